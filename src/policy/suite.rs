//! Policy test suites: expectations written beside the rules (`[[tests]]` in a policy file) or
//! in files of their own, each suite checked against its `[fixture]` workspace.
//!
//! ```toml
//! [fixture]
//! files = ["src/main.rs"]
//! git = true
//!
//! [[tests]]
//! cmd = "git -c core.pager=sh log"
//! expect = "deny"
//! reason_contains = "core.pager"
//! ```

use super::fixture::{Fixture, FixtureSpec};
pub use super::rules::TestCase;
use super::{Decision, Policy};
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A file holding only tests: `[fixture]` and `[[tests]]`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct TestFile {
    #[serde(default)]
    fixture: FixtureSpec,
    #[serde(default)]
    tests: Vec<TestCase>,
}

/// Tests with the fixture they run in, and where they came from.
#[derive(Clone, Debug)]
pub struct Suite {
    pub origin: String,
    pub fixture: FixtureSpec,
    pub tests: Vec<TestCase>,
}

impl Suite {
    /// A test-only file.
    pub fn load(path: &Path) -> Result<Suite, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read test file {}: {e}", path.display()))?;
        let file: TestFile = toml::from_str(&text)
            .map_err(|e| format!("invalid test file {}: {e}", path.display()))?;
        Ok(Suite {
            origin: path.display().to_string(),
            fixture: file.fixture,
            tests: file.tests,
        })
    }

    /// The tests written in a policy file (`[fixture]` and `[[tests]]` beside the rules).
    pub fn from_policy_text(text: &str, origin: &str) -> Result<Suite, String> {
        let file: super::rules::PolicyFile =
            toml::from_str(text).map_err(|e| format!("invalid policy {origin}: {e}"))?;
        Ok(Suite {
            origin: origin.to_string(),
            fixture: file.fixture,
            tests: file.tests,
        })
    }
}

/// What one test found.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub origin: String,
    /// 1-based position in its suite.
    pub index: usize,
    pub case: TestCase,
    pub decision: Decision,
    pub reason: String,
    /// Why it failed; `None` when it passed.
    pub failure: Option<String>,
}

/// Run every suite's tests against `policy`, each suite in a fresh fixture.
pub fn run(policy: &Arc<Policy>, suites: &[Suite]) -> Result<Vec<Outcome>, String> {
    let mut outcomes = Vec::new();
    for suite in suites {
        let fixture = Fixture::build(&suite.fixture)
            .map_err(|e| format!("{}: fixture: {e}", suite.origin))?;
        let workspace = fixture.workspace();
        let mut checker = policy
            .checker(&workspace, &[], &workspace)
            .map_err(|e| format!("{}: {e}", suite.origin))?;
        for (i, case) in suite.tests.iter().enumerate() {
            let cwd = match &case.cwd {
                Some(dir) => workspace.join(dir),
                None => workspace.clone(),
            };
            let verdict = checker.check_in(&case.cmd, &cwd);
            let failure = judge(case, verdict.decision, &verdict.reason);
            outcomes.push(Outcome {
                origin: suite.origin.clone(),
                index: i + 1,
                case: case.clone(),
                decision: verdict.decision,
                reason: verdict.reason,
                failure,
            });
        }
    }
    Ok(outcomes)
}

fn judge(case: &TestCase, decision: Decision, reason: &str) -> Option<String> {
    if decision != case.expect {
        return Some(format!(
            "expected {}, got {decision}: {reason}",
            case.expect
        ));
    }
    match &case.reason_contains {
        Some(part) if !reason.contains(part.as_str()) => Some(format!(
            "{decision} as expected, but the reason does not contain {part:?}: {reason}"
        )),
        _ => None,
    }
}

/// The outcomes as JUnit XML (one testsuite per origin), for CI test reports.
pub fn junit(outcomes: &[Outcome]) -> String {
    let mut origins: Vec<&str> = Vec::new();
    for outcome in outcomes {
        if !origins.contains(&outcome.origin.as_str()) {
            origins.push(&outcome.origin);
        }
    }
    let failures = outcomes.iter().filter(|o| o.failure.is_some()).count();
    let mut xml = format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"warden policy test\" \
         tests=\"{}\" failures=\"{failures}\">\n",
        outcomes.len()
    );
    for origin in origins {
        let own: Vec<&Outcome> = outcomes.iter().filter(|o| o.origin == origin).collect();
        let failed = own.iter().filter(|o| o.failure.is_some()).count();
        xml.push_str(&format!(
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{failed}\">\n",
            escape(origin),
            own.len()
        ));
        for outcome in own {
            let name = format!("#{} {}", outcome.index, outcome.case.cmd);
            xml.push_str(&format!(
                "    <testcase classname=\"{}\" name=\"{}\"",
                escape(origin),
                escape(&name)
            ));
            match &outcome.failure {
                None => xml.push_str("/>\n"),
                Some(why) => xml.push_str(&format!(
                    ">\n      <failure message=\"{}\"/>\n    </testcase>\n",
                    escape(why)
                )),
            }
        }
        xml.push_str("  </testsuite>\n");
    }
    xml.push_str("</testsuites>\n");
    xml
}

/// XML attribute text: markup characters escaped, control characters (invalid in XML 1.0)
/// shown as `\u{…}`.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\n' => out.push_str("&#10;"),
            '\t' => out.push_str("&#9;"),
            c if c.is_control() => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// Where the tests of a run come from: test files, else the policy file's own tests, else the
/// embedded default's.
pub fn collect(policy_file: Option<&Path>, files: &[PathBuf]) -> Result<Vec<Suite>, String> {
    let mut suites = Vec::new();
    if let Some(path) = policy_file {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("cannot read policy file {}: {e}", path.display()))?;
        let own = Suite::from_policy_text(&text, &path.display().to_string())?;
        if !own.tests.is_empty() {
            suites.push(own);
        }
    }
    for file in files {
        suites.push(Suite::load(file)?);
    }
    if policy_file.is_none() && files.is_empty() {
        suites.push(Suite::from_policy_text(
            super::DEFAULT_POLICY,
            "embedded default policy",
        )?);
    }
    if suites.iter().all(|s| s.tests.is_empty()) {
        return Err("no tests found: write [[tests]] in the policy file or name test files".into());
    }
    Ok(suites)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case(cmd: &str, expect: Decision, reason: Option<&str>) -> TestCase {
        TestCase {
            cmd: cmd.into(),
            expect,
            reason_contains: reason.map(String::from),
            cwd: None,
        }
    }

    #[test]
    fn a_wrong_decision_or_reason_fails() {
        let policy = Arc::new(Policy::embedded_default());
        let suite = Suite {
            origin: "t".into(),
            fixture: FixtureSpec {
                files: vec!["a.txt".into()],
                ..FixtureSpec::default()
            },
            tests: vec![
                case("cat a.txt", Decision::Allow, None),
                case("cat a.txt", Decision::Deny, None),
                case("curl http://x", Decision::Deny, Some("no such words")),
            ],
        };
        let outcomes = run(&policy, &[suite]).unwrap();
        assert!(outcomes[0].failure.is_none());
        assert!(outcomes[1]
            .failure
            .as_ref()
            .unwrap()
            .starts_with("expected deny, got allow"));
        assert!(outcomes[2]
            .failure
            .as_ref()
            .unwrap()
            .contains("no such words"));
        let xml = junit(&outcomes);
        assert!(xml.contains("tests=\"3\" failures=\"2\""), "{xml}");
        assert!(
            xml.contains("<failure message=\"expected deny, got allow"),
            "{xml}"
        );
    }

    #[test]
    fn the_embedded_default_ships_tests_that_pass() {
        let suites = collect(None, &[]).unwrap();
        assert!(suites[0].tests.len() >= 30, "{}", suites[0].tests.len());
        let outcomes = run(&Arc::new(Policy::embedded_default()), &suites).unwrap();
        let failed: Vec<String> = outcomes
            .iter()
            .filter_map(|o| o.failure.as_ref().map(|f| format!("{}: {f}", o.case.cmd)))
            .collect();
        assert!(failed.is_empty(), "{failed:#?}");
    }

    #[test]
    fn xml_attributes_are_escaped() {
        assert_eq!(
            escape("a<b>&\"c'\n\u{1}"),
            "a&lt;b&gt;&amp;&quot;c&apos;&#10;\\u{1}"
        );
    }
}

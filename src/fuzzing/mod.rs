//! `warden policy fuzz`: a built-in, reproducible fuzzer of a command policy, on stable Rust.
//!
//! Inputs come from a grammar-aware generator (`generate`) drawing programs and flags from the
//! policy under test — half of them from the policy file's own programs, when it has some —
//! and from mutations (`mutate`) of seeds (the policies' `[[tests]]`, `--corpus`) and of inputs
//! that reached programs not seen before. Oracles:
//!
//! - (a) no panic and no hang (a check using over a second of CPU, or taking over
//!   `HANG_WALL` on the clock);
//! - (b) the independent invariant (`policy::invariant`): listed programs only, every path
//!   inside the roots, no secret reached, nothing written where git reads its config;
//! - (c) a differential against real bash (`differential`), sampled;
//! - (d) real behaviour under strace (`behaviour`), sampled.
//!
//! Failures are minimized (`minimize`) and reported as ready `[[tests]]` entries. Everything is
//! reproducible from `--seed` for (a) and (b); (c) and (d) are sampled by time, so which
//! inputs they see depends on the machine's speed.

mod behaviour;
mod differential;
mod generate;
mod minimize;
mod mutate;

pub use differential::{compare as compare_with_bash, Bash, Recorded};

use crate::policy::fixture::{Fixture, FixtureSpec};
use crate::policy::{invariant, Checker, Decision, Policy, Verdict};
use rand::rngs::SmallRng;
use rand::seq::IndexedRandom;
use rand::{Rng, SeedableRng};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub struct Options {
    /// The policy file under test (`None`: the embedded default).
    pub policy_file: Option<PathBuf>,
    pub seconds: u64,
    pub seed: u64,
    /// Seed inputs (one command per file) read before, and interesting inputs written after.
    pub corpus: Option<PathBuf>,
    pub jobs: usize,
    /// Run the sampled oracles (c) and (d).
    pub behaviour: bool,
    /// Stop once this many findings are recorded (`None`: run the whole time).
    pub max_findings: Option<usize>,
}

/// Which oracle failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Oracle {
    Crash,
    Invariant,
    Bash,
    Behaviour,
}

impl Oracle {
    pub fn describe(self) -> &'static str {
        match self {
            Oracle::Crash => "(a) panic or hang",
            Oracle::Invariant => "(b) invariant",
            Oracle::Bash => "(c) differential against bash",
            Oracle::Behaviour => "(d) real behaviour",
        }
    }
}

#[derive(Clone, Debug, serde::Serialize)]
pub struct Finding {
    pub oracle: Oracle,
    /// The minimized input.
    pub command: String,
    pub original: String,
    pub decision: Decision,
    pub detail: String,
}

impl Finding {
    /// The finding as a `[[tests]]` entry that fails until the policy is fixed.
    pub fn as_test(&self) -> String {
        format!(
            "[[tests]]\ncmd = {}\nexpect = \"deny\"\n",
            toml::Value::String(self.command.clone())
        )
    }
}

#[derive(Debug, serde::Serialize)]
pub struct Report {
    pub cases: u64,
    pub seconds: f64,
    pub behaviour_runs: u64,
    pub bash_runs: u64,
    /// Why (c) and (d) did not run, when they did not.
    pub skipped: Vec<String>,
    pub findings: Vec<Finding>,
}

/// The fixture the fuzzer checks in: the policy's own `[fixture]` plus what attacks need — a
/// symlink out of the workspace, secrets outside and in the home, git config to copy into
/// place, attributes naming a filter, a hard link to `.git/config`, a list of names.
fn fuzz_fixture(own: &FixtureSpec) -> Result<Fixture, String> {
    let mut spec = own.clone();
    spec.git = true;
    spec.files.extend(
        ["src/main.rs", "src/lib.rs", "notes.txt", "README.md"]
            .iter()
            .map(|s| s.to_string()),
    );
    spec.dirs.extend(
        ["build", "sub/deeper", "cfgcopy/git", "attrs"]
            .iter()
            .map(|s| s.to_string()),
    );
    spec.outside.push("secret.txt".into());
    spec.home.extend(
        ["~/.ssh/id_ed25519", "~/.gitconfig"]
            .iter()
            .map(|s| s.to_string()),
    );
    for (link, target) in [
        ("escape", "../outside"),
        ("link_secret", "../outside/secret.txt"),
        ("keys", "~/.ssh"),
        ("gitlink", ".git"),
        ("deep", "sub/deeper"),
    ] {
        spec.symlinks.insert(link.into(), target.into());
    }
    let fixture = Fixture::build(&spec)?;
    let ws = fixture.workspace();
    let write = |name: &str, text: &str| {
        std::fs::write(ws.join(name), text).map_err(|e| format!("fuzz fixture {name}: {e}"))
    };
    write("cfgcopy/git/config", "[core]\n# x \\\n\tpager = sh\n")?;
    write("attrs/.gitattributes", "* filter=x\n")?;
    write("names0", "notes.txt\0../outside/secret.txt\0")?;
    std::fs::hard_link(ws.join(".git/config"), ws.join("hardlinked.txt"))
        .map_err(|e| format!("fuzz fixture hard link: {e}"))?;
    Ok(fixture)
}

fn secrets(fixture: &Fixture) -> Vec<PathBuf> {
    let root = fixture
        .workspace()
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default();
    vec![
        root.join("outside/secret.txt"),
        fixture.home().join(".ssh/id_ed25519"),
        PathBuf::from("/etc/shadow"),
    ]
}

/// Shared state of the jobs.
struct Shared {
    policy: Arc<Policy>,
    own: FixtureSpec,
    vocabulary: generate::Vocabulary,
    focus: Vec<String>,
    seeds: Vec<String>,
    findings: Mutex<Vec<Finding>>,
    max_findings: usize,
    pool: Mutex<Vec<String>>,
    seen_programs: Mutex<BTreeSet<String>>,
    tracer: Option<behaviour::Tracer>,
    /// Programs the policy allows outright (what a wrapper may run).
    allowed: BTreeSet<String>,
    bash: Option<Bash>,
    cases: std::sync::atomic::AtomicU64,
    behaviour_runs: std::sync::atomic::AtomicU64,
    bash_runs: std::sync::atomic::AtomicU64,
}

pub fn run(options: &Options) -> Result<Report, String> {
    let policy = Arc::new(Policy::load(options.policy_file.as_deref()).map_err(|e| e.to_string())?);
    let (own, focus, mut seeds) = match &options.policy_file {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("cannot read policy file {}: {e}", path.display()))?;
            let file: crate::policy::rules::PolicyFile = toml::from_str(&text)
                .map_err(|e| format!("invalid policy {}: {e}", path.display()))?;
            let seeds: Vec<String> = file.tests.iter().map(|t| t.cmd.clone()).collect();
            (file.fixture, file.programs.keys().cloned().collect(), seeds)
        }
        None => (FixtureSpec::default(), Vec::new(), Vec::new()),
    };
    let default_suite = crate::policy::suite::Suite::from_policy_text(
        crate::policy::DEFAULT_POLICY,
        "embedded default policy",
    )?;
    seeds.extend(default_suite.tests.iter().map(|t| t.cmd.clone()));
    if let Some(dir) = &options.corpus {
        seeds.extend(read_corpus(dir)?);
    }
    let mut skipped = Vec::new();
    let (tracer, bash) = if options.behaviour {
        let tracer = behaviour::Tracer::find(options.policy_file.as_deref());
        if tracer.is_none() {
            skipped.push(
                "(d) real behaviour: strace or the warden binary beside this one is missing".into(),
            );
        }
        let bash = Bash::find();
        if bash.is_none() {
            skipped.push("(c) bash differential: /bin/bash or the warden binary is missing".into());
        }
        (tracer, bash)
    } else {
        skipped.push("(c) and (d): switched off (--no-behaviour)".into());
        (None, None)
    };
    let shared = Arc::new(Shared {
        vocabulary: generate::Vocabulary::new(&policy),
        allowed: policy
            .programs()
            .filter(|(_, rule)| rule.decision == Decision::Allow && rule.analyzer.is_none())
            .map(|(name, _)| name.clone())
            .collect(),
        policy,
        own,
        focus,
        seeds,
        findings: Mutex::new(Vec::new()),
        max_findings: options.max_findings.unwrap_or(usize::MAX),
        pool: Mutex::new(Vec::new()),
        seen_programs: Mutex::new(BTreeSet::new()),
        tracer,
        bash,
        cases: 0.into(),
        behaviour_runs: 0.into(),
        bash_runs: 0.into(),
    });
    let started = Instant::now();
    let deadline = started + Duration::from_secs(options.seconds);
    let jobs = options.jobs.max(1);
    let handles = (0..jobs)
        .map(|job| {
            let shared = Arc::clone(&shared);
            let seed = options.seed ^ (job as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            std::thread::Builder::new()
                .name(format!("fuzz job {job}"))
                .spawn(move || worker(&shared, job, seed, deadline))
                .map_err(|e| format!("could not start fuzz job {job}: {e}"))
        })
        .collect::<Result<Vec<_>, String>>()?;
    for handle in handles {
        handle.join().map_err(|_| "a fuzz job died".to_string())??;
    }
    if let Some(dir) = &options.corpus {
        write_corpus(dir, &shared.pool.lock().map_err(|_| "poisoned")?)?;
    }
    let mut findings = shared.findings.lock().map_err(|_| "poisoned")?.clone();
    findings.sort_by(|a, b| (a.oracle, &a.command).cmp(&(b.oracle, &b.command)));
    use std::sync::atomic::Ordering::Relaxed;
    Ok(Report {
        cases: shared.cases.load(Relaxed),
        seconds: started.elapsed().as_secs_f64(),
        behaviour_runs: shared.behaviour_runs.load(Relaxed),
        bash_runs: shared.bash_runs.load(Relaxed),
        skipped,
        findings,
    })
}

fn new_checker(shared: &Shared, fixture: &Fixture) -> Result<Checker, String> {
    shared
        .policy
        .checker(&fixture.workspace(), &[], &fixture.workspace())
        .map_err(|e| e.to_string())
}

/// A check that uses more CPU than this is a hang: the checker's own work, so a fuzz run beside
/// other work (CI runs it beside the aarch64 build and tests) is judged as on an idle machine.
const HANG_CPU: Duration = Duration::from_secs(1);
/// A check that takes this long on the clock is a hang too, CPU or not (waiting on a file).
const HANG_WALL: Duration = Duration::from_secs(30);

/// CPU time the calling thread has used so far (user and system); `None` if the kernel will
/// not say.
fn thread_cpu_time() -> Option<Duration> {
    use nix::sys::resource::{getrusage, UsageWho};
    let usage = getrusage(UsageWho::RUSAGE_THREAD).ok()?;
    let micros = |t: nix::sys::time::TimeVal| {
        Duration::from_secs(t.tv_sec().max(0) as u64)
            + Duration::from_micros(t.tv_usec().max(0) as u64)
    };
    Some(micros(usage.user_time()) + micros(usage.system_time()))
}

/// Check one input, catching a panic; the slow-check limits are the hang oracle.
fn check(checker: &mut Checker, input: &str) -> Result<Verdict, String> {
    let start = Instant::now();
    let verdict = check_catching_panics(checker, input)?;
    let wall = start.elapsed();
    if wall <= HANG_CPU {
        // A thread uses no more CPU than wall time, so no hang: no CPU clock read on the common
        // path (two system calls a case cost 2% of the rate).
        return Ok(verdict);
    }
    if wall > HANG_WALL {
        // A hang whatever the CPU says: not waited for a second time.
        return Err(format!("the check took {wall:?}"));
    }
    // Slow on the clock: the same check once more on this thread's CPU clock tells a slow
    // checker from a busy machine (the checker decides the same input the same way).
    let cpu_start = thread_cpu_time();
    let again = check_catching_panics(checker, input);
    // Without a CPU clock, the clock on the wall judges, as before it.
    let cpu = match (cpu_start, thread_cpu_time()) {
        (Some(before), Some(after)) => after.saturating_sub(before),
        _ => wall,
    };
    if cpu > HANG_CPU {
        return Err(format!(
            "the check took {wall:?}, and {cpu:?} of CPU when run again"
        ));
    }
    again
}

fn check_catching_panics(checker: &mut Checker, input: &str) -> Result<Verdict, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| checker.check(input))).map_err(
        |panic| {
            let text = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "a panic".into());
            format!("the checker panicked: {text}")
        },
    )
}

fn worker(shared: &Shared, job: usize, seed: u64, deadline: Instant) -> Result<(), String> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let fixture = fuzz_fixture(&shared.own)?;
    let secrets = secrets(&fixture);
    let mut checker = new_checker(shared, &fixture)?;
    let started = Instant::now();
    let mut slow_time = Duration::ZERO;
    let mut sampled: BTreeSet<String> = BTreeSet::new();
    let mut cases = 0u64;
    // Only job 0 runs the sampled oracles (they fork processes; one at a time suffices).
    let samples = job == 0 && (shared.tracer.is_some() || shared.bash.is_some());
    while Instant::now() < deadline && !enough(shared) {
        let input = next_input(shared, &mut rng, cases);
        cases += 1;
        let verdict = match check(&mut checker, &input) {
            Ok(verdict) => verdict,
            Err(detail) => {
                checker = new_checker(shared, &fixture)?;
                let command = minimize::minimize(&input, 300, |c| {
                    new_checker(shared, &fixture)
                        .map(|mut fresh| check(&mut fresh, c).is_err())
                        .unwrap_or(false)
                });
                record(
                    shared,
                    Oracle::Crash,
                    command,
                    input,
                    Decision::Deny,
                    detail,
                );
                continue;
            }
        };
        if verdict.decision == Decision::Deny {
            continue;
        }
        if let Err(detail) = invariant::verify(&verdict, &shared.policy, checker.paths(), &secrets)
        {
            let command = minimize::minimize(&input, 300, |c| {
                let mut fresh = match new_checker(shared, &fixture) {
                    Ok(fresh) => fresh,
                    Err(_) => return false,
                };
                check(&mut fresh, c).is_ok_and(|v| {
                    invariant::verify(&v, &shared.policy, fresh.paths(), &secrets).is_err()
                })
            });
            record(
                shared,
                Oracle::Invariant,
                command,
                input,
                verdict.decision,
                detail,
            );
            continue;
        }
        remember(shared, &input, &verdict);
        // Novel to this job (the job that samples must see every new program + first word
        // itself, whichever job generated it first).
        let mut novel = false;
        // Only the job that samples reads it (the sampled oracles' new programs).
        for command in verdict.script.commands().filter(|_| samples) {
            let key = command
                .argv
                .iter()
                .take(2)
                .cloned()
                .collect::<Vec<_>>()
                .join(" ");
            novel |= sampled.insert(key);
        }
        // The sampled oracles get a third of this job's time (half when fuzzing a policy
        // file's own programs), new programs first.
        let share = if shared.focus.is_empty() { 3 } else { 2 };
        let budget_left = slow_time < started.elapsed() / share;
        if samples && budget_left && (novel || rng.random_ratio(1, 4)) && focused(shared, &verdict)
        {
            let began = Instant::now();
            sampled_oracles(shared, &input)?;
            slow_time += began.elapsed();
        }
    }
    shared
        .cases
        .fetch_add(cases, std::sync::atomic::Ordering::Relaxed);
    Ok(())
}

/// Whether the sampled oracles should look at this verdict: with a policy file of its own,
/// commands using the file's programs; otherwise any.
fn focused(shared: &Shared, verdict: &Verdict) -> bool {
    shared.focus.is_empty()
        || verdict
            .script
            .commands()
            .any(|c| c.argv.first().is_some_and(|p| shared.focus.contains(p)))
}

fn next_input(shared: &Shared, rng: &mut SmallRng, cases: u64) -> String {
    if cases < shared.seeds.len() as u64 && cases < 10_000 {
        return shared.seeds[cases as usize].clone();
    }
    if rng.random_ratio(1, 3) {
        // Two inputs taken under the lock (the pool itself is never copied).
        let (base, other) = match shared.pool.lock() {
            Ok(pool) => (pool.choose(rng).cloned(), pool.choose(rng).cloned()),
            Err(_) => (None, None),
        };
        if let Some(base) = base.or_else(|| shared.seeds.choose(rng).cloned()) {
            return mutate::mutate(rng, &base, other.as_deref());
        }
    }
    if !shared.focus.is_empty() && rng.random_bool(0.5) {
        let program = shared.focus.choose(rng).cloned().unwrap_or_default();
        return shared.vocabulary.focused(rng, &program);
    }
    shared.vocabulary.script(rng)
}

/// Keep inputs that reach programs not seen before; true when this one did.
fn remember(shared: &Shared, input: &str, verdict: &Verdict) -> bool {
    let Ok(mut seen) = shared.seen_programs.lock() else {
        return false;
    };
    let mut novel = false;
    for command in verdict.script.commands() {
        let key = command
            .argv
            .iter()
            .take(2)
            .cloned()
            .collect::<Vec<_>>()
            .join(" ");
        novel |= seen.insert(key);
    }
    if novel {
        if let Ok(mut pool) = shared.pool.lock() {
            if pool.len() < 5_000 {
                pool.push(input.to_string());
            }
        }
    }
    novel
}

/// (c) and (d) on a fresh scratch fixture each (they run real processes that write).
fn sampled_oracles(shared: &Shared, input: &str) -> Result<(), String> {
    use std::sync::atomic::Ordering::Relaxed;
    let verdict_in = |fixture: &Fixture| -> Result<Option<Verdict>, String> {
        let mut checker = new_checker(shared, fixture)?;
        Ok(check(&mut checker, input)
            .ok()
            .filter(|v| v.decision == Decision::Allow))
    };
    if let Some(tracer) = &shared.tracer {
        let fixture = fuzz_fixture(&shared.own)?;
        if let Some(verdict) = verdict_in(&fixture)? {
            shared.behaviour_runs.fetch_add(1, Relaxed);
            let root = fixture
                .workspace()
                .parent()
                .map(Path::to_path_buf)
                .unwrap_or_default();
            if let Ok(Some(detail)) = tracer.judge(input, &verdict.script, &root, &shared.allowed) {
                let command = minimize::minimize(input, 40, |c| {
                    let Ok(fresh) = fuzz_fixture(&shared.own) else {
                        return false;
                    };
                    let root = fresh
                        .workspace()
                        .parent()
                        .map(Path::to_path_buf)
                        .unwrap_or_default();
                    let Ok(mut checker) = new_checker(shared, &fresh) else {
                        return false;
                    };
                    match check(&mut checker, c) {
                        Ok(v) if v.decision == Decision::Allow => {
                            matches!(
                                tracer.judge(c, &v.script, &root, &shared.allowed),
                                Ok(Some(_))
                            )
                        }
                        _ => false,
                    }
                });
                record(
                    shared,
                    Oracle::Behaviour,
                    command,
                    input.into(),
                    Decision::Allow,
                    detail,
                );
            }
        }
    }
    // With a policy file's own programs, real behaviour first; bash for one input in three.
    let bash_turn = shared.focus.is_empty() || input.len() % 3 == 0;
    if let (Some(bash), true) = (&shared.bash, bash_turn) {
        let fixture = fuzz_fixture(&shared.own)?;
        if let Some(verdict) = verdict_in(&fixture)? {
            shared.bash_runs.fetch_add(1, Relaxed);
            let root = fixture
                .workspace()
                .parent()
                .map(Path::to_path_buf)
                .unwrap_or_default();
            let names = recorded_names(shared, &verdict);
            // A run that failed (a loaded machine missing the deadline) is inconclusive.
            let Ok(recorded) = bash.record(input, &root, &names) else {
                return Ok(());
            };
            if let Err(detail) = compare_with_bash(&recorded, &verdict.script) {
                record(
                    shared,
                    Oracle::Bash,
                    input.into(),
                    input.into(),
                    Decision::Allow,
                    detail,
                );
            }
        }
    }
    Ok(())
}

/// Every name bash should record instead of running: the policy's programs, the IR's, and
/// builtins warden runs as programs.
fn recorded_names(shared: &Shared, verdict: &Verdict) -> BTreeSet<String> {
    let mut names: BTreeSet<String> = shared.policy.programs().map(|(n, _)| n.clone()).collect();
    names.extend(
        verdict
            .script
            .commands()
            .filter_map(|c| c.argv.first().cloned()),
    );
    names.extend(
        [
            "echo", "printf", "test", "[", "true", "false", "pwd", "kill",
        ]
        .map(String::from),
    );
    names.remove("cd");
    names
}

fn record(
    shared: &Shared,
    oracle: Oracle,
    command: String,
    original: String,
    decision: Decision,
    detail: String,
) {
    if let Ok(mut findings) = shared.findings.lock() {
        // One finding per oracle, program and kind of failure (paths aside).
        let key = |command: &str, detail: &str| {
            let program = command
                .split_whitespace()
                .next()
                .unwrap_or("")
                .replace(['\'', '"'], "");
            let kind: Vec<&str> = detail
                .split_whitespace()
                .map(|w| if w.contains('/') { "PATH" } else { w })
                .collect();
            (program, kind.join(" "))
        };
        let this = key(&command, &detail);
        let duplicate = findings
            .iter()
            .any(|f| f.oracle == oracle && key(&f.command, &f.detail) == this);
        if !duplicate && findings.len() < 50 {
            findings.push(Finding {
                oracle,
                command,
                original,
                decision,
                detail,
            });
        }
    }
}

fn enough(shared: &Shared) -> bool {
    shared
        .findings
        .lock()
        .map(|f| f.len() >= shared.max_findings)
        .unwrap_or(true)
}

fn read_corpus(dir: &Path) -> Result<Vec<String>, String> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(format!("cannot read corpus {}: {e}", dir.display())),
    };
    let mut inputs = Vec::new();
    for entry in entries.flatten() {
        if let Ok(text) = std::fs::read_to_string(entry.path()) {
            inputs.push(text);
        }
    }
    inputs.sort();
    Ok(inputs)
}

fn write_corpus(dir: &Path, inputs: &[String]) -> Result<(), String> {
    use sha2::Digest;
    std::fs::create_dir_all(dir).map_err(|e| format!("corpus {}: {e}", dir.display()))?;
    for input in inputs {
        let name = hex::encode(&sha2::Sha256::digest(input.as_bytes())[..8]);
        std::fs::write(dir.join(name), input)
            .map_err(|e| format!("corpus {}: {e}", dir.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The hang oracle's clock counts this thread's work, not the time it waits: a fuzz run at
    /// low priority beside busy neighbours must not report their CPU as its hang.
    #[test]
    fn the_hang_clock_counts_work_and_not_waiting() {
        let before = thread_cpu_time().unwrap();
        std::thread::sleep(Duration::from_millis(300));
        let slept = thread_cpu_time().unwrap().saturating_sub(before);
        assert!(
            slept < Duration::from_millis(100),
            "sleeping used {slept:?} of CPU"
        );

        let before = thread_cpu_time().unwrap();
        let started = Instant::now();
        let mut spins = 0u64;
        while thread_cpu_time().unwrap().saturating_sub(before) < Duration::from_millis(50) {
            spins = std::hint::black_box(spins + 1);
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "20 s of spinning counted less than 50 ms of CPU"
            );
        }
        assert!(spins > 0);
    }
}

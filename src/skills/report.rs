//! What a skill run produced, for the three places it goes: the tool result (or CLI output),
//! the audit log's one-line reason, and the skill's run history.

use crate::audit::AuditDecision;
use crate::egress::proxy::EgressEvent;
use crate::exec::RunOutput;

/// How much of a failed script's error output a reason quotes: its last lines, each cut.
const REASON_STDERR_LINES: usize = 3;
const REASON_STDERR_CHARS: usize = 200;

#[derive(Clone, Debug)]
pub struct SkillReport {
    pub name: String,
    pub decision: AuditDecision,
    /// Why it was refused, or a summary of what ran (the audit reason).
    pub reason: String,
    /// The content hash of what ran (or was refused), once known.
    pub hash: Option<String>,
    /// The checked command, as it ran.
    pub command: Option<String>,
    pub output: Option<RunOutput>,
    pub egress: Vec<EgressEvent>,
    pub notes: Vec<String>,
}

impl SkillReport {
    pub fn denied(name: &str, reason: impl Into<String>) -> SkillReport {
        SkillReport::without_output(name, AuditDecision::Deny, reason.into())
    }

    pub fn rejected(name: &str, reason: impl Into<String>) -> SkillReport {
        SkillReport::without_output(name, AuditDecision::Rejected, reason.into())
    }

    pub fn error(name: &str, reason: impl Into<String>) -> SkillReport {
        SkillReport::without_output(name, AuditDecision::Error, reason.into())
    }

    fn without_output(name: &str, decision: AuditDecision, reason: String) -> SkillReport {
        SkillReport {
            name: name.to_string(),
            decision,
            reason,
            hash: None,
            command: None,
            output: None,
            egress: Vec::new(),
            notes: Vec::new(),
        }
    }

    pub fn with_hash(mut self, hash: &str) -> SkillReport {
        self.hash = Some(hash.to_string());
        self
    }

    pub fn exit_code(&self) -> Option<i32> {
        self.output.as_ref().map(|o| o.status)
    }

    /// Whether it ran and ended with status 0.
    pub fn succeeded(&self) -> bool {
        self.exit_code() == Some(0)
    }

    /// The audit reason of a run that happened: what ran, how it ended, what the proxy
    /// refused, what was killed, and the last line of error output of a failure.
    pub fn summarize(&mut self, policy_reason: &str, backend: &str) {
        let Some(out) = &self.output else { return };
        let mut parts = vec![format!(
            "ran `{}` in the {backend} sandbox ({policy_reason})",
            self.command.as_deref().unwrap_or("?")
        )];
        if out.timed_out {
            parts.push("timed out; everything it started was killed".into());
        } else if out.cancelled {
            parts.push("cancelled; everything it started was killed".into());
        }
        parts.push(format!("exit code {}", out.status));
        for event in self.egress.iter().filter(|e| !e.allowed) {
            parts.push(event.describe());
        }
        let allowed: Vec<&str> = self
            .egress
            .iter()
            .filter(|e| e.allowed)
            .map(|e| e.target.as_str())
            .collect();
        if !allowed.is_empty() {
            parts.push(format!("egress allowed: {}", allowed.join(", ")));
        }
        if out.background_killed > 0 {
            parts.push(format!(
                "killed {} process(es) it left running in the background",
                out.background_killed
            ));
        }
        if out.status != 0 {
            // The last lines usually say what the jail refused (`PermissionError: …`).
            let mut lines: Vec<String> = out
                .stderr
                .lines()
                .rev()
                .filter(|l| !l.trim().is_empty())
                .take(REASON_STDERR_LINES)
                .map(|l| l.trim().chars().take(REASON_STDERR_CHARS).collect())
                .collect();
            lines.reverse();
            if !lines.is_empty() {
                parts.push(format!("last error output: {}", lines.join(" | ")));
            }
        }
        self.reason = parts.join("; ");
    }

    /// The text for the model or the terminal.
    pub fn render(&self) -> String {
        let Some(out) = &self.output else {
            return match self.decision {
                AuditDecision::Error => format!("Error: {}", self.reason),
                AuditDecision::Rejected => format!("Not run: {}", self.reason),
                _ => format!("Denied: {}", self.reason),
            };
        };
        let mut text = format!(
            "[skill {} ({}) ran: {}]\n",
            self.name,
            self.hash
                .as_deref()
                .map(super::tree::short_hash)
                .unwrap_or("?"),
            self.command.as_deref().unwrap_or("?")
        );
        for note in &self.notes {
            text.push_str(&format!("[note: {note}]\n"));
        }
        push_stream(&mut text, "", &out.stdout);
        push_stream(&mut text, "[stderr]\n", &out.stderr);
        for event in &self.egress {
            if event.allowed {
                text.push_str(&format!(
                    "[egress allowed: {} ({})]\n",
                    event.target, event.detail
                ));
            } else {
                text.push_str(&format!(
                    "[egress proxy refused {}: {}]\n",
                    event.target, event.detail
                ));
            }
        }
        if out.background_killed > 0 {
            text.push_str(&format!(
                "[warden killed {} process(es) the skill left running in the background]\n",
                out.background_killed
            ));
        }
        if out.timed_out {
            text.push_str("[timed out: everything the skill started was killed]\n");
        } else if out.cancelled {
            text.push_str("[stopped: everything the skill started was killed]\n");
        }
        if out.truncated {
            text.push_str("[output was truncated]\n");
        }
        text.push_str(&format!("[exit code {}]", out.status));
        text
    }
}

fn push_stream(text: &mut String, label: &str, stream: &str) {
    if stream.is_empty() {
        return;
    }
    text.push_str(label);
    text.push_str(stream);
    if !stream.ends_with('\n') {
        text.push('\n');
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn output(status: i32, stderr: &str) -> RunOutput {
        RunOutput {
            status,
            stdout: "out\n".into(),
            stderr: stderr.into(),
            truncated: false,
            full_output: None,
            timed_out: false,
            cancelled: false,
            duration: Duration::from_millis(5),
            background_killed: 1,
        }
    }

    #[test]
    fn a_run_is_summarized_with_its_evidence() {
        let mut report = SkillReport::denied("x", "pending").with_hash("sha256:0123456789abcdef");
        report.decision = AuditDecision::Allow;
        report.command = Some("python3 a.py".into());
        report.output = Some(output(
            1,
            "Traceback\nPermissionError: [Errno 13] denied: '/k'\n",
        ));
        report.egress = vec![EgressEvent {
            target: "evil.test:80".into(),
            allowed: false,
            detail: "evil.test is not a declared domain".into(),
        }];
        report.summarize("allowed: python3", "host");
        for part in [
            "ran `python3 a.py` in the host sandbox (allowed: python3)",
            "exit code 1",
            "egress proxy refused evil.test:80: evil.test is not a declared domain",
            "killed 1 process(es)",
            "last error output: Traceback | PermissionError: [Errno 13] denied: '/k'",
        ] {
            assert!(report.reason.contains(part), "{part}: {}", report.reason);
        }
        let text = report.render();
        assert!(text.starts_with("[skill x (sha256:0123456789ab) ran: python3 a.py]\nout\n"));
        assert!(text.contains("[stderr]\nTraceback"));
        assert!(text.contains("[egress proxy refused evil.test:80"));
        assert!(text.ends_with("[exit code 1]"));
        assert_eq!(SkillReport::denied("x", "why").render(), "Denied: why");
    }
}

//! `GET /metrics`: what the API's runs do, in the Prometheus text format (the Prometheus
//! project's own client): runs by status, tool calls by tool and decision, approvals waiting
//! and how long answers took, model latency and tokens, sandbox start time. Counters are this
//! process's since it started; the run counts and the approvals waiting are read when scraped.
//! The model and sandbox numbers are measured where they happen (in the agent worker) and
//! arrive as [`AgentEvent::Measured`] events of the API's runs.

use super::runs::Status;
use crate::agent::measure::Measure;
use crate::agent::AgentEvent;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::time::Duration;

type Labels = Vec<(&'static str, String)>;

pub struct Metrics {
    registry: Registry,
    runs: Family<Labels, Gauge>,
    tool_calls: Family<Labels, Counter>,
    approvals_pending: Gauge,
    approval_answers: Family<Labels, Counter>,
    approval_wait: Histogram,
    llm_latency: Histogram,
    llm_tokens: Family<Labels, Counter>,
    sandbox_start: Family<Labels, Histogram>,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("warden");
        let runs = Family::<Labels, Gauge>::default();
        registry.register("runs", "The HTTP API's runs by status", runs.clone());
        let tool_calls = Family::<Labels, Counter>::default();
        registry.register(
            "tool_calls",
            "Tool calls of API runs by tool and decision (allow, deny, approved, rejected, error)",
            tool_calls.clone(),
        );
        let approvals_pending = Gauge::default();
        registry.register(
            "approvals_pending",
            "Approval requests waiting for an answer",
            approvals_pending.clone(),
        );
        let approval_answers = Family::<Labels, Counter>::default();
        registry.register(
            "approval_answers",
            "Approval requests by how they ended (approved, denied, timeout, cancelled)",
            approval_answers.clone(),
        );
        let approval_wait = Histogram::new([1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0]);
        registry.register_with_unit(
            "approval_wait",
            "How long approval requests waited for their end",
            prometheus_client::registry::Unit::Seconds,
            approval_wait.clone(),
        );
        let llm_latency = Histogram::new([0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 60.0, 120.0]);
        registry.register_with_unit(
            "llm_latency",
            "How long model calls took, from the request to the whole streamed answer",
            prometheus_client::registry::Unit::Seconds,
            llm_latency.clone(),
        );
        let llm_tokens = Family::<Labels, Counter>::default();
        registry.register(
            "llm_tokens",
            "Tokens of model calls by kind (input, output)",
            llm_tokens.clone(),
        );
        let sandbox_start = Family::<Labels, Histogram>::new_with_constructor(|| {
            Histogram::new([
                0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0,
            ])
        });
        registry.register_with_unit(
            "sandbox_start",
            "How long the sandbox took to start a program, by backend (host, docker)",
            prometheus_client::registry::Unit::Seconds,
            sandbox_start.clone(),
        );
        Metrics {
            registry,
            llm_latency,
            llm_tokens,
            sandbox_start,
            runs,
            tool_calls,
            approvals_pending,
            approval_answers,
            approval_wait,
        }
    }

    /// Count a finished tool call and what a run measured (other events are not counted).
    pub fn on_event(&self, event: &AgentEvent) {
        match event {
            AgentEvent::ToolEnd { name, decision, .. } => {
                self.tool_calls
                    .get_or_create(&vec![
                        ("tool", name.clone()),
                        ("decision", decision.as_str().to_string()),
                    ])
                    .inc();
            }
            AgentEvent::Measured(Measure::ModelCall {
                latency,
                input_tokens,
                output_tokens,
            }) => {
                self.llm_latency.observe(latency.as_secs_f64());
                for (kind, n) in [("input", input_tokens), ("output", output_tokens)] {
                    self.llm_tokens
                        .get_or_create(&vec![("kind", kind.to_string())])
                        .inc_by(*n);
                }
            }
            AgentEvent::Measured(Measure::SandboxStart { backend, took }) => {
                self.sandbox_start
                    .get_or_create(&vec![("backend", backend.to_string())])
                    .observe(took.as_secs_f64());
            }
            _ => {}
        }
    }

    /// An approval request ended (`how`: approved, denied, timeout, cancelled…) after `waited`.
    pub fn on_approval_end(&self, how: &'static str, waited: Duration) {
        self.approval_answers
            .get_or_create(&vec![("outcome", how.to_string())])
            .inc();
        self.approval_wait.observe(waited.as_secs_f64());
    }

    /// The text exposition: `runs` counts by status and `pending` approvals as of now.
    pub fn render(&self, runs: &[(Status, u64)], pending: usize) -> String {
        for status in Status::ALL {
            let count = runs
                .iter()
                .filter(|(s, _)| Status::parse(status) == Some(*s))
                .map(|(_, n)| *n)
                .sum::<u64>();
            self.runs
                .get_or_create(&vec![("status", status.to_string())])
                .set(count as i64);
        }
        self.approvals_pending.set(pending as i64);
        let mut text = String::new();
        // Writing into a String cannot fail.
        let _ = encode(&mut text, &self.registry);
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::AuditDecision;

    #[test]
    fn counts_show_up_in_the_text_format() {
        let metrics = Metrics::new();
        for decision in [
            AuditDecision::Allow,
            AuditDecision::Allow,
            AuditDecision::Deny,
        ] {
            metrics.on_event(&AgentEvent::ToolEnd {
                id: "t".into(),
                name: "bash".into(),
                decision,
                is_error: false,
                duration: Duration::from_millis(3),
                detail: None,
            });
        }
        metrics.on_approval_end("approved", Duration::from_secs(2));
        metrics.on_event(&AgentEvent::Measured(Measure::ModelCall {
            latency: Duration::from_millis(1500),
            input_tokens: 120,
            output_tokens: 30,
        }));
        metrics.on_event(&AgentEvent::Measured(Measure::SandboxStart {
            backend: crate::sandbox::Backend::Host,
            took: Duration::from_micros(1200),
        }));
        let text = metrics.render(&[(Status::Succeeded, 3), (Status::Failed, 1)], 2);
        for line in [
            "warden_runs{status=\"succeeded\"} 3",
            "warden_runs{status=\"queued\"} 0",
            "warden_tool_calls_total{tool=\"bash\",decision=\"allow\"} 2",
            "warden_tool_calls_total{tool=\"bash\",decision=\"deny\"} 1",
            "warden_approvals_pending 2",
            "warden_approval_answers_total{outcome=\"approved\"} 1",
            "warden_approval_wait_seconds_count 1",
            "warden_llm_latency_seconds_count 1",
            "warden_llm_latency_seconds_sum 1.5",
            "warden_llm_tokens_total{kind=\"input\"} 120",
            "warden_llm_tokens_total{kind=\"output\"} 30",
            "warden_sandbox_start_seconds_count{backend=\"host\"} 1",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} in:\n{text}");
        }
    }
}

//! Several providers in order: when one fails before showing any output, the next one gets the
//! same request. Once text or a tool call has streamed, a failure is final (the user already
//! saw part of that answer), and cancellation always stops at once.

use super::{ChatRequest, ChatResponse, EventSink, LlmError, Provider, StreamEvent};
use async_trait::async_trait;
use std::sync::atomic::{AtomicBool, Ordering};
use tokio_util::sync::CancellationToken;

pub struct Failover {
    providers: Vec<Box<dyn Provider>>,
    name: String,
}

impl Failover {
    /// Providers in the order they are tried.
    pub fn new(providers: Vec<Box<dyn Provider>>) -> Failover {
        let name = providers
            .iter()
            .map(|p| p.name())
            .collect::<Vec<_>>()
            .join(",");
        Failover { providers, name }
    }

    /// The providers' names in order.
    pub fn provider_names(&self) -> Vec<&str> {
        self.providers.iter().map(|p| p.name()).collect()
    }
}

#[async_trait]
impl Provider for Failover {
    /// The providers' names joined with commas, e.g. `anthropic,openai`.
    fn name(&self) -> &str {
        &self.name
    }

    /// True when any provider sees images; the others get a text note in their place.
    fn supports_images(&self) -> bool {
        self.providers.iter().any(|p| p.supports_images())
    }

    async fn chat(
        &self,
        req: &ChatRequest,
        events: &dyn EventSink,
        cancel: &CancellationToken,
    ) -> Result<ChatResponse, LlmError> {
        let mut failures = Vec::new();
        for provider in &self.providers {
            let shown = AtomicBool::new(false);
            let sink = |event: StreamEvent| {
                if event.is_output() {
                    shown.store(true, Ordering::Relaxed);
                }
                events.emit(event);
            };
            let err = match provider.chat(req, &sink, cancel).await {
                Ok(resp) => return Ok(resp),
                Err(LlmError::Cancelled) => return Err(LlmError::Cancelled),
                Err(err) => err,
            };
            let final_failure = shown.load(Ordering::Relaxed);
            if !final_failure {
                tracing::warn!(provider = provider.name(), error = %err, "LLM provider failed");
            }
            failures.push(err);
            if final_failure {
                break;
            }
        }
        match failures.len() {
            0 => Err(LlmError::NotConfigured(
                "no LLM provider configured".to_string(),
            )),
            // One provider: its own error, unwrapped, is the clearest message.
            1 => Err(failures.remove(0)),
            _ => Err(LlmError::AllFailed(failures)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::{ContentBlock, NoEvents, StopReason, Usage};
    use std::sync::atomic::AtomicU32;

    /// A provider that answers from a script without any network.
    struct Scripted {
        name: &'static str,
        emit_text_first: bool,
        result: fn() -> Result<ChatResponse, LlmError>,
        calls: AtomicU32,
    }

    #[async_trait]
    impl Provider for Scripted {
        fn name(&self) -> &str {
            self.name
        }
        fn supports_images(&self) -> bool {
            false
        }
        async fn chat(
            &self,
            _req: &ChatRequest,
            events: &dyn EventSink,
            _cancel: &CancellationToken,
        ) -> Result<ChatResponse, LlmError> {
            self.calls.fetch_add(1, Ordering::Relaxed);
            if self.emit_text_first {
                events.emit(StreamEvent::TextDelta { text: "par".into() });
            }
            (self.result)()
        }
    }

    fn scripted(
        name: &'static str,
        emit_text_first: bool,
        result: fn() -> Result<ChatResponse, LlmError>,
    ) -> Box<dyn Provider> {
        Box::new(Scripted {
            name,
            emit_text_first,
            result,
            calls: AtomicU32::new(0),
        })
    }

    fn ok() -> Result<ChatResponse, LlmError> {
        Ok(ChatResponse {
            content: vec![ContentBlock::text("hi")],
            stop_reason: StopReason::EndTurn,
            usage: Usage::default(),
            model: "m".into(),
            provider: "second".into(),
        })
    }

    fn overloaded() -> Result<ChatResponse, LlmError> {
        Err(LlmError::Http {
            provider: "first".into(),
            status: 529,
            attempts: 1,
            message: "overloaded".into(),
        })
    }

    fn broke_off() -> Result<ChatResponse, LlmError> {
        Err(LlmError::stream("first", "the connection broke off"))
    }

    fn cancelled() -> Result<ChatResponse, LlmError> {
        Err(LlmError::Cancelled)
    }

    async fn chat(f: &Failover) -> Result<ChatResponse, LlmError> {
        f.chat(
            &ChatRequest::default(),
            &NoEvents,
            &CancellationToken::new(),
        )
        .await
    }

    #[tokio::test]
    async fn next_provider_answers_after_a_failure_before_output() {
        let f = Failover::new(vec![
            scripted("first", false, overloaded),
            scripted("second", false, ok),
        ]);
        assert_eq!(f.name(), "first,second");
        assert_eq!(chat(&f).await.unwrap().text(), "hi");
    }

    #[tokio::test]
    async fn failure_after_output_is_final() {
        let f = Failover::new(vec![
            scripted("first", true, broke_off),
            scripted("second", false, ok),
        ]);
        let err = chat(&f).await.unwrap_err();
        assert!(matches!(err, LlmError::Stream { .. }), "{err}");
    }

    #[tokio::test]
    async fn cancellation_is_not_failed_over() {
        let f = Failover::new(vec![
            scripted("first", false, cancelled),
            scripted("second", false, ok),
        ]);
        assert!(chat(&f).await.unwrap_err().is_cancelled());
    }

    #[tokio::test]
    async fn every_failure_is_reported_in_order() {
        let f = Failover::new(vec![
            scripted("first", false, overloaded),
            scripted("second", false, broke_off),
        ]);
        let err = chat(&f).await.unwrap_err().to_string();
        assert!(
            err.starts_with("no LLM provider could answer: first: HTTP 529"),
            "{err}"
        );
        assert!(err.contains("; first: bad or interrupted answer"), "{err}");
    }
}

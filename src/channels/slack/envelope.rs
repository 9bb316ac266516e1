//! One Socket Mode envelope as Slack sends it (`events_api`, `interactive`,
//! `slash_commands`), and the key that tells a redelivery from a new envelope. The socket
//! receives envelopes and the handler records and handles them; both read this.

use serde_json::{json, Value};

/// One envelope: `events_api`, `interactive` or `slash_commands`.
#[derive(Clone, Debug)]
pub struct Envelope {
    pub envelope_id: String,
    pub kind: String,
    pub payload: Value,
}

impl Envelope {
    pub fn parse(text: &str) -> Option<Envelope> {
        let value: Value = serde_json::from_str(text).ok()?;
        Some(Envelope {
            envelope_id: value["envelope_id"].as_str()?.to_string(),
            kind: value["type"].as_str().unwrap_or_default().to_string(),
            payload: value["payload"].clone(),
        })
    }

    /// What a redelivery has in common with the first delivery: the event's id when it is an
    /// event (Slack may wrap the same event in a new envelope), else the envelope's.
    pub fn key(&self) -> String {
        match self.payload["event_id"].as_str() {
            Some(event) => format!("event:{event}"),
            None => format!("envelope:{}", self.envelope_id),
        }
    }

    pub fn to_json(&self) -> String {
        json!({"envelope_id": self.envelope_id, "type": self.kind, "payload": self.payload})
            .to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_is_known_by_its_event_id_across_envelopes() {
        let first = Envelope::parse(
            r#"{"envelope_id":"e1","type":"events_api","payload":{"event_id":"Ev1"}}"#,
        )
        .unwrap();
        let again = Envelope::parse(
            r#"{"envelope_id":"e2","type":"events_api","payload":{"event_id":"Ev1"}}"#,
        )
        .unwrap();
        assert_eq!(first.key(), again.key());
        let press =
            Envelope::parse(r#"{"envelope_id":"e3","type":"interactive","payload":{}}"#).unwrap();
        assert_eq!(press.key(), "envelope:e3");
        assert!(Envelope::parse(r#"{"type":"hello"}"#).is_none());
        let back = Envelope::parse(&first.to_json()).unwrap();
        assert_eq!(back.key(), first.key());
    }
}

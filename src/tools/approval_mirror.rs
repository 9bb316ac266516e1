//! One approval request shown in two channels at once (a Telegram chat's request also waits
//! in the HTTP API's inbox when `warden bot` serves the API). Exactly one answer counts: the
//! first to [`claim`](FirstAnswer::claim) the request; the other channel, answering later, is
//! told who was first and changes nothing.

use super::approval::ApprovalRequest;
use crate::locks::lock;
use std::sync::{Arc, Mutex};
use tokio::sync::oneshot;

/// Who answered a request shown in several places: the first claimant, once.
#[derive(Clone, Default, Debug)]
pub struct FirstAnswer(Arc<Mutex<Option<String>>>);

impl FirstAnswer {
    /// Claim the answer as `who` ("over HTTP", "by Ann in Telegram"); `Err` names whoever
    /// claimed it first.
    pub fn claim(&self, who: &str) -> Result<(), String> {
        let mut first = lock(&self.0);
        match first.as_ref() {
            Some(earlier) => Err(earlier.clone()),
            None => {
                *first = Some(who.to_string());
                Ok(())
            }
        }
    }

    /// Who answered, if anyone did.
    pub fn claimed_by(&self) -> Option<String> {
        lock(&self.0).clone()
    }
}

/// The second place a request is shown. A request answered there sends its decision
/// (`true`: approve) on the receiver, after claiming `first`.
pub trait ApprovalMirror: Send + Sync {
    /// Show `request` of run `run_id`; its id there and where its answer comes.
    fn show(
        &self,
        run_id: i64,
        request: &ApprovalRequest,
        first: FirstAnswer,
    ) -> (String, oneshot::Receiver<bool>);

    /// The request `id` stopped waiting (answered elsewhere, timed out, its run ended): take
    /// it down; a later answer there is refused, naming who answered.
    fn withdraw(&self, id: &str);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_first_claim_counts_and_later_ones_learn_who_was_first() {
        let first = FirstAnswer::default();
        let elsewhere = first.clone();
        assert_eq!(first.claimed_by(), None);
        assert_eq!(first.claim("over HTTP"), Ok(()));
        assert_eq!(
            elsewhere.claim("by Ann in Telegram"),
            Err("over HTTP".to_string())
        );
        assert_eq!(first.claim("over HTTP"), Err("over HTTP".to_string()));
        assert_eq!(elsewhere.claimed_by().as_deref(), Some("over HTTP"));
    }
}

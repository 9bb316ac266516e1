//! When warden's database cannot take a write — a full disk, mostly — nothing accepted may be
//! lost, and nothing may reach a chat that the database does not know about.
//!
//! - Each bookkeeping write of a run is tried again until it succeeds, and the run's next
//!   outward step (starting the agent, sending a part, calling it answered) waits for it. If
//!   warden stops meanwhile, the run is where its last write left it and the next start goes
//!   on from there.
//! - New work waits while the free space is below the reserve (`min_free_bytes`), so the runs
//!   already going keep room for their bookkeeping.
//! - A chat whose message or answer waits is told once ([`Gateway::tell_waiting`]) until its
//!   writes work again.

use super::store::RunRow;
use super::{lock, ChatKey, Gateway, Inner, RunInfo};
use crate::db::DbError;
use std::collections::HashSet;
use std::sync::Mutex;
use std::time::Duration;

/// The first wait before a failed write is tried again; it doubles up to [`MAX_WAIT`].
const FIRST_WAIT: Duration = Duration::from_millis(500);
const MAX_WAIT: Duration = Duration::from_secs(5);

/// Why work waits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trouble {
    /// No room on the disk (or less than the reserve).
    DiskFull,
    /// The database refused a write for another reason.
    Database,
}

impl Trouble {
    pub fn of(error: &DbError) -> Trouble {
        if error.is_disk_full() {
            Trouble::DiskFull
        } else {
            Trouble::Database
        }
    }

    /// What the chat is told: `answer` when the run's answer is ready and waits to be
    /// recorded, else the message waits to be run.
    pub fn notice(self, answer: bool) -> &'static str {
        match (self, answer) {
            (Trouble::DiskFull, false) => {
                "⚠️ warden's disk is full; your message is kept and will be answered when there \
                 is room."
            }
            (Trouble::DiskFull, true) => {
                "⚠️ warden's disk is full; your answer is kept and will be sent when there is \
                 room."
            }
            (Trouble::Database, false) => {
                "⚠️ warden cannot write its database right now; your message is kept and will \
                 be answered when it can."
            }
            (Trouble::Database, true) => {
                "⚠️ warden cannot write its database right now; your answer is kept and will \
                 be sent when it can."
            }
        }
    }
}

/// The chats (and topics) told that their work waits, until their writes work again.
#[derive(Default)]
pub(super) struct Told(Mutex<HashSet<ChatKey>>);

impl Gateway {
    /// Whether new work may start: the disk has at least the reserve free (a database that
    /// cannot say always has room).
    pub fn has_room(&self) -> bool {
        self.inner.has_room()
    }

    /// Tell `chat` (replying to its message `reply_to`) that its message waits for `trouble`
    /// to pass — once, until [`Gateway::writes_work`] for the chat.
    pub async fn tell_waiting(
        &self,
        chat: impl Into<ChatKey>,
        reply_to: Option<i32>,
        trouble: Trouble,
    ) {
        self.inner.tell(chat.into(), reply_to, trouble, false).await;
    }

    /// `chat`'s work was written: a later outage tells it (and each of its topics) again.
    pub fn writes_work(&self, chat: i64) {
        lock(&self.inner.told.0).retain(|told| told.chat_id != chat);
    }
}

impl Inner {
    pub(super) fn has_room(&self) -> bool {
        self.store
            .free_bytes()
            .is_none_or(|free| free >= self.settings.min_free_bytes)
    }

    async fn tell(&self, chat: ChatKey, reply_to: Option<i32>, trouble: Trouble, answer: bool) {
        if !lock(&self.told.0).insert(chat) {
            return;
        }
        tracing::warn!(chat = %chat, ?trouble, "work waits for the database");
        if let Err(e) = self.say(chat, reply_to, trouble.notice(answer)).await {
            tracing::warn!(chat = %chat, "telling the chat that its work waits: {e}");
        }
    }

    /// Send `text` to a chat outside any run's bookkeeping (at most once: a part that may have
    /// arrived is not sent again).
    pub(super) async fn say(
        &self,
        chat: ChatKey,
        reply_to: Option<i32>,
        text: &str,
    ) -> Result<(), String> {
        let info = RunInfo {
            run_id: 0,
            chat_id: chat.chat_id,
            topic: chat.topic,
            reply_to,
            preview: super::preview(text),
            origin: super::Origin::Unknown,
            deliver: true,
            draft: None,
        };
        // The channel replies with the first part only.
        for (index, part) in self
            .channel
            .parts_for(chat.chat_id, text)
            .iter()
            .enumerate()
        {
            self.channel
                .send_part(&info, index, part, false)
                .await
                .map_err(|e| e.to_string())?;
        }
        Ok(())
    }

    /// Run `write` for `run` until it succeeds; `None` if warden began to stop first. While
    /// it fails, the run's chat is told once; `answer`: the run's answer is what waits.
    pub(super) async fn durable<T>(
        &self,
        run: &RunRow,
        answer: bool,
        what: &str,
        mut write: impl FnMut() -> Result<T, DbError>,
    ) -> Option<T> {
        let mut wait = FIRST_WAIT;
        loop {
            match write() {
                Ok(value) => {
                    if wait > FIRST_WAIT {
                        tracing::info!(run = run.id, "{what}: the database takes writes again");
                    }
                    lock(&self.told.0).remove(&run.chat_key());
                    return Some(value);
                }
                Err(e) => {
                    tracing::error!(run = run.id, "{what}: {e} (trying again in {wait:?})");
                    if self.closing.is_cancelled() {
                        return None;
                    }
                    if run.deliver {
                        self.tell(run.chat_key(), run.reply_to, Trouble::of(&e), answer)
                            .await;
                    }
                    // Folding the write-ahead log into the database may give back its room.
                    let _ = self.store.checkpoint();
                }
            }
            if !self.pause(wait).await {
                return None;
            }
            wait = (wait * 2).min(MAX_WAIT);
        }
    }

    /// Wait until the disk has the reserve free before `run` starts; false if warden began to
    /// stop first.
    pub(super) async fn room_for(&self, run: &RunRow) -> bool {
        let mut wait = FIRST_WAIT;
        while !self.has_room() {
            if run.deliver {
                self.tell(run.chat_key(), run.reply_to, Trouble::DiskFull, false)
                    .await;
            }
            if !self.pause(wait).await {
                return false;
            }
            wait = (wait * 2).min(MAX_WAIT);
        }
        true
    }

    /// Sleep `wait`, or less if warden stops (then false).
    async fn pause(&self, wait: Duration) -> bool {
        tokio::select! {
            _ = tokio::time::sleep(wait) => true,
            _ = self.closing.cancelled() => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_disk_and_other_failures_read_differently() {
        let full = DbError::Io(std::io::Error::from_raw_os_error(libc::ENOSPC));
        assert_eq!(Trouble::of(&full), Trouble::DiskFull);
        assert_eq!(
            Trouble::of(&DbError::Io(std::io::Error::other("locked"))),
            Trouble::Database
        );
        assert!(Trouble::DiskFull
            .notice(false)
            .contains("your message is kept and will be answered when there is room"));
        assert!(Trouble::DiskFull
            .notice(true)
            .contains("your answer is kept"));
    }
}

//! Where a run's files go: the chat the run answers (Telegram), or nowhere (the terminal, a run
//! whose answer is filtered first). The channel supplies it, as it supplies the approver; the
//! `send_file` tool checks the file and hands it over.

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

/// A workspace file to show the person, already checked by the tool.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutgoingFile {
    /// Relative to the workspace (the receiving side checks and opens it again).
    pub path: String,
    /// Shown as a photo rather than as a file to download.
    pub photo: bool,
    /// Plain text shown under the file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caption: Option<String>,
}

#[async_trait]
pub trait Outbox: Send + Sync {
    /// Send `file`: `Ok` says how it went out, `Err` why it did not.
    async fn send_file(&self, file: &OutgoingFile) -> Result<String, String>;
}

/// No chat to send to; the reason says why, for the model to tell the user.
pub struct Nowhere(pub &'static str);

impl Nowhere {
    /// `warden run` and `warden chat`.
    pub const TERMINAL: Nowhere = Nowhere(
        "this run has no chat to send files to (the terminal): tell the user the file's path \
         in the workspace instead",
    );
}

#[async_trait]
impl Outbox for Nowhere {
    async fn send_file(&self, _file: &OutgoingFile) -> Result<String, String> {
        Err(self.0.to_string())
    }
}

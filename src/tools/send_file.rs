//! `send_file`: show the user a workspace file — a report the agent wrote, a chart — in the
//! chat, as a document or a photo.
//!
//! The file is taken as every file leaving warden is ([`crate::outgoing`]): through the path
//! validator, inside the workspace itself (not a readable root elsewhere, not a symlink out),
//! opened beneath it without following symlinks, a regular file within the caps — the Bot
//! API's own (50 MB for a document, 10 MB for a photo) and `telegram.max_send_bytes`. The
//! run's [`Outbox`] then sends it: in `warden bot` the gateway, which alone holds the bot
//! token, checks and opens it again before uploading; the terminal has no chat and says so.
//!
//! [`Outbox`]: super::outbox::Outbox

use super::outbox::OutgoingFile;
use super::{Tool, ToolContext, ToolOutput};
use crate::llm::ToolSpec;
use crate::policy::PathPolicy;
use crate::sizes::human;
use async_trait::async_trait;
use serde_json::{json, Value};
use std::sync::Arc;

/// The Bot API's upload limits.
pub const MAX_DOCUMENT_BYTES: u64 = 50 * 1024 * 1024;
pub const MAX_PHOTO_BYTES: u64 = 10 * 1024 * 1024;
/// Telegram's limit for a caption, in characters.
const MAX_CAPTION_CHARS: usize = 1024;
/// Extensions sent as a photo unless the model asks for a document.
const PHOTO_EXTENSIONS: &[&str] = &["jpg", "jpeg", "png", "webp"];

/// The cap for one kind of upload: the Bot API's limit or the configured one, the lower.
pub fn cap(photo: bool, configured: u64) -> u64 {
    configured.min(if photo {
        MAX_PHOTO_BYTES
    } else {
        MAX_DOCUMENT_BYTES
    })
}

/// Whether a file's name says it is a picture Telegram shows as a photo.
pub fn looks_like_photo(name: &str) -> bool {
    name.rsplit_once('.')
        .is_some_and(|(_, ext)| PHOTO_EXTENSIONS.iter().any(|p| ext.eq_ignore_ascii_case(p)))
}

pub struct SendFile {
    paths: Arc<PathPolicy>,
    /// `telegram.max_send_bytes`.
    max_bytes: u64,
}

impl SendFile {
    pub fn new(paths: Arc<PathPolicy>, max_bytes: u64) -> SendFile {
        SendFile { paths, max_bytes }
    }
}

#[async_trait]
impl Tool for SendFile {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "send_file".into(),
            description: "Send a file from the workspace to the user's chat: a document (any \
                          file) or a photo (jpg, png, webp; at most 10 MB). Use it when the \
                          user should get the file itself, not only its contents in your \
                          answer. The file must be inside the workspace."
                .into(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "The file, relative to the workspace"},
                    "as": {
                        "type": "string",
                        "enum": ["document", "photo"],
                        "description": "How to show it (default: photo for jpg/png/webp, else document)"
                    },
                    "caption": {"type": "string", "description": "A short text shown under the file"}
                },
                "required": ["path"]
            }),
        }
    }

    async fn run(&self, input: &Value, ctx: &ToolContext) -> ToolOutput {
        let Some(path) = input.get("path").and_then(Value::as_str) else {
            return ToolOutput::error("missing string argument `path`");
        };
        let photo = match input.get("as").and_then(Value::as_str) {
            Some("photo") => true,
            Some("document") => false,
            None => looks_like_photo(path),
            Some(other) => {
                return ToolOutput::error(format!(
                    "`as` is \"document\" or \"photo\", not {other:?}"
                ))
            }
        };
        let caption = input
            .get("caption")
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .map(|c| c.chars().take(MAX_CAPTION_CHARS).collect::<String>());
        let checked = match crate::outgoing::open(&self.paths, path, cap(photo, self.max_bytes)) {
            Ok(checked) => checked,
            Err(reason) => return ToolOutput::denied(reason),
        };
        let kind = if photo { "photo" } else { "document" };
        let file = OutgoingFile {
            path: checked.relative.clone(),
            photo,
            caption,
        };
        // The descriptor is not handed on: the receiving side opens the file again itself.
        drop(checked.file);
        match ctx.outbox.send_file(&file).await {
            Ok(how) => ToolOutput {
                reason: format!("sent {} as a {kind}", file.path),
                ..ToolOutput::ok(format!(
                    "Sent {} ({}) to the chat as a {kind}. {how}",
                    file.path,
                    human(checked.size)
                ))
            },
            Err(why) => ToolOutput::error(format!("{} was not sent: {why}", file.path)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::outbox::Outbox;
    use std::sync::Mutex;

    struct Recorded(Mutex<Vec<OutgoingFile>>);

    #[async_trait]
    impl Outbox for Recorded {
        async fn send_file(&self, file: &OutgoingFile) -> Result<String, String> {
            self.0.lock().unwrap().push(file.clone());
            Ok("It arrived.".into())
        }
    }

    fn setup() -> (tempfile::TempDir, Arc<PathPolicy>) {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(ws.join("out")).unwrap();
        std::fs::write(ws.join("out/report.txt"), "numbers").unwrap();
        std::fs::write(ws.join("chart.PNG"), [0x89, b'P', b'N', b'G']).unwrap();
        let paths = PathPolicy::new(&ws, &[], &[], dir.path()).unwrap();
        (dir, Arc::new(paths))
    }

    #[tokio::test]
    async fn a_checked_workspace_file_goes_to_the_outbox_as_a_document_or_a_photo() {
        let (_dir, paths) = setup();
        let outbox = Arc::new(Recorded(Mutex::new(Vec::new())));
        let ctx = ToolContext {
            outbox: outbox.clone(),
            ..ToolContext::detached("telegram:1")
        };
        let small = SendFile::new(paths.clone(), 5);
        let out = small.run(&json!({"path": "out/report.txt"}), &ctx).await;
        assert_eq!(out.decision, crate::audit::AuditDecision::Deny);
        assert!(
            out.content.contains("limit"),
            "over the 5-byte cap: {out:?}"
        );
        let out = small.run(&json!({"path": "/etc/passwd"}), &ctx).await;
        assert!(out.content.contains("outside"), "{out:?}");

        let tool = SendFile::new(paths, 1000);
        let out = tool
            .run(
                &json!({"path": "out/report.txt", "caption": " the numbers "}),
                &ctx,
            )
            .await;
        assert!(!out.is_error, "{out:?}");
        assert!(
            out.content.contains("as a document. It arrived."),
            "{out:?}"
        );
        let out = tool.run(&json!({"path": "chart.PNG"}), &ctx).await;
        assert!(out.content.contains("as a photo"), "{out:?}");
        let out = tool
            .run(&json!({"path": "chart.PNG", "as": "movie"}), &ctx)
            .await;
        assert!(out.is_error, "{out:?}");
        assert_eq!(
            *outbox.0.lock().unwrap(),
            [
                OutgoingFile {
                    path: "out/report.txt".into(),
                    photo: false,
                    caption: Some("the numbers".into()),
                },
                OutgoingFile {
                    path: "chart.PNG".into(),
                    photo: true,
                    caption: None,
                },
            ]
        );
    }

    #[tokio::test]
    async fn without_a_chat_the_tool_says_so() {
        let (_dir, paths) = setup();
        let tool = SendFile::new(paths, 1000);
        let out = tool
            .run(
                &json!({"path": "out/report.txt"}),
                &ToolContext::detached("run:1"),
            )
            .await;
        assert!(out.is_error);
        assert!(out.content.contains("no chat to send files to"), "{out:?}");
    }
}

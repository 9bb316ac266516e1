//! What outlives a run: the workspace files that feed every later system prompt, and cron jobs.
//! A model that read someone else's instructions (a web page, a document) would make them
//! stick there, so:
//!
//! - [`PromptFiles`] names those files and is the one check every write path goes through (the
//!   `write` and `edit` tools, and every path and redirection of a checked bash line):
//!   instruction files (`AGENTS.md`, `SOUL.md`, `TOOLS.md`) always ask, with a diff where the
//!   new text is known; memory files ask once the run is tainted. It also says which paths hold
//!   untrusted files (`attachments/`), whose reading taints the run.
//! - [`Snapshot`] records those files and the jobs at the start of a run, so the end of the run
//!   can tell the user, in one short summary, what it changed — whatever path the change took.

mod guard;
mod summary;

pub use guard::{diff, Kind, PromptFiles, Touched};
pub use summary::{JobState, Snapshot};

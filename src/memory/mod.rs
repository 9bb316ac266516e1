//! What warden remembers.
//!
//! - [`sessions`]: transcripts in SQLite, appended as a run goes; [`repair`] makes a stored
//!   history acceptable to the providers after a crash or a compaction.
//! - [`compaction`]: keeping a session inside the context window — the [`flush`] turn at the
//!   soft threshold, a [`summary`] replacing older messages at the hard one.
//! - [`workspace`]: the convention files (SOUL.md, MEMORY.md…) seeded and put into the prompt.
//! - [`index`] and [`search`]: MEMORY.md, memory/*.md and compacted conversations, chunked
//!   ([`chunk`]) into FTS5 with optional [`embeddings`]; read by the `memory_search` tool.

pub mod call_site;
pub mod chat_key;
pub mod chunk;
pub mod compaction;
pub mod embeddings;
pub mod flush;
pub mod index;
pub mod repair;
pub mod search;
pub mod session_taint;
pub mod sessions;
pub mod summary;
pub mod transcript;
pub mod workspace;

pub use compaction::Compactor;
pub use index::MemoryIndex;
pub use search::Hit;

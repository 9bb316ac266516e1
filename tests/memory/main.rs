//! Memory and sessions: compaction, crashes, hybrid search, the workspace files.

#[path = "../support/mod.rs"]
mod support;

mod compaction;
mod crash;
mod embeddings;
mod search;
mod workspace;

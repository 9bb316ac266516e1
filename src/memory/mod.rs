//! What warden remembers: session transcripts in SQLite (and, later, compaction and the
//! memory index over the workspace's markdown files).

pub mod sessions;

//! A part of the system prompt that another room contributes (the workspace's convention
//! files, the skills list, a sub-agent's role). The agent renders every section afresh at the
//! start of each run, because the files they read change.

/// A part of the system prompt rendered at the start of each run.
pub trait PromptSection: Send + Sync {
    /// `None` leaves the section out this run.
    fn render(&self) -> Option<String>;
}

//! `[trust]`: the workspace files that steer the agent, the ones no command may change unasked,
//! and the folders whose files count as untrusted.

use serde::Deserialize;

/// `[trust]`: the workspace files that steer the agent, and where untrusted files land (see
/// `crate::persistence`). Paths are relative to the workspace; `dir/**` is a whole folder.
#[derive(Clone, Debug, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TrustConfig {
    /// Files that tell the agent how to behave: every model write to them asks, with a diff.
    pub instruction_files: Vec<String>,
    /// Memory that feeds later prompts: written freely, except after the run read untrusted
    /// content, when writes ask.
    pub memory_files: Vec<String>,
    /// Where files from others land: reading from them marks the run as untrusted.
    pub untrusted_paths: Vec<String>,
    /// More files no command may change unasked (a model write asks, like an instruction
    /// file; the write verifier undoes any other change). git's hooks and config files are
    /// always protected.
    pub protected_files: Vec<String>,
}

impl TrustConfig {
    /// Every entry a plain path relative to the workspace, or `dir/**`; an error names the
    /// list. The persistence guard reads the same lists through the same parser.
    pub fn check(&self) -> Result<(), String> {
        for (key, list) in [
            ("untrusted_paths", &self.untrusted_paths),
            ("instruction_files", &self.instruction_files),
            ("memory_files", &self.memory_files),
            ("protected_files", &self.protected_files),
        ] {
            crate::verify::Listed::parse_all(key, list)?;
        }
        Ok(())
    }
}

impl Default for TrustConfig {
    fn default() -> Self {
        let strings = |list: &[&str]| list.iter().map(|s| s.to_string()).collect();
        TrustConfig {
            instruction_files: strings(&["AGENTS.md", "SOUL.md", "TOOLS.md"]),
            memory_files: strings(&["MEMORY.md", "USER.md", "HEARTBEAT.md", "memory/**"]),
            untrusted_paths: strings(&["attachments"]),
            protected_files: Vec::new(),
        }
    }
}

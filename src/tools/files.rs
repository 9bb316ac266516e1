//! File tools: `read`, `write`, `edit`, `list_dir`. Every path goes through the same validator
//! as the command policy (relative to the workspace, symlinks resolved, inside the roots) and
//! is then opened beneath its root without following symlinks, so a link swapped in after the
//! check cannot redirect a read or a write.

use super::approval::{self, ApprovalRequest};
use super::{Tool, ToolContext, ToolOutput};
use crate::beneath;
use crate::llm::ToolSpec;
use crate::persistence::{self, PromptFiles};
use crate::policy::{Access, PathPolicy};
use async_trait::async_trait;
use serde_json::{json, Value};
use std::io::Read;
use std::path::PathBuf;
use std::sync::Arc;

/// Lines `read` returns when no limit is given, and the longest line it shows in full.
const DEFAULT_READ_LINES: usize = 2000;
const MAX_LINE_CHARS: usize = 2000;
/// Files larger than this are not loaded whole by `read` without a limit, nor by `edit`.
const MAX_FILE_BYTES: u64 = 10 * 1024 * 1024;

/// Called after a successful write or edit (the memory index re-syncs memory files).
pub type WriteHook = Arc<dyn Fn(&std::path::Path) + Send + Sync>;

/// The four file tools over one path policy; writes to the files that feed the prompt are
/// gated by `prompt_files`.
pub fn tools(
    paths: Arc<PathPolicy>,
    prompt_files: Arc<PromptFiles>,
    on_write: Option<WriteHook>,
) -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(ReadTool {
            paths: paths.clone(),
            prompt_files: prompt_files.clone(),
        }),
        Arc::new(WriteTool {
            paths: paths.clone(),
            prompt_files: prompt_files.clone(),
            on_write: on_write.clone(),
        }),
        Arc::new(EditTool {
            paths: paths.clone(),
            prompt_files,
            on_write,
        }),
        Arc::new(ListDirTool { paths }),
    ]
}

/// Ask before a write that changes a prompt-feeding file when [`PromptFiles::why_ask`] says
/// so, showing the diff; `Ok(asked)` when no approval is needed or it was given.
async fn approve_change(
    prompt_files: &PromptFiles,
    ctx: &ToolContext,
    tool: &str,
    checked: &std::path::Path,
    old: impl FnOnce() -> Result<String, ToolOutput>,
    new: &str,
) -> Result<bool, ToolOutput> {
    let touched = prompt_files.touched_by(checked);
    let Some(why) = prompt_files.why_ask(&touched, &ctx.taint) else {
        return Ok(false);
    };
    let old = old()?;
    let name = prompt_files.name(checked);
    let request = ApprovalRequest {
        session: ctx.session.clone(),
        tool: tool.into(),
        command: format!("{tool} {name}"),
        reason: why,
        always: None,
        detail: Some(persistence::diff(&name, &old, new)),
    };
    approval::ask(ctx.approver.as_ref(), &request).await?;
    Ok(true)
}

/// The file's text before a write (empty when it does not exist yet).
fn current_text(paths: &PathPolicy, checked: &std::path::Path) -> Result<String, ToolOutput> {
    match std::fs::symlink_metadata(checked) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(String::new()),
        _ => read_text(paths, checked, MAX_FILE_BYTES),
    }
}

fn string_arg<'a>(input: &'a Value, key: &str) -> Result<&'a str, ToolOutput> {
    input
        .get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| ToolOutput::error(format!("missing string argument `{key}`")))
}

fn check(paths: &PathPolicy, path: &str, access: Access) -> Result<PathBuf, ToolOutput> {
    paths
        .check(paths.workspace(), path, access)
        .map_err(|d| ToolOutput::denied(d.reason))
}

fn read_text(
    paths: &PathPolicy,
    checked: &std::path::Path,
    max: u64,
) -> Result<String, ToolOutput> {
    let file = beneath::open_read(paths, checked)
        .map_err(|e| ToolOutput::error(format!("{}: {e}", checked.display())))?;
    let size = file.metadata().map(|m| m.len()).unwrap_or(0);
    if size > max {
        return Err(ToolOutput::error(format!(
            "{} is {size} bytes, more than the {max}-byte limit",
            checked.display()
        )));
    }
    let mut bytes = Vec::with_capacity(size as usize);
    file.take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| ToolOutput::error(format!("{}: {e}", checked.display())))?;
    if bytes.contains(&0) {
        return Err(ToolOutput::error(format!(
            "{} looks binary ({} bytes); not shown",
            checked.display(),
            bytes.len()
        )));
    }
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

struct ReadTool {
    paths: Arc<PathPolicy>,
    prompt_files: Arc<PromptFiles>,
}

#[async_trait]
impl Tool for ReadTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "read".into(),
            description: "Read a text file in the workspace, with line numbers. Use offset \
                          (1-based first line) and limit (number of lines) for large files."
                .into(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File path, relative to the workspace"},
                    "offset": {"type": "integer", "minimum": 1},
                    "limit": {"type": "integer", "minimum": 1}
                },
                "required": ["path"]
            }),
        }
    }

    async fn run(&self, input: &Value, ctx: &ToolContext) -> ToolOutput {
        let result = (|| {
            let path = string_arg(input, "path")?;
            let checked = check(&self.paths, path, Access::Read)?;
            // What others sent (Telegram documents) is untrusted: reading it taints the run.
            if self.prompt_files.is_untrusted(&checked) {
                ctx.taint.add(self.prompt_files.name(&checked));
            }
            let offset = input
                .get("offset")
                .and_then(Value::as_u64)
                .unwrap_or(1)
                .max(1) as usize;
            let limit = input
                .get("limit")
                .and_then(Value::as_u64)
                .map_or(DEFAULT_READ_LINES, |l| l as usize);
            let text = read_text(&self.paths, &checked, MAX_FILE_BYTES)?;
            let total = text.lines().count();
            let mut out = String::new();
            for (n, line) in text.lines().enumerate().skip(offset - 1).take(limit) {
                let shown: String = line.chars().take(MAX_LINE_CHARS).collect();
                let cut = if shown.len() < line.len() {
                    " [line truncated]"
                } else {
                    ""
                };
                out.push_str(&format!("{:>6}\t{shown}{cut}\n", n + 1));
            }
            if total == 0 {
                out.push_str("(empty file)\n");
            } else if offset - 1 + limit < total {
                out.push_str(&format!(
                    "[showing lines {offset}-{} of {total}; use offset to read more]\n",
                    offset - 1 + limit
                ));
            }
            Ok(ToolOutput::ok(out))
        })();
        result.unwrap_or_else(|e| e)
    }
}

struct WriteTool {
    paths: Arc<PathPolicy>,
    prompt_files: Arc<PromptFiles>,
    on_write: Option<WriteHook>,
}

#[async_trait]
impl Tool for WriteTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "write".into(),
            description: "Write a file in the workspace (replacing it), creating parent \
                          directories as needed."
                .into(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File path, relative to the workspace"},
                    "content": {"type": "string"}
                },
                "required": ["path", "content"]
            }),
        }
    }

    async fn run(&self, input: &Value, ctx: &ToolContext) -> ToolOutput {
        let (path, content, checked) = match (|| {
            let path = string_arg(input, "path")?;
            let content = string_arg(input, "content")?;
            let checked = check(&self.paths, path, Access::Write)?;
            Ok((path, content, checked))
        })() {
            Ok(args) => args,
            Err(e) => return e,
        };
        let old = || current_text(&self.paths, &checked);
        let approved =
            match approve_change(&self.prompt_files, ctx, "write", &checked, old, content).await {
                Ok(approved) => approved,
                Err(refused) => return refused,
            };
        let result = (|| {
            if let Some(parent) = checked.parent() {
                beneath::create_dirs(&self.paths, parent).map_err(|e| {
                    ToolOutput::error(format!("creating {}: {e}", parent.display()))
                })?;
            }
            beneath::replace(&self.paths, &checked, content.as_bytes())
                .map_err(|e| ToolOutput::error(format!("{path}: {e}")))?;
            if let Some(hook) = &self.on_write {
                hook(&checked);
            }
            Ok(ToolOutput::ok(format!(
                "wrote {} bytes to {path}",
                content.len()
            )))
        })();
        result.unwrap_or_else(|e| e).approved_if(approved)
    }
}

struct EditTool {
    paths: Arc<PathPolicy>,
    prompt_files: Arc<PromptFiles>,
    on_write: Option<WriteHook>,
}

#[async_trait]
impl Tool for EditTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "edit".into(),
            description: "Replace text in a workspace file. old_string must occur exactly once \
                          unless replace_all is true."
                .into(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string"},
                    "old_string": {"type": "string"},
                    "new_string": {"type": "string"},
                    "replace_all": {"type": "boolean", "default": false}
                },
                "required": ["path", "old_string", "new_string"]
            }),
        }
    }

    async fn run(&self, input: &Value, ctx: &ToolContext) -> ToolOutput {
        let prepared = (|| {
            let path = string_arg(input, "path")?;
            let old = string_arg(input, "old_string")?;
            let new = string_arg(input, "new_string")?;
            let all = input
                .get("replace_all")
                .and_then(Value::as_bool)
                .unwrap_or(false);
            if old.is_empty() {
                return Err(ToolOutput::error("old_string is empty"));
            }
            if old == new {
                return Err(ToolOutput::error("old_string and new_string are the same"));
            }
            let checked = check(&self.paths, path, Access::Write)?;
            let text = read_text(&self.paths, &checked, MAX_FILE_BYTES)?;
            let count = text.matches(old).count();
            let updated = match (count, all) {
                (0, _) => {
                    return Err(ToolOutput::error(format!(
                        "old_string was not found in {path}"
                    )))
                }
                (1, _) | (_, true) => text.replace(old, new),
                (n, false) => {
                    return Err(ToolOutput::error(format!(
                    "old_string occurs {n} times in {path}; give more context or set replace_all"
                )))
                }
            };
            Ok((path, checked, text, updated, count))
        })();
        let (path, checked, text, updated, count) = match prepared {
            Ok(prepared) => prepared,
            Err(e) => return e,
        };
        let asked = approve_change(
            &self.prompt_files,
            ctx,
            "edit",
            &checked,
            || Ok(text),
            &updated,
        );
        let approved = match asked.await {
            Ok(approved) => approved,
            Err(refused) => return refused,
        };
        let result = (|| {
            beneath::replace(&self.paths, &checked, updated.as_bytes())
                .map_err(|e| ToolOutput::error(format!("{path}: {e}")))?;
            if let Some(hook) = &self.on_write {
                hook(&checked);
            }
            Ok(ToolOutput::ok(format!(
                "replaced {count} occurrence(s) in {path}"
            )))
        })();
        result.unwrap_or_else(|e| e).approved_if(approved)
    }
}

struct ListDirTool {
    paths: Arc<PathPolicy>,
}

#[async_trait]
impl Tool for ListDirTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "list_dir".into(),
            description: "List a directory in the workspace (default: the workspace root).".into(),
            input_schema: json!({
                "type": "object",
                "properties": {"path": {"type": "string"}}
            }),
        }
    }

    async fn run(&self, input: &Value, _ctx: &ToolContext) -> ToolOutput {
        let result = (|| {
            let path = input.get("path").and_then(Value::as_str).unwrap_or(".");
            let checked = check(&self.paths, path, Access::Read)?;
            let fd = beneath::open_dir(&self.paths, &checked)
                .map_err(|e| ToolOutput::error(format!("{path}: {e}")))?;
            let mut dir = nix::dir::Dir::from_fd(fd)
                .map_err(|e| ToolOutput::error(format!("{path}: {e}")))?;
            let mut entries: Vec<String> = Vec::new();
            for entry in dir.iter() {
                let entry = entry.map_err(|e| ToolOutput::error(format!("{path}: {e}")))?;
                let name = entry.file_name().to_string_lossy().into_owned();
                if name == "." || name == ".." {
                    continue;
                }
                let full = checked.join(&name);
                let meta = std::fs::symlink_metadata(&full);
                let line = match meta {
                    Ok(m) if m.is_dir() => format!("{name}/"),
                    Ok(m) if m.file_type().is_symlink() => {
                        let target = std::fs::read_link(&full)
                            .map(|t| t.display().to_string())
                            .unwrap_or_default();
                        format!("{name} -> {target}")
                    }
                    Ok(m) => format!("{name}  ({} bytes)", m.len()),
                    Err(_) => name,
                };
                entries.push(line);
            }
            entries.sort();
            if entries.is_empty() {
                return Ok(ToolOutput::ok(format!("{path} is empty")));
            }
            Ok(ToolOutput::ok(entries.join("\n") + "\n"))
        })();
        result.unwrap_or_else(|e| e)
    }
}

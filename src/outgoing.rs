//! Workspace files that leave warden's process — uploaded to the chat by `send_file`, sent to
//! the speech-to-text endpoint — are taken from the workspace itself only: the path goes
//! through the path validator and must then lie inside the workspace (not in a readable root
//! elsewhere, not behind a symlink that leads out), and the file is opened beneath the
//! workspace without following symlinks, a regular non-empty file within a size cap.

use crate::beneath;
use crate::policy::{Access, PathPolicy};
use crate::sizes::human;
use std::fs::File;

/// A checked workspace file, open for reading.
#[derive(Debug)]
pub struct Outgoing {
    pub file: File,
    /// Its path relative to the workspace.
    pub relative: String,
    /// Its file name.
    pub name: String,
    pub size: u64,
}

/// Check `path` (relative to the workspace, or absolute inside it) and open it: at most `max`
/// bytes. The error is the reason, for the model, the user and the audit log.
pub fn open(paths: &PathPolicy, path: &str, max: u64) -> Result<Outgoing, String> {
    let workspace = paths.workspace();
    let checked = paths
        .check(workspace, path, Access::Read)
        .map_err(|d| d.reason)?;
    let relative = match checked.strip_prefix(workspace) {
        Ok(rel) if !rel.as_os_str().is_empty() => rel.to_string_lossy().into_owned(),
        _ => {
            return Err(format!(
                "only files in the workspace may leave it; {path} is outside it (it is {})",
                checked.display()
            ))
        }
    };
    let file = beneath::open_read(paths, &checked).map_err(|e| format!("{relative}: {e}"))?;
    let size = file
        .metadata()
        .map_err(|e| format!("{relative}: {e}"))?
        .len();
    if size == 0 {
        return Err(format!("{relative} is empty"));
    }
    if size > max {
        return Err(format!(
            "{relative} is {}, more than the {} limit",
            human(size),
            human(max)
        ));
    }
    let name = checked
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| relative.clone());
    Ok(Outgoing {
        file,
        relative,
        name,
        size,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_regular_files_inside_the_workspace_within_the_cap_leave() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(ws.join("out")).unwrap();
        std::fs::write(ws.join("out/report.txt"), "numbers").unwrap();
        std::fs::write(ws.join("empty.txt"), "").unwrap();
        std::fs::write(dir.path().join("secret.txt"), "outside").unwrap();
        std::os::unix::fs::symlink(dir.path().join("secret.txt"), ws.join("link.txt")).unwrap();
        std::os::unix::fs::symlink("out/report.txt", ws.join("inner.txt")).unwrap();
        // The parent is a readable root: the path check alone would let it through.
        let paths = PathPolicy::new(&ws, &[], &[dir.path().to_path_buf()], dir.path()).unwrap();

        let ok = open(&paths, "out/report.txt", 100).unwrap();
        assert_eq!(
            (ok.relative.as_str(), ok.name.as_str(), ok.size),
            ("out/report.txt", "report.txt", 7)
        );
        let inner = open(&paths, "inner.txt", 100).unwrap();
        assert_eq!(
            inner.relative, "out/report.txt",
            "a link inside the workspace is its target"
        );
        for (path, max, why) in [
            ("out/report.txt", 5, "more than the 5 bytes limit"),
            ("../secret.txt", 100, "only files in the workspace"),
            ("link.txt", 100, "only files in the workspace"),
            ("/etc/passwd", 100, "outside"),
            ("empty.txt", 100, "empty"),
            ("out", 100, "not a regular file"),
            (".", 100, "only files in the workspace"),
        ] {
            let err = open(&paths, path, max).unwrap_err();
            assert!(err.contains(why), "{path}: {err}");
        }
    }
}

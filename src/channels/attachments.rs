//! Files a person sends in a chat (Telegram, Slack) land in the workspace's `attachments/`:
//! the name reduced to one safe path component, written beneath the workspace through the path
//! validator (a planted symlink is refused, never followed), never overwriting. What lands
//! there is untrusted: `attachments/` is one of `[trust] untrusted_paths`.

use crate::beneath;
use crate::policy::paths::Access;
use crate::policy::PathPolicy;
use nix::fcntl::OFlag;
use std::io::Write;

/// One path component of `[A-Za-z0-9._-]`, no leading dot, at most 100 characters, keeping
/// the extension: `../../etc/passwd` → `passwd`, `my report (v2).pdf` → `my_report_v2_.pdf`.
pub fn safe_file_name(name: &str) -> String {
    let base = name.rsplit(['/', '\\']).next().unwrap_or("");
    let mut cleaned: String = base
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                c
            } else {
                '_'
            }
        })
        .collect();
    while cleaned.contains("__") {
        cleaned = cleaned.replace("__", "_");
    }
    let cleaned = cleaned.trim_start_matches(['.', '_']).to_string();
    let cleaned = if cleaned.chars().any(|c| c.is_ascii_alphanumeric()) {
        cleaned
    } else {
        "file".to_string()
    };
    if cleaned.len() <= 100 {
        return cleaned;
    }
    match cleaned.rfind('.') {
        Some(dot) if cleaned.len() - dot <= 16 => {
            format!(
                "{}{}",
                &cleaned[..100 - (cleaned.len() - dot)],
                &cleaned[dot..]
            )
        }
        _ => cleaned[..100].to_string(),
    }
}

/// Write `data` to `attachments/<name>` in the workspace (adding `-1`, `-2`… instead of
/// overwriting); returns the path relative to the workspace.
pub fn save_attachment(paths: &PathPolicy, name: &str, data: &[u8]) -> Result<String, String> {
    let workspace = paths.workspace().to_path_buf();
    let (stem, ext) = match name.rfind('.') {
        Some(dot) if dot > 0 => (&name[..dot], &name[dot..]),
        _ => (name, ""),
    };
    for n in 0..100 {
        let candidate = if n == 0 {
            name.to_string()
        } else {
            format!("{stem}-{n}{ext}")
        };
        let relative = format!("attachments/{candidate}");
        let checked = paths
            .check(&workspace, &relative, Access::Write)
            .map_err(|d| d.reason)?;
        if let Some(dir) = checked.parent() {
            beneath::create_dirs(paths, dir).map_err(|e| format!("attachments/: {e}"))?;
        }
        let flags = OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL;
        match beneath::open(paths, &checked, flags, 0o600) {
            Ok(mut file) => {
                file.write_all(data)
                    .and_then(|_| file.sync_all())
                    .map_err(|e| format!("{relative}: {e}"))?;
                return Ok(relative);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(format!("{relative}: {e}")),
        }
    }
    Err(format!("too many files named {name} in attachments/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_become_one_safe_component() {
        assert_eq!(safe_file_name("../../etc/passwd"), "passwd");
        assert_eq!(safe_file_name("..\\..\\boot.ini"), "boot.ini");
        assert_eq!(safe_file_name("my report (v2).pdf"), "my_report_v2_.pdf");
        assert_eq!(safe_file_name(".bashrc"), "bashrc");
        assert_eq!(safe_file_name(".."), "file");
        assert_eq!(safe_file_name(""), "file");
        assert_eq!(safe_file_name("отчёт.txt"), "txt");
        let long = format!("{}.tar.gz", "a".repeat(300));
        let cut = safe_file_name(&long);
        assert_eq!(cut.len(), 100);
        assert!(cut.ends_with(".gz"));
    }

    #[test]
    fn attachments_are_saved_without_overwriting_or_following_symlinks() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir(&ws).unwrap();
        let paths = PathPolicy::new(&ws, &[], &[], std::path::Path::new("/root")).unwrap();
        assert_eq!(
            save_attachment(&paths, "a.txt", b"one").unwrap(),
            "attachments/a.txt"
        );
        assert_eq!(
            save_attachment(&paths, "a.txt", b"two").unwrap(),
            "attachments/a-1.txt"
        );
        let saved = paths.workspace().join("attachments");
        assert_eq!(std::fs::read(saved.join("a.txt")).unwrap(), b"one");
        // A symlinked attachments/ pointing outside is refused.
        let ws2 = dir.path().join("ws2");
        std::fs::create_dir(&ws2).unwrap();
        std::os::unix::fs::symlink(dir.path(), ws2.join("attachments")).unwrap();
        let paths2 = PathPolicy::new(&ws2, &[], &[], std::path::Path::new("/root")).unwrap();
        assert!(save_attachment(&paths2, "x.txt", b"x").is_err());
        assert!(!dir.path().join("x.txt").exists());
    }
}

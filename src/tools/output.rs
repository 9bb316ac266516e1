//! Capping long tool results: keep the head and the tail, say how much was cut, and save the
//! full text in the workspace so the model can read it in pieces.

use std::path::{Path, PathBuf};

/// Cap `text` at `max_chars` characters. When cut, the full text is written to a new file in
/// `save_dir` and its path is named in the marker.
pub fn cap(text: &str, max_chars: usize, save_dir: &Path, label: &str) -> String {
    let total = text.chars().count();
    if total <= max_chars {
        return text.to_string();
    }
    let saved = save_full(text, save_dir, label);
    let keep_head = max_chars * 2 / 3;
    let keep_tail = max_chars - keep_head;
    let head: String = text.chars().take(keep_head).collect();
    let tail: String = text.chars().skip(total - keep_tail).collect();
    let where_ = match saved {
        Ok(path) => format!("full output saved to {}", path.display()),
        Err(e) => format!("the full output could not be saved: {e}"),
    };
    format!(
        "{head}\n[... {} characters truncated; {where_} ...]\n{tail}",
        total - keep_head - keep_tail
    )
}

fn save_full(text: &str, dir: &Path, label: &str) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%S%.3f");
    let safe: String = label
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let path = dir.join(format!("{stamp}-{safe}.txt"));
    std::fs::write(&path, text)?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_text_is_unchanged_and_long_text_is_saved() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(cap("short", 100, dir.path(), "bash"), "short");
        let long: String = (0..1000).map(|i| format!("{i:04}\n")).collect();
        let capped = cap(&long, 300, dir.path(), "bash");
        assert!(capped.starts_with("0000\n"));
        assert!(capped.ends_with("0999\n"));
        assert!(capped.contains("characters truncated; full output saved to"));
        let saved: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(saved.len(), 1);
        let path = saved[0].as_ref().unwrap().path();
        assert_eq!(std::fs::read_to_string(path).unwrap(), long);
    }
}

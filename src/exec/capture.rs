//! Capturing one output stream with a size cap: the head and the tail are kept, the middle is
//! replaced by a marker saying how much was dropped and where the full output was saved.
//!
//! Once the stream exceeds the cap, everything (the head so far, then every new byte) is also
//! written to a new file in the save directory (inside the workspace), opened without following
//! symlinks, so the model can read the whole output with its file tools.

use crate::beneath;
use crate::policy::PathPolicy;
use nix::fcntl::OFlag;
use std::collections::VecDeque;
use std::fs::File;
use std::io::Write;
use std::path::PathBuf;

/// Where a capture may save its full output: a directory beneath one of `paths`' roots.
#[derive(Clone, Debug)]
pub struct SaveTarget {
    pub paths: PathPolicy,
    pub dir: PathBuf,
}

#[derive(Debug)]
pub struct Capture {
    name: &'static str,
    cap: usize,
    head: Vec<u8>,
    tail: VecDeque<u8>,
    total: u64,
    over: bool,
    save: Option<SaveTarget>,
    spill: Option<(PathBuf, File)>,
    spill_error: Option<String>,
}

/// A finished capture.
#[derive(Debug, PartialEq, Eq)]
pub struct Captured {
    pub text: String,
    pub truncated: bool,
    pub saved: Option<PathBuf>,
}

impl Capture {
    /// `name` ("stdout"/"stderr") appears in the saved file's name.
    pub fn new(name: &'static str, cap: usize, save: Option<SaveTarget>) -> Capture {
        Capture {
            name,
            cap,
            head: Vec::new(),
            tail: VecDeque::new(),
            total: 0,
            over: false,
            save,
            spill: None,
            spill_error: None,
        }
    }

    fn head_keep(&self) -> usize {
        self.cap / 2
    }

    fn tail_keep(&self) -> usize {
        self.cap - self.cap / 2
    }

    pub fn push(&mut self, data: &[u8]) {
        self.total += data.len() as u64;
        if !self.over {
            if self.head.len() + data.len() <= self.cap {
                self.head.extend_from_slice(data);
                return;
            }
            self.over = true;
            self.start_spill();
        }
        self.write_spill(data);
        let head_keep = self.head_keep();
        let mut rest = data;
        // Right at the overflow the head may still have room.
        if self.head.len() < head_keep && self.tail.is_empty() {
            let take = (head_keep - self.head.len()).min(rest.len());
            self.head.extend_from_slice(&rest[..take]);
            rest = &rest[take..];
        }
        if self.head.len() > head_keep {
            self.tail.extend(self.head.drain(head_keep..));
        }
        let tail_keep = self.tail_keep();
        if rest.len() >= tail_keep {
            self.tail.clear();
            self.tail.extend(&rest[rest.len() - tail_keep..]);
        } else {
            self.tail.extend(rest);
            let excess = self.tail.len().saturating_sub(tail_keep);
            self.tail.drain(..excess);
        }
    }

    fn start_spill(&mut self) {
        let Some(save) = &self.save else {
            return;
        };
        let name = format!(
            "warden-{}-{}-{:08x}.txt",
            self.name,
            chrono::Local::now().format("%Y%m%d-%H%M%S"),
            rand::random::<u32>()
        );
        let path = save.dir.join(name);
        // Created beneath the root without following symlinks: the jail could have planted one.
        let opened = beneath::create_dirs(&save.paths, &save.dir).and_then(|()| {
            beneath::open(
                &save.paths,
                &path,
                OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL,
                0o644,
            )
        });
        match opened {
            Ok(file) => {
                self.spill = Some((path, file));
                let head = std::mem::take(&mut self.head);
                self.write_spill(&head);
                self.head = head;
            }
            Err(e) => self.spill_error = Some(format!("{}: {e}", save.dir.display())),
        }
    }

    fn write_spill(&mut self, data: &[u8]) {
        if let Some((path, file)) = &mut self.spill {
            if let Err(e) = file.write_all(data) {
                self.spill_error = Some(format!("{}: {e}", path.display()));
                self.spill = None;
            }
        }
    }

    /// The kept text, with the truncation marker when bytes were dropped.
    pub fn finish(self) -> Captured {
        if !self.over {
            return Captured {
                text: String::from_utf8_lossy(&self.head).into_owned(),
                truncated: false,
                saved: None,
            };
        }
        let kept = self.head.len() + self.tail.len();
        let dropped = self.total - kept as u64;
        let saved = self.spill.map(|(path, _)| path);
        let marker = match (&saved, &self.spill_error) {
            (Some(path), _) => format!(
                "\n[... {dropped} bytes truncated; full output saved to {} ...]\n",
                path.display()
            ),
            (None, Some(err)) => format!(
                "\n[... {dropped} bytes truncated; the full output could not be saved: {err} ...]\n"
            ),
            (None, None) => format!("\n[... {dropped} bytes truncated ...]\n"),
        };
        let mut bytes = self.head;
        bytes.extend_from_slice(marker.as_bytes());
        bytes.extend(self.tail);
        Captured {
            text: String::from_utf8_lossy(&bytes).into_owned(),
            truncated: true,
            saved,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn under_the_cap_everything_is_kept() {
        let mut c = Capture::new("stdout", 10, None);
        c.push(b"hello");
        c.push(b"world");
        assert_eq!(
            c.finish(),
            Captured {
                text: "helloworld".into(),
                truncated: false,
                saved: None
            }
        );
    }

    #[test]
    fn over_the_cap_head_and_tail_remain_with_a_marker() {
        let mut c = Capture::new("stdout", 10, None);
        for chunk in [&b"0123"[..], b"456789ab", b"cdefghij", b"KLMNO"] {
            c.push(chunk);
        }
        let out = c.finish();
        assert!(out.truncated);
        // 25 bytes in, 5 head + 5 tail kept.
        assert_eq!(out.text, "01234\n[... 15 bytes truncated ...]\nKLMNO");
    }

    #[test]
    fn a_single_huge_chunk_is_cut_too() {
        let mut c = Capture::new("stderr", 4, None);
        c.push(&[b'x'; 1000]);
        let out = c.finish();
        assert_eq!(out.text, "xx\n[... 996 bytes truncated ...]\nxx");
    }

    #[test]
    fn full_output_is_saved_inside_the_workspace() {
        let ws = tempfile::tempdir().unwrap();
        let ws = ws.path().canonicalize().unwrap();
        let target = SaveTarget {
            paths: PathPolicy::new(&ws, &[], &[], std::path::Path::new("/root")).unwrap(),
            dir: ws.join(".warden/output"),
        };
        let mut c = Capture::new("stdout", 8, Some(target));
        let input: Vec<u8> = (0..100u8).map(|i| b'a' + i % 26).collect();
        for chunk in input.chunks(7) {
            c.push(chunk);
        }
        let out = c.finish();
        let saved = out.saved.clone().expect("saved");
        assert!(saved.starts_with(ws.join(".warden/output")));
        assert_eq!(std::fs::read(&saved).unwrap(), input);
        assert!(
            out.text.contains(&format!(
                "92 bytes truncated; full output saved to {}",
                saved.display()
            )),
            "{}",
            out.text
        );
    }

    #[test]
    fn a_symlinked_save_dir_is_not_followed() {
        let ws = tempfile::tempdir().unwrap();
        let ws = ws.path().canonicalize().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), ws.join("out")).unwrap();
        let target = SaveTarget {
            paths: PathPolicy::new(&ws, &[], &[], std::path::Path::new("/root")).unwrap(),
            dir: ws.join("out/sub"),
        };
        let mut c = Capture::new("stdout", 2, Some(target));
        c.push(b"0123456789");
        let out = c.finish();
        assert!(out.saved.is_none());
        assert!(out.text.contains("could not be saved"), "{}", out.text);
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
    }
}

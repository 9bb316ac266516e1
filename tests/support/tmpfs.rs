//! A small tmpfs mounted for one test, to fill a disk for real. Mounting needs root (and a
//! kernel that lets this namespace mount); without it, [`Tmpfs::mount`] says why, for the
//! test to print that it skipped.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

pub struct Tmpfs {
    dir: PathBuf,
}

impl Tmpfs {
    /// Mount a tmpfs of `megabytes` at `dir` (created), or say why not.
    pub fn mount(dir: &Path, megabytes: u32) -> Result<Tmpfs, String> {
        let uid = unsafe { libc::geteuid() };
        if uid != 0 {
            return Err(format!("mounting a tmpfs needs root; running as uid {uid}"));
        }
        std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o"])
            .arg(format!("size={megabytes}m,mode=0700"))
            .arg("tmpfs")
            .arg(dir)
            .output()
            .map_err(|e| format!("running mount: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "mount -t tmpfs failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(Tmpfs {
            dir: dir.to_path_buf(),
        })
    }

    /// Fill what is left with `name`, until the disk refuses more; returns the bytes written.
    pub fn fill(&self, name: &str) -> u64 {
        let mut file = std::fs::File::create(self.dir.join(name)).unwrap();
        let chunk = vec![0u8; 64 * 1024];
        let mut written = 0;
        loop {
            match file.write(&chunk) {
                Ok(0) | Err(_) => break,
                Ok(n) => written += n as u64,
            }
        }
        // Whatever a smaller write still fits.
        for size in [4096, 512, 1] {
            while file.write_all(&chunk[..size]).is_ok() {
                written += size as u64;
            }
        }
        written
    }

    /// Free what [`Tmpfs::fill`] took.
    pub fn free(&self, name: &str) {
        std::fs::remove_file(self.dir.join(name)).unwrap();
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.dir).status();
    }
}

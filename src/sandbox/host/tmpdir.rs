//! The jail's private `TMPDIR`: one directory per `HostSandbox`, mode 0700, writable inside the
//! jail (Landlock), removed with everything in it when the sandbox is dropped. The shared system
//! `/tmp` stays out of reach, so jailed programs cannot meet other users' files there.

use crate::sandbox::SandboxError;
use std::hash::BuildHasher;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

#[derive(Debug)]
pub struct PrivateTmp {
    path: PathBuf,
}

impl PrivateTmp {
    /// Create `warden-jail-<pid>-<random>` under the system temp dir.
    pub fn create() -> Result<PrivateTmp, SandboxError> {
        let base = std::env::temp_dir();
        let base = base.canonicalize().map_err(|e| {
            SandboxError::Setup(format!(
                "cannot resolve the system temp dir {}: {e}",
                base.display()
            ))
        })?;
        // std's hasher keys come from the kernel's random source once per thread: a fresh name
        // without starting a whole random generator (`rand`'s costs more than the mkdir).
        let keys = std::hash::RandomState::new();
        for attempt in 0..8u32 {
            let path = base.join(format!(
                "warden-jail-{}-{:016x}",
                std::process::id(),
                keys.hash_one(attempt)
            ));
            // `create` (not `recursive`) fails if anything, including a planted symlink, exists.
            match std::fs::DirBuilder::new().mode(0o700).create(&path) {
                Ok(()) => return Ok(PrivateTmp { path }),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => {
                    return Err(SandboxError::Setup(format!(
                        "cannot create the jail's private TMPDIR in {}: {e}",
                        base.display()
                    )))
                }
            }
        }
        Err(SandboxError::Setup(
            "cannot find a free name for the jail's private TMPDIR".into(),
        ))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for PrivateTmp {
    fn drop(&mut self) {
        // Most commands leave it empty: one rmdir, where the full walk costs ten system calls.
        if std::fs::remove_dir(&self.path).is_ok() {
            return;
        }
        if let Err(e) = std::fs::remove_dir_all(&self.path) {
            if e.kind() != std::io::ErrorKind::NotFound {
                tracing::warn!(path = %self.path.display(), error = %e, "could not remove the jail's TMPDIR");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn private_tmp_is_0700_and_removed_on_drop() {
        let tmp = PrivateTmp::create().unwrap();
        let path = tmp.path().to_path_buf();
        let meta = std::fs::metadata(&path).unwrap();
        assert!(meta.is_dir());
        assert_eq!(meta.permissions().mode() & 0o777, 0o700);
        std::fs::write(path.join("f"), b"x").unwrap();
        drop(tmp);
        assert!(!path.exists());
        // Left empty (the usual case): removed too.
        let empty = PrivateTmp::create().unwrap();
        let path = empty.path().to_path_buf();
        drop(empty);
        assert!(!path.exists());
    }
}

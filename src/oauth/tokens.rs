//! The stored tokens of one provider: `<data dir>/oauth/<provider>.json`, mode 0600 in a 0700
//! directory, replaced atomically (write beside, fsync, rename) so a reader never sees half a
//! file. `<provider>.lock` beside it is the advisory lock one refresh holds across processes.

use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// What the token endpoint gave us.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tokens {
    pub access_token: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_token: Option<String>,
    /// Unix seconds; `None`: the provider did not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
}

impl Tokens {
    /// Whether the access token expires within `margin_secs` of `now` (unix seconds).
    pub fn expires_within(&self, now: i64, margin_secs: i64) -> bool {
        self.expires_at.is_some_and(|at| at - now <= margin_secs)
    }

    /// Register both tokens with the log redactor.
    pub fn redact(&self) {
        crate::redact::register(&self.access_token);
        if let Some(refresh) = &self.refresh_token {
            crate::redact::register(refresh);
        }
    }
}

#[derive(Clone, Debug)]
pub struct TokenStore {
    dir: PathBuf,
    provider: String,
}

/// Held while one process refreshes; dropping it releases the lock.
pub struct RefreshLock {
    _lock: nix::fcntl::Flock<File>,
}

impl TokenStore {
    /// The store of `provider` in `dir` (`<data dir>/oauth`).
    pub fn new(dir: &Path, provider: &str) -> TokenStore {
        TokenStore {
            dir: dir.to_path_buf(),
            provider: provider.to_string(),
        }
    }

    pub fn path(&self) -> PathBuf {
        self.dir.join(format!("{}.json", self.provider))
    }

    /// The stored tokens; `None` when not signed in.
    pub fn load(&self) -> Result<Option<Tokens>, String> {
        let path = self.path();
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(format!("{}: {e}", path.display())),
        };
        let tokens: Tokens = serde_json::from_str(&text)
            .map_err(|e| format!("{}: not a token file ({e})", path.display()))?;
        tokens.redact();
        Ok(Some(tokens))
    }

    /// Store `tokens`, replacing what was there.
    pub fn save(&self, tokens: &Tokens) -> Result<(), String> {
        self.make_dir()?;
        let path = self.path();
        let partial = self.dir.join(format!(".{}.json.partial", self.provider));
        let fail = |e: std::io::Error| format!("{}: {e}", path.display());
        let _ = std::fs::remove_file(&partial);
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&partial)
            .map_err(fail)?;
        let text = serde_json::to_vec_pretty(tokens).map_err(|e| e.to_string())?;
        file.write_all(&text)
            .and_then(|()| file.sync_all())
            .map_err(fail)?;
        std::fs::rename(&partial, &path).map_err(fail)?;
        if let Ok(dir) = File::open(&self.dir) {
            let _ = dir.sync_all();
        }
        Ok(())
    }

    /// Forget the tokens (`warden logout`); false when there were none.
    pub fn remove(&self) -> Result<bool, String> {
        match std::fs::remove_file(self.path()) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(format!("{}: {e}", self.path().display())),
        }
    }

    /// Wait for the refresh lock (blocking: call it off the async threads).
    pub fn lock(&self) -> Result<RefreshLock, String> {
        self.make_dir()?;
        let path = self.dir.join(format!("{}.lock", self.provider));
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&path)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        let lock = nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusive)
            .map_err(|(_, e)| format!("locking {}: {e}", path.display()))?;
        Ok(RefreshLock { _lock: lock })
    }

    fn make_dir(&self) -> Result<(), String> {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)
            .map_err(|e| format!("{}: {e}", self.dir.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn tokens(access: &str) -> Tokens {
        Tokens {
            access_token: access.into(),
            refresh_token: Some("refresh".into()),
            expires_at: Some(1_000),
            scope: None,
        }
    }

    #[test]
    fn tokens_are_stored_0600_and_replaced_whole() {
        let dir = tempfile::tempdir().unwrap();
        let store = TokenStore::new(&dir.path().join("oauth"), "openai");
        assert_eq!(store.load().unwrap(), None);
        store.save(&tokens("one")).unwrap();
        store.save(&tokens("two")).unwrap();
        assert_eq!(store.load().unwrap(), Some(tokens("two")));
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&store.path()), 0o600);
        assert_eq!(mode(&dir.path().join("oauth")), 0o700);
        assert_eq!(
            std::fs::read_dir(dir.path().join("oauth")).unwrap().count(),
            1
        );
        assert!(store.remove().unwrap());
        assert!(!store.remove().unwrap());
    }

    #[test]
    fn expiry_counts_the_margin() {
        let t = tokens("a");
        assert!(t.expires_within(941, 60));
        assert!(!t.expires_within(939, 60));
        let never = Tokens {
            expires_at: None,
            ..t
        };
        assert!(!never.expires_within(i64::MAX - 100, 60));
    }
}

//! A test both chat channels' outboxes pass: the file the worker asked to send is checked
//! again in the gateway, before any upload — a link swapped in after the worker's check, and
//! a file over the limit, are refused there.

use crate::policy::PathPolicy;
use crate::tools::outbox::{Outbox, OutgoingFile};
use std::sync::Arc;

/// The limit the outbox under test is built with (`max_bytes`).
pub const MAX_BYTES: u64 = 50;

/// A workspace holding `chart.png`, a link out of it, and `big.txt`, over [`MAX_BYTES`].
pub struct Traps {
    _dir: tempfile::TempDir,
    pub paths: Arc<PathPolicy>,
}

impl Traps {
    pub fn lay() -> Traps {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir(&ws).unwrap();
        std::fs::write(dir.path().join("secret.txt"), "secret").unwrap();
        // Swapped in after the worker's check: a link out of the workspace.
        std::os::unix::fs::symlink(dir.path().join("secret.txt"), ws.join("chart.png")).unwrap();
        std::fs::write(ws.join("big.txt"), vec![b'x'; 100]).unwrap();
        let paths = Arc::new(PathPolicy::new(&ws, &[], &[], dir.path()).unwrap());
        Traps { _dir: dir, paths }
    }

    /// Both traps are refused by `outbox` for what they are (an outbox pointed at a closed
    /// port would fail differently, had it made a request).
    pub async fn assert_refused(&self, outbox: &dyn Outbox) {
        let file = |path: &str| OutgoingFile {
            path: path.into(),
            photo: false,
            caption: None,
        };
        let err = outbox.send_file(&file("chart.png")).await.unwrap_err();
        assert!(err.contains("outside the workspace"), "{err}");
        let err = outbox.send_file(&file("big.txt")).await.unwrap_err();
        assert!(err.contains("more than the 50 bytes limit"), "{err}");
    }
}

//! The output of a command substitution: read from a pipe warden creates while the inner
//! script runs (`flow` runs it), capped, and turned into the one argument bash would make of
//! it — trailing newlines stripped. Output over the cap, with a NUL byte or not UTF-8 makes
//! the command fail instead of running with a value cut or changed.

use std::io::Read;
use std::os::fd::OwnedFd;
use std::sync::Arc;
use tokio::task::JoinHandle;

/// The most output one substitution may give (bytes).
pub const CAP_BYTES: usize = 64 * 1024;

/// A pipe whose write end is the inner script's stdout, drained by a blocking reader.
pub struct Capture {
    pub stdout: Arc<OwnedFd>,
    reader: JoinHandle<std::io::Result<Vec<u8>>>,
}

impl Capture {
    pub fn start() -> std::io::Result<Capture> {
        let (read, write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
        let reader = tokio::task::spawn_blocking(move || {
            let mut bytes = Vec::new();
            // One byte past the cap tells "too long" apart; the reader then stops, and the
            // writer gets EPIPE (the jail's programs die of it, as in `cmd | head -c N`).
            std::fs::File::from(read)
                .take(CAP_BYTES as u64 + 1)
                .read_to_end(&mut bytes)?;
            Ok(bytes)
        });
        Ok(Capture {
            stdout: Arc::new(write),
            reader,
        })
    }

    /// The argument the output makes, once every holder of the write end is gone.
    pub async fn finish(self) -> Result<String, String> {
        drop(self.stdout);
        let bytes = self
            .reader
            .await
            .map_err(|e| format!("reading a command substitution's output failed: {e}"))?
            .map_err(|e| format!("reading a command substitution's output failed: {e}"))?;
        value(bytes)
    }
}

/// bash's value of `$(…)`: the output without its trailing newlines.
fn value(mut bytes: Vec<u8>) -> Result<String, String> {
    if bytes.len() > CAP_BYTES {
        return Err(format!(
            "a command substitution printed more than {CAP_BYTES} bytes; the command did not run"
        ));
    }
    if bytes.contains(&0) {
        // bash drops NUL bytes with a warning; an argument cannot hold one.
        return Err(
            "a command substitution printed a NUL byte, which no argument can hold; the command \
             did not run"
                .into(),
        );
    }
    while bytes.last() == Some(&b'\n') {
        bytes.pop();
    }
    String::from_utf8(bytes).map_err(|_| {
        "a command substitution printed text that is not UTF-8; the command did not run".into()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trailing_newlines_go_and_everything_else_stays() {
        assert_eq!(value(b"a b\n\n".to_vec()).unwrap(), "a b");
        assert_eq!(value(b"\n x\n y \n".to_vec()).unwrap(), "\n x\n y ");
        assert_eq!(value(b"-rf --".to_vec()).unwrap(), "-rf --");
        assert_eq!(value(Vec::new()).unwrap(), "");
    }

    #[test]
    fn too_long_nul_and_not_utf8_are_refused() {
        assert!(value(vec![b'a'; CAP_BYTES + 1]).is_err());
        assert!(value(vec![b'a'; CAP_BYTES]).is_ok());
        assert!(value(b"a\0b".to_vec()).is_err());
        assert!(value(vec![0xff, b'\n']).is_err());
    }
}

//! Everything a child writes to a pipe or a terminal, copied by a thread as it comes, so a test
//! can look at it while the child runs and, after the exit, wait for the last of it.

use std::io::Read;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub struct Capture {
    bytes: Arc<Mutex<Vec<u8>>>,
    /// Ends when the reading side sees the end (the last writer closed it) or an error (EIO
    /// from a pty once no one holds its slave side).
    reader: JoinHandle<()>,
}

impl Capture {
    pub fn start(mut source: impl Read + Send + 'static) -> Capture {
        let bytes = Arc::new(Mutex::new(Vec::new()));
        let sink = bytes.clone();
        let reader = std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = source.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
        Capture { bytes, reader }
    }

    /// What came so far, as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.bytes.lock().unwrap()).into_owned()
    }

    /// After the child's exit, let the reader take what is still in flight, for at most
    /// `bound` (a leftover descendant could keep the pipe or terminal open).
    pub fn drain(&self, bound: Duration) {
        let deadline = Instant::now() + bound;
        while !self.reader.is_finished() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

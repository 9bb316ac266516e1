//! The tail of a long-running command's output: stdout and stderr together, in the order they
//! arrived, in a ring of at most `cap` bytes. Shared, so it can be read while the command runs
//! (`process poll`) and after it ended (the completion notice). Nothing is written to disk: a
//! background command may run for an hour and print all the while.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

#[derive(Clone, Debug)]
pub struct Tail {
    ring: Arc<Mutex<Ring>>,
}

#[derive(Debug)]
struct Ring {
    bytes: VecDeque<u8>,
    cap: usize,
    total: u64,
}

impl Tail {
    pub fn new(cap: usize) -> Tail {
        Tail {
            ring: Arc::new(Mutex::new(Ring {
                bytes: VecDeque::new(),
                cap: cap.max(1),
                total: 0,
            })),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Ring> {
        self.ring.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn push(&self, data: &[u8]) {
        let mut ring = self.lock();
        ring.total += data.len() as u64;
        let cap = ring.cap;
        let data = &data[data.len().saturating_sub(cap)..];
        let excess = (ring.bytes.len() + data.len()).saturating_sub(cap);
        ring.bytes.drain(..excess);
        ring.bytes.extend(data);
    }

    /// Bytes written so far, kept or not.
    pub fn total(&self) -> u64 {
        self.lock().total
    }

    /// The last `max` kept bytes as text (never starting inside a UTF-8 character), with a
    /// note of how much came before.
    pub fn last(&self, max: usize) -> String {
        let ring = self.lock();
        let skip = ring.bytes.len().saturating_sub(max);
        let mut kept: Vec<u8> = ring.bytes.iter().skip(skip).copied().collect();
        // Drop continuation bytes left from a character cut in two.
        let cut = kept
            .iter()
            .take(3)
            .take_while(|b| (**b & 0b1100_0000) == 0b1000_0000)
            .count();
        kept.drain(..cut);
        let before = ring.total - kept.len() as u64;
        let text = String::from_utf8_lossy(&kept).into_owned();
        if before == 0 {
            text
        } else {
            format!("[… {before} earlier bytes not shown]\n{text}")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_last_bytes_and_says_what_came_before() {
        let tail = Tail::new(8);
        tail.push(b"hello ");
        assert_eq!(tail.last(100), "hello ");
        tail.push(b"world!");
        assert_eq!(tail.total(), 12);
        assert_eq!(tail.last(100), "[… 4 earlier bytes not shown]\no world!");
        assert_eq!(tail.last(3), "[… 9 earlier bytes not shown]\nld!");
        tail.push(&[b'x'; 100]);
        assert_eq!(
            tail.last(100),
            format!("[… 104 earlier bytes not shown]\n{}", "x".repeat(8))
        );
    }

    #[test]
    fn never_starts_inside_a_character() {
        let tail = Tail::new(5);
        tail.push("aé€".as_bytes()); // 1 + 2 + 3 bytes: the ring keeps the last 5 of 6
        assert_eq!(tail.last(100), "[… 1 earlier bytes not shown]\né€");
        assert_eq!(tail.last(4), "[… 3 earlier bytes not shown]\n€");
    }
}

//! Locking a `std::sync::Mutex` whose holder may have panicked.

use std::sync::{Mutex, MutexGuard};

/// The guard even when a holder panicked: every mutex that uses this guards data that stays
/// valid across a panic (no invariant spans one), so the rest of the process keeps going.
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

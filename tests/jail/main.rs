//! The host jail on the real kernel: the executor, files, processes, system calls, lifetime,
//! unprivileged and weak modes, `warden doctor`.

#[path = "../common/mod.rs"]
mod common;
#[path = "../support/mod.rs"]
mod support;

mod doctor;
mod exec;
mod exec_cli;
mod files;
mod lifecycle;
mod own_files;
mod process;
mod steps;
mod syscalls;
mod unprivileged;
mod weak_mode;

//! The Docker backend on the real engine: the CLI, escape probes, the session container's life,
//! real work.

#[path = "../support/file_server.rs"]
mod file_server;
#[path = "../support/docker.rs"]
mod support;

mod cli;
mod escape;
mod lifecycle;
mod network;
mod work;

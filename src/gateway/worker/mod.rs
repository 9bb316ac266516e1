//! `warden bot` runs its agents in a worker process: `warden-full agent-worker`.
//!
//! The bot process (the gateway: Telegram polling, the durable queues, approvals, the
//! scheduler) waits for messages most of its life. It holds none of the agent's code, model
//! keys, sandboxes or memory index; the worker holds those, and is started when a run needs
//! it and stopped after a while without runs. Messages between them are JSON lines over the
//! worker's stdin and stdout ([`protocol`]); several runs (one per chat) share one worker.
//!
//! The worker's life is tied to its stdin: when the bot exits — even by `kill -9` — the pipe
//! closes, and the worker aborts its runs (killing their sandboxed commands) and exits. It
//! does not inherit the bot token (`TELEGRAM_BOT_TOKEN` is removed from its environment).

pub mod client;
pub mod protocol;
pub mod serve;

pub use client::{WorkerAgent, WorkerCommand};

//! `warden-full agent-worker`: runs agents for `warden bot` (see `crate::gateway::worker`).
//! Not for people: the bot starts it and speaks JSON lines on its stdin and stdout.

use crate::app::App;
use crate::gateway::worker::serve::serve;
use anyhow::Context;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::time::Duration;
use tokio::net::unix::pipe;

/// How long the worker waits for aborted runs to stop once the bot is gone.
const ABORT_GRACE: Duration = Duration::from_secs(10);

pub fn run(config_path: Option<&Path>) -> anyhow::Result<i32> {
    // stdout carries the protocol: keep a descriptor for that, and point fd 1 at stderr so a
    // stray print anywhere cannot corrupt a message.
    let protocol = nix::unistd::dup(std::io::stdout()).context("keeping stdout")?;
    // SAFETY: dup2 on two descriptors this process owns; nothing holds fd 1 across it.
    if unsafe { libc::dup2(std::io::stderr().as_raw_fd(), 1) } < 0 {
        return Err(std::io::Error::last_os_error()).context("pointing stdout at stderr");
    }
    let mut config = super::load_config(config_path)?;
    // The bot token stays with the bot, even when it is written in the config file.
    config.telegram.token = Default::default();
    config.http.token = Default::default();
    config.slack.app_token = Default::default();
    config.slack.bot_token = Default::default();
    let app = App::build(config)?;
    let supports_images = app.agent.provider().supports_images();
    let voice = app.voice.clone();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let result = runtime.block_on(async {
        keep_running_on_signals()?;
        // Both ends are pipes from the bot: read and written without a blocking thread.
        let not_pipes = "agent-worker talks to `warden bot` over pipes; the bot starts it";
        let output = pipe::Sender::from_owned_fd(protocol).context(not_pipes)?;
        let stdin = nix::unistd::dup(std::io::stdin()).context("taking stdin")?;
        let input = pipe::Receiver::from_owned_fd(stdin).context(not_pipes)?;
        let served = serve(
            app.agent.clone(),
            supports_images,
            voice,
            app.jobs.wake().clone(),
            input,
            output,
            ABORT_GRACE,
        )
        .await;
        app.shutdown().await;
        served.map_err(anyhow::Error::msg)
    });
    runtime.shutdown_timeout(Duration::from_secs(1));
    result.map(|()| 0)
}

/// Ctrl-C in a terminal and systemd's SIGTERM reach the whole process group; the bot decides
/// how its runs end (it lets them finish, then aborts them) and closes our stdin when done.
/// Handlers, not SIG_IGN: an ignored signal would stay ignored in the sandboxed programs.
fn keep_running_on_signals() -> anyhow::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    for kind in [SignalKind::interrupt(), SignalKind::terminate()] {
        let mut stream = signal(kind).context("watching signals")?;
        tokio::spawn(async move { while stream.recv().await.is_some() {} });
    }
    Ok(())
}

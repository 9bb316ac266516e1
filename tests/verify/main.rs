//! The write verifier through the real binaries: a command the policy let through (here: a
//! policy file that mislabels a program's arguments, as a program can fool the real policy)
//! plants git hooks, git config, attributes or instruction files; warden undoes it, refuses
//! the command naming the file, and the user's own git, run afterwards on the host, runs
//! nothing.

#[path = "../common/mod.rs"]
mod common;
#[path = "../support/mod.rs"]
mod support;

#[path = "../support/docker.rs"]
mod docker;

mod bot;
mod exec;
mod run;

/// The user's own git on the host, with HOME at `home` and no system config.
fn host_git(ws: &std::path::Path, home: &std::path::Path, args: &[&str]) {
    let out = std::process::Command::new("git")
        .args(["-c", "user.name=t", "-c", "user.email=t@t"])
        .args(args)
        .current_dir(ws)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", home)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
}

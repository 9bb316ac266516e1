//! Fuzz the command policy: no panic, no hang (libFuzzer's timeout), and every allowed verdict
//! passes the independent invariant (`warden::policy::invariant::verify`): listed programs
//! only, every path inside the roots, no argument reaching a secret outside the workspace, no
//! write (or copied directory) landing where git reads its config. Every input is checked by
//! one long-lived checker after a long command given up for time, as the agent's bash tool
//! does; the fixture holds git config to copy into place and a hard link to `.git/config`.
#![no_main]

// The policy module itself, compiled into this crate: it depends on nothing else in warden,
// and instrumenting only it keeps the fuzz build small.
#[path = "../../src/policy/mod.rs"]
#[allow(dead_code, unused_imports)]
mod policy;

use libfuzzer_sys::fuzz_target;
use policy::{invariant, Checker, Policy};
use std::cell::RefCell;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

struct Fixture {
    _root: tempfile::TempDir,
    workspace: PathBuf,
    home: PathBuf,
    secrets: Vec<PathBuf>,
}

fn fixture() -> &'static Fixture {
    static FIXTURE: OnceLock<Fixture> = OnceLock::new();
    FIXTURE.get_or_init(|| {
        let root = tempfile::tempdir().expect("tempdir");
        let r = root.path().canonicalize().expect("canonical tempdir");
        let ws = r.join("ws");
        std::fs::create_dir_all(ws.join("src")).expect("mkdir");
        std::fs::write(ws.join("notes.txt"), "a\n").expect("write");
        std::fs::write(r.join("secret"), "s\n").expect("write");
        std::fs::create_dir_all(r.join("home/.ssh")).expect("mkdir");
        std::fs::write(r.join("home/.ssh/id_rsa"), "k\n").expect("write");
        std::os::unix::fs::symlink(r.join("secret"), ws.join("link_secret")).expect("symlink");
        std::os::unix::fs::symlink("/etc", ws.join("escape")).expect("symlink");
        for dir in [".git", "cfgcopy/git", "repo-copy/.git", "attrs", "sub/deeper"] {
            std::fs::create_dir_all(ws.join(dir)).expect("mkdir");
        }
        for (file, text) in [
            (".git/config", "[core]\n\tbare = false\n"),
            ("cfgcopy/git/config", "[core]\n# x \\\n\tpager = sh\n"),
            ("repo-copy/.git/config", "[core]\n\tbare = false\n"),
            ("attrs/.gitattributes", "* filter=x\n"),
            ("names0", "notes.txt\0../secret\0"),
        ] {
            std::fs::write(ws.join(file), text).expect("write");
        }
        std::os::unix::fs::symlink(".git", ws.join("gitlink")).expect("symlink");
        std::os::unix::fs::symlink("sub/deeper", ws.join("deep")).expect("symlink");
        std::fs::hard_link(ws.join(".git/config"), ws.join("hardlinked.txt")).expect("link");
        Fixture {
            secrets: vec![
                r.join("secret"),
                r.join("home/.ssh/id_rsa"),
                PathBuf::from("/etc/shadow"),
                PathBuf::from("/etc/passwd"),
            ],
            home: r.join("home"),
            workspace: ws,
            _root: root,
        }
    })
}

thread_local! {
    // A tiny parse budget and room for long inputs: the fuzzer's long inputs are given up for
    // time, and every later input must still be decided on its own tree.
    static CHECKER: RefCell<Checker> = RefCell::new({
        let fx = fixture();
        let policy = Policy::from_user_toml(
            "[settings]\nmax_input_bytes = 1048576\nparse_budget_ms = 20\n",
            "fuzz",
        )
        .expect("policy");
        Arc::new(policy)
            .checker(&fx.workspace, &[], &fx.home)
            .expect("checker")
    });
}

/// A command long enough to be given up for time.
fn long_command() -> &'static str {
    static LONG: OnceLock<String> = OnceLock::new();
    LONG.get_or_init(|| format!("echo {}", "'a' \"b\" ".repeat(80_000)))
}

fuzz_target!(|data: &[u8]| {
    let Ok(command) = std::str::from_utf8(data) else {
        return;
    };
    let fx = fixture();
    CHECKER.with(|checker| {
        let mut checker = checker.borrow_mut();
        // Every 256th input: a parse given up for time (20 ms) just before it.
        static INPUTS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        if INPUTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % 256 == 0 {
            let _ = checker.check(long_command());
        }
        let verdict = checker.check(command);
        assert!(!verdict.reason.is_empty(), "no reason for {command:?}");
        if let Err(violation) =
            invariant::verify(&verdict, checker.policy(), checker.paths(), &fx.secrets)
        {
            panic!("{command:?} was {} but {violation}", verdict.decision);
        }
    });
});

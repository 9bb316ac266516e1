//! Fuzz the command policy: no panic, no hang (libFuzzer's timeout), and every allowed verdict
//! passes the independent invariant (`warden::policy::invariant::verify`): listed programs
//! only, every path inside the roots, no argument reaching a secret outside the workspace.
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
    static CHECKER: RefCell<Checker> = RefCell::new({
        let fx = fixture();
        Arc::new(Policy::embedded_default())
            .checker(&fx.workspace, &[], &fx.home)
            .expect("checker")
    });
}

fuzz_target!(|data: &[u8]| {
    let Ok(command) = std::str::from_utf8(data) else {
        return;
    };
    let fx = fixture();
    CHECKER.with(|checker| {
        let mut checker = checker.borrow_mut();
        let verdict = checker.check(command);
        assert!(!verdict.reason.is_empty(), "no reason for {command:?}");
        if let Err(violation) =
            invariant::verify(&verdict, checker.policy(), checker.paths(), &fx.secrets)
        {
            panic!("{command:?} was {} but {violation}", verdict.decision);
        }
    });
});

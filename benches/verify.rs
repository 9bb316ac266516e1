//! What the write verifier costs per command: the look before and the look after (begin and
//! finish of a ticket), with nothing changed, in three workspaces — a fresh repository, a
//! project the size of this one (its folders copied, a real `.git` with history), and a
//! workspace of 5,000 folders. The first command of a process lists every folder; later ones
//! reuse the listings of folders unchanged since. Prints the median and p99 per command.
//! Run: `cargo bench --bench verify`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;
use warden::policy::ir::Script;
use warden::policy::PathPolicy;
use warden::verify::{begin, Listed, Protection};

const ROUNDS: usize = 2000;

fn git(dir: &Path, args: &[&str]) {
    let ok = Command::new("git")
        .args(["-c", "user.name=b", "-c", "user.email=b@b"])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    assert!(ok, "git {args:?} in {}", dir.display());
}

fn repo(dir: &Path, folders: usize) {
    std::fs::create_dir_all(dir).unwrap();
    git(dir, &["init", "-q"]);
    for i in 0..folders {
        let sub = dir.join(format!("d{}/e{}", i / 50, i % 50));
        std::fs::create_dir_all(&sub).unwrap();
        std::fs::write(sub.join("f.txt"), "x\n").unwrap();
    }
    std::fs::write(dir.join("AGENTS.md"), "be kind\n").unwrap();
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-qm", "init"]);
}

/// This project's folders (not its build output), committed in a repository of their own.
fn like_this_project(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    for part in [
        "src",
        "tests",
        "policy",
        "benches",
        "skills",
        "templates",
        "sandbox-images",
    ] {
        let ok = Command::new("cp")
            .arg("-r")
            .arg(here.join(part))
            .arg(dir)
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        assert!(ok, "copying {part}");
    }
    git(dir, &["init", "-q"]);
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-qm", "init"]);
}

fn measure(name: &str, ws: &Path) {
    let ws = ws.canonicalize().unwrap();
    let paths = PathPolicy::new(&ws, &[], &[], &ws).unwrap();
    let protection = Protection::for_paths(&paths).with_instructions(&[
        Listed::File("AGENTS.md".into()),
        Listed::File("SOUL.md".into()),
        Listed::File("TOOLS.md".into()),
    ]);
    let script = Script::single(vec!["true".into()], ws.clone());
    // Files changed in the last two seconds are read again at every look (timestamps may be
    // coarse); a real workspace's hooks and configs are older than that.
    std::thread::sleep(Duration::from_millis(2100));
    let cancel = CancellationToken::new();
    let first = Instant::now();
    assert!(begin(&protection, &script, &cancel).finish().is_empty());
    let cold = first.elapsed();
    let mut times: Vec<Duration> = (0..ROUNDS)
        .map(|_| {
            let at = Instant::now();
            let undone = begin(&protection, &script, &cancel).finish();
            let took = at.elapsed();
            assert!(undone.is_empty());
            took
        })
        .collect();
    times.sort();
    let median = times[ROUNDS / 2];
    let p99 = times[ROUNDS * 99 / 100];
    println!(
        "verify/{name}: first command {:.0} µs; then median {:.0} µs, p99 {:.0} µs per command \
         (look before + look after)",
        cold.as_secs_f64() * 1e6,
        median.as_secs_f64() * 1e6,
        p99.as_secs_f64() * 1e6
    );
}

fn main() {
    if Command::new("git").arg("--version").output().is_err() {
        println!("verify bench skipped: git is not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let fresh = dir.path().join("fresh");
    repo(&fresh, 0);
    measure("fresh-repository", &fresh);
    let project = dir.path().join("project");
    like_this_project(&project);
    measure("project-like-this-one", &project);
    let big = dir.path().join("big");
    repo(&big, 5000);
    measure("5000-folders", &big);
}

//! warden keeps secrets in its own process only: it marks itself non-dumpable, so another
//! process of the same (unprivileged) user cannot read its environment through /proc.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const NOBODY: &str = "65534";

#[test]
fn another_process_of_the_same_user_cannot_read_wardens_environment() {
    if !nix::unistd::Uid::effective().is_root() {
        eprintln!("skipped: switching to uid {NOBODY} needs root");
        return;
    }
    if !std::path::Path::new("/usr/bin/setpriv").exists() {
        eprintln!("skipped: setpriv (util-linux) is not installed");
        return;
    }
    let home = tempfile::tempdir().unwrap();
    std::os::unix::fs::chown(home.path(), Some(65534), Some(65534)).unwrap();
    let as_nobody = |program: &str| {
        let mut cmd = Command::new("/usr/bin/setpriv");
        cmd.args([
            "--reuid",
            NOBODY,
            "--regid",
            NOBODY,
            "--clear-groups",
            program,
        ]);
        cmd
    };
    // `warden chat` waits on stdin with the key in its environment.
    let mut warden = as_nobody(env!("CARGO_BIN_EXE_warden"))
        .arg("chat")
        .env_clear()
        .env("HOME", home.path())
        .env("PATH", "/usr/bin:/bin")
        .env("ANTHROPIC_API_KEY", "fake-anthropic-key-not-real-1234")
        .env("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = warden.id();
    // Wait until warden has replaced setpriv (same pid) and is waiting for input.
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap_or_default();
        if exe.to_string_lossy().contains("warden") {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    let probe = as_nobody("/bin/cat")
        .arg(format!("/proc/{pid}/environ"))
        .output()
        .unwrap();
    let _ = warden.kill();
    let _ = warden.wait();
    assert!(
        !probe.status.success(),
        "read warden's environ: {:?}",
        String::from_utf8_lossy(&probe.stdout)
    );
    assert!(!String::from_utf8_lossy(&probe.stdout).contains("fake-anthropic-key-not-real"));
    assert!(
        String::from_utf8_lossy(&probe.stderr).contains("Permission denied"),
        "{:?}",
        probe
    );
}

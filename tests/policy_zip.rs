//! unzip through the policy: extraction reads the archive's central directory and checks every
//! member as a write; listing and printing read only the archive. Real zip bytes, built here.

mod support;

use std::sync::Arc;
use support::archives;
use warden::policy::{Decision, Policy};

#[test]
fn extraction_checks_every_member_and_listing_reads_only_the_archive() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().canonicalize().unwrap().join("ws");
    std::fs::create_dir(&ws).unwrap();
    let write = |name: &str, members: &[(&str, u32, &str)]| {
        std::fs::write(ws.join(name), archives::zip(members)).unwrap();
    };
    write(
        "ok.zip",
        &[("src/", 0o40755, ""), ("src/a.rs", 0o100644, "fn a() {}\n")],
    );
    write(
        "link.zip",
        &[("l", 0o120777, "/etc"), ("l/passwd", 0o100644, "x")],
    );
    write("up.zip", &[("a/../../x", 0o100644, "x")]);
    write(
        "git.zip",
        &[(".git/hooks/pre-commit", 0o100755, "#!/bin/sh\n")],
    );
    write("abs.zip", &[("/.gitattributes", 0o100644, "* filter=x\n")]);
    std::fs::write(ws.join("not.zip"), b"PK\x05\x06 but not really").unwrap();
    let policy = Arc::new(Policy::embedded_default());
    let mut checker = policy.checker(&ws, &[], &ws).unwrap();
    for cmd in [
        "unzip -q ok.zip -d out",
        "unzip ok.zip",
        "unzip -l link.zip",
        "unzip -p git.zip",
        "unzip -o ok.zip -x src/a.rs -d out",
        "unzip -v",
    ] {
        let v = checker.check(cmd);
        assert_eq!(v.decision, Decision::Allow, "{cmd}: {}", v.reason);
    }
    for (cmd, why) in [
        ("unzip link.zip", "symbolic link"),
        ("unzip up.zip", "climbs out"),
        ("unzip git.zip", ".git/hooks/pre-commit"),
        ("unzip abs.zip", ".gitattributes"),
        ("unzip ok.zip -d ../elsewhere", "outside"),
        ("unzip -: ok.zip", "climb out"),
        ("unzip -Z ok.zip", "zipinfo"),
        ("unzip --help", "not in the policy's list"),
        ("unzip -q", "no archive"),
        ("unzip not.zip", "not a zip archive"),
        ("touch x && unzip ok.zip", "own command"),
    ] {
        let v = checker.check(cmd);
        assert_eq!(v.decision, Decision::Deny, "{cmd}: {}", v.reason);
        assert!(v.reason.contains(why), "{cmd}: {}", v.reason);
    }
}

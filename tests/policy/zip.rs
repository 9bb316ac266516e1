//! unzip through the policy: extraction reads the archive's central directory and checks every
//! member as a write; listing and printing read only the archive. Real zip bytes, built here.

use crate::support::archives;
use std::sync::Arc;
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

/// unzip makes links for more hosts than Unix, from a mode in an ASi extra field, names entries
/// by their Unicode Path field, drops control characters and VMS versions: each is checked as
/// unzip reads it (every case confirmed against Debian's unzip 6.0).
#[test]
fn members_are_named_and_typed_as_unzip_extracts_them() {
    use archives::{asi_unix, unicode_path, zip_entries, ZipEntry};
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().canonicalize().unwrap().join("ws");
    std::fs::create_dir(&ws).unwrap();
    let link = |host: u8, mode: u32| ZipEntry {
        host,
        ..ZipEntry::unix("lnk", mode, ".git/hooks")
    };
    let cases: Vec<(&str, Vec<ZipEntry>, &str)> = vec![
        ("atari.zip", vec![link(5, 0o120777)], "symbolic link"),
        ("beos.zip", vec![link(16, 0o120777)], "symbolic link"),
        ("fat.zip", vec![link(0, 0o120600)], "symbolic link"),
        ("ntfs.zip", vec![link(11, 0o120777)], "symbolic link"),
        (
            "asi.zip",
            vec![ZipEntry {
                central_extra: asi_unix(0o120777, ".git/hooks"),
                ..ZipEntry::unix("lnk", 0, "")
            }],
            "symbolic link",
        ),
        (
            "asi-local.zip",
            vec![ZipEntry {
                local_extra: asi_unix(0o120777, ".git/hooks"),
                ..ZipEntry::unix("lnk", 0, "")
            }],
            "symbolic link",
        ),
        (
            "unicode.zip",
            vec![ZipEntry {
                central_extra: unicode_path("innocent.txt", ".git/hooks/pre-commit"),
                ..ZipEntry::unix("innocent.txt", 0o100755, "#!/bin/sh\n")
            }],
            ".git/hooks/pre-commit",
        ),
        (
            "control.zip",
            vec![ZipEntry::unix(".gi\u{1}t/config", 0o100644, "[core]\n")],
            ".git/config",
        ),
        (
            "vms.zip",
            vec![ZipEntry::unix(".gitconfig;1", 0o100644, "[core]\n")],
            ".gitconfig",
        ),
        (
            "junk.zip",
            vec![ZipEntry::unix(
                "deep/.gitattributes",
                0o100644,
                "* filter=x\n",
            )],
            ".gitattributes",
        ),
    ];
    for (name, entries, _) in &cases {
        std::fs::write(ws.join(name), zip_entries(entries)).unwrap();
    }
    std::fs::write(
        ws.join("plain.zip"),
        zip_entries(&[
            ZipEntry {
                host: 0,
                ..ZipEntry::unix("docs/readme.txt", 0, "hello\n")
            },
            ZipEntry::unix("notes;x", 0o100644, "x\n"),
        ]),
    )
    .unwrap();
    let policy = Arc::new(Policy::embedded_default());
    let mut checker = policy.checker(&ws, &[], &ws).unwrap();
    for (name, _, why) in &cases {
        let cmd = format!("unzip -o {name}");
        let v = checker.check(&cmd);
        assert_eq!(v.decision, Decision::Deny, "{cmd}: {}", v.reason);
        assert!(v.reason.contains(why), "{cmd}: {}", v.reason);
    }
    // -j keeps only the last component: `deep/x` is written as `x`.
    let v = checker.check("unzip -j junk.zip");
    assert!(v.reason.contains("holds .gitattributes"), "{}", v.reason);
    let v = checker.check("unzip plain.zip -d out");
    assert_eq!(v.decision, Decision::Allow, "{}", v.reason);
}

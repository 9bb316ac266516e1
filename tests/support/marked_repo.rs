//! A git repository in a test workspace, and the payloads an attacker would plant in it: a
//! `pre-commit` hook and a `core.fsmonitor` setting that touch a marker outside the workspace.
//! After a chain of commands, `assert_untouched` runs the user's own git on the host (`git
//! status`, `git commit`; once with the user's HOME, once with the workspace as HOME, as git in
//! the jail sees it) and checks that no marker appeared and every file git runs programs from
//! is as it was.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub struct MarkedRepo {
    pub ws: PathBuf,
    home: PathBuf,
    pub marker: PathBuf,
    config: Vec<u8>,
}

/// The places whose contents make git run programs (relative to the workspace).
const PROTECTED: &[&str] = &[
    ".git/hooks/pre-commit",
    ".git/hooks/post-checkout",
    ".gitconfig",
    ".config/git/config",
    ".gitattributes",
    ".gitmodules",
];

impl MarkedRepo {
    /// `git init` in `ws` with one commit; `outside` holds the marker and the user's HOME.
    pub fn init(ws: &Path, outside: &Path) -> MarkedRepo {
        let home = outside.join("home");
        std::fs::create_dir_all(&home).unwrap();
        let repo = MarkedRepo {
            ws: ws.to_path_buf(),
            home,
            marker: outside.join("marker"),
            config: Vec::new(),
        };
        repo.git(&["init", "-q", "-b", "main"]);
        std::fs::write(ws.join("notes.txt"), "one\n").unwrap();
        repo.git(&["add", "notes.txt"]);
        repo.git(&["commit", "-qm", "init"]);
        MarkedRepo {
            config: std::fs::read(ws.join(".git/config")).unwrap(),
            ..repo
        }
    }

    /// A hook script that touches the marker.
    pub fn hook(&self) -> String {
        format!("#!/bin/sh\ntouch {}\n", self.marker.display())
    }

    /// A git config that runs a command touching the marker on `git status`, on one line (so a
    /// one-line chunk can carry it).
    pub fn fsmonitor(&self) -> String {
        format!("[core] fsmonitor = \"touch {}\"\n", self.marker.display())
    }

    /// The user's git on the host, in the workspace (`HOME` outside it).
    pub fn git(&self, args: &[&str]) -> Output {
        self.git_with_home(&self.home, args)
    }

    fn git_with_home(&self, home: &Path, args: &[&str]) -> Output {
        let out = Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@t"])
            .args(args)
            .current_dir(&self.ws)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", home)
            .env_remove("GIT_DIR")
            .output()
            .unwrap();
        assert!(
            out.status.success() || args[0] == "commit",
            "git {args:?}: {out:?}"
        );
        out
    }

    /// A branch `name` holding `files`, committed with the user's git; HEAD stays on main.
    pub fn branch(&self, name: &str, files: &[(&str, &str)]) {
        self.git(&["checkout", "-q", "-b", name, "main"]);
        for (file, text) in files {
            let path = self.ws.join(file);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
            self.git(&["add", "-f", file]);
        }
        self.git(&["commit", "-qm", name]);
        self.git(&["checkout", "-q", "main"]);
    }

    /// Run the user's git as they would next (`status`, `commit -a`), with their HOME and with
    /// the workspace as HOME, then check: no marker, `.git/config` byte for byte as made, and
    /// none of the other places git runs programs from exists.
    pub fn assert_untouched(&self, chain: &str) {
        for home in [&self.home, &self.ws] {
            self.git_with_home(home, &["status", "--short"]);
            self.git_with_home(home, &["commit", "-qam", "after", "--allow-empty"]);
        }
        assert!(
            !self.marker.exists(),
            "{chain}: a program planted by the chain ran"
        );
        assert_eq!(
            std::fs::read(self.ws.join(".git/config")).unwrap(),
            self.config,
            "{chain}: .git/config changed"
        );
        for place in PROTECTED {
            assert!(
                self.ws.join(place).symlink_metadata().is_err(),
                "{chain}: {place} was written"
            );
        }
    }
}

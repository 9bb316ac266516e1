//! `warden exec` in a git workspace.

use crate::common::*;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A policy blind to where `cp` and `tee` write: their arguments are values to it, not paths.
const FOOLED: &str = "[programs.cp]\nargs = \"value\"\n\n[programs.tee]\nargs = \"value\"\n";

struct Repo {
    env: Env,
    policy: PathBuf,
    /// Exists only if a program planted through git ran.
    marker: PathBuf,
    home: PathBuf,
}

fn have_git() -> bool {
    let found = Command::new("git").arg("--version").output().is_ok();
    if !found {
        eprintln!("skipped: git is not installed on this machine");
    }
    found
}

impl Repo {
    fn new() -> Repo {
        let env = Env::new();
        let policy = env.outside("policy").join("fooled.toml");
        std::fs::write(&policy, FOOLED).unwrap();
        let marker = env.outside("out").join("ran");
        let home = env.outside("home");
        let repo = Repo {
            env,
            policy,
            marker,
            home,
        };
        repo.git(&["init", "-q"]);
        std::fs::write(repo.ws().join("data.txt"), "one\n").unwrap();
        std::fs::write(repo.ws().join("AGENTS.md"), "Be kind.\n").unwrap();
        repo.git(&["add", "data.txt"]);
        repo.git(&["commit", "-qm", "init"]);
        // What a hostile command brings along: a script that leaves the marker.
        let script = repo.ws().join("hook.sh");
        std::fs::write(
            &script,
            format!("#!/bin/sh\ntouch {}\n", repo.marker.display()),
        )
        .unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
        repo
    }

    fn ws(&self) -> &Path {
        &self.env.ws
    }

    /// The user's own git on the host, outside every jail.
    fn git(&self, args: &[&str]) -> std::process::Output {
        self.git_in(self.ws(), args)
    }

    /// The user's own git in `dir`.
    fn git_in(&self, dir: &Path, args: &[&str]) -> std::process::Output {
        Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@t"])
            .args(["-c", "safe.directory=*"])
            .args(args)
            .current_dir(dir)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", &self.home)
            .output()
            .unwrap()
    }

    fn exec(&self, command: &str) -> Run {
        self.exec_with(&[], command)
    }

    fn exec_with(&self, flags: &[&str], command: &str) -> Run {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_warden"));
        cmd.arg("exec")
            .args(flags)
            .arg("--policy")
            .arg(&self.policy)
            .arg("--workspace")
            .arg(self.ws())
            .arg("--")
            .arg(command)
            .env("WARDEN_CONFIG", &self.env.config)
            .stdin(std::process::Stdio::null());
        run(cmd)
    }

    /// The user's next commit and status run no planted program.
    fn assert_git_runs_nothing(&self) {
        std::fs::write(self.ws().join("data.txt"), "two\n").unwrap();
        self.git(&["status"]);
        self.git(&["commit", "-qam", "next"]);
        assert!(
            !self.marker.exists(),
            "a program planted in the repository ran when the user ran git"
        );
    }
}

fn assert_refused_naming(r: &Run, name: &str) {
    assert_eq!(r.status, 126, "{r:?}");
    assert!(r.stderr.contains("refused after it ran"), "{r:?}");
    assert!(r.stderr.contains(name), "{name} not named: {r:?}");
    assert!(r.stderr.contains("undone"), "{r:?}");
}

#[test]
fn a_planted_hook_is_undone_and_the_users_commit_runs_nothing() {
    if !have_git() {
        return;
    }
    let repo = Repo::new();
    let r = repo.exec("cp hook.sh .git/hooks/pre-commit");
    assert_refused_naming(&r, ".git/hooks/pre-commit");
    assert!(!repo.ws().join(".git/hooks/pre-commit").exists());
    repo.assert_git_runs_nothing();
}

#[test]
fn an_fsmonitor_appended_to_the_config_is_undone_byte_for_byte() {
    if !have_git() {
        return;
    }
    let repo = Repo::new();
    let before = std::fs::read(repo.ws().join(".git/config")).unwrap();
    let line = format!(
        "printf '\\tfsmonitor = {}\\n' | tee -a .git/config",
        repo.ws().join("hook.sh").display()
    );
    let r = repo.exec(&line);
    assert_refused_naming(&r, ".git/config");
    assert_eq!(
        std::fs::read(repo.ws().join(".git/config")).unwrap(),
        before
    );
    repo.assert_git_runs_nothing();
}

#[test]
fn git_later_on_the_same_line_never_sees_what_an_earlier_command_planted() {
    if !have_git() {
        return;
    }
    let repo = Repo::new();
    // Attributes naming a diff driver, then git diff: stopped before git starts.
    let r = repo.exec("cp hook.sh .gitattributes; git status");
    assert_refused_naming(&r, ".gitattributes");
    assert!(!r.stdout.contains("On branch"), "git ran: {r:?}");
    assert!(!repo.ws().join(".gitattributes").exists());
}

#[test]
fn a_repository_planted_in_a_new_folder_is_removed() {
    if !have_git() {
        return;
    }
    let repo = Repo::new();
    // A template folder holding a repository whose config runs the marker.
    let template = repo.env.outside("template");
    let status = Command::new("git")
        .args(["init", "-q"])
        .arg(&template)
        .status()
        .unwrap();
    assert!(status.success());
    let mut config = std::fs::read_to_string(template.join(".git/config")).unwrap();
    config.push_str(&format!(
        "\tfsmonitor = {}\n",
        repo.ws().join("hook.sh").display()
    ));
    std::fs::write(template.join(".git/config"), config).unwrap();
    let staged = repo.ws().join("template");
    let status = Command::new("cp")
        .arg("-r")
        .arg(&template)
        .arg(&staged)
        .status()
        .unwrap();
    assert!(status.success());
    // The staged copy is the user's; copying it to a new project is the command's.
    let r = repo.exec("cp -r template project");
    assert_refused_naming(&r, "project/.git/config");
    assert!(!repo.ws().join("project/.git/config").exists());
    let status = Command::new("git")
        .arg("status")
        .current_dir(repo.ws().join("project"))
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("HOME", &repo.home)
        .output()
        .unwrap();
    drop(status);
    assert!(!repo.marker.exists(), "the planted fsmonitor ran");
}

/// A submodule's git dir without its `HEAD` is no git directory yet, to git or to the
/// verifier's search; the hooks and config planted in it would wait for a later `HEAD`. The
/// folders under `.git/modules`, and that folder itself, are protected, so the plant is removed
/// whole.
#[test]
fn a_submodule_git_dir_planted_without_its_head_is_removed() {
    if !have_git() {
        return;
    }
    let repo = Repo::new();
    let plant = repo.ws().join("plant/sub");
    std::fs::create_dir_all(plant.join("hooks")).unwrap();
    std::fs::copy(repo.ws().join("hook.sh"), plant.join("hooks/post-checkout")).unwrap();
    std::fs::write(
        plant.join("config"),
        format!(
            "[core]\n\trepositoryformatversion = 0\n\tfsmonitor = {}\n",
            repo.ws().join("hook.sh").display()
        ),
    )
    .unwrap();
    // `.git/modules` as a link to a folder holding a whole git dir (HEAD and all): the walk
    // does not follow links, git would; the folder itself is protected, so the link goes.
    for part in ["objects", "refs"] {
        std::fs::create_dir_all(plant.join(part)).unwrap();
    }
    std::fs::write(plant.join("HEAD"), "ref: refs/heads/main\n").unwrap();
    std::os::unix::fs::symlink("plant", repo.ws().join("link")).unwrap();
    let r = repo.exec("cp -r link .git/modules");
    assert_refused_naming(&r, ".git/modules: created (symlink to plant)");
    assert!(
        repo.ws().join(".git/modules").symlink_metadata().is_err(),
        "{r:?}"
    );
    std::fs::remove_file(plant.join("HEAD")).unwrap();
    let r = repo.exec("cp -r plant .git/modules");
    assert_refused_naming(&r, ".git/modules/sub");
    assert!(!repo.ws().join(".git/modules/sub").exists(), "{r:?}");
    // A folder the user's git made there stays: only what the command created goes.
    std::fs::create_dir_all(repo.ws().join(".git/modules/kept")).unwrap();
    let r = repo.exec("cp -r plant/sub .git/modules/kept/sub");
    assert_refused_naming(&r, ".git/modules/kept/sub");
    assert!(repo.ws().join(".git/modules/kept").is_dir());
    assert!(!repo.ws().join(".git/modules/kept/sub").exists(), "{r:?}");
    repo.assert_git_runs_nothing();
}

/// A repository whose git dir lives beside its work tree (`git init --separate-git-dir`, as
/// linked worktrees and submodules have): its `.git` is a file naming that dir, and the
/// verifier watches the hooks of the dir git will use, though no `.git` is in their path.
#[test]
fn a_hook_planted_in_a_git_dir_a_gitfile_names_is_undone() {
    if !have_git() {
        return;
    }
    let repo = Repo::new();
    let project = repo.ws().join("project");
    let made = repo.git(&["init", "-q", "--separate-git-dir", "store", "project"]);
    assert!(made.status.success(), "{made:?}");
    let gitfile = std::fs::read_to_string(project.join(".git")).unwrap();
    assert!(gitfile.starts_with("gitdir: "), "{gitfile}");
    let r = repo.exec("cp hook.sh store/hooks/pre-commit");
    assert_refused_naming(&r, "store/hooks/pre-commit");
    assert!(!repo.ws().join("store/hooks/pre-commit").exists());
    // The user's own commit in the project runs nothing.
    std::fs::write(project.join("f.txt"), "x\n").unwrap();
    repo.git_in(&project, &["add", "f.txt"]);
    repo.git_in(&project, &["commit", "-qm", "f"]);
    assert!(!repo.marker.exists(), "the planted hook ran");
}

#[test]
fn the_jail_homes_gitconfig_and_instruction_files_are_put_back() {
    if !have_git() {
        return;
    }
    let repo = Repo::new();
    let r = repo.exec("cp hook.sh .gitconfig");
    assert_refused_naming(&r, ".gitconfig");
    assert!(!repo.ws().join(".gitconfig").exists());
    let r = repo.exec("cp data.txt AGENTS.md");
    assert_refused_naming(&r, "AGENTS.md");
    assert_eq!(
        std::fs::read_to_string(repo.ws().join("AGENTS.md")).unwrap(),
        "Be kind.\n"
    );
    // A write the command declares is its own.
    let r = repo.exec("echo 'Be brief.' >> AGENTS.md");
    assert_eq!(r.status, 0, "{r:?}");
    assert_eq!(
        std::fs::read_to_string(repo.ws().join("AGENTS.md")).unwrap(),
        "Be kind.\nBe brief.\n"
    );
    // Ordinary work is untouched.
    let r = repo.exec("cp data.txt copy.txt");
    assert_eq!(r.status, 0, "{r:?}");
    assert!(repo.ws().join("copy.txt").exists());
}

#[test]
fn a_long_command_is_stopped_as_soon_as_it_plants_a_hook() {
    if !have_git() {
        return;
    }
    let repo = Repo::new();
    let r = repo.exec("cp hook.sh .git/hooks/post-checkout; sleep 60");
    assert_refused_naming(&r, ".git/hooks/post-checkout");
    // Stopped by the watch, not at the end of its minute.
    assert!(
        r.elapsed < std::time::Duration::from_secs(20),
        "it ran for {:?}",
        r.elapsed
    );
    assert!(!repo.ws().join(".git/hooks/post-checkout").exists());
    repo.git(&["checkout", "-q", "-b", "other"]);
    assert!(!repo.marker.exists());
}

#[test]
fn in_docker_too_a_planted_hook_is_undone() {
    if !have_git() {
        return;
    }
    let runtime = tokio::runtime::Runtime::new().unwrap();
    if runtime.block_on(crate::docker::daemon()).is_none() {
        return;
    }
    let repo = Repo::new();
    if nix::unistd::geteuid().is_root() {
        // As root, commands run as the workspace's owner: let that be nobody, who can write it.
        let status = Command::new("chown")
            .args(["-R", "65534:65534"])
            .arg(repo.ws())
            .status()
            .unwrap();
        assert!(status.success());
    }
    let r = repo.exec_with(&["--backend", "docker"], "cp hook.sh .git/hooks/pre-commit");
    assert_refused_naming(&r, ".git/hooks/pre-commit");
    assert!(!repo.ws().join(".git/hooks/pre-commit").exists());
    repo.assert_git_runs_nothing();
}

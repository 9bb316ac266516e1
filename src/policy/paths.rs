//! The path validator, shared by the command policy and the file tools.
//!
//! A path is resolved against the command's cwd, normalized, and every symlink in its existing
//! prefix resolved; the result must fall under a writable root (the workspace) for writes or a
//! readable root for reads. Nothing is decided on the path as written.

use super::lstat_memo::{self, Lstat};
use super::Denial;
use std::ffi::OsStr;
use std::io;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

/// How a path is used.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Access {
    Read,
    /// Created, truncated or modified.
    Write,
    /// Removed or renamed: the final component is not followed (rm removes the link itself)
    /// and a root itself may not be removed.
    Delete,
}

/// The home directory of the user running warden (`$HOME`, else `/`).
pub fn home_dir() -> PathBuf {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/"))
}

/// Replace a leading `~` or `~/` with the home directory (config and policy files).
pub fn expand_home(path: &Path) -> PathBuf {
    match path.strip_prefix("~") {
        Ok(rest) => home_dir().join(rest),
        Err(_) => path.to_path_buf(),
    }
}

/// Devices any command may use without being under a root.
const DEVICES_READ_WRITE: &[&str] = &["/dev/null"];
const DEVICES_READ: &[&str] = &["/dev/zero", "/dev/random", "/dev/urandom"];

/// Symlink hops followed before giving up (as the kernel does with ELOOP).
const MAX_SYMLINK_HOPS: usize = 40;

/// One of warden's own files or folders (see [`PathPolicy::refuse_exposing`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OwnFile {
    pub path: PathBuf,
    /// What it is, for the refusal ("warden's config file (API keys, the bot token)").
    pub what: &'static str,
    /// Whether jailed programs may read it (the policy: yes; secrets and state: no).
    pub readable: bool,
}

#[derive(Clone, Debug)]
pub struct PathPolicy {
    workspace: PathBuf,
    /// How denials name the writable root: "the workspace (/path)" unless set otherwise.
    workspace_label: String,
    write_roots: Vec<PathBuf>,
    read_roots: Vec<PathBuf>,
    home: PathBuf,
    /// See [`PathPolicy::settled_directories`].
    settled: Arc<[PathBuf]>,
}

impl PathPolicy {
    /// Roots are canonicalized; they must exist.
    pub fn new(
        workspace: &Path,
        extra_write: &[PathBuf],
        extra_read: &[PathBuf],
        home: &Path,
    ) -> io::Result<PathPolicy> {
        let canon = |p: &Path| {
            std::fs::canonicalize(p)
                .map_err(|e| io::Error::new(e.kind(), format!("root {}: {e}", p.display())))
        };
        let workspace = canon(workspace)?;
        let mut write_roots = vec![workspace.clone()];
        for root in extra_write {
            write_roots.push(canon(root)?);
        }
        let mut read_roots = write_roots.clone();
        for root in extra_read {
            read_roots.push(canon(root)?);
        }
        let settled = settled_directories(&read_roots, &write_roots);
        Ok(PathPolicy {
            settled,
            workspace_label: format!("the workspace ({})", workspace.display()),
            workspace,
            write_roots,
            read_roots,
            // Canonical like the roots, so a workspace given as home is recognized as one.
            home: canon(home).unwrap_or_else(|_| home.to_path_buf()),
        })
    }

    /// Name the writable root differently in denials, for runs where it is not the user's
    /// workspace (a skill's scratch folder). `describe` gets the canonical root.
    pub fn with_workspace_label(mut self, describe: impl FnOnce(&Path) -> String) -> PathPolicy {
        self.workspace_label = describe(&self.workspace);
        self
    }

    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    /// The directory `~` and `$HOME` expand to in commands: the workspace for commands
    /// warden runs (in its jail HOME is the workspace), the user's own home for a real shell.
    pub fn home(&self) -> &Path {
        &self.home
    }

    /// What a refusal says about `~` when it is the workspace (a user expecting their own
    /// home learns why `~/x` named a workspace file, or why `~/..` left the roots).
    pub fn home_note(&self) -> Option<String> {
        (self.home == self.workspace).then(|| {
            format!(
                "~ and $HOME are the workspace ({}): in the jail HOME is the workspace",
                self.workspace.display()
            )
        })
    }

    pub fn write_roots(&self) -> &[PathBuf] {
        &self.write_roots
    }

    pub fn read_roots(&self) -> &[PathBuf] {
        &self.read_roots
    }

    /// The roots and the directories above them, all canonical when this policy was made, that
    /// a check takes as resolved instead of asking `lstat` about each again for every path it
    /// names (they were most of a check's system calls). No command this policy allows can
    /// turn one into a link or remove it: none lies beneath a writable root. A process outside
    /// the jail that does changes a name the jail does not go by: it confines by the
    /// directories it opened when its sandbox was made. And the invariant that verifies each
    /// verdict before it runs resolves every path from `/` itself.
    pub fn settled_directories(&self) -> Arc<[PathBuf]> {
        self.settled.clone()
    }

    /// Refuse roots that would hand warden's own files to jailed programs: a readable root
    /// holding a secret one, or a writable root holding any. Landlock only grants access, so
    /// the jail could not carve such a file out of a root: the roots must not cover it.
    pub fn refuse_exposing(&self, own: &[OwnFile]) -> Result<(), String> {
        for file in own {
            // Compare real paths; a relative one is relative to the current directory, as
            // warden opens it; a file not created yet is where it would be created. A path
            // warden cannot resolve (a folder it may not search) is compared as written: the
            // jail, with warden's uid, cannot reach it either.
            let written = std::path::absolute(&file.path).map_err(|e| {
                format!(
                    "cannot tell where {} ({}) is, so cannot keep it out of the sandbox: {e}",
                    file.what,
                    file.path.display()
                )
            })?;
            let path = resolve(&written, false).unwrap_or(written);
            let writable = self.write_roots.iter().find(|r| path.starts_with(r));
            let readable = self.read_roots.iter().find(|r| path.starts_with(r));
            let (root, kind, verb) = match (writable, readable) {
                (Some(root), _) => (root, "writable", "change"),
                (None, Some(root)) if !file.readable => (root, "readable", "read"),
                _ => continue,
            };
            return Err(format!(
                "the {kind} sandbox root {} contains {} at {}: a jailed program could {verb} \
                 it. The jail cannot exempt a file inside a root: narrow the root (the \
                 workspace, sandbox.read, a skill's grant) or move the file out of it",
                root.display(),
                file.what,
                path.display()
            ));
        }
        Ok(())
    }

    /// The root that contains an already-checked path, for opening it beneath that root.
    pub fn root_of(&self, checked: &Path) -> Option<&Path> {
        self.read_roots
            .iter()
            .filter(|r| checked.starts_with(r))
            .max_by_key(|r| r.as_os_str().len())
            .map(PathBuf::as_path)
    }

    /// Resolve `path` (relative to `cwd`) and check it for `access`. Returns the resolved,
    /// symlink-free absolute path.
    pub fn check(&self, cwd: &Path, path: &str, access: Access) -> Result<PathBuf, Denial> {
        if let Some(reason) = special_path_reason(path) {
            return Err(Denial::new(reason));
        }
        // Sized once: `Path::join` copies the cwd exactly and grows it again for the path.
        let mut joined = PathBuf::with_capacity(cwd.as_os_str().len() + path.len() + 1);
        joined.push(cwd);
        joined.push(path);
        if let Some(device) = device(&joined, access) {
            return Ok(device);
        }
        let resolved = resolve(&joined, access == Access::Delete)
            .map_err(|e| Denial::new(format!("{path}: {e}")))?;
        // Said only in a denial: where the path leads when that is not where it is written.
        let via = || {
            if lexically_normal(&joined) == resolved {
                String::new()
            } else {
                format!(" (it resolves to {})", resolved.display())
            }
        };
        match access {
            Access::Read => {
                if self.read_roots.iter().any(|r| within(&resolved, r)) {
                    return Ok(resolved);
                }
                Err(Denial::new(format!(
                    "{path} is outside {} and the readable roots{}",
                    self.workspace_label,
                    via()
                )))
            }
            Access::Write | Access::Delete => {
                let Some(root) = self.write_roots.iter().find(|r| within(&resolved, r)) else {
                    let read_only = self.read_roots.iter().any(|r| within(&resolved, r));
                    return Err(Denial::new(format!(
                        "writing {path} is not allowed: it is {} {}{}",
                        if read_only {
                            "in a read-only root, outside"
                        } else {
                            "outside"
                        },
                        self.workspace_label,
                        via()
                    )));
                };
                if access == Access::Delete && &resolved == root {
                    return Err(Denial::new(format!(
                        "removing {path} is not allowed: it is the root {} itself",
                        root.display()
                    )));
                }
                if let Some(reason) = protected_reason(root, &resolved) {
                    return Err(Denial::new(format!(
                        "writing {path} is not allowed: {reason}"
                    )));
                }
                if access == Access::Write {
                    refuse_hard_linked(path, &resolved)?;
                }
                Ok(resolved)
            }
        }
    }
}

impl PathPolicy {
    /// Why the policy keeps `resolved` (absolute, symlink-free) read-only although it is under
    /// a writable root: git's config, hooks, attributes and submodule list (see
    /// [`protected_reason`]). `None` for every other path, and for paths outside the roots.
    pub fn protected(&self, resolved: &Path) -> Option<String> {
        self.write_roots
            .iter()
            .filter(|r| resolved.starts_with(r))
            .find_map(|root| protected_reason(root, resolved))
    }

    /// Check a path that does not exist yet beneath `base`, an already checked (resolved,
    /// writable) path: `tail` is plain names, so nothing in it can be a symlink and the path is
    /// `base/tail` as written. Used where `base` is not a directory now but an earlier command
    /// of the same line may make it one.
    pub fn check_new_beneath(&self, base: &Path, tail: &Path) -> Result<PathBuf, Denial> {
        if tail
            .components()
            .any(|c| !matches!(c, Component::Normal(_)))
        {
            return Err(Denial::new(format!(
                "{}: only plain names may follow {}",
                tail.display(),
                base.display()
            )));
        }
        let full = base.join(tail);
        let Some(root) = self.write_roots.iter().find(|r| full.starts_with(r)) else {
            return Err(Denial::new(format!(
                "writing {} is not allowed: it is outside {}",
                full.display(),
                self.workspace_label
            )));
        };
        if let Some(reason) = protected_reason(root, &full) {
            return Err(Denial::new(format!(
                "writing {} is not allowed: {reason}",
                full.display()
            )));
        }
        Ok(full)
    }
}

/// `path.starts_with(root)`, comparing bytes first: a path that begins with the root's text
/// followed by `/` (or that is the root) has the root's components first. Only when the text
/// differs are components compared (`/a/./b` under `/a/b`).
fn within(path: &Path, root: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    within_by_text(path.as_os_str().as_bytes(), root.as_os_str().as_bytes())
        || path.starts_with(root)
}

/// The text half of [`within`]: `root`'s bytes begin `path`'s, followed by a `/` or the end.
fn within_by_text(path: &[u8], root: &[u8]) -> bool {
    !root.is_empty()
        && path.starts_with(root)
        && (path.len() == root.len() || root.ends_with(b"/") || path[root.len()] == b'/')
}

/// The length of the deepest settled directory `path` begins with as text (whole components),
/// during a check that has them. Every directory above a settled one is settled too, so a
/// walk may start there.
fn settled_prefix(path: &Path) -> Option<usize> {
    use std::os::unix::ffi::OsStrExt;
    let p = path.as_os_str().as_bytes();
    lstat_memo::with_settled(|dirs| {
        dirs.iter()
            .map(|dir| dir.as_os_str().as_bytes())
            .filter(|d| within_by_text(p, d))
            .map(<[u8]>::len)
            .max()
    })
    .flatten()
}

/// Paths bash would treat specially, or devices with a clearer reason than "outside".
fn special_path_reason(path: &str) -> Option<String> {
    let net = ["/dev/tcp/", "/dev/udp/"];
    if net.iter().any(|p| path.starts_with(p)) {
        return Some(format!(
            "{path}: bash network redirections (/dev/tcp, /dev/udp) are not allowed; the sandbox \
             has no network"
        ));
    }
    None
}

fn device(path: &Path, access: Access) -> Option<PathBuf> {
    // A path normalizing to a device has the components `dev` and a name after it.
    use std::os::unix::ffi::OsStrExt;
    if !path
        .as_os_str()
        .as_bytes()
        .windows(5)
        .any(|w| w == b"/dev/")
    {
        return None;
    }
    let normal = lexically_normal(path);
    let s = normal.to_str()?;
    let ok =
        DEVICES_READ_WRITE.contains(&s) || (access == Access::Read && DEVICES_READ.contains(&s));
    ok.then_some(normal)
}

/// A file with several hard links has other names, which may be protected (`.git/config`
/// linked as `notes.txt` by an archive); writing through this name would change them too.
fn refuse_hard_linked(path: &str, resolved: &Path) -> Result<(), Denial> {
    use std::os::unix::fs::MetadataExt;
    match std::fs::symlink_metadata(resolved) {
        Ok(meta) if meta.is_file() && meta.nlink() > 1 => Err(Denial::new(format!(
            "writing {path} is not allowed: the file has {} hard links, so writing it changes \
             every other name of it too, and one may be a file the policy protects (.git/config); \
             write a copy instead",
            meta.nlink()
        ))),
        _ => Ok(()),
    }
}

/// Inside a writable root, places whose contents make git run programs later: anything under
/// a `.git` (config, hooks; a `.git` file points git at another directory), any
/// `.gitattributes` (names filter and diff drivers), any `.gitmodules` (names the submodules
/// git clones and updates), and git's global config, which is in the root because the jail's
/// HOME is the workspace.
fn protected_reason(root: &Path, resolved: &Path) -> Option<String> {
    let rel = resolved.strip_prefix(root).ok()?;
    if rel
        .components()
        .any(|c| c.as_os_str() == OsStr::new(".git"))
    {
        return Some(
            "files under .git/ (config, hooks) make git run programs; the policy keeps them \
             read-only"
                .into(),
        );
    }
    if rel
        .components()
        .any(|c| c.as_os_str() == OsStr::new(".gitattributes"))
    {
        return Some(
            ".gitattributes names the filter and diff programs git runs; the policy keeps it \
             read-only"
                .into(),
        );
    }
    if rel
        .components()
        .any(|c| c.as_os_str() == OsStr::new(".gitmodules"))
    {
        return Some(
            ".gitmodules names the submodules git clones and updates (their URLs and \
             commands); the policy keeps it read-only"
                .into(),
        );
    }
    let mut comps = rel.components().map(|c| c.as_os_str());
    match (comps.next(), comps.next()) {
        (Some(first), _) if first == ".gitconfig" => {
            Some("~/.gitconfig in the workspace is git's global config inside the jail".into())
        }
        (Some(first), Some(second)) if first == ".config" && second == "git" => {
            Some("~/.config/git in the workspace is git's global config inside the jail".into())
        }
        _ => None,
    }
}

/// Every root and every directory above one, but `/` (never asked about) and any directory
/// beneath a writable root: a command allowed to write there could rename it and leave a link
/// in its place.
fn settled_directories(read_roots: &[PathBuf], write_roots: &[PathBuf]) -> Arc<[PathBuf]> {
    let mut settled: Vec<PathBuf> = Vec::new();
    for root in read_roots {
        for dir in root.ancestors() {
            let writable_above = write_roots
                .iter()
                .any(|w| dir != w.as_path() && within(dir, w));
            if dir.parent().is_some() && !writable_above && !settled.iter().any(|d| d == dir) {
                settled.push(dir.to_path_buf());
            }
        }
    }
    settled.into()
}

/// `.` and `..` removed without touching the filesystem (only for messages and devices).
pub(crate) fn lexically_normal(path: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for comp in path.components() {
        match comp {
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(name) => out.push(name),
            _ => {}
        }
    }
    out
}

/// Resolve an absolute path: symlinks in the existing prefix followed (the last component too
/// unless `keep_last`), `..` applied to the resolved parent as the kernel does, and the missing
/// tail appended. A `..` after a missing component is refused (the kernel would fail).
pub fn resolve(path: &Path, keep_last: bool) -> io::Result<PathBuf> {
    // Sized once for the whole path (pushing component by component regrew it each time), and
    // started at the deepest settled directory the path begins with, if any: each component
    // of it would only be answered "a directory" from the same list.
    let mut resolved = PathBuf::with_capacity(path.as_os_str().len() + 1);
    let remainder = match settled_prefix(path) {
        Some(len) => {
            use std::os::unix::ffi::OsStrExt;
            let bytes = path.as_os_str().as_bytes();
            resolved.push(OsStr::from_bytes(&bytes[..len]));
            Path::new(OsStr::from_bytes(&bytes[len..]))
        }
        None => {
            resolved.push("/");
            path
        }
    };
    let mut rest = remainder
        .components()
        .filter(|c| !matches!(c, Component::RootDir | Component::Prefix(_)))
        .peekable();
    // The components of symbolic link targets still to walk, as a stack (reversed): they
    // come before `rest`.
    let mut linked: Vec<std::ffi::OsString> = Vec::new();
    let mut missing = false;
    let mut hops = 0;
    loop {
        let owned;
        let name: &OsStr = match linked.pop() {
            Some(name) => {
                owned = name;
                &owned
            }
            None => match rest.next() {
                Some(component) => component.as_os_str(),
                None => break,
            },
        };
        if name == "." {
            continue;
        }
        if name == ".." {
            if missing {
                return Err(io::Error::new(
                    io::ErrorKind::NotFound,
                    "`..` after a directory that does not exist",
                ));
            }
            resolved.pop();
            continue;
        }
        // `resolved` is the candidate now; the parent again when it is a link or an error.
        resolved.push(name);
        if missing {
            continue;
        }
        let is_last = linked.is_empty() && rest.peek().is_none();
        match lstat_memo::lstat(&resolved) {
            Ok(Lstat::Link) if !(is_last && keep_last) => {
                hops += 1;
                if hops > MAX_SYMLINK_HOPS {
                    return Err(io::Error::other("too many levels of symbolic links"));
                }
                let target = std::fs::read_link(&resolved)?;
                resolved.pop();
                if target.is_absolute() {
                    resolved.as_mut_os_string().clear();
                    resolved.push("/");
                }
                let at = linked.len();
                linked.extend(
                    target
                        .components()
                        .filter(|c| !matches!(c, Component::RootDir | Component::Prefix(_)))
                        .map(|c| c.as_os_str().to_os_string()),
                );
                linked[at..].reverse();
            }
            Ok(Lstat::Missing) => missing = true,
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(libc::ENOTDIR) => {
                resolved.pop();
                return Err(io::Error::new(
                    io::ErrorKind::NotADirectory,
                    format!("{} is not a directory", resolved.display()),
                ));
            }
            Err(e) => return Err(e),
        }
    }
    Ok(resolved)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn setup() -> (tempfile::TempDir, PathPolicy) {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(ws.join("sub")).unwrap();
        std::fs::write(ws.join("notes.txt"), "x").unwrap();
        std::fs::write(dir.path().join("secret"), "s").unwrap();
        symlink(dir.path().join("secret"), ws.join("link")).unwrap();
        symlink("sub", ws.join("inner")).unwrap();
        let policy = PathPolicy::new(&ws, &[], &[], Path::new("/root")).unwrap();
        (dir, policy)
    }

    #[test]
    fn settled_directories_stop_above_what_a_writable_root_holds() {
        let p = |s: &str| PathBuf::from(s);
        let settled = settled_directories(
            &[p("/a/b/ws"), p("/a/b/ws/sub"), p("/r/x")],
            &[p("/a/b/ws"), p("/a/b/ws/sub")],
        );
        assert_eq!(
            &*settled,
            [p("/a/b/ws"), p("/a/b"), p("/a"), p("/r/x"), p("/r")]
        );
        // A writable root higher up leaves only what is above it.
        let settled = settled_directories(&[p("/a/b/ws"), p("/a")], &[p("/a/b/ws"), p("/a")]);
        assert_eq!(&*settled, [p("/a")]);
    }

    #[test]
    fn a_writable_root_inside_another_is_looked_at_again_at_every_check() {
        use crate::policy::{Checker, Decision, Policy};
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().canonicalize().unwrap().join("ws");
        let outside = dir.path().join("outside");
        std::fs::create_dir_all(ws.join("sub")).unwrap();
        std::fs::create_dir(&outside).unwrap();
        let paths = PathPolicy::new(&ws, &[ws.join("sub")], &[], &ws).unwrap();
        let mut checker = Checker::new(Arc::new(Policy::embedded_default()), paths);
        let verdict = checker.check("echo x > sub/f");
        assert_eq!(verdict.decision, Decision::Allow, "{}", verdict.reason);
        // What a command allowed in the workspace can do: move the inner root away and leave a
        // link to elsewhere under its name.
        std::fs::rename(ws.join("sub"), ws.join("old")).unwrap();
        symlink(&outside, ws.join("sub")).unwrap();
        let verdict = checker.check("echo x > sub/f");
        assert_eq!(verdict.decision, Decision::Deny, "{}", verdict.reason);
        assert!(verdict.reason.contains("outside"), "{}", verdict.reason);
    }

    #[test]
    fn a_walk_started_at_a_settled_directory_ends_where_one_from_the_root_does() {
        let (dir, _) = setup();
        let top = dir.path().canonicalize().unwrap();
        let ws = top.join("ws");
        let settled: Arc<[PathBuf]> = Arc::from(vec![ws.clone(), top.clone()]);
        for path in [
            "ws",
            "ws/notes.txt",
            "ws/link",
            "ws/inner/x",
            "ws/../secret",
            "ws/sub/../../ws/./notes.txt",
            "ws/missing/../notes.txt",
            "wsx/y",
        ] {
            let path = top.join(path);
            for keep_last in [false, true] {
                let from_root = resolve(&path, keep_last).map_err(|e| e.to_string());
                let from_settled =
                    lstat_memo::during_from(Some(settled.clone()), || resolve(&path, keep_last))
                        .map_err(|e| e.to_string());
                assert_eq!(from_settled, from_root, "{}", path.display());
            }
        }
    }

    #[test]
    fn a_settled_prefix_is_made_of_whole_components() {
        let dirs: Arc<[PathBuf]> = Arc::from(vec![PathBuf::from("/a"), PathBuf::from("/a/b")]);
        lstat_memo::during_from(Some(dirs), || {
            assert_eq!(settled_prefix(Path::new("/a/b/c")), Some(4));
            assert_eq!(settled_prefix(Path::new("/a/b")), Some(4));
            assert_eq!(settled_prefix(Path::new("/a/bc/x")), Some(2));
            assert_eq!(settled_prefix(Path::new("/ab")), None);
            lstat_memo::during(|| assert_eq!(settled_prefix(Path::new("/a/b")), Some(4)));
        });
        // Only during the check that has them.
        assert_eq!(settled_prefix(Path::new("/a/b/c")), None);
        lstat_memo::during(|| assert_eq!(settled_prefix(Path::new("/a/b/c")), None));
    }

    #[test]
    fn within_is_starts_with() {
        for (path, root) in [
            ("/a/b", "/a/b"),
            ("/a/b/c", "/a/b"),
            ("/a/bc", "/a/b"),
            ("/a", "/a/b"),
            ("/a/b", "/"),
            ("/a/b/c", "/a/b/"),
            ("/a/./b/c", "/a/b"),
            ("/a//b", "/a/b"),
            ("/x/../a/b", "/a/b"),
            ("/a/b", ""),
        ] {
            let (path, root) = (Path::new(path), Path::new(root));
            assert_eq!(
                within(path, root),
                path.starts_with(root),
                "{path:?} {root:?}"
            );
        }
    }

    #[test]
    fn relative_paths_resolve_against_cwd() {
        let (_d, p) = setup();
        let ws = p.workspace().to_path_buf();
        assert_eq!(
            p.check(&ws.join("sub"), "../notes.txt", Access::Read)
                .unwrap(),
            ws.join("notes.txt")
        );
        assert!(p
            .check(&ws, "../secret", Access::Read)
            .unwrap_err()
            .reason
            .contains("outside"));
    }

    #[test]
    fn symlinks_are_followed_before_the_check() {
        let (_d, p) = setup();
        let ws = p.workspace().to_path_buf();
        let err = p.check(&ws, "link", Access::Read).unwrap_err().reason;
        assert!(err.contains("resolves to"), "{err}");
        assert_eq!(
            p.check(&ws, "inner/new.txt", Access::Write).unwrap(),
            ws.join("sub/new.txt")
        );
        // rm of the link removes the link, not its target.
        assert_eq!(
            p.check(&ws, "link", Access::Delete).unwrap(),
            ws.join("link")
        );
    }

    #[test]
    fn dotdot_after_a_missing_directory_is_refused() {
        let (_d, p) = setup();
        let ws = p.workspace().to_path_buf();
        assert!(p.check(&ws, "nope/../../secret", Access::Read).is_err());
        assert_eq!(
            p.check(&ws, "new/dir/file", Access::Write).unwrap(),
            ws.join("new/dir/file")
        );
    }

    #[test]
    fn devices_and_protected_places() {
        let (_d, p) = setup();
        let ws = p.workspace().to_path_buf();
        assert_eq!(
            p.check(&ws, "/dev/null", Access::Write).unwrap(),
            PathBuf::from("/dev/null")
        );
        assert!(p.check(&ws, "/dev/zero", Access::Write).is_err());
        assert!(p
            .check(&ws, "/dev/tcp/1.2.3.4/80", Access::Write)
            .unwrap_err()
            .reason
            .contains("network"));
        assert!(p
            .check(&ws, ".git/config", Access::Write)
            .unwrap_err()
            .reason
            .contains(".git"));
        assert!(p.check(&ws, ".git/config", Access::Read).is_ok());
        assert!(p
            .check(&ws, ".", Access::Delete)
            .unwrap_err()
            .reason
            .contains("root"));
    }

    fn own(path: &Path, readable: bool) -> OwnFile {
        OwnFile {
            path: path.to_path_buf(),
            what: "a test file",
            readable,
        }
    }

    #[test]
    fn roots_must_not_expose_wardens_own_files() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().canonicalize().unwrap();
        let ws = home.join("ws");
        let data = home.join(".warden");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::create_dir_all(data.join("bundled")).unwrap();
        let policy_file = home.join("policy.toml");

        // A readable root holding the data directory: refused, naming both.
        let p = PathPolicy::new(&ws, &[], std::slice::from_ref(&home), &home).unwrap();
        let err = p.refuse_exposing(&[own(&data, false)]).unwrap_err();
        assert!(err.contains("readable sandbox root"), "{err}");
        assert!(err.contains(&data.display().to_string()), "{err}");
        // The policy may be read, not written.
        assert!(p.refuse_exposing(&[own(&policy_file, true)]).is_ok());
        let p = PathPolicy::new(&home, &[], &[], &home).unwrap();
        let err = p.refuse_exposing(&[own(&policy_file, true)]).unwrap_err();
        assert!(err.contains("writable sandbox root"), "{err}");
        // Roots beside or inside the data directory expose nothing of it.
        let p = PathPolicy::new(&ws, &[], &[data.join("bundled")], &home).unwrap();
        assert!(p.refuse_exposing(&[own(&data, false)]).is_ok());
        // A file not created yet counts where it would be created.
        let p = PathPolicy::new(&ws, &[], &[], &home).unwrap();
        let err = p
            .refuse_exposing(&[own(&ws.join("later/warden.db"), false)])
            .unwrap_err();
        assert!(err.contains("writable"), "{err}");
    }

    #[test]
    fn a_relative_path_is_judged_from_the_current_directory() {
        // The config given as `--config config.toml` in the workspace is the workspace's file.
        let cwd = std::env::current_dir().unwrap().canonicalize().unwrap();
        let p = PathPolicy::new(&cwd, &[], &[], &cwd).unwrap();
        let err = p
            .refuse_exposing(&[own(Path::new("warden-test-config.toml"), false)])
            .unwrap_err();
        assert!(err.contains(&cwd.display().to_string()), "{err}");
    }

    #[test]
    fn a_symlink_to_wardens_files_is_judged_by_its_target() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let ws = root.join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::create_dir_all(root.join("real")).unwrap();
        std::os::unix::fs::symlink(ws.join("inside"), root.join("real/link")).unwrap();
        std::fs::create_dir_all(ws.join("inside")).unwrap();
        let p = PathPolicy::new(&ws, &[], &[], &root).unwrap();
        // Configured as root/real/link/config.toml, really inside the workspace.
        let err = p
            .refuse_exposing(&[own(&root.join("real/link/config.toml"), false)])
            .unwrap_err();
        assert!(err.contains(&ws.display().to_string()), "{err}");
    }
}

//! A repository read at check time: its refs (loose, packed, symbolic, per worktree), the
//! revisions a command names, and the commits and trees they lead to.
//!
//! Revisions are resolved as git resolves them — a full object name, then the refs git tries
//! in its order (`X`, `refs/X`, `refs/tags/X`, `refs/heads/X`, `refs/remotes/X`,
//! `refs/remotes/X/HEAD`), then `describe` output and abbreviated names — with `@`, `-` and
//! `@{-N}` (the branch checked out before), `stash@{N}`, and `~N`, `^N`, `^{}`, `^{commit}`,
//! `^{tree}` after them. What git would find nothing for is "missing" (git fails too); syntax
//! not modelled here (dates, `@{upstream}`, `:/text`, ranges) and ambiguous abbreviations are
//! errors, which the caller refuses.

use super::git_objects::{self, Kind, Objects, Oid};
use std::path::{Path, PathBuf};

pub struct Repo {
    git_dir: PathBuf,
    common_dir: PathBuf,
    /// Why the repository cannot be read as git reads it, if it cannot: said when a command
    /// needs a ref or an object, not before.
    unreadable: Option<String>,
    /// Opened when first needed (pack indexes are read whole).
    objects: std::cell::OnceCell<Result<Objects, String>>,
}

/// A tree entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub mode: u32,
    pub name: String,
    pub oid: Oid,
}

pub const MODE_TREE: u32 = 0o040_000;

impl Repo {
    /// `git_dir` is the repository (or linked worktree) git directory, `common_dir` where its
    /// refs and objects live (the same for a plain repository).
    pub fn open(git_dir: &Path, common_dir: &Path) -> Repo {
        let config = std::fs::read_to_string(common_dir.join("config")).unwrap_or_default();
        let lowered = config.to_ascii_lowercase().replace([' ', '\t'], "");
        let mut unreadable = [
            ("objectformat=sha256", "SHA-256 object names"),
            ("refstorage=reftable", "reftable refs"),
        ]
        .iter()
        .find(|(needle, _)| lowered.contains(needle))
        .map(|(_, what)| format!("the repository uses {what}, which warden does not read"));
        if common_dir.join("info/grafts").exists() {
            unreadable =
                Some("the repository has grafts (info/grafts), which change its history".into());
        }
        Repo {
            git_dir: git_dir.to_path_buf(),
            common_dir: common_dir.to_path_buf(),
            unreadable,
            objects: std::cell::OnceCell::new(),
        }
    }

    fn objects(&self) -> Result<&Objects, String> {
        if let Some(why) = &self.unreadable {
            return Err(why.clone());
        }
        self.objects
            .get_or_init(|| Objects::open(&self.common_dir.join("objects")))
            .as_ref()
            .map_err(Clone::clone)
    }

    /// The tree HEAD points at; `None` on an unborn branch.
    pub fn head_tree(&self) -> Result<Option<Oid>, String> {
        match self.read_ref("HEAD", 0)? {
            Some(oid) => self.tree_of(&oid).map(Some),
            None => Ok(None),
        }
    }

    /// What `rev` names: `Ok(None)` when git finds nothing either.
    pub fn resolve(&self, rev: &str) -> Result<Option<Oid>, String> {
        let cannot = || format!("cannot tell which commit `{rev}` names");
        if rev.contains("..") || rev.contains(':') || rev.is_empty() {
            return Err(cannot());
        }
        let split = rev.find(['~', '^']).unwrap_or(rev.len());
        let (base, ops) = rev.split_at(split);
        let Some(mut oid) = self.resolve_base(base)? else {
            return Ok(None);
        };
        let mut ops = ops;
        while !ops.is_empty() {
            let (op, rest) = ops.split_at(1);
            ops = rest;
            if op == "^" && ops.starts_with('{') {
                let end = ops.find('}').ok_or_else(cannot)?;
                let want = &ops[1..end];
                ops = &ops[end + 1..];
                oid = match want {
                    "" => self.peel_tags(&oid)?,
                    "commit" => self.peel_to(&oid, Kind::Commit)?,
                    "tree" => self.tree_of(&oid)?,
                    _ => return Err(cannot()),
                };
                continue;
            }
            let digits: String = ops.chars().take_while(char::is_ascii_digit).collect();
            ops = &ops[digits.len()..];
            let n: usize = if digits.is_empty() {
                1
            } else {
                digits.parse().map_err(|_| cannot())?
            };
            let commit = self.peel_to(&oid, Kind::Commit)?;
            let next = if op == "~" {
                let mut at = Some(commit);
                for _ in 0..n {
                    at = match at {
                        Some(c) => self.parents(&c)?.first().copied(),
                        None => None,
                    };
                }
                at
            } else if n == 0 {
                Some(commit)
            } else {
                self.parents(&commit)?.get(n - 1).copied()
            };
            match next {
                Some(next) => oid = next,
                // git fails: the commit has no such parent.
                None => return Ok(None),
            }
        }
        Ok(Some(oid))
    }

    fn resolve_base(&self, base: &str) -> Result<Option<Oid>, String> {
        let cannot = || format!("cannot tell which commit `{base}` names");
        if base == "@" || base.is_empty() {
            return if base.is_empty() {
                Err(cannot())
            } else {
                self.read_ref("HEAD", 0)
            };
        }
        if base == "-" {
            return self.resolve_base("@{-1}");
        }
        if let Some(n) = base
            .strip_prefix("@{-")
            .and_then(|r| r.strip_suffix('}'))
            .and_then(|n| n.parse::<usize>().ok())
            .filter(|n| *n > 0)
        {
            return match self.previous_checkout(n)? {
                Some(name) if name.contains("@{") => Err(cannot()),
                Some(name) => self.resolve_base(&name),
                None => Ok(None),
            };
        }
        if let Some(n) = base
            .strip_prefix("stash@{")
            .or_else(|| base.strip_prefix("refs/stash@{"))
            .and_then(|r| r.strip_suffix('}'))
            .and_then(|n| n.parse::<usize>().ok())
        {
            return self.stash_entry(n);
        }
        if base.contains("@{") {
            return Err(cannot());
        }
        // No ref name holds these, and no other syntax gives them a meaning: git finds nothing.
        if base.contains(['?', '*', '[', '\\', ' ']) || base.chars().any(char::is_control) {
            return Ok(None);
        }
        if let Some(oid) = git_objects::parse_hex(base) {
            return Ok(self.objects()?.exists(&oid).then_some(oid));
        }
        if let Some(oid) = self.dwim(base)? {
            return Ok(Some(oid));
        }
        // `git describe` output: NAME-gABBREV.
        if let Some((_, abbrev)) = base.rsplit_once("-g") {
            if let Some(oid) = self.abbreviated(abbrev)? {
                return Ok(Some(oid));
            }
        }
        self.abbreviated(base)
    }

    fn abbreviated(&self, text: &str) -> Result<Option<Oid>, String> {
        if text.len() < 4 || text.len() > 40 || !text.chars().all(|c| c.is_ascii_hexdigit()) {
            return Ok(None);
        }
        let found = self.objects()?.find_prefix(&text.to_ascii_lowercase())?;
        match found.as_slice() {
            [] => Ok(None),
            [one] => Ok(Some(*one)),
            _ => Err(format!(
                "`{text}` is an abbreviation of several objects; write more of it"
            )),
        }
    }

    /// git's ref rules, in order; the first that exists wins.
    fn dwim(&self, name: &str) -> Result<Option<Oid>, String> {
        let root_like = name.starts_with("refs/")
            || (!name.is_empty() && name.chars().all(|c| c.is_ascii_uppercase() || c == '_'));
        let mut candidates = Vec::new();
        if root_like {
            candidates.push(name.to_string());
        }
        for pattern in [
            "refs/{}",
            "refs/tags/{}",
            "refs/heads/{}",
            "refs/remotes/{}",
            "refs/remotes/{}/HEAD",
        ] {
            candidates.push(pattern.replace("{}", name));
        }
        for candidate in candidates {
            if let Some(oid) = self.read_ref(&candidate, 0)? {
                return Ok(Some(oid));
            }
        }
        Ok(None)
    }

    /// The remote-tracking branches named `name` (`refs/remotes/*/name`): what checkout and
    /// switch create a branch from when no branch of that name exists.
    pub fn remote_branches(&self, name: &str) -> Result<Vec<Oid>, String> {
        let mut out = Vec::new();
        let remotes = self.common_dir.join("refs/remotes");
        let mut names: Vec<String> = std::fs::read_dir(&remotes)
            .map(|d| {
                d.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        for (_, refname) in self.packed_refs()? {
            if let Some(remote) = refname
                .strip_prefix("refs/remotes/")
                .and_then(|r| r.strip_suffix(&format!("/{name}")))
            {
                if !remote.contains('/') {
                    names.push(remote.to_string());
                }
            }
        }
        names.sort();
        names.dedup();
        for remote in names {
            if let Some(oid) = self.read_ref(&format!("refs/remotes/{remote}/{name}"), 0)? {
                out.push(oid);
            }
        }
        Ok(out)
    }

    /// Whether a local branch of this name exists.
    pub fn has_branch(&self, name: &str) -> Result<bool, String> {
        Ok(self.read_ref(&format!("refs/heads/{name}"), 0)?.is_some())
    }

    /// A ref's object: loose file (per worktree for HEAD and pseudo refs), else packed-refs.
    fn read_ref(&self, name: &str, depth: usize) -> Result<Option<Oid>, String> {
        if let Some(why) = &self.unreadable {
            return Err(why.clone());
        }
        if depth > 5 {
            return Err(format!("the ref {name} is a loop of symbolic refs"));
        }
        if name
            .split('/')
            .any(|part| part.is_empty() || part.starts_with('.'))
            || name.ends_with(".lock")
        {
            return Ok(None);
        }
        let per_worktree = !name.starts_with("refs/")
            || ["refs/bisect/", "refs/worktree/", "refs/rewritten/"]
                .iter()
                .any(|p| name.starts_with(p));
        let dir = if per_worktree {
            &self.git_dir
        } else {
            &self.common_dir
        };
        match std::fs::read_to_string(dir.join(name)) {
            Ok(text) => {
                let text = text.trim();
                if let Some(target) = text.strip_prefix("ref:") {
                    return self.read_ref(target.trim(), depth + 1);
                }
                let hex = text.split_whitespace().next().unwrap_or_default();
                return git_objects::parse_hex(hex)
                    .map(Some)
                    .ok_or_else(|| format!("the ref {name} holds no object name"));
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            // A folder (refs/heads/a when a/b exists) is no ref.
            Err(_) if dir.join(name).is_dir() => {}
            Err(e) => return Err(format!("cannot read the ref {name}: {e}")),
        }
        Ok(self
            .packed_refs()?
            .into_iter()
            .find(|(_, refname)| refname == name)
            .map(|(oid, _)| oid))
    }

    fn packed_refs(&self) -> Result<Vec<(Oid, String)>, String> {
        let text = match std::fs::read_to_string(self.common_dir.join("packed-refs")) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(format!("cannot read packed-refs: {e}")),
        };
        let mut out = Vec::new();
        for line in text.lines() {
            if line.starts_with('#') || line.starts_with('^') || line.is_empty() {
                continue;
            }
            let (hex, name) = line.split_once(' ').ok_or("a damaged packed-refs")?;
            let oid = git_objects::parse_hex(hex).ok_or("a damaged packed-refs")?;
            out.push((oid, name.to_string()));
        }
        Ok(out)
    }

    /// The branch (or commit) checked out `n` checkouts ago, from HEAD's reflog.
    fn previous_checkout(&self, n: usize) -> Result<Option<String>, String> {
        let Ok(log) = std::fs::read_to_string(self.git_dir.join("logs/HEAD")) else {
            return Ok(None);
        };
        let moves = log.lines().rev().filter_map(|line| {
            let message = line.split_once('\t')?.1;
            let rest = message.strip_prefix("checkout: moving from ")?;
            Some(rest.split_once(" to ")?.0.to_string())
        });
        Ok(moves.into_iter().nth(n - 1))
    }

    /// `stash@{n}`: the n-th newest entry of the stash's reflog.
    fn stash_entry(&self, n: usize) -> Result<Option<Oid>, String> {
        let Ok(log) = std::fs::read_to_string(self.common_dir.join("logs/refs/stash")) else {
            return if n == 0 {
                self.read_ref("refs/stash", 0)
            } else {
                Ok(None)
            };
        };
        let entry = log.lines().rev().nth(n).and_then(|line| {
            let new = line.split_whitespace().nth(1)?;
            git_objects::parse_hex(new)
        });
        Ok(entry)
    }

    fn peel_tags(&self, oid: &Oid) -> Result<Oid, String> {
        let mut at = *oid;
        for _ in 0..20 {
            let (kind, data) = self.objects()?.read(&at)?;
            if kind != Kind::Tag {
                return Ok(at);
            }
            at = header(&data, "object").ok_or("a damaged tag")?;
        }
        Err("a chain of tags too long to follow".into())
    }

    fn peel_to(&self, oid: &Oid, want: Kind) -> Result<Oid, String> {
        let oid = self.peel_tags(oid)?;
        let (kind, _) = self.objects()?.read(&oid)?;
        if kind != want {
            return Err(format!("{} is not a {want:?}", git_objects::hex(&oid)));
        }
        Ok(oid)
    }

    /// The tree of a commit (or tag of one), or the tree itself.
    pub fn tree_of(&self, oid: &Oid) -> Result<Oid, String> {
        let oid = self.peel_tags(oid)?;
        let (kind, data) = self.objects()?.read(&oid)?;
        match kind {
            Kind::Tree => Ok(oid),
            Kind::Commit => header(&data, "tree").ok_or_else(|| "a damaged commit".into()),
            _ => Err(format!(
                "{} is not a commit or tree",
                git_objects::hex(&oid)
            )),
        }
    }

    /// A commit's parents, in order.
    pub fn parents(&self, commit: &Oid) -> Result<Vec<Oid>, String> {
        let (kind, data) = self.objects()?.read(commit)?;
        if kind != Kind::Commit {
            return Err(format!("{} is not a commit", git_objects::hex(commit)));
        }
        let text = String::from_utf8_lossy(&data);
        let mut out = Vec::new();
        for line in text.lines() {
            if line.is_empty() {
                break;
            }
            if let Some(hex) = line.strip_prefix("parent ") {
                out.push(git_objects::parse_hex(hex.trim()).ok_or("a damaged commit")?);
            }
        }
        Ok(out)
    }

    pub fn tree(&self, oid: &Oid) -> Result<Vec<Entry>, String> {
        let (kind, data) = self.objects()?.read(oid)?;
        if kind != Kind::Tree {
            return Err(format!("{} is not a tree", git_objects::hex(oid)));
        }
        let bad = || "a damaged tree".to_string();
        let mut out = Vec::new();
        let mut at = 0;
        while at < data.len() {
            let space = data[at..].iter().position(|b| *b == b' ').ok_or_else(bad)? + at;
            let mode =
                u32::from_str_radix(std::str::from_utf8(&data[at..space]).map_err(|_| bad())?, 8)
                    .map_err(|_| bad())?;
            let nul = data[space..].iter().position(|b| *b == 0).ok_or_else(bad)? + space;
            let name = String::from_utf8(data[space + 1..nul].to_vec())
                .map_err(|_| "a tree entry whose name is not UTF-8".to_string())?;
            let oid: Oid = data
                .get(nul + 1..nul + 21)
                .ok_or_else(bad)?
                .try_into()
                .map_err(|_| bad())?;
            out.push(Entry { mode, name, oid });
            at = nul + 21;
        }
        Ok(out)
    }
}

/// The object named by a `key HEX` header line of a commit or tag.
fn header(data: &[u8], key: &str) -> Option<Oid> {
    let text = std::str::from_utf8(data).ok()?;
    for line in text.lines() {
        if line.is_empty() {
            break;
        }
        if let Some(hex) = line.strip_prefix(key).and_then(|r| r.strip_prefix(' ')) {
            return git_objects::parse_hex(hex.trim());
        }
    }
    None
}

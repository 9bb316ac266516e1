//! git's config files, read exactly as git reads them, and judged by an allowlist.
//!
//! The reader follows git's own (`config.c`: `git_parse_source`, `get_base_var`,
//! `get_extended_base_var`, `get_value`, `parse_value`) character by character: a UTF-8 BOM,
//! CRLF line ends, `#`/`;` comments — in which a backslash continues nothing —, `[section]`,
//! `[section "subsection"]` with its escapes, the old `[section.subsection]`, keys without a
//! value, quoted values, the escapes `\t \b \n \\ \"` and backslash-newline continuations. A
//! file git would reject is refused too: whatever git would do with it, warden does not guess.
//!
//! Every entry must then be one warden knows to be safe: keys that make git run a program
//! (pagers, editors, filter and diff drivers, hooks, gpg, credential helpers, ssh, trace
//! targets…) are refused by name, so are keys that name transports or promisor remotes
//! (`protocol.<name>.allow` beats the command line's `protocol.allow=never`, and a promisor
//! remote is fetched from by any command that meets a missing object: `ext::` runs a shell
//! command), includes are refused (they would pull in a file unread), and a section warden
//! does not know is refused as well.

/// One `section[.subsection].key = value` entry. Section and key are lowercase, as git
/// compares them; the subsection keeps its case.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub section: String,
    pub subsection: Option<String>,
    pub key: String,
    /// `None` for a key written without `=` (a boolean true).
    pub value: Option<String>,
}

impl Entry {
    fn name(&self) -> String {
        match &self.subsection {
            Some(sub) => format!("{}.{sub}.{}", self.section, self.key),
            None => format!("{}.{}", self.section, self.key),
        }
    }
}

/// Parse a config file as git does; `Err` names the line git would reject.
pub fn parse(text: &[u8]) -> Result<Vec<Entry>, String> {
    Reader::new(text).entries()
}

/// The first entry that is not known to be safe, with why; `None` when every entry is.
pub fn first_unsafe(entries: &[Entry]) -> Option<String> {
    entries.iter().find_map(judge)
}

struct Reader<'a> {
    text: &'a [u8],
    pos: usize,
    line: usize,
    eof: bool,
}

/// git's `isspace`: only these four (not `\v` or `\f`).
fn is_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\r')
}

fn is_key_char(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'-'
}

impl<'a> Reader<'a> {
    fn new(text: &'a [u8]) -> Reader<'a> {
        Reader {
            text,
            pos: 0,
            line: 1,
            eof: false,
        }
    }

    /// git's `get_next_char`: CRLF is one newline, end of input reads as a final newline.
    fn next(&mut self) -> u8 {
        let Some(&c) = self.text.get(self.pos) else {
            self.eof = true;
            return b'\n';
        };
        self.pos += 1;
        if c == b'\r' && self.text.get(self.pos) == Some(&b'\n') {
            self.pos += 1;
            self.line += 1;
            return b'\n';
        }
        if c == b'\n' {
            self.line += 1;
        }
        c
    }

    fn bad(&self) -> String {
        format!(
            "bad config line {} (git itself would refuse the file)",
            self.line
        )
    }

    fn entries(&mut self) -> Result<Vec<Entry>, String> {
        const BOM: &[u8] = b"\xef\xbb\xbf";
        let matched = self
            .text
            .iter()
            .zip(BOM)
            .take_while(|(a, b)| a == b)
            .count();
        match matched {
            3 => self.pos = 3,
            0 => {}
            // git does not tolerate a partial BOM.
            _ => return Err(self.bad()),
        }
        let mut out = Vec::new();
        let mut section: Option<(String, Option<String>)> = None;
        let mut comment = false;
        loop {
            let c = self.next();
            if c == b'\n' {
                if self.eof {
                    return Ok(out);
                }
                comment = false;
                continue;
            }
            if comment || is_space(c) {
                continue;
            }
            if c == b'#' || c == b';' {
                comment = true;
                continue;
            }
            if c == b'[' {
                section = Some(self.section_header()?);
                continue;
            }
            if !c.is_ascii_alphabetic() {
                return Err(self.bad());
            }
            // A key before any section header is an error in git too.
            let Some((name, subsection)) = &section else {
                return Err(self.bad());
            };
            let (key, value) = self.key_and_value(c)?;
            out.push(Entry {
                section: name.clone(),
                subsection: subsection.clone(),
                key,
                value,
            });
        }
    }

    /// After `[`: `name]`, `name.sub]` (old style, lowercased) or `name "sub"]`.
    fn section_header(&mut self) -> Result<(String, Option<String>), String> {
        let mut name = Vec::new();
        loop {
            let c = self.next();
            if self.eof {
                return Err(self.bad());
            }
            if c == b']' {
                break;
            }
            if is_space(c) {
                let sub = self.extended_subsection(c)?;
                return self.split_dotted(name, Some(sub));
            }
            if !is_key_char(c) && c != b'.' {
                return Err(self.bad());
            }
            name.push(c.to_ascii_lowercase());
        }
        if name.is_empty() {
            return Err(self.bad());
        }
        self.split_dotted(name, None)
    }

    /// `[a.b]` is section `a`, subsection `b`; `[a.b "c"]` is section `a`, subsection `b.c`
    /// as git stores it (`a.b.c.key`): warden treats the part after the first dot as the
    /// subsection either way, which is how git matches keys (`section.<anything>.key`).
    fn split_dotted(
        &self,
        name: Vec<u8>,
        quoted: Option<String>,
    ) -> Result<(String, Option<String>), String> {
        let name = String::from_utf8(name).map_err(|_| self.bad())?;
        let (section, dotted) = match name.split_once('.') {
            Some((s, rest)) => (s.to_string(), Some(rest.to_string())),
            None => (name, None),
        };
        let subsection = match (dotted, quoted) {
            (Some(d), Some(q)) => Some(format!("{d}.{q}")),
            (Some(d), None) => Some(d),
            (None, q) => q,
        };
        Ok((section, subsection))
    }

    /// git's `get_extended_base_var`: blanks, then `"sub"` with `\x` escapes, then `]`.
    fn extended_subsection(&mut self, mut c: u8) -> Result<String, String> {
        loop {
            if c == b'\n' {
                return Err(self.bad());
            }
            c = self.next();
            if !is_space(c) {
                break;
            }
        }
        if c != b'"' {
            return Err(self.bad());
        }
        let mut sub = Vec::new();
        loop {
            let mut c = self.next();
            if c == b'\n' {
                return Err(self.bad());
            }
            if c == b'"' {
                break;
            }
            if c == b'\\' {
                c = self.next();
                if c == b'\n' {
                    return Err(self.bad());
                }
            }
            sub.push(c);
        }
        if self.next() != b']' {
            return Err(self.bad());
        }
        String::from_utf8(sub).map_err(|_| self.bad())
    }

    /// git's `get_value` and `parse_value`, starting at the key's first letter.
    fn key_and_value(&mut self, first: u8) -> Result<(String, Option<String>), String> {
        let mut key = vec![first.to_ascii_lowercase()];
        let mut c;
        loop {
            c = self.next();
            if self.eof || !is_key_char(c) {
                break;
            }
            key.push(c.to_ascii_lowercase());
        }
        while c == b' ' || c == b'\t' {
            c = self.next();
        }
        let key = String::from_utf8(key).map_err(|_| self.bad())?;
        if c == b'\n' {
            return Ok((key, None));
        }
        if c != b'=' {
            return Err(self.bad());
        }
        let mut value: Vec<u8> = Vec::new();
        let mut quote = false;
        let mut comment = false;
        let mut trim_len = 0usize;
        loop {
            let mut c = self.next();
            if c == b'\n' {
                if quote {
                    return Err(self.bad());
                }
                if trim_len > 0 {
                    value.truncate(trim_len);
                }
                let value = String::from_utf8(value).map_err(|_| {
                    format!(
                        "config line {} has a value that is not UTF-8",
                        self.line - 1
                    )
                })?;
                return Ok((key, Some(value)));
            }
            if comment {
                continue;
            }
            if is_space(c) && !quote {
                if trim_len == 0 {
                    trim_len = value.len();
                }
                if !value.is_empty() {
                    value.push(c);
                }
                continue;
            }
            if !quote && (c == b';' || c == b'#') {
                comment = true;
                continue;
            }
            trim_len = 0;
            if c == b'\\' {
                c = self.next();
                c = match c {
                    b'\n' => continue,
                    b't' => b'\t',
                    b'b' => 0x08,
                    b'n' => b'\n',
                    b'\\' | b'"' => c,
                    _ => return Err(self.bad()),
                };
                value.push(c);
                continue;
            }
            if c == b'"' {
                quote = !quote;
                continue;
            }
            value.push(c);
        }
    }
}

/// Sections whose keys never name a program (or whose only such keys are listed in
/// [`DANGEROUS`]): anything else is refused as unknown.
const SAFE_SECTIONS: &[&str] = &[
    "add",
    "advice",
    "alias",
    "am",
    "apply",
    "archive",
    "attr",
    "author",
    "blame",
    "branch",
    "checkout",
    "clean",
    "clone",
    "color",
    "column",
    "commit",
    "committer",
    "core",
    "credential",
    "diff",
    "extensions",
    "feature",
    "fetch",
    "format",
    "fsck",
    "gc",
    "grep",
    "help",
    "http",
    "i18n",
    "index",
    "init",
    "lfs",
    "log",
    "mailmap",
    "maintenance",
    "merge",
    "notes",
    "pack",
    "pretty",
    "protocol",
    "pull",
    "push",
    "rebase",
    "remote",
    "repack",
    "rerere",
    "revert",
    "safe",
    "showbranch",
    "sparse",
    "splitindex",
    "ssh",
    "stash",
    "status",
    "submodule",
    "tag",
    "transfer",
    "url",
    "user",
    "versionsort",
    "worktree",
];

/// `(section, key, with a subsection only?)`: keys that make git run a program or read
/// configuration warden did not inspect. `*` matches any key of the section.
const DANGEROUS: &[(&str, &str, Subsection)] = &[
    ("core", "fsmonitor", Subsection::Any),
    ("core", "pager", Subsection::Any),
    ("core", "editor", Subsection::Any),
    ("core", "askpass", Subsection::Any),
    ("core", "sshcommand", Subsection::Any),
    ("core", "hookspath", Subsection::Any),
    ("core", "gitproxy", Subsection::Any),
    ("core", "alternaterefscommand", Subsection::Any),
    ("core", "worktree", Subsection::Any),
    ("core", "attributesfile", Subsection::Any),
    ("diff", "external", Subsection::Any),
    ("diff", "tool", Subsection::Any),
    ("diff", "guitool", Subsection::Any),
    ("diff", "textconv", Subsection::Any),
    ("diff", "command", Subsection::Any),
    ("merge", "tool", Subsection::Any),
    ("merge", "guitool", Subsection::Any),
    ("merge", "verifysignatures", Subsection::Any),
    ("merge", "*", Subsection::Required),
    ("credential", "helper", Subsection::Any),
    ("log", "showsignature", Subsection::Any),
    ("commit", "gpgsign", Subsection::Any),
    ("tag", "gpgsign", Subsection::Any),
    ("tag", "forcesignannotated", Subsection::Any),
    ("push", "gpgsign", Subsection::Any),
    ("rebase", "exec", Subsection::Any),
    ("remote", "receivepack", Subsection::Any),
    ("remote", "uploadpack", Subsection::Any),
    ("remote", "proxy", Subsection::Any),
    ("remote", "vcs", Subsection::Any),
    ("init", "templatedir", Subsection::Any),
    ("ssh", "variant", Subsection::Any),
    ("help", "browser", Subsection::Any),
    ("help", "format", Subsection::Any),
    ("http", "proxy", Subsection::Any),
];

#[derive(Clone, Copy, PartialEq, Eq)]
enum Subsection {
    Any,
    /// Only `section.<name>.key` (a driver definition), not `section.key`.
    Required,
}

/// Why an entry is not safe, or `None`.
fn judge(entry: &Entry) -> Option<String> {
    let name = entry.name();
    let section = entry.section.as_str();
    if matches!(section, "include" | "includeif") {
        return Some(format!(
            "`{name}` includes another config file, which warden would not have read"
        ));
    }
    if !SAFE_SECTIONS.contains(&section) {
        return Some(format!(
            "`{name}` is in the section [{section}], which warden does not know to be safe \
             (some sections name programs for git to run: filter, gpg, pager, difftool…)"
        ));
    }
    let dangerous = DANGEROUS.iter().any(|(s, k, sub)| {
        *s == section
            && (*k == "*" || *k == entry.key)
            && (*sub == Subsection::Any || entry.subsection.is_some())
    });
    // `submodule.<name>.update = !command` runs the command.
    let shell_update = section == "submodule"
        && entry.key == "update"
        && entry.value.as_deref().is_some_and(|v| v.starts_with('!'));
    if dangerous || shell_update {
        return Some(format!("`{name}` makes git run a program"));
    }
    transport(entry).then(|| {
        format!(
            "`{name}` names a transport, a URL rewrite or a promisor remote (a lazy fetch of a \
             missing object would reach it; `ext::` runs a command)"
        )
    })
}

/// Keys that allow transports, rewrite URLs, or make a remote a promisor that git fetches
/// missing objects from.
fn transport(entry: &Entry) -> bool {
    let key = entry.key.as_str();
    match entry.section.as_str() {
        // Only the wire protocol's version says nothing about what may run.
        "protocol" => !(key == "version" && entry.subsection.is_none()),
        "url" => true,
        "remote" => matches!(key, "promisor" | "partialclonefilter"),
        "extensions" => key == "partialclone",
        "core" => key == "partialclonefilter",
        "fetch" => matches!(key, "uriprotocols" | "bundleuri" | "bundlecreationtoken"),
        "transfer" => key == "bundleuri",
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entries(text: &str) -> Vec<Entry> {
        parse(text.as_bytes()).unwrap_or_else(|e| panic!("{text:?}: {e}"))
    }

    fn names(text: &str) -> Vec<String> {
        entries(text).iter().map(Entry::name).collect()
    }

    #[test]
    fn reads_what_git_reads() {
        assert_eq!(
            names("[core]\n\tbare = false\n[remote \"Origin\"]\n\turl = x\n"),
            ["core.bare", "remote.Origin.url"]
        );
        // Case of sections and keys does not matter; subsections keep theirs.
        assert_eq!(names("[CoRe]\n\tPaGeR = less\n"), ["core.pager"]);
        // Old-style dotted subsection, same-line key, keys without a value.
        assert_eq!(
            names("[branch.main] remote = origin\n\tbare\n"),
            ["branch.main.remote", "branch.main.bare"]
        );
        // A backslash ends nothing inside a comment: the next line is a real entry.
        assert_eq!(
            names("[core]\n# harmless \\\n\tpager = sh -c x\n"),
            ["core.pager"]
        );
        // ...while a value's trailing backslash joins the next line to the value.
        let e = entries("[alias]\n\tx = one \\\n  pager = two\n");
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].value.as_deref(), Some("one   pager = two"));
        // CRLF, a BOM, comments after values, quotes and escapes.
        let e = entries("\u{feff}[user]\r\n\tname = \"A \\\"B\\\"\" ; c\r\n\temail=x#y\r\n");
        assert_eq!(e[0].value.as_deref(), Some("A \"B\""));
        assert_eq!(e[1].value.as_deref(), Some("x"));
        // Escaped quote in a subsection.
        assert_eq!(names("[diff \"a\\\"b\"]\n\tx = 1\n"), ["diff.a\"b.x"]);
    }

    #[test]
    fn refuses_what_git_refuses() {
        for bad in [
            "[core\n",
            "[core]\n\tpager = \"open\n",
            "[core]\n\tx = \\q\n",
            "[core]\n\t1x = y\n",
            "key = value\n",
            "[core \"a\"x]\n",
            "[core]\n\tpager # no equals\n",
            "[]\n",
        ] {
            assert!(parse(bad.as_bytes()).is_err(), "{bad:?} parsed");
        }
        assert!(parse(b"\xef\xbb[core]\n").is_err(), "a partial BOM parsed");
    }

    #[test]
    fn judges_by_allowlist() {
        let safe = "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\
                    [remote \"origin\"]\n\turl = https://example.com/x.git\n\
                    [branch \"main\"]\n\tremote = origin\n[user]\n\tname = A\n\
                    [diff]\n\tcolorMoved = zebra\n[diff \"rust\"]\n\txfuncname = fn\n\
                    [protocol]\n\tversion = 2\n[extensions]\n\tworktreeConfig = true\n";
        assert_eq!(first_unsafe(&entries(safe)), None);
        for (cfg, needle) in [
            ("[core]\n\tfsmonitor = ./evil.sh\n", "core.fsmonitor"),
            ("[CORE]\n\tPager = less\n", "core.pager"),
            ("[diff \"x\"]\n\ttextconv = cat\n", "diff.x.textconv"),
            ("[diff]\n\texternal = ./x\n", "diff.external"),
            ("[filter \"lfs\"]\n\tclean = x\n", "[filter]"),
            ("[FILTER \"x\"]\n\tsmudge = x\n", "[filter]"),
            ("[include]\n\tpath = other\n", "includes"),
            ("[includeIf \"gitdir:x\"]\n\tpath = o\n", "includes"),
            ("[core] sshCommand = x\n", "core.sshcommand"),
            ("[merge \"ours\"]\n\tdriver = x\n", "merge.ours.driver"),
            ("[submodule \"s\"]\n\tupdate = !sh\n", "submodule.s.update"),
            ("[trace2]\n\teventTarget = /tmp/x\n", "[trace2]"),
            ("[gpg]\n\tprogram = x\n", "[gpg]"),
            ("[pager]\n\tlog = x\n", "[pager]"),
            ("[core]\n# c \\\n\tpager = x\n", "core.pager"),
            (
                "[protocol \"ext\"]\n\tallow = always\n",
                "protocol.ext.allow",
            ),
            ("[protocol]\n\tallow = always\n", "protocol.allow"),
            ("[remote \"origin\"]\n\tpromisor = true\n", "promisor"),
            (
                "[remote \"o\"]\n\tpartialCloneFilter = blob:none\n",
                "remote.o.partialclonefilter",
            ),
            (
                "[extensions]\n\tpartialClone = origin\n",
                "extensions.partialclone",
            ),
            ("[fetch]\n\turiProtocols = ext\n", "fetch.uriprotocols"),
            ("[uploadpack]\n\tpackObjectsHook = sh\n", "[uploadpack]"),
            ("[url \"ext::sh \"]\n\tinsteadOf = https://\n", "insteadof"),
            // A value's comment ending in a backslash continues nothing either.
            (
                "[core]\n\tbare = no # c \\\n[filter \"x\"]\n\tclean = sh\n",
                "[filter]",
            ),
        ] {
            let why = first_unsafe(&entries(cfg)).unwrap_or_default();
            assert!(why.contains(needle), "{cfg:?}: {why:?}");
        }
    }
}

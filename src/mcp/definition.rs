//! A configured MCP server as warden will run or reach it, and the content hash a grant pins.
//!
//! A stdio server is treated like a skill whose process lives on: its folder (`dir`) is read
//! whole (no links, no special files), its manifest is `mcp.toml` there or the config entry's
//! `permissions`, and it runs in a fresh sandbox over a private copy of exactly the bytes that
//! were hashed ([`crate::skills::jail`]). The hash covers the command and its arguments, the
//! manifest and every file of the folder, so a server whose code or manifest changed after
//! the grant is not started until the user grants it again. An HTTP server has no local code:
//! its grant pins the URL and the header templates.

use super::config::ServerConfig;
use crate::sandbox::Backend;
use crate::skills::manifest::{Bounds, Manifest};
use crate::skills::tree::SkillTree;
use crate::skills::{Skill, Source};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// The manifest file in a server's folder.
pub const MANIFEST_FILE: &str = "mcp.toml";

/// One server, checked.
#[derive(Clone, Debug)]
pub struct ServerDef {
    pub name: String,
    pub kind: ServerKind,
    /// `sha256:…` of everything the grant covers.
    pub hash: String,
    pub config: ServerConfig,
}

#[derive(Clone, Debug)]
pub enum ServerKind {
    Stdio(Box<StdioServer>),
    Http(HttpServer),
}

#[derive(Clone, Debug)]
pub struct StdioServer {
    /// The command and its arguments, checked by the run's policy before every start.
    pub argv: Vec<String>,
    /// The server as the skill jail runs it: its manifest and its files.
    pub skill: Skill,
    pub backend: Backend,
    /// Where the manifest came from (for the review).
    pub manifest_source: String,
}

#[derive(Clone, Debug)]
pub struct HttpServer {
    pub url: String,
    /// Header templates; `{secret:NAME}` is filled at connect time.
    pub headers: BTreeMap<String, String>,
}

impl ServerDef {
    /// Read and check `[mcp.servers.NAME]` (and its folder) as they are now.
    pub fn load(
        name: &str,
        config: &ServerConfig,
        bounds: &Bounds,
        default_backend: Backend,
    ) -> Result<ServerDef, String> {
        let what = format!("the MCP server {name}");
        let (kind, hash) = match (&config.command, &config.url) {
            (Some(command), None) => {
                let stdio = load_stdio(name, command, config, bounds, default_backend)
                    .map_err(|e| format!("{what}: {e}"))?;
                let hash = hash_parts(&[
                    "stdio",
                    name,
                    &serde_json::to_string(&stdio.argv).unwrap_or_default(),
                    &config
                        .permissions
                        .as_ref()
                        .map(|t| t.to_string())
                        .unwrap_or_default(),
                    &stdio.skill.tree.hash(),
                ]);
                (ServerKind::Stdio(Box::new(stdio)), hash)
            }
            (None, Some(url)) => {
                let http = HttpServer {
                    url: url.clone(),
                    headers: config.headers.clone(),
                };
                let hash = hash_parts(&[
                    "http",
                    name,
                    url,
                    &serde_json::to_string(&http.headers).unwrap_or_default(),
                ]);
                (ServerKind::Http(http), hash)
            }
            _ => return Err(format!("{what}: needs command or url (not both)")),
        };
        let mut def = ServerDef {
            name: name.to_string(),
            kind,
            hash: hash.clone(),
            config: config.clone(),
        };
        if let ServerKind::Stdio(stdio) = &mut def.kind {
            stdio.skill.hash = hash;
        }
        Ok(def)
    }

    /// `stdio, runs python3 server.py in the host jail` / `HTTP, https://…`.
    pub fn summary(&self) -> String {
        match &self.kind {
            ServerKind::Stdio(s) => format!(
                "stdio: {} in the {} sandbox",
                shell_words::join(&s.argv),
                s.backend
            ),
            ServerKind::Http(h) => format!("streamable HTTP: {}", h.url),
        }
    }
}

fn load_stdio(
    name: &str,
    command: &str,
    config: &ServerConfig,
    bounds: &Bounds,
    default_backend: Backend,
) -> Result<StdioServer, String> {
    let (tree, dir) = match &config.dir {
        Some(dir) => {
            let dir = crate::config::expand_home(dir);
            let tree = SkillTree::read(&dir)
                .map_err(|e| format!("reading its folder {}: {e}", dir.display()))?;
            (tree, dir)
        }
        None => (SkillTree::from_entries(Vec::new())?, PathBuf::from("/")),
    };
    let from_file = tree.file(MANIFEST_FILE);
    let (manifest, manifest_source) = match (from_file, &config.permissions) {
        (Some(_), Some(_)) => {
            return Err(format!(
                "its folder has {MANIFEST_FILE} and the config gives permissions too; keep one"
            ))
        }
        (Some(bytes), None) => {
            let text =
                std::str::from_utf8(bytes).map_err(|_| format!("{MANIFEST_FILE} is not UTF-8"))?;
            (
                Manifest::parse(text).map_err(|e| e.replace("skill.toml", MANIFEST_FILE))?,
                format!("{}/{MANIFEST_FILE}", dir.display()),
            )
        }
        (None, Some(table)) => (
            Manifest {
                run: None,
                permissions: toml::Value::Table(table.clone())
                    .try_into()
                    .map_err(|e| format!("mcp.servers.{name}.permissions: {e}"))?,
            },
            format!("mcp.servers.{name}.permissions in the config"),
        ),
        (None, None) => (Manifest::default(), "none (the default policy)".into()),
    };
    if manifest.run.is_some() {
        return Err(format!(
            "`run` in {MANIFEST_FILE}: the command is the config's command and args"
        ));
    }
    manifest
        .validate(bounds)
        .map_err(|e| e.replace("skill.toml", MANIFEST_FILE))?;
    let mut argv = vec![command.to_string()];
    argv.extend(config.args.iter().cloned());
    let skill = Skill {
        // The run folder and container are named after it.
        name: format!("mcp-{name}"),
        description: format!("MCP server {name}"),
        source: Source::Workspace,
        dir,
        manifest,
        tree,
        hash: String::new(),
    };
    Ok(StdioServer {
        argv,
        skill,
        backend: config.backend.unwrap_or(default_backend),
        manifest_source,
    })
}

fn hash_parts(parts: &[&str]) -> String {
    let mut h = Sha256::new();
    h.update(b"warden-mcp-server-v1\n");
    for part in parts {
        h.update(format!("{}\n", part.len()).as_bytes());
        h.update(part.as_bytes());
        h.update(b"\n");
    }
    format!("sha256:{}", hex::encode(h.finalize()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn bounds() -> Bounds {
        Bounds {
            timeout_secs: 60,
            limits: Default::default(),
        }
    }

    fn stdio(dir: &Path) -> ServerConfig {
        ServerConfig {
            command: Some("python3".into()),
            args: vec!["server.py".into()],
            dir: Some(dir.to_path_buf()),
            ..Default::default()
        }
    }

    #[test]
    fn the_hash_covers_files_manifest_and_command() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("server.py"), "print(1)\n").unwrap();
        std::fs::write(
            dir.path().join(MANIFEST_FILE),
            "[permissions]\ninterpreters = [\"python3\"]\n",
        )
        .unwrap();
        let load = |config: &ServerConfig| {
            ServerDef::load("notes", config, &bounds(), Backend::Host).unwrap()
        };
        let first = load(&stdio(dir.path()));
        let ServerKind::Stdio(s) = &first.kind else {
            panic!("stdio")
        };
        assert_eq!(s.argv, ["python3", "server.py"]);
        assert_eq!(s.skill.manifest.permissions.interpreters, ["python3"]);
        assert_eq!(s.skill.hash, first.hash);
        assert_eq!(load(&stdio(dir.path())).hash, first.hash);

        std::fs::write(dir.path().join("server.py"), "print(2)\n").unwrap();
        let code_changed = load(&stdio(dir.path())).hash;
        assert_ne!(code_changed, first.hash);
        std::fs::write(
            dir.path().join(MANIFEST_FILE),
            "[permissions]\ninterpreters = [\"python3\"]\npaths.read = [\"notes\"]\n",
        )
        .unwrap();
        let manifest_changed = load(&stdio(dir.path())).hash;
        assert_ne!(manifest_changed, code_changed);
        let mut other_args = stdio(dir.path());
        other_args.args.push("--debug".into());
        assert_ne!(load(&other_args).hash, manifest_changed);
        // The tool decisions are the user's, not part of what the server is.
        let mut rules = stdio(dir.path());
        rules
            .tools
            .insert("x".into(), crate::policy::Decision::Deny);
        assert_eq!(load(&rules).hash, manifest_changed);
    }

    #[test]
    fn manifests_are_checked() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("server.py"), "").unwrap();
        let mut both = stdio(dir.path());
        both.permissions = Some(toml::from_str("interpreters = [\"python3\"]").unwrap());
        std::fs::write(dir.path().join(MANIFEST_FILE), "").unwrap();
        let err = ServerDef::load("a", &both, &bounds(), Backend::Host).unwrap_err();
        assert!(err.contains("keep one"), "{err}");

        std::fs::write(dir.path().join(MANIFEST_FILE), "run = [\"sh\"]\n").unwrap();
        let err = ServerDef::load("a", &stdio(dir.path()), &bounds(), Backend::Host).unwrap_err();
        assert!(err.contains("`run`"), "{err}");

        std::fs::write(
            dir.path().join(MANIFEST_FILE),
            "[permissions]\ninterpreters = [\"lua\"]\n",
        )
        .unwrap();
        let err = ServerDef::load("a", &stdio(dir.path()), &bounds(), Backend::Host).unwrap_err();
        assert!(err.contains("mcp.toml") && err.contains("lua"), "{err}");

        std::os::unix::fs::symlink("/etc/passwd", dir.path().join("link")).unwrap();
        let err = ServerDef::load("a", &stdio(dir.path()), &bounds(), Backend::Host).unwrap_err();
        assert!(err.contains("reading its folder"), "{err}");
    }

    #[test]
    fn config_permissions_and_http_servers() {
        let inline = ServerConfig {
            command: Some("mcp-time".into()),
            permissions: Some(toml::from_str("paths.read = [\"notes\"]").unwrap()),
            ..Default::default()
        };
        let def = ServerDef::load("time", &inline, &bounds(), Backend::Docker).unwrap();
        let ServerKind::Stdio(s) = &def.kind else {
            panic!("stdio")
        };
        assert_eq!(s.backend, Backend::Docker);
        assert_eq!(s.skill.manifest.permissions.paths.read, ["notes"]);
        assert!(s.manifest_source.contains("mcp.servers.time.permissions"));

        let http = ServerConfig {
            url: Some("https://mcp.example.com/mcp".into()),
            ..Default::default()
        };
        let a = ServerDef::load("docs", &http, &bounds(), Backend::Host).unwrap();
        let mut moved = http.clone();
        moved.url = Some("https://elsewhere.example/mcp".into());
        let b = ServerDef::load("docs", &moved, &bounds(), Backend::Host).unwrap();
        assert_ne!(a.hash, b.hash);
        assert!(a.summary().contains("mcp.example.com"));
    }
}

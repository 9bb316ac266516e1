//! The jailed process's environment: an explicit allowlist, never anything inherited from warden
//! (whose environment holds API keys and the bot token), and the fixed `PATH` that `argv[0]` is
//! resolved against in the parent, so the child does no `PATH` search.

use crate::sandbox::SandboxError;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The only `PATH` a jailed program sees, and the one its `argv[0]` is looked up in.
pub const JAIL_PATH: &str = crate::policy::SANDBOX_PATH;

/// Build the environment: the fixed base, then `extra` (from `JailSpec.env`).
///
/// Names are validated so a caller cannot smuggle a second assignment in, and `PATH` cannot be
/// replaced because the parent resolved the program against [`JAIL_PATH`].
pub fn build(
    workspace: &Path,
    tmpdir: &Path,
    extra: &[(String, String)],
) -> Result<Vec<CString>, SandboxError> {
    let mut vars: Vec<(String, String)> = vec![
        ("PATH".into(), JAIL_PATH.into()),
        ("HOME".into(), path_string(workspace)?),
        ("LANG".into(), "C.UTF-8".into()),
        ("TERM".into(), "dumb".into()),
        ("TMPDIR".into(), path_string(tmpdir)?),
        ("GIT_CONFIG_NOSYSTEM".into(), "1".into()),
        ("GIT_TERMINAL_PROMPT".into(), "0".into()),
        // git fetches no missing object on its own, and reaches no transport but a local path,
        // whatever a repository's config allows (`protocol.ext.allow` beats the command line).
        ("GIT_NO_LAZY_FETCH".into(), "1".into()),
        ("GIT_ALLOW_PROTOCOL".into(), "file".into()),
        ("PAGER".into(), "cat".into()),
        ("GIT_PAGER".into(), "cat".into()),
    ];
    for (name, value) in extra {
        validate_name(name)?;
        if name == "PATH" {
            return Err(SandboxError::Setup(format!(
                "the jail's PATH is fixed to {JAIL_PATH}; it cannot be set through the jail environment"
            )));
        }
        if value.contains('\0') {
            return Err(SandboxError::Setup(format!(
                "environment variable {name} contains a NUL byte"
            )));
        }
        match vars.iter_mut().find(|(n, _)| n == name) {
            Some(slot) => slot.1 = value.clone(),
            None => vars.push((name.clone(), value.clone())),
        }
    }
    vars.into_iter()
        .map(|(n, v)| {
            CString::new(format!("{n}={v}"))
                .map_err(|_| SandboxError::Setup(format!("environment variable {n} contains NUL")))
        })
        .collect()
}

/// `base` (a built environment) with `extra` set for one process: replaced where a name is
/// already there, added otherwise. `PATH` stays fixed.
pub fn with_extra(
    base: &[CString],
    extra: &[(String, String)],
) -> Result<Vec<CString>, SandboxError> {
    let mut vars = base.to_vec();
    for (name, value) in extra {
        validate_name(name)?;
        if name == "PATH" {
            return Err(SandboxError::Setup(format!(
                "the jail's PATH is fixed to {JAIL_PATH}; it cannot be set for a command"
            )));
        }
        let entry = CString::new(format!("{name}={value}")).map_err(|_| {
            SandboxError::Setup(format!("environment variable {name} contains a NUL byte"))
        })?;
        let prefix = format!("{name}=");
        match vars
            .iter_mut()
            .find(|v| v.as_bytes().starts_with(prefix.as_bytes()))
        {
            Some(slot) => *slot = entry,
            None => vars.push(entry),
        }
    }
    Ok(vars)
}

fn validate_name(name: &str) -> Result<(), SandboxError> {
    let ok = !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(SandboxError::Setup(format!(
            "invalid environment variable name {name:?} for the jail"
        )))
    }
}

fn path_string(path: &Path) -> Result<String, SandboxError> {
    path.to_str()
        .map(str::to_owned)
        .ok_or_else(|| SandboxError::Setup(format!("path {} is not valid UTF-8", path.display())))
}

/// Resolve `argv[0]` to an absolute path: relative to `cwd` when it contains a `/`, else the
/// first executable regular file in [`JAIL_PATH`]. `None` when nothing matches (exit 127).
pub fn resolve_program(argv0: &str, cwd: &Path) -> Option<PathBuf> {
    if argv0.is_empty() {
        return None;
    }
    if argv0.contains('/') {
        let path = cwd.join(argv0);
        // Existence only: whether it may be executed is for the kernel (and Landlock) to say.
        return path.exists().then_some(path);
    }
    JAIL_PATH
        .split(':')
        .map(|dir| Path::new(dir).join(argv0))
        .find(|candidate| is_executable_file(candidate))
}

fn is_executable_file(path: &Path) -> bool {
    std::fs::metadata(path)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// A path as a C string for the child (no allocation in the child).
pub fn c_path(path: &Path) -> Result<CString, SandboxError> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| SandboxError::Setup(format!("path {} contains NUL", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(env: &[CString]) -> Vec<String> {
        env.iter()
            .map(|v| v.to_str().unwrap().split('=').next().unwrap().to_string())
            .collect()
    }

    #[test]
    fn base_environment_is_the_allowlist_only() {
        // Whatever warden's own environment holds must not appear.
        std::env::set_var("WARDEN_TEST_SECRET_SHOULD_NOT_LEAK", "x");
        let env = build(Path::new("/ws"), Path::new("/tmp/t"), &[]).unwrap();
        assert_eq!(
            names(&env),
            [
                "PATH",
                "HOME",
                "LANG",
                "TERM",
                "TMPDIR",
                "GIT_CONFIG_NOSYSTEM",
                "GIT_TERMINAL_PROMPT",
                "GIT_NO_LAZY_FETCH",
                "GIT_ALLOW_PROTOCOL",
                "PAGER",
                "GIT_PAGER"
            ]
        );
        let all: Vec<&str> = env.iter().map(|v| v.to_str().unwrap()).collect();
        assert!(all.contains(&"HOME=/ws"));
        assert!(all.contains(&"TMPDIR=/tmp/t"));
        assert!(all.contains(&"PATH=/usr/local/bin:/usr/bin:/bin"));
        assert!(!all.iter().any(|v| v.contains("WARDEN_TEST_SECRET")));
    }

    #[test]
    fn spec_env_adds_and_overrides_but_not_path() {
        let extra = vec![
            ("LANG".to_string(), "de_DE.UTF-8".to_string()),
            ("EDITOR".to_string(), "true".to_string()),
        ];
        let env = build(Path::new("/ws"), Path::new("/t"), &extra).unwrap();
        let all: Vec<&str> = env.iter().map(|v| v.to_str().unwrap()).collect();
        assert!(all.contains(&"LANG=de_DE.UTF-8"));
        assert!(all.contains(&"EDITOR=true"));
        assert_eq!(all.iter().filter(|v| v.starts_with("LANG=")).count(), 1);

        let path = vec![("PATH".to_string(), "/evil".to_string())];
        let err = build(Path::new("/ws"), Path::new("/t"), &path).unwrap_err();
        assert!(err.to_string().contains("PATH is fixed"), "{err}");
    }

    #[test]
    fn invalid_names_are_rejected() {
        for bad in ["", "A=B", "1X", "A B", "A\0"] {
            let extra = vec![(bad.to_string(), "v".to_string())];
            assert!(
                build(Path::new("/ws"), Path::new("/t"), &extra).is_err(),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn programs_resolve_against_the_fixed_path() {
        let sh = resolve_program("sh", Path::new("/")).expect("sh in /usr/bin or /bin");
        assert!(sh.is_absolute());
        assert!(JAIL_PATH.split(':').any(|d| sh.starts_with(d)), "{sh:?}");
        assert_eq!(
            resolve_program("no-such-program-warden", Path::new("/")),
            None
        );
        assert_eq!(resolve_program("", Path::new("/")), None);
        assert_eq!(
            resolve_program("./true", Path::new("/bin")),
            Some(PathBuf::from("/bin/./true"))
        );
        assert_eq!(resolve_program("./missing-x", Path::new("/bin")), None);
    }
}

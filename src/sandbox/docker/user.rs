//! Which uid:gid the session container runs as.
//!
//! Files the container writes into the bind-mounted workspace keep that uid:gid on the host,
//! so the choice decides who can use them afterwards:
//!
//! 1. warden runs as a normal user → the container runs as that same uid:gid, so everything it
//!    writes belongs to the user, exactly as with the host backend.
//! 2. warden runs as root over a workspace owned by a normal user (`sudo warden …`) → the
//!    container runs as the workspace owner, so the owner keeps owning their files.
//! 3. warden runs as root over a root-owned workspace → the container runs as 65534:65534
//!    (`nobody`), never as root. Root on the host can use whatever `nobody` writes, but `nobody`
//!    can only write into the workspace when the directory lets it (owned by 65534 or
//!    world-writable); otherwise warden refuses with the `chown` that fixes it rather than
//!    quietly running the container as root.

use crate::sandbox::SandboxError;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// The unprivileged identity used when the only alternative would be root.
pub const NOBODY: u32 = 65534;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ContainerUser {
    pub uid: u32,
    pub gid: u32,
}

impl ContainerUser {
    /// The `uid:gid` string the Engine API takes.
    pub fn spec(&self) -> String {
        format!("{}:{}", self.uid, self.gid)
    }

    /// The identity for a container over `workspace`, chosen as described in the module docs.
    pub fn for_workspace(workspace: &Path) -> Result<ContainerUser, SandboxError> {
        let meta = std::fs::metadata(workspace).map_err(|e| {
            SandboxError::Setup(format!(
                "cannot stat workspace {}: {e}",
                workspace.display()
            ))
        })?;
        if !meta.is_dir() {
            return Err(SandboxError::Setup(format!(
                "workspace {} is not a directory",
                workspace.display()
            )));
        }
        let euid = nix::unistd::geteuid().as_raw();
        let egid = nix::unistd::getegid().as_raw();
        choose(euid, egid, meta.uid(), meta.gid(), meta.mode(), workspace)
    }
}

fn choose(
    euid: u32,
    egid: u32,
    owner_uid: u32,
    owner_gid: u32,
    mode: u32,
    workspace: &Path,
) -> Result<ContainerUser, SandboxError> {
    if euid != 0 {
        return Ok(ContainerUser {
            uid: euid,
            gid: egid,
        });
    }
    if owner_uid != 0 {
        return Ok(ContainerUser {
            uid: owner_uid,
            gid: owner_gid,
        });
    }
    let nobody = ContainerUser {
        uid: NOBODY,
        gid: NOBODY,
    };
    let writable = mode & 0o002 != 0 || (owner_gid == NOBODY && mode & 0o020 != 0);
    if writable {
        Ok(nobody)
    } else {
        Err(SandboxError::Setup(format!(
            "workspace {ws} belongs to root, and the container never runs as root: it would run \
             as {NOBODY}:{NOBODY} (nobody), which cannot write there. Run \
             `chown -R {NOBODY}:{NOBODY} {ws}` (root keeps full access) or use a workspace owned \
             by a normal user",
            ws = workspace.display()
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pick(euid: u32, owner: u32, gid: u32, mode: u32) -> Result<ContainerUser, SandboxError> {
        choose(euid, euid, owner, gid, mode, Path::new("/ws"))
    }

    #[test]
    fn a_normal_user_runs_the_container_as_themself() {
        let u = pick(1000, 0, 0, 0o755).unwrap();
        assert_eq!((u.uid, u.gid), (1000, 1000));
    }

    #[test]
    fn root_over_a_user_workspace_runs_as_its_owner() {
        let u = pick(0, 1001, 1002, 0o700).unwrap();
        assert_eq!((u.uid, u.gid), (1001, 1002));
        assert_eq!(u.spec(), "1001:1002");
    }

    #[test]
    fn root_over_a_root_workspace_never_runs_as_root() {
        let u = pick(0, 0, 0, 0o777).unwrap();
        assert_eq!((u.uid, u.gid), (NOBODY, NOBODY));
        let err = pick(0, 0, 0, 0o755).unwrap_err().to_string();
        assert!(err.contains("chown -R 65534:65534 /ws"), "{err}");
        let group_writable = pick(0, 0, NOBODY, 0o775).unwrap();
        assert_eq!(group_writable.uid, NOBODY);
    }
}

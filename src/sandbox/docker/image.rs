//! Building the sandbox images from `sandbox-images/NAME/` through the Engine API.
//!
//! The build context is assembled by warden as a tar archive: the folder's files plus the host
//! files its `host-files` list names (for `minimal`: the static `/bin/busybox` from Debian's
//! `busybox-static`), so `FROM scratch` images build with no registry at all. The folders
//! shipped in the repository are also compiled into the binary, so an installed warden can
//! build them without a checkout.

use bollard::query_parameters::BuildImageOptionsBuilder;
use bollard::Docker;
use futures::StreamExt;
use std::path::{Path, PathBuf};

/// Images are tagged `warden-sandbox:NAME`.
pub const REPOSITORY: &str = "warden-sandbox";
const HOST_FILES: &str = "host-files";

/// The image folders shipped with warden: (name, [(file, contents)]).
const EMBEDDED: &[(&str, &[(&str, &str)])] = &[
    (
        "minimal",
        &[
            (
                "Dockerfile",
                include_str!("../../../sandbox-images/minimal/Dockerfile"),
            ),
            (
                "passwd",
                include_str!("../../../sandbox-images/minimal/passwd"),
            ),
            (
                "group",
                include_str!("../../../sandbox-images/minimal/group"),
            ),
            (
                HOST_FILES,
                include_str!("../../../sandbox-images/minimal/host-files"),
            ),
        ],
    ),
    (
        "debian",
        &[(
            "Dockerfile",
            include_str!("../../../sandbox-images/debian/Dockerfile"),
        )],
    ),
];

#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    #[error("no sandbox image {name:?}: looked for {searched} and the images built into warden ({known})")]
    Unknown {
        name: String,
        searched: String,
        known: String,
    },
    #[error("image name {0:?} may only contain lowercase letters, digits, '.', '_' and '-'")]
    BadName(String),
    #[error("{path} is missing on this machine: the image needs it (apt-get install {package})")]
    MissingHostFile { path: PathBuf, package: String },
    #[error(
        "{path} is dynamically linked and cannot run in a FROM-scratch image \
         (apt-get install {package} for a static one)"
    )]
    NotStatic { path: PathBuf, package: String },
    #[error("invalid line in {HOST_FILES}: {0:?} (expected NAME HOST-PATH PACKAGE)")]
    BadHostFiles(String),
    #[error("cannot read the build context: {0}")]
    Io(#[from] std::io::Error),
    #[error("building {tag} failed: {reason}")]
    Build { tag: String, reason: String },
}

/// The files of one image's build context.
#[derive(Debug)]
pub struct Context {
    pub name: String,
    /// Where the files came from, for messages.
    pub origin: String,
    /// (path in the context, contents, mode).
    files: Vec<(String, Vec<u8>, u32)>,
}

/// The tag for image `name`.
pub fn tag(name: &str) -> String {
    format!("{REPOSITORY}:{name}")
}

impl Context {
    /// The context for `name`: from `dir` when given, else `./sandbox-images/NAME` when it
    /// exists, else the copy built into warden. Host files are added and checked.
    pub fn locate(name: &str, dir: Option<&Path>) -> Result<Context, ImageError> {
        let valid = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "._-".contains(c));
        if !valid {
            return Err(ImageError::BadName(name.into()));
        }
        let local = PathBuf::from("sandbox-images").join(name);
        let mut context = match dir {
            Some(dir) => Context::from_dir(name, dir)?,
            None if local.join("Dockerfile").is_file() => Context::from_dir(name, &local)?,
            None => Context::embedded(name).ok_or_else(|| ImageError::Unknown {
                name: name.into(),
                searched: local.display().to_string(),
                known: EMBEDDED
                    .iter()
                    .map(|(n, _)| *n)
                    .collect::<Vec<_>>()
                    .join(", "),
            })?,
        };
        context.add_host_files()?;
        Ok(context)
    }

    fn embedded(name: &str) -> Option<Context> {
        let (_, files) = EMBEDDED.iter().find(|(n, _)| *n == name)?;
        Some(Context {
            name: name.into(),
            origin: "the copy built into warden".into(),
            files: files
                .iter()
                .map(|(path, text)| (path.to_string(), text.as_bytes().to_vec(), 0o644))
                .collect(),
        })
    }

    fn from_dir(name: &str, dir: &Path) -> Result<Context, ImageError> {
        let mut files = Vec::new();
        collect(dir, dir, &mut files)?;
        files.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(Context {
            name: name.into(),
            origin: dir.display().to_string(),
            files,
        })
    }

    /// Add what `host-files` lists, refusing missing files and dynamic executables.
    fn add_host_files(&mut self) -> Result<(), ImageError> {
        let Some((_, list, _)) = self.files.iter().find(|(p, _, _)| p == HOST_FILES) else {
            return Ok(());
        };
        let list = String::from_utf8_lossy(list).into_owned();
        for line in list.lines().map(str::trim) {
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let fields: Vec<&str> = line.split_whitespace().collect();
            let [name, host, package] = fields[..] else {
                return Err(ImageError::BadHostFiles(line.into()));
            };
            let path = PathBuf::from(host);
            let package = package.to_string();
            let bytes = match std::fs::read(&path) {
                Ok(bytes) => bytes,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    return Err(ImageError::MissingHostFile { path, package })
                }
                Err(e) => return Err(ImageError::Io(e)),
            };
            if is_dynamic_elf(&bytes) {
                return Err(ImageError::NotStatic { path, package });
            }
            self.files.push((name.to_string(), bytes, 0o755));
        }
        Ok(())
    }

    /// The context as the tar archive the build API takes.
    pub fn to_tar(&self) -> Result<Vec<u8>, ImageError> {
        let mut archive = tar::Builder::new(Vec::new());
        for (path, contents, mode) in &self.files {
            let mut header = tar::Header::new_gnu();
            header.set_size(contents.len() as u64);
            header.set_mode(*mode);
            header.set_mtime(0);
            header.set_cksum();
            archive.append_data(&mut header, path, contents.as_slice())?;
        }
        Ok(archive.into_inner()?)
    }
}

fn collect(
    root: &Path,
    dir: &Path,
    files: &mut Vec<(String, Vec<u8>, u32)>,
) -> Result<(), ImageError> {
    use std::os::unix::fs::PermissionsExt;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let path = entry.path();
        let meta = std::fs::metadata(&path)?;
        if meta.is_dir() {
            collect(root, &path, files)?;
        } else if meta.is_file() {
            let relative = path.strip_prefix(root).unwrap_or(&path);
            let mode = meta.permissions().mode() & 0o777;
            files.push((
                relative.to_string_lossy().into_owned(),
                std::fs::read(&path)?,
                mode,
            ));
        }
    }
    Ok(())
}

/// Whether `bytes` is an ELF file with a program interpreter (a dynamic executable).
fn is_dynamic_elf(bytes: &[u8]) -> bool {
    const PT_INTERP: u32 = 3;
    if bytes.len() < 0x40 || &bytes[..4] != b"\x7fELF" || bytes[5] != 1 {
        return false; // not ELF, or big-endian (not built for these machines anyway)
    }
    let u16_at = |o: usize| {
        bytes
            .get(o..o + 2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]) as usize)
    };
    let u32_at = |o: usize| {
        bytes
            .get(o..o + 4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    };
    let (phoff, phentsize, phnum) = match bytes[4] {
        1 => (u32_at(0x1c).map(|v| v as usize), u16_at(0x2a), u16_at(0x2c)),
        2 => (
            bytes
                .get(0x20..0x28)
                .map(|b| u64::from_le_bytes(b.try_into().unwrap_or_default()) as usize),
            u16_at(0x36),
            u16_at(0x38),
        ),
        _ => return false,
    };
    let (Some(phoff), Some(phentsize), Some(phnum)) = (phoff, phentsize, phnum) else {
        return false;
    };
    (0..phnum).any(|i| u32_at(phoff + i * phentsize) == Some(PT_INTERP))
}

/// Build `context` as `warden-sandbox:NAME`, passing every log line to `log`; returns the
/// image id.
pub async fn build(
    docker: &Docker,
    context: &Context,
    log: &mut dyn FnMut(&str),
) -> Result<String, ImageError> {
    let tag = tag(&context.name);
    let tar = context.to_tar()?;
    let options = BuildImageOptionsBuilder::new()
        .dockerfile("Dockerfile")
        .t(&tag)
        .rm(true)
        .forcerm(true)
        .build();
    let mut stream = docker.build_image(options, None, Some(bollard::body_full(tar.into())));
    let mut image_id = None;
    while let Some(item) = stream.next().await {
        let info = item.map_err(|e| ImageError::Build {
            tag: tag.clone(),
            reason: e.to_string(),
        })?;
        if let Some(line) = info.stream.as_deref().or(info.status.as_deref()) {
            log(line);
        }
        if let Some(id) = info.aux.and_then(|aux| aux.id) {
            image_id = Some(id);
        }
    }
    match image_id {
        Some(id) => Ok(id),
        None => docker
            .inspect_image(&tag)
            .await
            .ok()
            .and_then(|i| i.id)
            .ok_or(ImageError::Build {
                tag,
                reason: "the daemon reported no image".into(),
            }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn static_and_dynamic_executables_are_told_apart() {
        let dynamic = std::fs::read("/bin/sh").unwrap();
        assert!(is_dynamic_elf(&dynamic));
        assert!(!is_dynamic_elf(b"#!/bin/sh\necho hi\n"));
        if let Ok(busybox) = std::fs::read("/bin/busybox") {
            assert!(!is_dynamic_elf(&busybox), "busybox-static is static");
        }
    }

    #[test]
    fn the_minimal_context_is_built_in_and_lists_busybox() {
        let context = Context::embedded("minimal").unwrap();
        let names: Vec<&str> = context.files.iter().map(|f| f.0.as_str()).collect();
        assert!(
            names.contains(&"Dockerfile") && names.contains(&"passwd"),
            "{names:?}"
        );
        let host = &context.files.iter().find(|f| f.0 == HOST_FILES).unwrap().1;
        assert!(String::from_utf8_lossy(host).contains("busybox /bin/busybox busybox-static"));
    }

    #[test]
    fn host_files_must_exist_and_be_static() {
        let mut context = Context::embedded("debian").unwrap();
        context.files.push((
            HOST_FILES.into(),
            b"tool /nonexistent/tool some-package\n".to_vec(),
            0o644,
        ));
        let err = context.add_host_files().unwrap_err().to_string();
        assert!(err.contains("apt-get install some-package"), "{err}");
        let mut context = Context::embedded("debian").unwrap();
        context
            .files
            .push((HOST_FILES.into(), b"sh /bin/sh dash\n".to_vec(), 0o644));
        let err = context.add_host_files().unwrap_err().to_string();
        assert!(err.contains("dynamically linked"), "{err}");
    }

    #[test]
    fn the_tar_holds_every_file() {
        let mut context = Context::embedded("minimal").unwrap();
        context
            .files
            .push(("busybox".into(), b"stand-in".to_vec(), 0o755));
        let tar = context.to_tar().unwrap();
        let mut archive = tar::Archive::new(tar.as_slice());
        let mut names: Vec<String> = archive
            .entries()
            .unwrap()
            .map(|e| e.unwrap().path().unwrap().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(
            names,
            ["Dockerfile", "busybox", "group", "host-files", "passwd"]
        );
    }

    #[test]
    fn names_are_checked() {
        assert!(matches!(
            Context::locate("../x", None),
            Err(ImageError::BadName(_))
        ));
        assert!(matches!(
            Context::locate("nonexistent", None),
            Err(ImageError::Unknown { .. })
        ));
    }
}

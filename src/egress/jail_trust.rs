//! The run CA's certificate where a jailed command's TLS clients find it (`super::jailed`).

/// The run CA's certificate for the jail: alone (`ca.pem`, for `NODE_EXTRA_CA_CERTS`) and after
/// the system's roots (`bundle.pem`, for the variables that replace the default store), in a
/// folder of warden's removed when the run ends. Certificates only: the key never leaves memory.
pub struct TrustFiles {
    dir: tempfile::TempDir,
}

/// The variables TLS clients read for the file that replaces their default store: set to
/// `bundle.pem` in a jail with the proxy.
pub const BUNDLE_VARIABLES: [&str; 6] = [
    "SSL_CERT_FILE",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "GIT_SSL_CAINFO",
    "CARGO_HTTP_CAINFO",
    "PIP_CERT",
];

/// Node's variable for a CA added to its own roots: set to `ca.pem`.
pub const EXTRA_CA_VARIABLE: &str = "NODE_EXTRA_CA_CERTS";

/// Where distributions keep the system's CA bundle.
const SYSTEM_BUNDLES: &[&str] = &[
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/cert.pem",
];

impl TrustFiles {
    pub fn write(ca_pem: &str) -> Result<TrustFiles, String> {
        use std::os::unix::fs::PermissionsExt;
        let fail = |e: std::io::Error| format!("writing the run's CA certificate failed: {e}");
        let dir = tempfile::Builder::new()
            .prefix("warden-ca-")
            .tempdir()
            .map_err(fail)?;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))
            .map_err(fail)?;
        let system = SYSTEM_BUNDLES
            .iter()
            .find_map(|path| std::fs::read_to_string(path).ok())
            .unwrap_or_default();
        let mut bundle = system;
        if !bundle.is_empty() && !bundle.ends_with('\n') {
            bundle.push('\n');
        }
        bundle.push_str(ca_pem);
        let files = TrustFiles { dir };
        for (path, text) in [(files.ca(), ca_pem), (files.bundle(), bundle.as_str())] {
            std::fs::write(&path, text).map_err(fail)?;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644))
                .map_err(fail)?;
        }
        Ok(files)
    }

    pub fn dir(&self) -> &std::path::Path {
        self.dir.path()
    }

    pub fn ca(&self) -> std::path::PathBuf {
        self.dir.path().join("ca.pem")
    }

    pub fn bundle(&self) -> std::path::PathBuf {
        self.dir.path().join("bundle.pem")
    }
}

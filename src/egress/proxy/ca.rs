//! The run's certificate authority: made when a jailed run starts, its key only in warden's
//! memory (never written anywhere), its certificate given to the jail to trust. It signs one
//! leaf per host the proxy looks inside, cached for the run.

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// One run's CA.
pub struct RunCa {
    issuer: Issuer<'static, KeyPair>,
    cert_der: CertificateDer<'static>,
    cert_pem: String,
    leaves: Mutex<HashMap<String, Arc<rustls::ServerConfig>>>,
}

impl std::fmt::Debug for RunCa {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RunCa(<key in memory>)")
    }
}

/// Validity: from a day ago (clock skew) for a week; a run never lasts that long.
fn validity(params: &mut CertificateParams) {
    let now = std::time::SystemTime::now();
    let day = std::time::Duration::from_secs(86_400);
    params.not_before = (now - day).into();
    params.not_after = (now + 7 * day).into();
}

impl RunCa {
    pub fn new() -> Result<RunCa, String> {
        let fail = |e: rcgen::Error| format!("making the run's CA failed: {e}");
        let mut params = CertificateParams::new(Vec::new()).map_err(fail)?;
        params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
        params
            .distinguished_name
            .push(DnType::CommonName, "warden run CA (one run only)");
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        validity(&mut params);
        let key = KeyPair::generate().map_err(fail)?;
        let cert = params.self_signed(&key).map_err(fail)?;
        Ok(RunCa {
            cert_der: cert.der().clone(),
            cert_pem: cert.pem(),
            issuer: Issuer::new(params, key),
            leaves: Mutex::new(HashMap::new()),
        })
    }

    /// The CA certificate (PEM), for the jail's trust store.
    pub fn cert_pem(&self) -> &str {
        &self.cert_pem
    }

    #[cfg(test)]
    pub fn cert_der(&self) -> &CertificateDer<'static> {
        &self.cert_der
    }

    /// A TLS server config presenting a leaf for `host`, signed by this CA.
    pub fn server_config(&self, host: &str) -> Result<Arc<rustls::ServerConfig>, String> {
        let mut leaves = self.leaves.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(config) = leaves.get(host) {
            return Ok(config.clone());
        }
        let config = Arc::new(self.issue(host)?);
        leaves.insert(host.to_string(), config.clone());
        Ok(config)
    }

    fn issue(&self, host: &str) -> Result<rustls::ServerConfig, String> {
        let fail = |e: rcgen::Error| format!("a certificate for {host} failed: {e}");
        let mut params = CertificateParams::new(vec![host.to_string()]).map_err(fail)?;
        params.distinguished_name.push(DnType::CommonName, host);
        params.use_authority_key_identifier_extension = true;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        validity(&mut params);
        let key = KeyPair::generate().map_err(fail)?;
        let leaf = params.signed_by(&key, &self.issuer).map_err(fail)?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS setup failed: {e}"))?
            .with_no_client_auth()
            .with_single_cert(
                vec![leaf.der().clone(), self.cert_der.clone()],
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
            )
            .map_err(|e| format!("a certificate for {host} failed: {e}"))?;
        // One request per connection (the proxy answers with `Connection: close`): HTTP/1.1.
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn leaves_are_trusted_through_the_run_ca_for_their_host_only() {
        let ca = RunCa::new().unwrap();
        assert!(ca.cert_pem().starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(!format!("{ca:?}").contains("PRIVATE"));
        let server = ca.server_config("api.example.test").unwrap();
        assert!(
            Arc::ptr_eq(&server, &ca.server_config("api.example.test").unwrap()),
            "issued once per host"
        );
        let mut roots = rustls::RootCertStore::empty();
        roots.add(ca.cert_der().clone()).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let client = Arc::new(
            rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_root_certificates(roots)
                .with_no_client_auth(),
        );
        for (name, trusted) in [("api.example.test", true), ("other.example.test", false)] {
            let (a, b) = tokio::io::duplex(64 * 1024);
            let acceptor = tokio_rustls::TlsAcceptor::from(server.clone());
            let serve = tokio::spawn(async move {
                let mut tls = acceptor.accept(a).await.ok()?;
                let mut buf = [0u8; 2];
                tls.read_exact(&mut buf).await.ok()?;
                tls.write_all(b"ok").await.ok()?;
                tls.shutdown().await.ok()
            });
            let name = rustls::pki_types::ServerName::try_from(name.to_string()).unwrap();
            let connected = tokio_rustls::TlsConnector::from(client.clone())
                .connect(name, b)
                .await;
            match connected {
                Ok(mut tls) => {
                    assert!(
                        trusted,
                        "a leaf for api.example.test passed for another name"
                    );
                    tls.write_all(b"hi").await.unwrap();
                    let mut buf = [0u8; 2];
                    tls.read_exact(&mut buf).await.unwrap();
                    assert_eq!(&buf, b"ok");
                }
                Err(e) => assert!(!trusted, "{e}"),
            }
            let _ = serve.await;
        }
    }
}

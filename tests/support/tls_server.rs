//! An HTTPS server on 127.0.0.1 for the names a test gives it, with a certificate from a CA the
//! test makes (rcgen). It answers every request with a short text and keeps each request's
//! head, so a test can see exactly what reached it (the headers a proxy added or left alone).

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::sync::{Arc, Mutex};
use tokio_rustls::rustls;

/// A CA for test servers.
pub struct TestCa {
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
    pem: String,
}

impl TestCa {
    pub fn new(name: &str) -> TestCa {
        let mut params = rcgen::CertificateParams::new(Vec::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        params.key_usages = vec![
            rcgen::KeyUsagePurpose::KeyCertSign,
            rcgen::KeyUsagePurpose::DigitalSignature,
        ];
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        TestCa {
            pem: cert.pem(),
            issuer: rcgen::Issuer::new(params, key),
        }
    }

    /// The CA certificate, PEM.
    pub fn pem(&self) -> &str {
        &self.pem
    }

    pub fn write(&self, path: &Path) {
        std::fs::write(path, &self.pem).unwrap();
    }
}

pub struct TlsServer {
    pub addr: SocketAddr,
    heads: Arc<Mutex<Vec<String>>>,
}

impl TlsServer {
    /// Serve HTTPS for `names` with a certificate `ca` signs, until the test process ends.
    pub fn start(ca: &TestCa, names: &[&str]) -> TlsServer {
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let mut params = rcgen::CertificateParams::new(names).unwrap();
        params.use_authority_key_identifier_extension = true;
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
        let key = rcgen::KeyPair::generate().unwrap();
        let leaf = params.signed_by(&key, &ca.issuer).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                vec![leaf.der().clone()],
                rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
            )
            .unwrap();
        let config = Arc::new(config);
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let heads = Arc::new(Mutex::new(Vec::new()));
        let log = heads.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (config, log) = (config.clone(), log.clone());
                std::thread::spawn(move || serve(stream, config, &log));
            }
        });
        TlsServer { addr, heads }
    }

    /// Every request head so far (request line and headers, `\r\n` between them).
    pub fn heads(&self) -> Vec<String> {
        self.heads.lock().unwrap().clone()
    }
}

fn serve(stream: std::net::TcpStream, config: Arc<rustls::ServerConfig>, log: &Mutex<Vec<String>>) {
    let Ok(conn) = rustls::ServerConnection::new(config) else {
        return;
    };
    let mut tls = rustls::StreamOwned::new(conn, stream);
    let mut reader = BufReader::new(&mut tls);
    let mut head = String::new();
    loop {
        let mut line = String::new();
        match reader.read_line(&mut line) {
            Ok(n) if n > 2 => head.push_str(&line),
            Ok(2) => break,
            _ => return,
        }
    }
    log.lock().unwrap().push(head);
    let body = "hello over https\n";
    let reply = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = tls.write_all(reply.as_bytes());
    tls.conn.send_close_notify();
    let _ = tls.flush();
}

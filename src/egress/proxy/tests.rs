use super::decide::check_resolved;
use super::domain::parse_domain;
use super::*;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// An upstream that counts connections and answers each with the request line it got.
async fn upstream() -> (SocketAddr, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(AtomicUsize::new(0));
    let counter = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            counter.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let mut buf = vec![0u8; 4096];
                let n = conn.read(&mut buf).await.unwrap_or(0);
                let text = String::from_utf8_lossy(&buf[..n]).to_string();
                let line = text.lines().next().unwrap_or("").to_string();
                let host = text
                    .lines()
                    .find(|l| l.to_ascii_lowercase().starts_with("host:"))
                    .unwrap_or("")
                    .to_string();
                let body = format!("{line}|{host}");
                let reply = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
                    body.len()
                );
                let _ = conn.write_all(reply.as_bytes()).await;
            });
        }
    });
    (addr, seen)
}

async fn exchange(proxy: SocketAddr, request: &str) -> String {
    let mut conn = TcpStream::connect(proxy).await.unwrap();
    conn.write_all(request.as_bytes()).await.unwrap();
    let mut out = String::new();
    conn.read_to_string(&mut out).await.unwrap();
    out
}

const AUTH: &str = "Proxy-Authorization: Basic d2FyZGVuOnQwaw==\r\n"; // warden:t0k

fn rules(allowed: SocketAddr, other: SocketAddr) -> EgressRules {
    EgressRules {
        domains: vec![parse_domain("api.example.test").unwrap()],
        hosts: BTreeMap::from([
            ("api.example.test".to_string(), HostTarget::Addr(allowed)),
            ("other.example.test".to_string(), HostTarget::Addr(other)),
        ]),
        token: "t0k".into(),
        ..EgressRules::default()
    }
}

/// `request` with the run's token added after its first line.
fn authorized(request: &str) -> String {
    let (line, rest) = request.split_once("\r\n").unwrap();
    format!("{line}\r\n{AUTH}{rest}")
}

#[tokio::test]
async fn a_head_past_its_cap_is_refused_naming_the_key() {
    let (allowed, _) = upstream().await;
    let proxy = EgressProxy::start(rules(allowed, allowed)).await.unwrap();
    let huge = format!(
        "GET http://api.example.test/ HTTP/1.1\r\nX-Fill: {}\r\n",
        "a".repeat(40 * 1024)
    );
    let mut conn = TcpStream::connect(proxy.addr()).await.unwrap();
    // The proxy may answer and close before everything is written.
    let _ = conn.write_all(huge.as_bytes()).await;
    let mut out = Vec::new();
    let _ = conn.read_to_end(&mut out).await;
    let answer = String::from_utf8_lossy(&out);
    assert!(
        answer.contains("the request head is larger than 16.0 KB (caps.proxy_head_bytes)"),
        "{answer}"
    );
    let events = proxy.stop().await;
    assert!(events.iter().all(|e| !e.allowed), "{events:?}");
}

#[tokio::test]
async fn declared_domains_pass_and_nothing_else() {
    let (allowed, allowed_seen) = upstream().await;
    let (other, other_seen) = upstream().await;
    let proxy = EgressProxy::start(rules(allowed, other)).await.unwrap();

    let ok = exchange(
        proxy.addr(),
        &authorized("GET http://API.example.test./data?q=1 HTTP/1.1\r\nHost: evil\r\n\r\n"),
    )
    .await;
    assert!(
        ok.contains("GET /data?q=1 HTTP/1.1|Host: api.example.test"),
        "{ok}"
    );

    for request in [
        "GET http://other.example.test/ HTTP/1.1\r\n\r\n",
        "CONNECT other.example.test:443 HTTP/1.1\r\n\r\n",
        "GET http://127.0.0.1/ HTTP/1.1\r\n\r\n",
        "CONNECT api.example.test:22 HTTP/1.1\r\n\r\n",
        "GET https://api.example.test/ HTTP/1.1\r\n\r\n",
        "GET /relative HTTP/1.1\r\n\r\n",
    ] {
        let answer = exchange(proxy.addr(), &authorized(request)).await;
        assert!(
            answer.contains("X-Warden-Egress: refused"),
            "{request}: {answer}"
        );
    }
    let tunnel = exchange(
        proxy.addr(),
        &authorized("CONNECT api.example.test:443 HTTP/1.1\r\n\r\nGET /tunnelled HTTP/1.1\r\n\r\n"),
    )
    .await;
    assert!(
        tunnel.starts_with("HTTP/1.1 200 Connection Established"),
        "{tunnel}"
    );
    assert!(tunnel.contains("GET /tunnelled HTTP/1.1"), "{tunnel}");

    let events = proxy.stop().await;
    assert_eq!(events.iter().filter(|e| e.allowed).count(), 2, "{events:?}");
    let refused: Vec<&EgressEvent> = events.iter().filter(|e| !e.allowed).collect();
    assert_eq!(refused.len(), 6, "{events:?}");
    assert!(refused
        .iter()
        .any(|e| e.target == "other.example.test:80" && e.detail.contains("not a declared")));
    assert!(refused.iter().any(|e| e.detail.contains("port 22")));
    assert_eq!(allowed_seen.load(Ordering::SeqCst), 2);
    assert_eq!(
        other_seen.load(Ordering::SeqCst),
        0,
        "the undeclared server saw a request"
    );
}

#[tokio::test]
async fn the_token_routes_and_rules_decide_and_one_request_goes_up_per_connection() {
    let (allowed, allowed_seen) = upstream().await;
    let (other, _) = upstream().await;
    let mut rules = rules(allowed, other);
    rules.rules.insert(
        "api.example.test".into(),
        HttpRules {
            methods: vec!["GET".into()],
            paths: vec!["/v1/".into()],
        },
    );
    let route: super::routes::RouteSpec = toml::from_str(
        "url = \"http://api.example.test/base\"\nmethods = [\"GET\"]\n\
         headers = { Authorization = \"Bearer {secret:KEY}\" }",
    )
    .unwrap();
    rules.routes = vec![route
        .resolve("gh", &|_| Some(crate::config::Secret::new("sekret")))
        .unwrap()];
    let proxy = EgressProxy::start(rules).await.unwrap();
    let addr = proxy.addr();

    // No token, a wrong one, another run's route token: refused before any lookup.
    for request in [
        "GET http://api.example.test/v1/x HTTP/1.1\r\n\r\n".to_string(),
        "GET http://api.example.test/v1/x HTTP/1.1\r\nProxy-Authorization: Basic d2FyZGVuOng=\r\n\r\n".to_string(),
        "GET /other/gh/x HTTP/1.1\r\n\r\n".to_string(),
    ] {
        let answer = exchange(addr, &request).await;
        assert!(answer.starts_with("HTTP/1.1 40"), "{request}: {answer}");
    }
    assert!(
        exchange(addr, "CONNECT api.example.test:443 HTTP/1.1\r\n\r\n")
            .await
            .contains("407 Proxy Authentication Required")
    );

    // Domain rules: the method and the path, and no tunnel (it could not be checked).
    let ok = exchange(
        addr,
        &authorized("GET http://api.example.test/v1/a HTTP/1.1\r\n\r\n"),
    )
    .await;
    assert!(ok.contains("GET /v1/a HTTP/1.1"), "{ok}");
    for (request, why) in [
        (
            "POST http://api.example.test/v1/a HTTP/1.1\r\nContent-Length: 0\r\n\r\n",
            "method POST",
        ),
        ("GET http://api.example.test/v2/a HTTP/1.1\r\n\r\n", "/v1/"),
        (
            "GET http://api.example.test/v1/../v2 HTTP/1.1\r\n\r\n",
            "/v1/",
        ),
        (
            "CONNECT api.example.test:443 HTTP/1.1\r\n\r\n",
            "encrypted tunnel",
        ),
    ] {
        let answer = exchange(addr, &authorized(request)).await;
        assert!(answer.contains(why), "{request}: {answer}");
    }

    // The route: the header is added (and the client's own replaced), the base path kept.
    let routed = exchange(
        addr,
        "GET /t0k/gh/repos?q=1 HTTP/1.1\r\nAuthorization: mine\r\n\r\n",
    )
    .await;
    assert!(routed.contains("GET /base/repos?q=1 HTTP/1.1"), "{routed}");
    assert!(exchange(
        addr,
        "POST /t0k/gh/repos HTTP/1.1\r\nContent-Length: 2\r\n\r\nhi"
    )
    .await
    .contains("route gh: method POST is not allowed"));
    assert!(exchange(addr, "GET /t0k/nope/x HTTP/1.1\r\n\r\n")
        .await
        .contains("404"));
    // Chunked bodies are refused; a request riding after the body never goes up.
    assert!(exchange(
        addr,
        "GET /t0k/gh/a HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
    )
    .await
    .contains("411"));
    let before = allowed_seen.load(Ordering::SeqCst);
    let smuggled = exchange(
        addr,
        "GET /t0k/gh/a HTTP/1.1\r\nContent-Length: 0\r\n\r\nPOST /base/delete HTTP/1.1\r\n\r\n",
    )
    .await;
    assert!(smuggled.contains("GET /base/a"), "{smuggled}");
    assert!(!smuggled.contains("delete"), "{smuggled}");
    assert_eq!(allowed_seen.load(Ordering::SeqCst), before + 1);
    let events = proxy.stop().await;
    assert!(
        events
            .iter()
            .any(|e| e.allowed && e.target.starts_with("route gh")),
        "{events:?}"
    );
    assert!(!format!("{events:?}").contains("sekret"));
}

#[tokio::test]
async fn the_header_reaches_the_upstream() {
    // An upstream that echoes the whole head, to see the injected header arrive.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let up = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (mut conn, _) = listener.accept().await.unwrap();
        let mut buf = vec![0u8; 4096];
        let n = conn.read(&mut buf).await.unwrap();
        let reply = format!("HTTP/1.1 200 OK\r\nContent-Length: {n}\r\n\r\n");
        conn.write_all(reply.as_bytes()).await.unwrap();
        conn.write_all(&buf[..n]).await.unwrap();
    });
    let route: super::routes::RouteSpec = toml::from_str(
        "url = \"http://api.example.test\"\nheaders = { X-Key = \"k={secret:KEY}\" }",
    )
    .unwrap();
    let rules = EgressRules {
        hosts: BTreeMap::from([("api.example.test".to_string(), HostTarget::Addr(up))]),
        routes: vec![route
            .resolve("r", &|_| Some(crate::config::Secret::new("v4lue")))
            .unwrap()],
        token: "t".into(),
        ..EgressRules::default()
    };
    let proxy = EgressProxy::start(rules).await.unwrap();
    let answer = exchange(proxy.addr(), "GET /t/r/x HTTP/1.1\r\nX-Key: forged\r\n\r\n").await;
    assert!(answer.contains("X-Key: k=v4lue\r\n"), "{answer}");
    assert!(!answer.contains("forged"), "{answer}");
    assert!(answer.contains("Host: api.example.test\r\n"), "{answer}");
}

#[test]
fn private_resolutions_are_refused() {
    let public: SocketAddr = "93.184.216.34:443".parse().unwrap();
    let private: SocketAddr = "10.0.0.7:443".parse().unwrap();
    let metadata: SocketAddr = "169.254.169.254:80".parse().unwrap();
    assert_eq!(check_resolved("a.test", &[public]), Ok(public));
    assert!(check_resolved("a.test", &[public, private])
        .unwrap_err()
        .contains("10.0.0.7 (private)"));
    assert!(check_resolved("a.test", &[metadata])
        .unwrap_err()
        .contains("link-local"));
    assert!(check_resolved("a.test", &[]).is_err());
}

#[tokio::test]
async fn a_secret_is_never_swapped_into_plain_http() {
    // An upstream that echoes the whole head.
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let up = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (mut conn, _) = listener.accept().await.unwrap();
        let mut buf = vec![0u8; 4096];
        let n = conn.read(&mut buf).await.unwrap();
        let reply = format!("HTTP/1.1 200 OK\r\nContent-Length: {n}\r\n\r\n");
        conn.write_all(reply.as_bytes()).await.unwrap();
        conn.write_all(&buf[..n]).await.unwrap();
    });
    let config: crate::egress::network::NetworkConfig = toml::from_str(&format!(
        "[hosts]\n\"api.example.test\" = \"allow\"\n[resolve]\n\"api.example.test\" = \"{up}\"\n\
         [secrets.KEY]\nhosts = [\"api.example.test\"]\n"
    ))
    .unwrap();
    let bound = crate::egress::network_secrets::BoundSecret::resolve(
        "KEY",
        &config.secrets["KEY"],
        &|_| Some(crate::config::Secret::new("v4lue")),
    )
    .unwrap();
    let placeholder = bound.placeholder.clone();
    let interception = intercept::Interception::new(vec![bound], None).unwrap();
    let rules = EgressRules {
        token: "t0k".into(),
        network: Some(Arc::new(NetworkRules::parse(&config).unwrap())),
        interception: Some(Arc::new(interception)),
        ..EgressRules::default()
    };
    let proxy = EgressProxy::start(rules).await.unwrap();
    let answer = exchange(
        proxy.addr(),
        &authorized(&format!(
            "GET http://api.example.test/x HTTP/1.1\r\nAuthorization: Bearer {placeholder}\r\n\r\n"
        )),
    )
    .await;
    assert!(
        answer.contains(&format!("Authorization: Bearer {placeholder}\r\n")),
        "{answer}"
    );
    assert!(!answer.contains("v4lue"), "{answer}");
}

//! A small Chrome DevTools Protocol client: Debian's `chromium`, headless, driven over its
//! WebSocket (tokio-tungstenite) — navigate, evaluate JavaScript in the page, wait for a
//! condition, take a screenshot. Enough for a real browser to use warden's dashboard.

use base64::Engine;
use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tokio_tungstenite::tungstenite::Message;

type Socket = tokio_tungstenite::WebSocketStream<tokio::net::TcpStream>;

/// The browser, if installed.
pub fn chromium() -> Option<PathBuf> {
    ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .find_map(|name| {
            std::env::var_os("PATH").and_then(|paths| {
                std::env::split_paths(&paths)
                    .map(|dir| dir.join(name))
                    .find(|p| p.is_file())
            })
        })
}

pub struct Browser {
    child: Child,
    socket: Socket,
    next_id: u64,
    /// The page's session (flattened `Target.attachToTarget`).
    session: String,
    _profile: tempfile::TempDir,
}

impl Browser {
    /// Start headless Chromium with a fresh profile and open one blank page; `None` when no
    /// browser is installed.
    pub async fn launch() -> Option<Browser> {
        let program = chromium()?;
        let profile = tempfile::tempdir().unwrap();
        let mut child = Command::new(program)
            .args([
                "--headless=new",
                // Chromium refuses to run as root with its own sandbox on; CI runs tests as
                // root in a container, where the page is our own dashboard on 127.0.0.1.
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--no-default-browser-check",
                "--disable-extensions",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--remote-debugging-port=0",
                "--window-size=1200,900",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg("about:blank")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("chromium starts");
        // "DevTools listening on ws://127.0.0.1:PORT/devtools/browser/ID"
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(at) = line.find("ws://") {
                    let _ = tx.send(line[at..].trim().to_string());
                }
            }
        });
        let url = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("chromium prints its DevTools address");
        // `client_async` over a socket of our own: the crate's `connect` feature would give the
        // tests a second build of it, and so of warden (see Cargo.toml's feature note).
        let address = url
            .strip_prefix("ws://")
            .and_then(|rest| rest.split('/').next())
            .expect("a ws:// address");
        let tcp = tokio::net::TcpStream::connect(address)
            .await
            .expect("the DevTools port answers");
        let (socket, _) = tokio_tungstenite::client_async(url.as_str(), tcp)
            .await
            .expect("the DevTools socket opens");
        let mut browser = Browser {
            child,
            socket,
            next_id: 0,
            session: String::new(),
            _profile: profile,
        };
        let target = browser
            .call("Target.createTarget", json!({"url": "about:blank"}))
            .await;
        let attached = browser
            .call(
                "Target.attachToTarget",
                json!({"targetId": target["targetId"], "flatten": true}),
            )
            .await;
        browser.session = attached["sessionId"].as_str().unwrap().to_string();
        browser.page("Page.enable", json!({})).await;
        Some(browser)
    }

    /// A browser-level command; its result.
    async fn call(&mut self, method: &str, params: Value) -> Value {
        self.send(method, params, None).await
    }

    /// A command to the page; its result.
    pub async fn page(&mut self, method: &str, params: Value) -> Value {
        self.try_page(method, params)
            .await
            .unwrap_or_else(|error| panic!("{method}: {error}"))
    }

    /// A command to the page; its result, or the error the browser answered it with.
    async fn try_page(&mut self, method: &str, params: Value) -> Result<Value, Value> {
        let session = self.session.clone();
        self.try_send(method, params, Some(&session)).await
    }

    async fn send(&mut self, method: &str, params: Value, session: Option<&str>) -> Value {
        self.try_send(method, params, session)
            .await
            .unwrap_or_else(|error| panic!("{method}: {error}"))
    }

    /// A command's result, or the error the browser answered it with.
    async fn try_send(
        &mut self,
        method: &str,
        params: Value,
        session: Option<&str>,
    ) -> Result<Value, Value> {
        self.next_id += 1;
        let id = self.next_id;
        let mut message = json!({"id": id, "method": method, "params": params});
        if let Some(session) = session {
            message["sessionId"] = json!(session);
        }
        self.socket
            .send(Message::text(message.to_string()))
            .await
            .expect("the DevTools socket takes a command");
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            let next = tokio::time::timeout_at(deadline, self.socket.next())
                .await
                .unwrap_or_else(|_| panic!("no answer to {method}"))
                .expect("the DevTools socket stays open")
                .expect("a DevTools message");
            let Message::Text(text) = next else { continue };
            let reply: Value = serde_json::from_str(&text).unwrap();
            // Events (no id) and other answers are not this command's.
            if reply["id"] != json!(id) {
                continue;
            }
            if let Some(error) = reply.get("error") {
                return Err(error.clone());
            }
            return Ok(reply["result"].clone());
        }
    }

    /// Open `url` and wait for its document to load.
    pub async fn navigate(&mut self, url: &str) {
        self.page("Page.navigate", json!({"url": url})).await;
        self.wait_for(
            "document.readyState === 'complete'",
            Duration::from_secs(20),
        )
        .await;
    }

    /// Evaluate `expression` in the page (promises awaited); its value. Asked while the page
    /// navigates (a form just submitted), the browser refuses: that counts as thrown, so
    /// `wait_for` asks again once the new document is there.
    pub async fn eval(&mut self, expression: &str) -> Value {
        let params = json!({"expression": expression, "returnByValue": true, "awaitPromise": true});
        let result = match self.try_page("Runtime.evaluate", params).await {
            Ok(result) => result,
            Err(error) if navigating(&error) => return json!({ "thrown": error }),
            Err(error) => panic!("Runtime.evaluate: {error}"),
        };
        if let Some(thrown) = result.get("exceptionDetails") {
            return json!({ "thrown": thrown });
        }
        result["result"]["value"].clone()
    }

    /// Poll `expression` until it is truthy; its value. Panics with the page's text after
    /// `timeout`.
    pub async fn wait_for(&mut self, expression: &str, timeout: Duration) -> Value {
        let deadline = Instant::now() + timeout;
        loop {
            let value = self.eval(expression).await;
            let truthy = match &value {
                Value::Null | Value::Bool(false) => false,
                Value::String(s) => !s.is_empty(),
                Value::Object(o) => !o.contains_key("thrown"),
                _ => true,
            };
            if truthy {
                return value;
            }
            if Instant::now() >= deadline {
                let text = self
                    .eval("document.body ? document.body.innerText : ''")
                    .await;
                panic!("the page never showed `{expression}` (last {value}); it shows:\n{text}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Emulate a screen `width` CSS pixels wide (a phone: 390).
    pub async fn viewport(&mut self, width: u32, height: u32, mobile: bool) {
        self.page(
            "Emulation.setDeviceMetricsOverride",
            json!({"width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile}),
        )
        .await;
    }

    /// A PNG of the page as shown, written to `path`.
    pub async fn screenshot(&mut self, path: &Path) {
        let shot = self
            .page(
                "Page.captureScreenshot",
                json!({"format": "png", "captureBeyondViewport": true}),
            )
            .await;
        let png = base64::engine::general_purpose::STANDARD
            .decode(shot["data"].as_str().unwrap())
            .unwrap();
        assert!(png.starts_with(b"\x89PNG"), "a PNG");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, png).unwrap();
    }
}

/// The errors Chromium answers an evaluation with while its document is being replaced.
fn navigating(error: &Value) -> bool {
    let message = error["message"].as_str().unwrap_or_default();
    [
        "Inspected target navigated or closed",
        "Execution context was destroyed",
        "Cannot find context with specified id",
    ]
    .iter()
    .any(|known| message.contains(known))
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

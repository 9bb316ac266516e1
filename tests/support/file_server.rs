//! A plain HTTP/1.0 server on 127.0.0.1 serving the files of one folder (enough for git's dumb
//! HTTP transport and a pip "simple" index). It counts the connections it accepts and logs
//! each request line, so a test can tell which requests reached it.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

pub struct FileServer {
    pub addr: SocketAddr,
    requests: Arc<Mutex<Vec<String>>>,
}

impl FileServer {
    /// Serve `root` until the test process ends.
    pub fn start(root: &Path) -> FileServer {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let (root, log) = (root.to_path_buf(), requests.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (root, log) = (root.clone(), log.clone());
                std::thread::spawn(move || serve(stream, &root, &log));
            }
        });
        FileServer { addr, requests }
    }

    /// Every request line so far (`GET /path HTTP/1.1`).
    pub fn requests(&self) -> Vec<String> {
        self.requests.lock().unwrap().clone()
    }
}

fn serve(mut stream: std::net::TcpStream, root: &Path, log: &Mutex<Vec<String>>) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut line = String::new();
    if reader.read_line(&mut line).is_err() {
        return;
    }
    log.lock().unwrap().push(line.trim_end().to_string());
    // Skip the headers.
    let mut header = String::new();
    while reader
        .read_line(&mut header)
        .map(|n| n > 2)
        .unwrap_or(false)
    {
        header.clear();
    }
    let path = line.split_whitespace().nth(1).unwrap_or("/");
    let path = path.split('?').next().unwrap_or("/");
    let mut file: PathBuf = root.to_path_buf();
    for part in path.split('/').filter(|p| !p.is_empty() && *p != "..") {
        file.push(part);
    }
    if file.is_dir() {
        file.push("index.html");
    }
    let reply = match std::fs::read(&file) {
        Ok(body) => {
            let kind = match file.extension().and_then(|e| e.to_str()) {
                Some("html") => "text/html",
                _ => "application/octet-stream",
            };
            let mut reply = format!(
                "HTTP/1.0 200 OK\r\nContent-Type: {kind}\r\nContent-Length: {}\r\n\
                 Connection: close\r\n\r\n",
                body.len()
            )
            .into_bytes();
            reply.extend_from_slice(&body);
            reply
        }
        Err(_) => {
            b"HTTP/1.0 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_vec()
        }
    };
    let _ = stream.write_all(&reply);
}

//! A loopback HTTP server standing in for the API server in unit tests of the bounded caches and
//! the Secret reader: every request is handed to the test, which decides what and when it
//! answers, so a test can order a GET's answer against a watch event. It speaks HTTP/1.1 with
//! keep-alive, as kube's client does; the rules of the answers (a metadata-only `Accept` gets
//! metadata only, a LIST pages by `limit` and `continue`) are the test's, written as the API
//! server's.

use kube::Client;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::{mpsc, oneshot};

/// A request the double received, and the means to answer it.
pub struct Request {
    /// The request line and headers, as sent.
    pub head: String,
    /// The body, as sent (by its `Content-Length`).
    pub body: String,
    reply: oneshot::Sender<(u16, String)>,
}

impl Request {
    /// The path and query of the request line.
    pub fn target(&self) -> &str {
        self.head.split(' ').nth(1).unwrap_or_default()
    }

    /// Whether the request asks for metadata only (`PartialObjectMetadata[List]`).
    pub fn metadata_only(&self) -> bool {
        self.head
            .to_ascii_lowercase()
            .lines()
            .any(|l| l.starts_with("accept:") && l.contains("as=partialobjectmetadata"))
    }

    /// Whether it is a LIST (a collection's path, no name).
    pub fn is_list(&self, plural: &str) -> bool {
        self.target().split('?').next().is_some_and(|p| p.ends_with(&format!("/{plural}")))
    }

    /// The value of query parameter `name`.
    pub fn query(&self, name: &str) -> Option<String> {
        let query = self.target().split_once('?')?.1;
        query.split('&').find_map(|pair| pair.strip_prefix(&format!("{name}=")).map(String::from))
    }

    /// Answers `200 OK` with the JSON `body`.
    pub fn answer(self, body: &serde_json::Value) {
        self.answer_status(200, body);
    }

    /// Answers with status `code` and the JSON `body` (a `Status` for an error, as the API
    /// server's).
    pub fn answer_status(self, code: u16, body: &serde_json::Value) {
        drop(self.reply.send((code, body.to_string())));
    }
}

/// The `Content-Length` of a request's `head`; 0 without one.
fn content_length(head: &str) -> usize {
    let length = head.lines().find_map(|line| {
        let (name, value) = line.split_once(':')?;
        name.trim().eq_ignore_ascii_case("content-length").then(|| value.trim().parse().ok())?
    });
    length.unwrap_or(0)
}

/// Starts the double; returns a client of it and the requests as they arrive.
pub async fn start() -> (Client, mpsc::UnboundedReceiver<Request>) {
    let (client, requests, _) = start_at().await;
    (client, requests)
}

/// Like [`start`], with the double's URL, to make other clients of it.
pub async fn start_at() -> (Client, mpsc::UnboundedReceiver<Request>, String) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let (requests, received) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            let requests = requests.clone();
            tokio::spawn(async move {
                loop {
                    let mut head = Vec::new();
                    let mut byte = [0u8; 1];
                    while !head.ends_with(b"\r\n\r\n") {
                        match socket.read(&mut byte).await {
                            Ok(0) | Err(_) => return,
                            Ok(_) => head.push(byte[0]),
                        }
                    }
                    let head = String::from_utf8_lossy(&head).into_owned();
                    let mut body = vec![0u8; content_length(&head)];
                    if socket.read_exact(&mut body).await.is_err() {
                        return;
                    }
                    let body = String::from_utf8_lossy(&body).into_owned();
                    let (reply, answer) = oneshot::channel();
                    if requests.send(Request { head, body, reply }).is_err() {
                        return;
                    }
                    let Ok((code, body)) = answer.await else { return };
                    let response = format!(
                        "HTTP/1.1 {code} Answered\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                        body.len()
                    );
                    if socket.write_all(response.as_bytes()).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    let client = Client::try_from(kube::Config::new(url.parse().unwrap())).unwrap();
    (client, received, url)
}

//! Outgoing HTTP for the exports that may reach outside the cluster (`fetch`, `fetch_all`,
//! `apply_external`, `delete_external`), over `wasi:http`: the host sends the request if the
//! plugin's [`HttpGrant`](crate::HttpGrant) names its origin, adds the secret headers, and
//! enforces the timeouts and the response-size cap. Anywhere else, or to another origin, the
//! request fails with the host's reason and no connection is made.
//!
//! ```no_run
//! use wasmop_guest::http::Request;
//!
//! # fn f() -> Result<(), wasmop_guest::http::HttpError> {
//! let response = Request::get("http://127.0.0.1:8080/records/www").send()?;
//! if response.status == 200 {
//!     let record: serde_json::Value = response.json()?;
//! }
//! # Ok(())
//! # }
//! ```
//!
//! Natively (unit tests) there is no `wasi:http`: `send` fails with an error saying so; test
//! the external client behind a trait, or through the host.
//!
//! A recorded call (`wasmop run --record`) keeps each request and the response the plugin read,
//! without the values of headers and query parameters named like credentials; mark responses
//! that carry credentials themselves with [`Request::sensitive_response`].

use serde::Serialize;
use serde::de::DeserializeOwned;
pub use wasmop_core::record::redact::SENSITIVE_RESPONSE;

/// A failed request: refused by the host, a connection or protocol failure, a timeout, or a
/// body that does not decode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpError(pub String);

impl std::fmt::Display for HttpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for HttpError {}

impl From<HttpError> for crate::Error {
    /// A failed request is worth a retry.
    fn from(error: HttpError) -> Self {
        crate::Error::transient(error.0)
    }
}

/// An HTTP request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// `GET`, `POST`, ...
    pub method: String,
    /// The absolute URL.
    pub url: String,
    /// Request headers.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Option<Vec<u8>>,
}

impl Request {
    /// A request with `method` to `url`.
    pub fn new(method: &str, url: impl Into<String>) -> Self {
        Self { method: method.to_owned(), url: url.into(), headers: Vec::new(), body: None }
    }

    /// `GET url`.
    pub fn get(url: impl Into<String>) -> Self {
        Self::new("GET", url)
    }

    /// `POST url`.
    pub fn post(url: impl Into<String>) -> Self {
        Self::new("POST", url)
    }

    /// `PUT url`.
    pub fn put(url: impl Into<String>) -> Self {
        Self::new("PUT", url)
    }

    /// `DELETE url`.
    pub fn delete(url: impl Into<String>) -> Self {
        Self::new("DELETE", url)
    }

    /// Adds a header.
    #[must_use]
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// `body` as JSON, with `content-type: application/json`.
    #[must_use]
    pub fn json(mut self, body: &impl Serialize) -> Self {
        self.body = Some(serde_json::to_vec(body).unwrap_or_default());
        self.header("content-type", "application/json")
    }

    /// Marks the response as sensitive: a record of the call (`wasmop run --record`) keeps its
    /// status and headers and only the length of its body, and scrubs what the body held from
    /// what the plugin writes (logs, status, objects, later requests). Mark the responses that
    /// carry credentials: a token endpoint's, a secret store's. The mark is the request header
    /// [`SENSITIVE_RESPONSE`], which the host takes off before the request leaves.
    ///
    /// A replay from a record hands the plugin `<redacted: N bytes>` as the body, so a plugin
    /// that parses it replays as it handles a body it cannot parse.
    #[must_use]
    pub fn sensitive_response(self) -> Self {
        if self.headers.iter().any(|(name, _)| name.eq_ignore_ascii_case(SENSITIVE_RESPONSE)) {
            return self;
        }
        self.header(SENSITIVE_RESPONSE, "1")
    }

    /// Sends the request and reads the whole response.
    pub fn send(self) -> Result<Response, HttpError> {
        send(self)
    }
}

/// A response, read whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// The status code.
    pub status: u16,
    /// Response headers.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
}

impl Response {
    /// The body as JSON.
    pub fn json<T: DeserializeOwned>(&self) -> Result<T, HttpError> {
        serde_json::from_slice(&self.body)
            .map_err(|e| HttpError(format!("the response body is not the JSON expected: {e}")))
    }

    /// The body as text (lossy).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// Whether the status is 2xx.
    pub fn is_success(&self) -> bool {
        (200..300).contains(&self.status)
    }
}

/// The URL's scheme, authority and path with query.
fn split(url: &str) -> Result<(&str, &str, &str), HttpError> {
    let (scheme, rest) = url.split_once("://").ok_or_else(|| HttpError(format!("{url:?} is not an absolute URL")))?;
    let at = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(at);
    if authority.is_empty() {
        return Err(HttpError(format!("{url:?} has no host")));
    }
    Ok((scheme, authority, if path.is_empty() { "/" } else { path }))
}

#[cfg(not(target_arch = "wasm32"))]
fn send(request: Request) -> Result<Response, HttpError> {
    split(&request.url)?;
    Err(HttpError(format!(
        "{} {}: outgoing HTTP runs only inside the wasmop host (wasi:http); this is a native build",
        request.method, request.url
    )))
}

#[cfg(target_arch = "wasm32")]
fn send(request: Request) -> Result<Response, HttpError> {
    use wasip2::http::outgoing_handler;
    use wasip2::http::types::{Fields, Method, OutgoingBody, OutgoingRequest, Scheme};
    use wasip2::io::streams::StreamError;

    let what = format!("{} {}", request.method, request.url);
    let fail = |reason: String| HttpError(format!("{what}: {reason}"));
    let (scheme, authority, path) = split(&request.url)?;
    let entries: Vec<(String, Vec<u8>)> =
        request.headers.iter().map(|(name, value)| (name.to_ascii_lowercase(), value.as_bytes().to_vec())).collect();
    let headers = Fields::from_list(&entries).map_err(|e| fail(format!("invalid header: {e:?}")))?;
    let outgoing = OutgoingRequest::new(headers);
    let method = match request.method.as_str() {
        "GET" => Method::Get,
        "POST" => Method::Post,
        "PUT" => Method::Put,
        "DELETE" => Method::Delete,
        "PATCH" => Method::Patch,
        "HEAD" => Method::Head,
        other => Method::Other(other.to_owned()),
    };
    let scheme = match scheme {
        "http" => Scheme::Http,
        "https" => Scheme::Https,
        other => Scheme::Other(other.to_owned()),
    };
    outgoing.set_method(&method).map_err(|()| fail("invalid method".into()))?;
    outgoing.set_scheme(Some(&scheme)).map_err(|()| fail("invalid scheme".into()))?;
    outgoing.set_authority(Some(authority)).map_err(|()| fail("invalid host".into()))?;
    outgoing.set_path_with_query(Some(path)).map_err(|()| fail("invalid path".into()))?;
    let body = outgoing.body().map_err(|()| fail("the request body is taken".into()))?;
    let future = outgoing_handler::handle(outgoing, None).map_err(|e| fail(describe(&e)))?;
    {
        let stream = body.write().map_err(|()| fail("the request body stream is taken".into()))?;
        for chunk in request.body.as_deref().unwrap_or_default().chunks(4096) {
            stream.blocking_write_and_flush(chunk).map_err(|e| fail(format!("writing the body: {e:?}")))?;
        }
    }
    OutgoingBody::finish(body, None).map_err(|e| fail(describe(&e)))?;
    future.subscribe().block();
    let response = match future.get() {
        Some(Ok(Ok(response))) => response,
        Some(Ok(Err(e))) => return Err(fail(describe(&e))),
        Some(Err(())) | None => return Err(fail("the response was lost".into())),
    };
    let status = response.status();
    let headers = response
        .headers()
        .entries()
        .into_iter()
        .map(|(name, value)| (name, String::from_utf8_lossy(&value).into_owned()))
        .collect();
    let incoming = response.consume().map_err(|()| fail("the response body is taken".into()))?;
    let mut body = Vec::new();
    {
        let stream = incoming.stream().map_err(|()| fail("the response body stream is taken".into()))?;
        loop {
            match stream.blocking_read(64 * 1024) {
                Ok(chunk) => body.extend_from_slice(&chunk),
                Err(StreamError::Closed) => break,
                Err(StreamError::LastOperationFailed(e)) => {
                    return Err(fail(format!("reading the body: {}", e.to_debug_string())));
                }
            }
        }
    }
    Ok(Response { status, headers, body })
}

/// The host's reason for a failed request, in words.
#[cfg(target_arch = "wasm32")]
fn describe(error: &wasip2::http::types::ErrorCode) -> String {
    use wasip2::http::types::ErrorCode;
    match error {
        ErrorCode::InternalError(Some(message)) => message.clone(),
        ErrorCode::HttpRequestDenied => "denied by the host".into(),
        ErrorCode::ConnectionRefused => "connection refused".into(),
        ErrorCode::ConnectionTimeout => "connect timed out (the http grant's connect timeout)".into(),
        ErrorCode::ConnectionReadTimeout => "timed out reading the response".into(),
        ErrorCode::HttpResponseTimeout => "timed out waiting for the response (the http grant's timeout)".into(),
        ErrorCode::HttpResponseBodySize(limit) => {
            format!("the response body is larger than the granted {} bytes", limit.unwrap_or_default())
        }
        other => format!("{other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_split_into_scheme_authority_and_path() {
        assert_eq!(split("http://127.0.0.1:8080/records?x=1").unwrap(), ("http", "127.0.0.1:8080", "/records?x=1"));
        assert_eq!(split("https://api.example.com").unwrap(), ("https", "api.example.com", "/"));
        assert!(split("api.example.com/x").is_err());
        assert!(split("http:///x").is_err());
    }

    #[test]
    fn a_request_marked_sensitive_carries_the_mark_once() {
        let request = Request::post("https://auth.example.com/token").sensitive_response().sensitive_response();
        assert_eq!(request.headers, [(SENSITIVE_RESPONSE.to_owned(), "1".to_owned())]);
        assert_eq!(SENSITIVE_RESPONSE, wasmop_core::record::redact::SENSITIVE_RESPONSE, "the host's name for it");
        assert!(Request::get("https://api.example.com/").headers.is_empty(), "unmarked by default");
    }

    #[test]
    fn natively_a_request_says_it_needs_the_host() {
        let error = Request::get("http://127.0.0.1:1/").send().unwrap_err();
        assert!(error.0.contains("only inside the wasmop host"), "{error}");
    }
}

//! The outgoing requests of a recorded or replayed call (`wasmop run --record`, `wasmop
//! replay`): each is an import call like a read, [`Import::Http`] answered with
//! [`Answer::Http`].
//!
//! - **Recording**: the guest's request (method, URL, its own headers, body) is kept, then sent
//!   through the grant as usual. The host reads the response's body whole, within the grant's
//!   size cap and total time, before the guest sees the response: the record holds what the guest
//!   read, and a body that fails to arrive fails the request. A refusal or a failure is kept as
//!   its words.
//! - **Replaying**: the request is answered from the tape: the recorded status, headers and body,
//!   or the recorded failure. No connection is opened, nothing is counted in the metrics, and the
//!   grant is not consulted (the record holds its refusals). A request the tape cannot answer
//!   fails with an internal error, and the replay reports the divergence.
//!
//! Failures come back as the guest saw them when they were the host's own words (refusals, a
//! Secret that cannot be read) or one of the fixed `wasi:http` error codes ([`FIXED_ERRORS`]);
//! other failures (a TLS alert, a DNS error with details) come back as an internal error with
//! the same words.

use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderName, HeaderValue};
use http_body_util::{BodyExt, Full};
use wasmop_core::record::format::{Body, HttpResponse};
use wasmop_core::record::{Answer, Import};
use wasmtime_wasi_http::{Error, WasiBody};

use super::send::{Sending, Sent};
use crate::runtime::tap::{Tap, unanswered};

/// The `wasi:http` error codes without details, which a replay gives back as they were.
const FIXED_ERRORS: [fn() -> Error; 17] = [
    || Error::DnsTimeout,
    || Error::DestinationNotFound,
    || Error::DestinationUnavailable,
    || Error::DestinationIpProhibited,
    || Error::DestinationIpUnroutable,
    || Error::ConnectionRefused,
    || Error::ConnectionTerminated,
    || Error::ConnectionTimeout,
    || Error::ConnectionReadTimeout,
    || Error::ConnectionWriteTimeout,
    || Error::ConnectionLimitReached,
    || Error::TlsProtocolError,
    || Error::TlsCertificateError,
    || Error::HttpRequestDenied,
    || Error::HttpResponseIncomplete,
    || Error::HttpResponseTimeout,
    || Error::HttpProtocolError,
];

/// What `HttpResponseBodySize(Some(n))` says before `n`.
const TOO_LARGE: &str = "HTTP response body size exceeds limit: ";

/// Sends `request` with `send` and records the exchange (`tap` records), or answers it from the
/// tape (`tap` replays).
pub(super) async fn tapped<F>(tap: Arc<Tap>, request: http::Request<WasiBody>, send: F) -> Result<Sent, Error>
where
    F: FnOnce(http::Request<WasiBody>) -> Sending,
{
    let (parts, body) = request.into_parts();
    let body = body.collect().await?.to_bytes();
    let import = Import::Http {
        method: parts.method.to_string(),
        url: parts.uri.to_string(),
        headers: text_pairs(&parts.headers),
        body: Body::of(body.to_vec()),
    };
    if let Some(answer) = tap.replayed(&import) {
        return match answer {
            Answer::Http(Ok(response)) => response_back(&response),
            Answer::Http(Err(words)) => Err(error_back(&words)),
            _ => Err(Error::InternalError(Some(unanswered("http")))),
        };
    }
    let request = http::Request::from_parts(parts, full(body));
    let sent = match send(request).await {
        Ok((response, io)) => {
            // The connection is driven while the body is read, as the runtime would drive it.
            let io = tokio::spawn(Box::into_pin(io));
            let (head, body) = response.into_parts();
            body.collect().await.map(|body| (head, body.to_bytes(), io))
        }
        Err(error) => Err(error),
    };
    match sent {
        Ok((head, body, io)) => {
            let response = HttpResponse {
                status: head.status.as_u16(),
                headers: text_pairs(&head.headers),
                body: Body::of(body.to_vec()),
            };
            tap.answered(import, Answer::Http(Ok(response)));
            let driven = async move { io.await.unwrap_or(Ok(())) };
            Ok((http::Response::from_parts(head, full(body)), Box::new(driven)))
        }
        Err(error) => {
            tap.answered(import, Answer::Http(Err(words(&error))));
            Err(error)
        }
    }
}

/// A body of `bytes`, whole.
fn full(bytes: Bytes) -> WasiBody {
    Full::new(bytes).map_err(|never| match never {}).boxed_unsync()
}

/// Headers as text pairs, in order (values that are not UTF-8 lossily).
fn text_pairs(headers: &http::HeaderMap) -> Vec<(String, String)> {
    headers
        .iter()
        .map(|(name, value)| (name.to_string(), String::from_utf8_lossy(value.as_bytes()).into_owned()))
        .collect()
}

/// A recorded response, as the guest reads it.
fn response_back(recorded: &HttpResponse) -> Result<Sent, Error> {
    let invalid = |what: String| Error::InternalError(Some(format!("the record's response has {what}")));
    let mut response = http::Response::new(full(Bytes::copy_from_slice(recorded.body.bytes())));
    *response.status_mut() =
        http::StatusCode::from_u16(recorded.status).map_err(|_| invalid(format!("status {}", recorded.status)))?;
    for (name, value) in &recorded.headers {
        let header = HeaderName::try_from(name.as_str()).map_err(|_| invalid(format!("header name {name:?}")))?;
        let value = HeaderValue::try_from(value.as_str()).map_err(|_| invalid(format!("a bad value of {name}")))?;
        response.headers_mut().append(header, value);
    }
    Ok((response, Box::new(std::future::ready(Ok(())))))
}

/// A failure as recorded: the host's own words, or the error's.
fn words(error: &Error) -> String {
    match error {
        Error::InternalError(Some(words)) => words.clone(),
        error => error.to_string(),
    }
}

/// A recorded failure, as the guest saw it.
fn error_back(words: &str) -> Error {
    if let Some(error) = FIXED_ERRORS.iter().map(|error| error()).find(|error| error.to_string() == words) {
        return error;
    }
    match words.strip_prefix(TOO_LARGE).and_then(|rest| rest.strip_suffix(" bytes")?.parse().ok()) {
        Some(cap) => Error::HttpResponseBodySize(Some(cap)),
        None => Error::InternalError(Some(words.to_owned())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_come_back_as_the_guest_saw_them() {
        let cases = [
            Error::ConnectionRefused,
            Error::HttpResponseTimeout,
            Error::HttpResponseBodySize(Some(4096)),
            Error::InternalError(Some("the http grant allows no requests to http://a:80".into())),
        ];
        for error in cases {
            let back = error_back(&words(&error));
            assert_eq!(format!("{back:?}"), format!("{error:?}"));
        }
        let detailed = Error::DnsError { rcode: Some("NXDOMAIN".into()), info_code: None };
        assert_eq!(
            format!("{:?}", error_back(&words(&detailed))),
            r#"InternalError(Some("DNS error: rcode NXDOMAIN"))"#
        );
    }

    #[tokio::test]
    async fn a_recorded_response_reads_back_with_its_status_headers_and_body() {
        let recorded = HttpResponse {
            status: 201,
            headers: vec![("content-type".into(), "application/json".into()), ("x-id".into(), "7".into())],
            body: Body::Text(r#"{"id":"7"}"#.into()),
        };
        let (response, _) = response_back(&recorded).unwrap();
        let (head, body) = response.into_parts();
        assert_eq!(head.status, 201);
        assert_eq!(text_pairs(&head.headers), recorded.headers);
        assert_eq!(body.collect().await.unwrap().to_bytes(), Bytes::from_static(br#"{"id":"7"}"#));
        let bad = HttpResponse { status: 1000, ..recorded };
        assert!(matches!(response_back(&bad), Err(Error::InternalError(Some(m))) if m.contains("status 1000")));
    }
}

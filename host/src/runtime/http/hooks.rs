//! The `wasi:http` hooks of one call: every outgoing request goes through the plugin's grant
//! for the export that runs, and through the call's tap when it is recorded or replayed
//! ([`super::tape`]). The guest's mark of a sensitive response (the request header
//! [`SENSITIVE_RESPONSE`]) is recorded with the request and never sent.

use std::sync::Arc;

use wasmtime_wasi_http::{Error, RequestOptions, WasiBody, WasiHttpHooks};

use wasmop_core::record::redact::SENSITIVE_RESPONSE;

use super::outbound::Outbound;
use super::policy::{HTTP_EXPORTS, Refusal};
use super::send::{Sending, Sent};
use super::tape;
use crate::runtime::tap::Tap;

/// The hooks of one call into a plugin.
pub struct Hooks {
    export: &'static str,
    outbound: Option<Arc<Outbound>>,
    tap: Option<Arc<Tap>>,
}

impl Hooks {
    /// The hooks of a call of `export`, under the plugin's grant (`None`: none, or not yet
    /// known while it describes itself), its requests seen by `tap` when there is one.
    pub fn new(export: &'static str, outbound: Option<Arc<Outbound>>, tap: Option<Arc<Tap>>) -> Self {
        Self { export, outbound, tap }
    }

    /// Sends `request` if the grant allows it; refuses it before a socket is opened otherwise,
    /// with the reason as the plugin's `internal-error`.
    fn send(export: &'static str, outbound: Option<Arc<Outbound>>, request: http::Request<WasiBody>) -> Sending {
        let refusal = match &outbound {
            Some(outbound) => match outbound.admit(export, request.uri()) {
                Ok(admitted) => return Box::pin(admitted.send(request)),
                Err(refusal) => refusal,
            },
            None => without_grant(export, request.uri()),
        };
        Box::pin(std::future::ready(Err(Error::InternalError(Some(refusal.to_string())))))
    }
}

/// Why a request of a plugin without a grant, made while `export` runs, is refused.
fn without_grant(export: &'static str, uri: &http::Uri) -> Refusal {
    if HTTP_EXPORTS.contains(&export) {
        let origin =
            format!("{}://{}", uri.scheme_str().unwrap_or_default(), uri.authority().map_or("", |a| a.as_str()));
        Refusal::NoGrant { requested: origin }
    } else {
        Refusal::Export { export }
    }
}

impl WasiHttpHooks for Hooks {
    /// Sends a request the grant allows ([`Hooks::send`]), recorded or answered from the tape
    /// when the call is tapped. The guest's request options are ignored: the grant's limits
    /// apply.
    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        _options: Option<RequestOptions>,
        _fut: Box<dyn Future<Output = Result<(), Error>> + Send>,
    ) -> Box<dyn Future<Output = Result<Sent, Error>> + Send> {
        let (export, outbound) = (self.export, self.outbound.clone());
        dispatch(self.tap.clone(), request, move |request| Self::send(export, outbound, request))
    }
}

/// Sends `request` with `send`, through `tap` when the call is tapped: recorded as the guest
/// wrote it, the mark of a sensitive response ([`SENSITIVE_RESPONSE`]) included, so that a
/// replay matches it and redaction knows the body; sent without the mark.
fn dispatch<F>(
    tap: Option<Arc<Tap>>,
    request: http::Request<WasiBody>,
    send: F,
) -> Box<dyn Future<Output = Result<Sent, Error>> + Send>
where
    F: FnOnce(http::Request<WasiBody>) -> Sending + Send + 'static,
{
    let send = move |mut request: http::Request<WasiBody>| {
        request.headers_mut().remove(SENSITIVE_RESPONSE);
        send(request)
    };
    match tap {
        Some(tap) => Box::new(tape::tapped(tap, request, send)),
        None => Box::new(send(request)),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use bytes::Bytes;
    use http_body_util::{BodyExt, Full};
    use wasmop_core::record::redact::SENSITIVE_RESPONSE;
    use wasmop_core::record::{Answer, Import};

    use super::*;

    /// A GET the guest marked as sensitive.
    fn marked() -> http::Request<WasiBody> {
        http::Request::get("https://auth.example.com/token")
            .header(SENSITIVE_RESPONSE, "1")
            .header("accept", "application/json")
            .body(Full::new(Bytes::new()).map_err(|never| match never {}).boxed_unsync())
            .unwrap()
    }

    #[tokio::test]
    async fn a_marked_request_leaves_without_its_mark_and_is_recorded_with_it() {
        for tap in [None, Some(Tap::recording())] {
            let sent = Arc::new(Mutex::new(Vec::new()));
            let seen = sent.clone();
            let send = move |request: http::Request<WasiBody>| -> Sending {
                let names = request.headers().keys().map(ToString::to_string).collect::<Vec<_>>();
                seen.lock().unwrap().push(names);
                Box::pin(std::future::ready(Err(Error::ConnectionRefused)))
            };
            let result = Box::into_pin(dispatch(tap.clone(), marked(), send)).await;
            assert!(matches!(result, Err(Error::ConnectionRefused)));
            assert_eq!(*sent.lock().unwrap(), [vec!["accept".to_string()]], "what left, tapped: {}", tap.is_some());
            let Some(tap) = tap else { continue };
            let calls = tap.take_calls();
            let Import::Http { headers, .. } = &calls[0].import else { panic!("{calls:?}") };
            assert_eq!(headers[0], (SENSITIVE_RESPONSE.to_string(), "1".to_string()), "the record keeps the mark");
            assert!(matches!(calls[0].answer, Answer::Http(Err(_))));
        }
    }
}

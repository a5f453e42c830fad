//! The `wasi:http` hooks of one call: every outgoing request goes through the plugin's grant
//! for the export that runs, and through the call's tap when it is recorded or replayed
//! ([`super::tape`]).

use std::pin::Pin;
use std::sync::Arc;

use wasmtime_wasi_http::{Error, RequestOptions, WasiBody, WasiHttpHooks};

use super::outbound::{Outbound, Sent};
use super::policy::{HTTP_EXPORTS, Refusal};
use super::tape;
use crate::runtime::tap::Tap;

/// The hooks of one call into a plugin.
pub struct Hooks {
    export: &'static str,
    outbound: Option<Arc<Outbound>>,
    tap: Option<Arc<Tap>>,
}

/// A request on its way.
pub(super) type Sending = Pin<Box<dyn Future<Output = Result<Sent, Error>> + Send>>;

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
        match self.tap.clone() {
            Some(tap) => Box::new(tape::tapped(tap, request, move |request| Self::send(export, outbound, request))),
            None => Box::new(Self::send(export, outbound, request)),
        }
    }
}

//! The `wasi:http` hooks of one call: every outgoing request goes through the plugin's grant
//! for the export that runs.

use std::sync::Arc;

use wasmtime_wasi_http::{Error, RequestOptions, WasiBody, WasiHttpHooks};

use super::outbound::{Outbound, Sent};
use super::policy::{HTTP_EXPORTS, Refusal};

/// The hooks of one call into a plugin.
pub struct Hooks {
    export: &'static str,
    outbound: Option<Arc<Outbound>>,
}

impl Hooks {
    /// The hooks of a call of `export`, under the plugin's grant (`None`: none, or not yet
    /// known while it describes itself).
    pub fn new(export: &'static str, outbound: Option<Arc<Outbound>>) -> Self {
        Self { export, outbound }
    }

    /// Why a request of a plugin without a grant is refused.
    fn without_grant(&self, uri: &http::Uri) -> Refusal {
        if HTTP_EXPORTS.contains(&self.export) {
            let origin =
                format!("{}://{}", uri.scheme_str().unwrap_or_default(), uri.authority().map_or("", |a| a.as_str()));
            Refusal::NoGrant { requested: origin }
        } else {
            Refusal::Export { export: self.export }
        }
    }
}

impl WasiHttpHooks for Hooks {
    /// Sends a request the grant allows; refuses any other before a socket is opened, with the
    /// reason as the plugin's `internal-error`. The guest's request options are ignored: the
    /// grant's limits apply.
    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        _options: Option<RequestOptions>,
        _fut: Box<dyn Future<Output = Result<(), Error>> + Send>,
    ) -> Box<dyn Future<Output = Result<Sent, Error>> + Send> {
        let refusal = match &self.outbound {
            Some(outbound) => match outbound.admit(self.export, request.uri()) {
                Ok(admitted) => return Box::new(admitted.send(request)),
                Err(refusal) => refusal,
            },
            None => self.without_grant(request.uri()),
        };
        Box::new(std::future::ready(Err(Error::InternalError(Some(refusal.to_string())))))
    }
}

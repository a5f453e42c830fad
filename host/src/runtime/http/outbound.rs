//! One plugin's granted outgoing HTTP: admits or refuses each request before a socket is opened,
//! then sends it within the grant's limits with the secret headers added.

use std::sync::Arc;

use http::HeaderValue;
use http_body_util::BodyExt;
use tokio::sync::Semaphore;
use tokio::time::Instant;
use wasmtime_wasi_http::{Error, WasiBody};

use super::body::{Code, Guarded, Record};
use super::policy::{HTTP_EXPORTS, Origin, Policy, Refusal};
use super::send::{self, Sent};
use super::services::Services;

/// The metrics' `origin` of requests to origins the plugin was not granted: the requested one
/// would let a plugin grow the label set without bound.
pub const UNDECLARED: &str = "undeclared";

/// A plugin's grant at run time: its policy, the permits of its concurrent requests and where
/// Secrets and metrics go.
pub struct Outbound {
    plugin: Arc<str>,
    policy: Policy,
    permits: Arc<Semaphore>,
    services: Arc<Services>,
}

/// A request the grant allows, on its way.
pub struct Admitted {
    outbound: Arc<Outbound>,
    /// The index of its origin in the policy.
    origin: usize,
    record: Record,
    /// The term of the run that made it, when the replica is fenced: its bytes go out only
    /// while that term lasts.
    ticket: Option<crate::fence::Ticket>,
}

impl Outbound {
    /// The outgoing HTTP of `plugin` under `policy`.
    pub fn new(plugin: &str, policy: Policy, services: Arc<Services>) -> Self {
        let permits = Arc::new(Semaphore::new(policy.max_concurrent as usize));
        Self { plugin: plugin.into(), policy, permits, services }
    }

    /// Whether a request to `uri` made while `export` runs is allowed; a refusal is counted.
    pub fn admit(self: &Arc<Self>, export: &'static str, uri: &http::Uri) -> Result<Admitted, Refusal> {
        let found = if HTTP_EXPORTS.contains(&export) {
            let scheme = uri.scheme_str().unwrap_or_default();
            let host = uri.host().unwrap_or_default();
            self.policy.origin(scheme, host, uri.port_u16()).map(|origin| self.index(origin))
        } else {
            Err(Refusal::Export { export })
        };
        let label = match &found {
            Ok(index) => self.policy.origins[*index].to_string(),
            Err(Refusal::Export { .. }) => {
                let (scheme, host) = (uri.scheme_str().unwrap_or_default(), uri.host().unwrap_or_default());
                self.policy.origin(scheme, host, uri.port_u16()).map_or(UNDECLARED.to_string(), ToString::to_string)
            }
            Err(_) => UNDECLARED.to_string(),
        };
        let mut record = Record::start(self.services.observer.clone(), self.plugin.clone(), label);
        match found {
            // Taken here, in the run's task: the send runs in a task of its own.
            Ok(origin) => {
                Ok(Admitted { outbound: self.clone(), origin, record, ticket: crate::fence::Ticket::current() })
            }
            Err(refusal) => {
                record.finish(Code::Refused);
                tracing::warn!(plugin = %self.plugin, export, uri = %uri, "outgoing request refused: {refusal}");
                Err(refusal)
            }
        }
    }

    fn index(&self, origin: &Origin) -> usize {
        self.policy.origins.iter().position(|o| std::ptr::eq(o, origin)).expect("the origin is the policy's")
    }
}

impl Admitted {
    /// Sends `request` within the grant: a concurrency permit, the secret headers, the connect
    /// timeout, and the total time, which the body keeps counting until it is read; past the
    /// size cap the body fails.
    pub async fn send(mut self, mut request: http::Request<WasiBody>) -> Result<Sent, Error> {
        let outbound = self.outbound.clone();
        let policy = &outbound.policy;
        let deadline = Instant::now() + policy.timeout;
        let within = async {
            let permit = outbound.permits.clone().acquire_owned().await.expect("the semaphore is never closed");
            self.secret_headers(&mut request).await?;
            let origin = &policy.origins[self.origin];
            let addresses = send::addresses(origin, &outbound.services.unreachable).await?;
            // The total time is kept here and by the body, not by per-read timeouts.
            let left = deadline.saturating_duration_since(Instant::now());
            let connect_timeout = policy.connect_timeout.min(left);
            let (response, io) = send::send(request, origin, &addresses, connect_timeout, self.ticket.clone()).await?;
            Ok::<_, Error>((permit, response, io))
        };
        // A request still unanswered when its run's term ends is abandoned with it.
        let lapsed = async {
            match &self.ticket {
                Some(ticket) => ticket.lapsed().await,
                None => std::future::pending().await,
            }
        };
        let sent = tokio::select! {
            within = tokio::time::timeout_at(deadline, within) => within.unwrap_or(Err(Error::HttpResponseTimeout)),
            () = lapsed => Err(Error::InternalError(Some(crate::fence::Unanswered::Fenced.to_string()))),
        };
        let (permit, response, io) = match sent {
            Ok(sent) => sent,
            Err(error) => {
                self.record.finish(Code::of(&error));
                return Err(error);
            }
        };
        self.record.answered(response.status().as_u16());
        let length = response.headers().get(http::header::CONTENT_LENGTH);
        if length.and_then(|v| v.to_str().ok()?.parse::<u64>().ok()).is_some_and(|n| n > policy.max_response_bytes) {
            self.record.finish(Code::TooLarge);
            return Err(Error::HttpResponseBodySize(Some(policy.max_response_bytes)));
        }
        let cap = policy.max_response_bytes;
        let response =
            response.map(|body| Guarded::new(body.boxed_unsync(), cap, deadline, self.record, permit).boxed_unsync());
        Ok((response, io))
    }

    /// Adds the origin's secret headers, replacing any of the same name the plugin set.
    async fn secret_headers(&self, request: &mut http::Request<WasiBody>) -> Result<(), Error> {
        let origin = &self.outbound.policy.origins[self.origin];
        if origin.secret_headers.is_empty() {
            return Ok(());
        }
        let secrets = self.outbound.services.secrets(&self.outbound.plugin);
        for header in &origin.secret_headers {
            let value = secrets
                .read(&header.secret)
                .await
                .map_err(|e| Error::InternalError(Some(format!("secret header {}: {e}", header.header))))?;
            let mut value = HeaderValue::try_from(format!("{}{value}", header.prefix)).map_err(|_| {
                Error::InternalError(Some(format!(
                    "secret header {}: the value of Secret {} key {:?} is not a valid header value",
                    header.header, header.secret.name, header.secret.key
                )))
            })?;
            value.set_sensitive(true);
            request.headers_mut().insert(header.header.clone(), value);
        }
        Ok(())
    }
}

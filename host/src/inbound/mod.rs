//! Inbound events (JOSDK's SimpleInboundEventSource and CachingInboundEventSource,
//! controller-runtime's `source.Channel`): `POST /plugins/<name>/events` on the host's events
//! listener (`wasmop run --events-addr`, off by default; TLS with a certificate and key, see
//! [`crate::listener::tls`]). The listener bounds its clients ([`Limits`], see
//! [`crate::listener::server`]): the headers of a request
//! within 10 s, its body within 30 s (else 408), at most 1024 connections at once.
//!
//! A request goes through, in order: the plugin must run and declare `inbound` (404); the
//! `Authorization: Bearer` token must be the one its `inbound.token` Secret key holds ([`auth`];
//! 401, or 503 when the Secret cannot be read now); the
//! body must be at most [`MAX_PAYLOAD`] (413), arrive in time (408) and be JSON (400). Only then does the plugin see
//! it: its `map-inbound` names the primaries to reconcile (its error: 422), which are enqueued in
//! its controller's scheduler through the plugin's
//! [`Inlet`](crate::source::inbound::Inlet), with the payload kept for `reconcile` when the
//! plugin caches inbound events; the answer is 202 with the number enqueued. Every answer is
//! counted in `wasmop_inbound_requests_total{plugin,code}`, and every refusal logged as a warning.
//!
//! With several replicas, an event goes where its primaries run ([`forward`], decided by
//! [`route`]): a standby forwards the whole request to the leader, a shard member delivers the
//! primaries it owns and forwards each other owner its part, at the address the owner advertises
//! in its Lease ([`peers`]). The answer is 202 only once every part is queued where it runs;
//! else 503 naming the parts that were not.
//!
//! The plugin is looked up at each request: plugins started later, hot reloaded or installed by
//! `ReconcilerPlugin` resources take events as soon as their controller runs.

pub mod auth;
pub mod forward;
pub mod route;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::connect_info::ConnectInfo;
use axum::extract::{Path, State};
use axum::http::header::{CONTENT_LENGTH, CONTENT_TYPE, WWW_AUTHENTICATE};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::host::Host;
use crate::listener::Limits;
use crate::listener::body;
use crate::listener::server;
use crate::listener::tls::{TlsError, TlsFiles, TlsListener};
use crate::runtime::CallError;
use crate::secrets::SecretKey;
use crate::source::inbound::{Inlet, NotRunning};
use forward::{ForwardError, Forwarded, Forwarder, PartFailed};
use route::{LeaderRoute, Unroutable};

/// The largest payload taken: 1 MiB.
pub const MAX_PAYLOAD: usize = 1024 * 1024;

/// The path of a plugin's inbound events.
pub const ROUTE: &str = "/plugins/{name}/events";

/// Why the events listener cannot start.
#[derive(Debug, thiserror::Error)]
pub enum EndpointError {
    /// The address cannot be listened on.
    #[error("cannot listen for inbound events on {address}: {source}")]
    Bind {
        /// The address.
        address: SocketAddr,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The listener given has no address.
    #[error("the inbound events listener has no address: {0}")]
    Address(#[source] std::io::Error),
    /// The certificate or key is not usable.
    #[error("inbound events: {0}")]
    Tls(#[from] TlsError),
}

/// How the listener takes connections.
enum Listening {
    Plain(TcpListener),
    Tls(TlsListener),
}

/// The events listener, bound: [`Endpoint::serve`] answers its requests.
pub struct Endpoint {
    listening: Listening,
    address: SocketAddr,
    limits: Limits,
    forwarder: Option<Forwarder>,
}

impl Endpoint {
    /// Listens on `address`, with TLS when `tls` names a certificate and key.
    pub async fn bind(address: SocketAddr, tls: Option<&TlsFiles>) -> Result<Self, EndpointError> {
        // The certificate first: a bad file is reported before anything listens.
        let config = tls.map(TlsFiles::server_config).transpose()?;
        let listener = TcpListener::bind(address).await.map_err(|source| EndpointError::Bind { address, source })?;
        Self::with_config(listener, config)
    }

    /// Answers on `listener`, already bound (port 0 in tests), with TLS when `tls` names a
    /// certificate and key.
    pub fn on(listener: TcpListener, tls: Option<&TlsFiles>) -> Result<Self, EndpointError> {
        let config = tls.map(TlsFiles::server_config).transpose()?;
        Self::with_config(listener, config)
    }

    fn with_config(
        listener: TcpListener,
        config: Option<Arc<tokio_rustls::rustls::ServerConfig>>,
    ) -> Result<Self, EndpointError> {
        let address = listener.local_addr().map_err(EndpointError::Address)?;
        let listening = match config {
            Some(config) => Listening::Tls(TlsListener::new(listener, config)),
            None => Listening::Plain(listener),
        };
        Ok(Self { listening, address, limits: Limits::default(), forwarder: None })
    }

    /// This endpoint, bounding its clients by `limits` rather than the defaults.
    #[must_use]
    pub fn with_limits(self, limits: Limits) -> Self {
        Self { limits, ..self }
    }

    /// This endpoint, forwarding the events other replicas run to them with `forwarder`
    /// (see [`forward`]); without one, an event this replica does not run is refused (503).
    #[must_use]
    pub fn with_forwarder(self, forwarder: Forwarder) -> Self {
        Self { forwarder: Some(forwarder), ..self }
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.address
    }

    /// Answers inbound events for `host`'s plugins until `shutdown`; requests in flight finish.
    pub async fn serve(self, host: Arc<Host>, shutdown: CancellationToken) -> std::io::Result<()> {
        let events = Arc::new(Events { host, forwarder: self.forwarder });
        let app = axum::Router::new().route(ROUTE, axum::routing::post(post_events)).with_state(events);
        let (address, limits) = (self.address, self.limits);
        match self.listening {
            Listening::Plain(listener) => {
                tracing::info!(%address, ?limits, "serving inbound events on POST /plugins/<name>/events");
                server::serve(listener, app, limits, shutdown).await;
            }
            Listening::Tls(listener) => {
                tracing::info!(%address, ?limits, "serving inbound events on POST /plugins/<name>/events over TLS");
                server::serve(listener, app, limits, shutdown).await;
            }
        }
        Ok(())
    }
}

/// Why an inbound event was refused; each has its HTTP status ([`Rejection::status`]).
#[derive(Debug, thiserror::Error)]
pub enum Rejection {
    /// No running plugin has the name: 404.
    #[error("no running plugin is named {0:?}")]
    UnknownPlugin(String),
    /// The plugin declares no `inbound`: 404.
    #[error("the plugin does not take inbound events")]
    NotInbound,
    /// The token is missing or wrong (401), or cannot be checked now (503).
    #[error(transparent)]
    Denied(#[from] auth::Denied),
    /// This replica does not lead (leader election): 503; the leader takes events.
    #[error("this replica does not lead; the leader takes inbound events")]
    NotLeading,
    /// Oversized (413), too slow (408), or the body could not be read (400).
    #[error(transparent)]
    Body(#[from] body::BodyError),
    /// The payload is not JSON: 400.
    #[error("the payload is not JSON: {0}")]
    NotJson(String),
    /// The plugin's controller does not run now (starting, or stopped): 503.
    #[error(transparent)]
    NotRunning(#[from] NotRunning),
    /// The plugin's `map-inbound` refused the payload: 422.
    #[error("the plugin refused the payload: {0}")]
    Refused(String),
    /// The call into `map-inbound` failed (a trap, a deadline): 500.
    #[error("the plugin's map-inbound failed: {0}")]
    Failed(#[from] CallError),
    /// The event cannot be placed where it runs now (503), or a forwarded request asks for
    /// primaries the payload does not map to (403).
    #[error(transparent)]
    Unroutable(#[from] Unroutable),
    /// A malformed forwarding header (400), or too many primaries to forward (503).
    #[error(transparent)]
    Forward(#[from] ForwardError),
    /// Some parts of the event were not queued where they run: 503.
    #[error("not every part of the event was queued: {}", parts(.0))]
    PartsFailed(Vec<(String, PartFailed)>),
    /// The UID of a primary, its shard key, cannot be read now: 503.
    #[error("cannot place the primaries among the shards: {0}")]
    Placement(#[source] kube::Error),
}

/// The failed parts of an event, each with its owner.
fn parts(failed: &[(String, PartFailed)]) -> String {
    failed.iter().map(|(part, why)| format!("{part}: {why}")).collect::<Vec<_>>().join("; ")
}

impl Rejection {
    /// The HTTP status of the answer.
    pub fn status(&self) -> StatusCode {
        match self {
            Self::UnknownPlugin(_) | Self::NotInbound => StatusCode::NOT_FOUND,
            Self::Denied(denied) if denied.unauthenticated() => StatusCode::UNAUTHORIZED,
            Self::Denied(_) | Self::NotLeading | Self::NotRunning(_) => StatusCode::SERVICE_UNAVAILABLE,
            Self::Unroutable(Unroutable::NotMapped(_)) => StatusCode::FORBIDDEN,
            Self::Forward(ForwardError::Malformed) => StatusCode::BAD_REQUEST,
            Self::Unroutable(_) | Self::Forward(_) | Self::PartsFailed(_) | Self::Placement(_) => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            Self::Body(err) => err.status(),
            Self::NotJson(_) => StatusCode::BAD_REQUEST,
            Self::Refused(_) => StatusCode::UNPROCESSABLE_ENTITY,
            Self::Failed(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// What the caller is told: why, except for what is not theirs to know (the token's Secret,
    /// the plugin's trap), which goes to the log only.
    fn message(&self) -> String {
        match self {
            Self::Denied(denied) if denied.unauthenticated() => "unauthorized".into(),
            Self::Denied(_) => "cannot check the token now".into(),
            Self::Failed(_) => "the plugin failed to map the payload".into(),
            other => other.to_string(),
        }
    }
}

impl IntoResponse for Rejection {
    fn into_response(self) -> Response {
        let status = self.status();
        let body = serde_json::json!({ "error": self.message() }).to_string();
        let mut response = (status, [(CONTENT_TYPE, "application/json")], body).into_response();
        if status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(WWW_AUTHENTICATE, "Bearer".parse().expect("a valid header value"));
        }
        response
    }
}

/// What the events listener serves with: the host, and the forwarder to the other replicas.
struct Events {
    host: Arc<Host>,
    forwarder: Option<Forwarder>,
}

/// `POST /plugins/<name>/events`.
async fn post_events(
    State(events): State<Arc<Events>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let host = &events.host;
    let answer = accept(&events, &name, &headers, body).await;
    // Names of plugins that do not run are the caller's words: not a label (unbounded series).
    let plugin = match &answer {
        Err(Rejection::UnknownPlugin(_)) => "",
        _ => name.as_str(),
    };
    let forwarded = headers.contains_key(forward::FORWARDED_HEADER);
    match answer {
        Ok(enqueued) => {
            host.metrics().inbound_request(plugin, StatusCode::ACCEPTED.as_u16());
            tracing::debug!(plugin, %peer, enqueued, forwarded, "inbound event accepted");
            let body = serde_json::json!({ "enqueued": enqueued }).to_string();
            (StatusCode::ACCEPTED, [(CONTENT_TYPE, "application/json")], body).into_response()
        }
        Err(rejection) => {
            let code = rejection.status().as_u16();
            host.metrics().inbound_request(plugin, code);
            tracing::warn!(plugin = name, code, %peer, forwarded, "inbound event refused: {rejection}");
            rejection.into_response()
        }
    }
}

/// Checks the request and hands it to the plugin, here or where it runs (see [`forward`]); the
/// number of primaries enqueued.
async fn accept(events: &Events, name: &str, headers: &HeaderMap, body: Body) -> Result<usize, Rejection> {
    let host = &events.host;
    let (module, inlet) = host.inlet(name).ok_or_else(|| Rejection::UnknownPlugin(name.to_string()))?;
    let inbound = module.config().inbound.as_ref().ok_or(Rejection::NotInbound)?;
    let token = &inbound.token;
    let secret = SecretKey { namespace: token.namespace.clone(), name: token.name.clone(), key: token.key.clone() };
    auth::check(headers, &secret, host.secrets_of(name).as_ref()).await?;
    let forwarded = Forwarded::of(headers)?;
    let placement = inlet.placement();
    // A plugin the leader runs: here, or the whole request to the leader.
    let to_leader = match &placement {
        Some(_) => LeaderRoute::Here,
        None => {
            let leading = host.fence().gate().map(|gate| gate.is_open());
            let leader = events.forwarder.as_ref().map(|f| f.peers().leader()).unwrap_or_default();
            match route::to_leader(leading, forwarded.is_some(), &leader) {
                Err(_) if events.forwarder.is_none() => return Err(Rejection::NotLeading),
                routed => routed?,
            }
        }
    };
    let declared = headers.get(CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse().ok());
    let bytes = body::read(body, declared, MAX_PAYLOAD).await?;
    let payload = std::str::from_utf8(&bytes).map_err(|e| Rejection::NotJson(e.to_string()))?;
    serde_json::from_str::<serde::de::IgnoredAny>(payload).map_err(|e| Rejection::NotJson(e.to_string()))?;
    let authorization = headers.get(axum::http::header::AUTHORIZATION);
    if let LeaderRoute::To { identity, address } = to_leader {
        let forwarder = events.forwarder.as_ref().expect("a leader to forward to comes from the forwarder");
        let sent = forwarder.send(&address, name, authorization, bytes.clone(), &Forwarded::All).await;
        return sent.map_err(|why| Rejection::PartsFailed(vec![(format!("the leader {identity} at {address}"), why)]));
    }
    let reader = inlet.reader()?;
    let primaries = module.map_inbound(reader, payload).await?.map_err(Rejection::Refused)?;
    let keys = inlet.keys(primaries)?;
    if !keys.skipped.is_empty() {
        tracing::warn!(plugin = name, skipped = ?keys.skipped,
            "map-inbound named namespaced primaries without a namespace; they are skipped");
    }
    let payload: Arc<str> = Arc::from(payload);
    let mapped = keys.enqueued;
    // A forwarded request: exactly what it asks for, if the payload maps to it and it is ours.
    if let Some(forwarded) = forwarded {
        let asked = match forwarded {
            Forwarded::All => mapped.clone(),
            Forwarded::Only(asked) => asked,
        };
        match &placement {
            Some(placement) => route::take_forwarded(&asked, &mapped, |key| placement.owns(key))?,
            None => route::take_forwarded(&asked, &mapped, |_| true)?,
        }
        return Ok(inlet.deliver_keys(asked, &payload)?.len());
    }
    let Some(placement) = placement else {
        return Ok(inlet.deliver_keys(mapped, &payload)?.len());
    };
    let Some(forwarder) = &events.forwarder else {
        return Err(Unroutable::NotMember.into());
    };
    let parts = Parts { inlet: &inlet, forwarder, name, authorization, body: &bytes, payload: &payload };
    let placed = place(&placement, mapped).await?;
    match parts.deliver(route::split(placed, forwarder.peers().identity(), &forwarder.peers().members())?).await {
        Ok(enqueued) => Ok(enqueued),
        // Some owners no longer own their part (the view moved): once more with the view now.
        Err(Delivery { enqueued, moved, failed }) if failed.is_empty() && !moved.is_empty() => {
            tokio::time::sleep(RETRY_AFTER).await;
            let placed = place(&placement, moved.into_iter().flat_map(|(part, _)| part.primaries).collect()).await?;
            let plan = route::split(placed, forwarder.peers().identity(), &forwarder.peers().members())?;
            match parts.deliver(plan).await {
                Ok(more) => Ok(enqueued + more),
                Err(Delivery { moved, failed, .. }) => Err(Rejection::PartsFailed(Delivery::failures(moved, failed))),
            }
        }
        Err(Delivery { moved, failed, .. }) => Err(Rejection::PartsFailed(Delivery::failures(moved, failed))),
    }
}

/// How long a forwarder waits before it retries a part whose owner no longer owns it: about the
/// time the replicas take to see each other's Leases change.
const RETRY_AFTER: std::time::Duration = std::time::Duration::from_millis(500);

/// The primaries `keys` with the hashes of their shard keys.
async fn place(
    placement: &crate::source::inbound::Placement,
    keys: Vec<crate::object::ObjectKey>,
) -> Result<Vec<(crate::object::ObjectKey, Option<u64>)>, Rejection> {
    let mut placed = Vec::with_capacity(keys.len());
    for key in keys {
        let hash = placement.hash(&key).await.map_err(Rejection::Placement)?;
        placed.push((key, hash));
    }
    Ok(placed)
}

/// What delivers the parts of one event.
struct Parts<'a> {
    inlet: &'a Inlet,
    forwarder: &'a Forwarder,
    name: &'a str,
    authorization: Option<&'a axum::http::HeaderValue>,
    body: &'a axum::body::Bytes,
    payload: &'a Arc<str>,
}

/// The parts of an event that were not all queued.
struct Delivery {
    /// How many primaries were enqueued.
    enqueued: usize,
    /// The parts whose owners no longer own them.
    moved: Vec<(route::Part, PartFailed)>,
    /// The parts that failed otherwise (this replica's own among them).
    failed: Vec<(String, PartFailed)>,
}

impl Delivery {
    fn failures(
        moved: Vec<(route::Part, PartFailed)>,
        mut failed: Vec<(String, PartFailed)>,
    ) -> Vec<(String, PartFailed)> {
        failed.extend(moved.into_iter().map(|(part, why)| (describe(&part), why)));
        failed
    }
}

/// Who takes a part, for the caller.
fn describe(part: &route::Part) -> String {
    format!("replica {} at {} ({})", part.identity, part.address, route::names(&part.primaries))
}

impl Parts<'_> {
    /// Delivers this replica's part of `plan` and forwards the others, all at once; the number
    /// enqueued when every part was queued.
    async fn deliver(&self, plan: route::Plan) -> Result<usize, Delivery> {
        let mut delivery = Delivery { enqueued: 0, moved: Vec::new(), failed: Vec::new() };
        if !plan.here.is_empty() {
            match self.inlet.deliver_keys(plan.here, self.payload) {
                Ok(enqueued) => delivery.enqueued += enqueued.len(),
                Err(NotRunning) => delivery.failed.push((
                    "this replica".into(),
                    PartFailed::Refused { status: 503, message: NotRunning.to_string() },
                )),
            }
        }
        let sent = plan.there.into_iter().map(|part| async move {
            let what = Forwarded::Only(part.primaries.clone());
            let sent = self.forwarder.send(&part.address, self.name, self.authorization, self.body.clone(), &what);
            (sent.await, part)
        });
        for (sent, part) in futures::future::join_all(sent).await {
            match sent {
                Ok(enqueued) => delivery.enqueued += enqueued,
                Err(why) if why.moved() => delivery.moved.push((part, why)),
                Err(why) => delivery.failed.push((describe(&part), why)),
            }
        }
        if delivery.moved.is_empty() && delivery.failed.is_empty() { Ok(delivery.enqueued) } else { Err(delivery) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_refusal_has_its_status() {
        let cases = [
            (Rejection::UnknownPlugin("x".into()), 404),
            (Rejection::NotInbound, 404),
            (Rejection::Denied(auth::Denied::NoToken), 401),
            (Rejection::Denied(auth::Denied::WrongToken), 401),
            (Rejection::Denied(auth::Denied::NoSecret("gone".into())), 401),
            (
                Rejection::Denied(auth::Denied::Unavailable(crate::secrets::SecretError::NoCluster {
                    name: "s".into(),
                })),
                503,
            ),
            (Rejection::NotLeading, 503),
            (Rejection::Body(body::BodyError::TooLarge { limit: 1 }), 413),
            (Rejection::Body(body::BodyError::TimedOut { limit: std::time::Duration::from_secs(30) }), 408),
            (Rejection::NotJson("eof".into()), 400),
            (Rejection::NotRunning(NotRunning), 503),
            (Rejection::Refused("no".into()), 422),
        ];
        for (rejection, code) in cases {
            assert_eq!(rejection.status().as_u16(), code, "{rejection}");
        }
    }

    #[test]
    fn the_caller_is_not_told_about_the_tokens_secret() {
        let denied = Rejection::Denied(auth::Denied::NoSecret("Secret ns/hook does not exist".into()));
        assert_eq!(denied.message(), "unauthorized");
        let response = denied.into_response();
        assert_eq!(response.headers()[WWW_AUTHENTICATE], "Bearer");
        assert_eq!(
            Rejection::Refused("unknown repository".into()).message(),
            "the plugin refused the payload: unknown repository"
        );
    }
}

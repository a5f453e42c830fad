//! Inbound events (JOSDK's SimpleInboundEventSource and CachingInboundEventSource,
//! controller-runtime's `source.Channel`): `POST /plugins/<name>/events` on the host's events
//! listener (`wasmop run --events-addr`, off by default; TLS with a certificate and key, see
//! [`tls`]).
//!
//! A request goes through, in order: the plugin must run and declare `inbound` (404); the
//! `Authorization: Bearer` token must be the one its `inbound.token` Secret key holds ([`auth`];
//! 401, or 503 when the Secret cannot be read now); on a replica that does not lead, 503; the
//! body must be at most [`body::MAX_PAYLOAD`] (413) and JSON (400). Only then does the plugin see
//! it: its `map-inbound` names the primaries to reconcile (its error: 422), which are enqueued in
//! its controller's scheduler through the plugin's
//! [`Inlet`](crate::source::inbound::Inlet), with the payload kept for `reconcile` when the
//! plugin caches inbound events; the answer is 202 with the number enqueued. Every answer is
//! counted in `wasmop_inbound_requests_total{plugin,code}`, and every refusal logged as a warning.
//!
//! The plugin is looked up at each request: plugins started later, hot reloaded or installed by
//! `ReconcilerPlugin` resources take events as soon as their controller runs.

pub mod auth;
pub mod body;
pub mod tls;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::Body;
use axum::extract::connect_info::{ConnectInfo, Connected};
use axum::extract::{Path, State};
use axum::http::header::{CONTENT_LENGTH, CONTENT_TYPE, WWW_AUTHENTICATE};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::serve::IncomingStream;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::host::Host;
use crate::runtime::CallError;
use crate::secrets::SecretKey;
use crate::source::inbound::NotRunning;
use tls::{TlsError, TlsFiles, TlsListener};

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
        Ok(Self { listening, address })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.address
    }

    /// Answers inbound events for `host`'s plugins until `shutdown`; requests in flight finish.
    pub async fn serve(self, host: Arc<Host>, shutdown: CancellationToken) -> std::io::Result<()> {
        let app = axum::Router::new().route(ROUTE, axum::routing::post(post_events)).with_state(host);
        let service = app.into_make_service_with_connect_info::<Peer>();
        let (address, stopped) = (self.address, shutdown.cancelled_owned());
        match self.listening {
            Listening::Plain(listener) => {
                tracing::info!(%address, "serving inbound events on POST /plugins/<name>/events");
                axum::serve(listener, service).with_graceful_shutdown(stopped).await
            }
            Listening::Tls(listener) => {
                tracing::info!(%address, "serving inbound events on POST /plugins/<name>/events over TLS");
                axum::serve(listener, service).with_graceful_shutdown(stopped).await
            }
        }
    }
}

/// The caller's address, for the log.
#[derive(Debug, Clone, Copy)]
struct Peer(SocketAddr);

impl Connected<IncomingStream<'_, TcpListener>> for Peer {
    fn connect_info(stream: IncomingStream<'_, TcpListener>) -> Self {
        Self(*stream.remote_addr())
    }
}

impl Connected<IncomingStream<'_, TlsListener>> for Peer {
    fn connect_info(stream: IncomingStream<'_, TlsListener>) -> Self {
        Self(*stream.remote_addr())
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
    /// Oversized (413), or the body could not be read (400).
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
}

impl Rejection {
    /// The HTTP status of the answer.
    pub fn status(&self) -> StatusCode {
        match self {
            Self::UnknownPlugin(_) | Self::NotInbound => StatusCode::NOT_FOUND,
            Self::Denied(denied) if denied.unauthenticated() => StatusCode::UNAUTHORIZED,
            Self::Denied(_) | Self::NotLeading | Self::NotRunning(_) => StatusCode::SERVICE_UNAVAILABLE,
            Self::Body(body::BodyError::TooLarge { .. }) => StatusCode::PAYLOAD_TOO_LARGE,
            Self::Body(body::BodyError::Unreadable(_)) | Self::NotJson(_) => StatusCode::BAD_REQUEST,
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

/// `POST /plugins/<name>/events`.
async fn post_events(
    State(host): State<Arc<Host>>,
    ConnectInfo(Peer(peer)): ConnectInfo<Peer>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let answer = accept(&host, &name, &headers, body).await;
    // Names of plugins that do not run are the caller's words: not a label (unbounded series).
    let plugin = match &answer {
        Err(Rejection::UnknownPlugin(_)) => "",
        _ => name.as_str(),
    };
    match answer {
        Ok(enqueued) => {
            host.metrics().inbound_request(plugin, StatusCode::ACCEPTED.as_u16());
            tracing::debug!(plugin, %peer, enqueued, "inbound event accepted");
            let body = serde_json::json!({ "enqueued": enqueued }).to_string();
            (StatusCode::ACCEPTED, [(CONTENT_TYPE, "application/json")], body).into_response()
        }
        Err(rejection) => {
            let code = rejection.status().as_u16();
            host.metrics().inbound_request(plugin, code);
            tracing::warn!(plugin = name, code, %peer, "inbound event refused: {rejection}");
            rejection.into_response()
        }
    }
}

/// Checks the request and hands it to the plugin; the number of primaries enqueued.
async fn accept(host: &Host, name: &str, headers: &HeaderMap, body: Body) -> Result<usize, Rejection> {
    let (module, inlet) = host.inlet(name).ok_or_else(|| Rejection::UnknownPlugin(name.to_string()))?;
    let inbound = module.config().inbound.as_ref().ok_or(Rejection::NotInbound)?;
    let token = &inbound.token;
    let secret = SecretKey { namespace: token.namespace.clone(), name: token.name.clone(), key: token.key.clone() };
    auth::check(headers, &secret, host.secrets_of(name).as_ref()).await?;
    if host.fence().gate().is_some_and(|gate| !gate.is_open()) {
        return Err(Rejection::NotLeading);
    }
    let declared = headers.get(CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse().ok());
    let bytes = body::read(body, declared, body::MAX_PAYLOAD).await?;
    let payload = std::str::from_utf8(&bytes).map_err(|e| Rejection::NotJson(e.to_string()))?;
    serde_json::from_str::<serde::de::IgnoredAny>(payload).map_err(|e| Rejection::NotJson(e.to_string()))?;
    let reader = inlet.reader()?;
    let primaries = module.map_inbound(reader, payload).await?.map_err(Rejection::Refused)?;
    let delivered = inlet.deliver(primaries, &Arc::from(payload))?;
    if !delivered.skipped.is_empty() {
        tracing::warn!(plugin = name, skipped = ?delivered.skipped,
            "map-inbound named namespaced primaries without a namespace; they are skipped");
    }
    Ok(delivered.enqueued.len())
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

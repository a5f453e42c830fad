//! Admission and conversion webhooks served from the plugins (`wasmop run --webhook-addr`, off
//! by default): an HTTPS endpoint on every replica, leader or not, sharded or not, since an
//! admission must not wait for an election. Per plugin, `POST /validate/<plugin>` calls its
//! `validate`, `/mutate/<plugin>` its `default` (answered with the JSON patch,
//! [`patch`]) and `/convert/<plugin>` its `convert` ([`call`]).
//!
//! Each request takes the plugin's module current at that moment: a hot reload's new version
//! takes the next request, and a request under way finishes on the version it started with.
//! The call runs sandboxed like a reconcile, with a deadline below the webhook's timeout
//! ([`policy`]); a trap, a deadline or a refusal by the host is answered as the webhook's
//! failure policy says, in a message naming the plugin. A request for a plugin that does not
//! run or declares no such webhook is answered 404, a body that is no review 400: the API
//! server then applies the configuration's own failure policy.
//!
//! The listener is the events listener's ([`crate::listener`]: header and body timeouts,
//! bounded handshakes and connections), with TLS always, its certificate given or managed by
//! the host ([`certificate`]); the host writes the webhook configurations that point the API
//! server at it ([`registration`]). Requests are counted under controller-runtime's webhook
//! metric names ([`crate::metrics::WebhookMetrics`]) and traced, one span per call. A
//! plugin's shadow candidate is asked each request once the live answer is made, its answer
//! compared and counted, never returned ([`shadowed`]); a recording plugin's calls are written
//! as webhook fixtures ([`recorded`]).

pub mod bounded;
pub mod call;
pub mod certificate;
pub mod configurations;
pub mod conversion;
pub mod fixture;
pub mod patch;
pub mod policy;
pub mod reader;
pub mod recorded;
pub mod registration;
pub mod review;
pub mod shadowed;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use axum::body::Body;
use axum::extract::{Path as UrlPath, State};
use axum::http::header::{CONTENT_LENGTH, CONTENT_TYPE};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use tokio::net::TcpListener;
use tokio_rustls::rustls::ServerConfig;
use tokio_util::sync::CancellationToken;

use crate::host::Host;
use crate::listener::tls::TlsListener;
use crate::listener::{Limits, body, server};
use call::{Path, Plugin, Unanswered};

/// The largest review taken: an object and its old version, each up to the API server's
/// largest (3 MiB), and the rest.
pub const MAX_REVIEW: usize = 7 * 1024 * 1024;

/// Why the endpoint cannot start.
#[derive(Debug, thiserror::Error)]
pub enum EndpointError {
    /// The address cannot be listened on.
    #[error("cannot listen for webhooks on {address}: {source}")]
    Bind {
        /// The address.
        address: SocketAddr,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The listener given has no address.
    #[error("the webhook listener has no address: {0}")]
    Address(#[source] std::io::Error),
}

/// The webhook endpoint, bound: [`Endpoint::serve`] answers its requests.
pub struct Endpoint {
    listener: TlsListener,
    address: SocketAddr,
}

impl Endpoint {
    /// Listens on `address` with the TLS configuration `tls`.
    pub async fn bind(address: SocketAddr, tls: Arc<ServerConfig>) -> Result<Self, EndpointError> {
        let listener = TcpListener::bind(address).await.map_err(|source| EndpointError::Bind { address, source })?;
        Self::on(listener, tls)
    }

    /// Answers on `listener`, already bound (port 0 in tests), with the TLS configuration `tls`.
    pub fn on(listener: TcpListener, tls: Arc<ServerConfig>) -> Result<Self, EndpointError> {
        let address = listener.local_addr().map_err(EndpointError::Address)?;
        Ok(Self { listener: TlsListener::new(listener, tls), address })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.address
    }

    /// Answers webhook requests for `host`'s plugins until `shutdown`; requests in flight
    /// finish.
    pub async fn serve(self, host: Arc<Host>, shutdown: CancellationToken) {
        let route = |path: Path| {
            axum::routing::post(
                move |state: State<Arc<Host>>, name: UrlPath<String>, headers: HeaderMap, body: Body| {
                    handle(state, name, headers, body, path)
                },
            )
        };
        let app = axum::Router::new()
            .route("/validate/{name}", route(Path::Validate))
            .route("/mutate/{name}", route(Path::Mutate))
            .route("/convert/{name}", route(Path::Convert))
            .with_state(host);
        // The events listener's bounds: 10 s for the headers, 30 s for the body, 1024 connections.
        let (address, limits) = (self.address, Limits::default());
        tracing::info!(%address, ?limits, "serving webhooks on /validate/<plugin>, /mutate/<plugin>, /convert/<plugin>");
        server::serve(self.listener, app, limits, shutdown).await;
    }
}

/// Why a request got no review.
#[derive(Debug, thiserror::Error)]
enum Refusal {
    /// Oversized (413), too slow (408) or unreadable (400).
    #[error(transparent)]
    Body(#[from] body::BodyError),
    /// Not served here (404), or no review (400).
    #[error(transparent)]
    Unanswered(#[from] Unanswered),
}

impl Refusal {
    fn status(&self) -> StatusCode {
        match self {
            Self::Body(err) => err.status(),
            Self::Unanswered(Unanswered::UnknownPlugin(_) | Unanswered::NotDeclared { .. }) => StatusCode::NOT_FOUND,
            Self::Unanswered(_) => StatusCode::BAD_REQUEST,
        }
    }
}

/// `POST /<path>/<name>`.
async fn handle(
    State(host): State<Arc<Host>>,
    UrlPath(name): UrlPath<String>,
    headers: HeaderMap,
    body: Body,
    path: Path,
) -> Response {
    let started = Instant::now();
    let webhook = format!("{}/{name}", path.prefix());
    let found = reader::plugin(&host, &name).filter(|(module, _)| call::serves(module, path));
    let answer = match found {
        // Names of plugins that do not run are the caller's words: not a label (unbounded series).
        None => {
            let refusal = match reader::plugin(&host, &name) {
                None => Refusal::from(Unanswered::UnknownPlugin(name.clone())),
                Some(_) => Refusal::from(Unanswered::NotDeclared { plugin: name.clone(), kind: path.kind() }),
            };
            Err((String::new(), refusal))
        }
        Some((module, cache)) => {
            let _in_flight = host.metrics().webhooks().in_flight(&webhook);
            let plugin = Plugin { name: &name, module: &module, cache };
            let answered = answer(&plugin, path, &headers, body).await;
            answered
                .map(|(review, body)| {
                    if let Some(records) = host.records_of(&name) {
                        recorded::record(&records, path, &body, &review);
                    }
                    if let Some(shadow) = host.shadow_of(&name) {
                        shadowed::compare(&shadow, &plugin, path, body, &review);
                    }
                    review
                })
                .map_err(|refusal| (webhook.clone(), refusal))
        }
    };
    let metrics = host.metrics().webhooks();
    match answer {
        Ok(review) => {
            metrics.answered(&webhook, StatusCode::OK.as_u16(), started.elapsed());
            (StatusCode::OK, [(CONTENT_TYPE, "application/json")], review).into_response()
        }
        Err((label, refusal)) => {
            let status = refusal.status();
            metrics.answered(&label, status.as_u16(), started.elapsed());
            tracing::warn!(
                plugin = name,
                path = path.prefix(),
                code = status.as_u16(),
                "webhook request refused: {refusal}"
            );
            (status, [(CONTENT_TYPE, "text/plain")], refusal.to_string()).into_response()
        }
    }
}

/// Reads the review and has the plugin answer it: the answer, and the review it answered.
async fn answer(
    plugin: &Plugin<'_>,
    path: Path,
    headers: &HeaderMap,
    body: Body,
) -> Result<(String, bytes::Bytes), Refusal> {
    let declared = headers.get(CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse().ok());
    let bytes = body::read(body, declared, MAX_REVIEW).await?;
    let answer = match path {
        Path::Convert => call::convert(plugin, &bytes).await?,
        Path::Validate | Path::Mutate => call::admit(plugin, path, &bytes).await?,
    };
    Ok((answer, bytes))
}

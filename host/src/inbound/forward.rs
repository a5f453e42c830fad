//! Forwarding an inbound event to the replica that runs its primaries, over HTTP.
//!
//! With several replicas, the one a client reaches (through a Service) may not run the primaries
//! of its event: a standby (`--leader-elect`), or a shard member that does not own them
//! (`--shards`). That replica forwards the event to the one that does, at the events address it
//! advertises in its Lease ([`crate::peers`]): the same path, `Authorization` header and body,
//! with the header [`FORWARDED_HEADER`] saying which primaries it must take ([`Forwarded`]).
//! The client is answered 202 only once every part of the event is queued where it will run:
//! this replica's part delivered here, every other part answered 202 by its owner.
//!
//! Why HTTP between the replicas, rather than through the API server (an annotation on the
//! primary, or a short-lived object the owner watches): it adds no write to the API server per
//! event and no object to collect, the owner answers within the client's request (so a 202
//! still means queued where it runs, and a failure is the client's 503 to retry), and the
//! payload, which may be sensitive, is not stored in etcd.
//!
//! Threat model:
//! - Who may call: only a caller with the plugin's inbound token. A forwarded request is
//!   authenticated by its owner exactly as a direct one (the token travels in the forwarded
//!   `Authorization` header); the forwarding header grants nothing by itself.
//! - A non-owner cannot make an owner reconcile what it does not own, nor what the payload does
//!   not name: the owner runs `map-inbound` on the payload itself and takes the forwarded
//!   primaries only if every one is among those it maps and those it owns now
//!   ([`super::route::take_forwarded`]); else 403 or 503.
//! - No forwarding loops: a forwarded request is never forwarded again; a replica that does not
//!   own (or lead) any more answers 503, and the forwarder answers its client 503 (after one
//!   retry with its newer view, for a shard that moved).
//! - A replica that lost its lease (its membership lapsed, or it thinks it leads but could not
//!   renew) forwards nothing it would have delivered itself: it answers 503 and the client
//!   retries, at another replica through the Service.
//! - Forwards are bounded by [`FORWARD_TIMEOUT`]. When the listener serves TLS, forwards go
//!   over https and trust only the certificates of `--events-tls-cert` (a self-signed
//!   certificate shared by the replicas, or the CA that the chain file includes): each
//!   replica's certificate must name the address it advertises (`--events-advertise-addr`, for
//!   example a per-pod DNS name of a headless Service).

use std::time::Duration;

use axum::body::Bytes;
use axum::http::{HeaderMap, HeaderValue};
use serde::{Deserialize, Serialize};

use crate::listener::tls::{TlsError, TlsFiles};
use crate::object::ObjectKey;
use crate::peers::Peers;

/// The header that marks a forwarded request, naming what its receiver must take.
pub const FORWARDED_HEADER: &str = "wasmop-forwarded";

/// How long a forward may take, its answer included.
pub const FORWARD_TIMEOUT: Duration = Duration::from_secs(5);

/// The most bytes of primaries one forward names: hyper's servers take headers of up to about
/// 400 KiB in all.
const MAX_HEADER: usize = 256 * 1024;

/// What a forwarded request asks its receiver to take.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Forwarded {
    /// Every primary the payload maps to (to the leader): `all`.
    All,
    /// Exactly these (to a shard owner): a JSON list of `{"namespace", "name"}`.
    Only(Vec<ObjectKey>),
}

/// A primary in the header.
#[derive(Serialize, Deserialize)]
struct Named {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    namespace: Option<String>,
    name: String,
}

/// Why a forward failed or cannot be made.
#[derive(Debug, thiserror::Error)]
pub enum ForwardError {
    /// The forwarding header is not one this host writes: 400.
    #[error("the {FORWARDED_HEADER} header is malformed")]
    Malformed,
    /// Too many primaries for one header.
    #[error("too many primaries to forward in one request ({0} bytes of names)")]
    TooMany(usize),
    /// The HTTP client cannot be built (its TLS trust).
    #[error("cannot build the forwarding client: {0}")]
    Client(String),
    /// The certificates to trust cannot be read.
    #[error(transparent)]
    Trust(#[from] TlsError),
}

impl Forwarded {
    /// The header's value.
    pub fn encode(&self) -> Result<HeaderValue, ForwardError> {
        let text = match self {
            Self::All => "all".to_string(),
            Self::Only(keys) => {
                let named: Vec<Named> =
                    keys.iter().map(|k| Named { namespace: k.namespace.clone(), name: k.name.clone() }).collect();
                serde_json::to_string(&named).expect("strings serialize")
            }
        };
        if text.len() > MAX_HEADER {
            return Err(ForwardError::TooMany(text.len()));
        }
        HeaderValue::from_str(&text).map_err(|_| ForwardError::Malformed)
    }

    /// What `headers` ask for, if the request was forwarded.
    pub fn of(headers: &HeaderMap) -> Result<Option<Self>, ForwardError> {
        let Some(value) = headers.get(FORWARDED_HEADER) else { return Ok(None) };
        let text = value.to_str().map_err(|_| ForwardError::Malformed)?;
        if text == "all" {
            return Ok(Some(Self::All));
        }
        let named: Vec<Named> = serde_json::from_str(text).map_err(|_| ForwardError::Malformed)?;
        let keys = named.into_iter().map(|n| ObjectKey { namespace: n.namespace, name: n.name }).collect();
        Ok(Some(Self::Only(keys)))
    }
}

/// Why one part of an event was not queued at its owner.
#[derive(Debug, thiserror::Error)]
pub enum PartFailed {
    /// The owner could not be reached, or did not answer within [`FORWARD_TIMEOUT`].
    #[error("cannot reach it: {0}")]
    Unreachable(String),
    /// The owner answered, but not 202.
    #[error("it answered {status}: {message}")]
    Refused {
        /// Its status.
        status: u16,
        /// Its error message.
        message: String,
    },
    /// The request could not be made.
    #[error(transparent)]
    Unsendable(#[from] ForwardError),
}

impl PartFailed {
    /// Whether the owner may take it after all with a newer view: it no longer owns (503).
    pub fn moved(&self) -> bool {
        matches!(self, Self::Refused { status: 503, .. })
    }
}

/// Sends forwarded events to the replicas that run them; cheap to clone.
#[derive(Debug, Clone)]
pub struct Forwarder {
    http: reqwest::Client,
    scheme: &'static str,
    peers: Peers,
}

impl Forwarder {
    /// Forwards over plain HTTP to the addresses on `peers`.
    pub fn plain(peers: Peers) -> Result<Self, ForwardError> {
        let http = reqwest::Client::builder()
            .timeout(FORWARD_TIMEOUT)
            .build()
            .map_err(|e| ForwardError::Client(e.to_string()))?;
        Ok(Self { http, scheme: "http", peers })
    }

    /// Forwards over https to the addresses on `peers`, trusting the certificates of `tls`
    /// alone (the replicas' own, or their CA).
    pub fn tls(peers: Peers, tls: &TlsFiles) -> Result<Self, ForwardError> {
        let config = tls.client_config()?;
        let http = reqwest::Client::builder()
            .timeout(FORWARD_TIMEOUT)
            .use_preconfigured_tls(config)
            .build()
            .map_err(|e| ForwardError::Client(e.to_string()))?;
        Ok(Self { http, scheme: "https", peers })
    }

    /// The board of the replicas' addresses.
    pub fn peers(&self) -> &Peers {
        &self.peers
    }

    /// Forwards plugin `plugin`'s event (its `authorization` header and `body`) to `address`,
    /// asking it to take `what`; the number of primaries it enqueued.
    pub async fn send(
        &self,
        address: &str,
        plugin: &str,
        authorization: Option<&HeaderValue>,
        body: Bytes,
        what: &Forwarded,
    ) -> Result<usize, PartFailed> {
        let url = format!("{}://{address}/plugins/{plugin}/events", self.scheme);
        let mut request = self
            .http
            .post(url)
            .header(axum::http::header::CONTENT_TYPE, "application/json")
            .header(FORWARDED_HEADER, what.encode()?)
            .body(body);
        if let Some(authorization) = authorization {
            request = request.header(axum::http::header::AUTHORIZATION, authorization.clone());
        }
        let response = request.send().await.map_err(|e| PartFailed::Unreachable(e.to_string()))?;
        let status = response.status().as_u16();
        let text = response.text().await.map_err(|e| PartFailed::Unreachable(e.to_string()))?;
        let answer: serde_json::Value = serde_json::from_str(&text).unwrap_or(serde_json::Value::Null);
        if status != 202 {
            let message = answer["error"].as_str().map_or(text, str::to_string);
            return Err(PartFailed::Refused { status, message });
        }
        Ok(answer["enqueued"].as_u64().and_then(|n| usize::try_from(n).ok()).unwrap_or(0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_header_names_the_primaries_or_all_and_nothing_else_parses() {
        let keys = vec![
            ObjectKey { namespace: Some("ns".into()), name: "a".into() },
            ObjectKey { namespace: None, name: "node-1".into() },
        ];
        for what in [Forwarded::All, Forwarded::Only(keys), Forwarded::Only(Vec::new())] {
            let mut headers = HeaderMap::new();
            headers.insert(FORWARDED_HEADER, what.encode().unwrap());
            assert_eq!(Forwarded::of(&headers).unwrap(), Some(what));
        }
        assert_eq!(Forwarded::of(&HeaderMap::new()).unwrap(), None, "a direct request");
        let mut bad = HeaderMap::new();
        bad.insert(FORWARDED_HEADER, HeaderValue::from_static("[{\"ns\": 1}]"));
        assert!(matches!(Forwarded::of(&bad), Err(ForwardError::Malformed)));
        let many: Vec<ObjectKey> =
            (0..20_000).map(|i| ObjectKey { namespace: None, name: format!("n{i:08}") }).collect();
        assert!(matches!(Forwarded::Only(many).encode(), Err(ForwardError::TooMany(_))));
    }
}

//! What the host grants a plugin beyond its caches: outgoing HTTP to declared origins
//! ([`HttpGrant`]) and inbound events ([`Inbound`]); secrets for both stay with the host
//! ([`SecretKey`]).

use std::time::Duration;

use crate::bindings::wasmop::plugin::types as wit;
use crate::wire::millis;

/// A key of a Kubernetes Secret the host reads for the plugin; the plugin never sees the value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SecretKey {
    /// The Secret's name.
    pub name: String,
    /// Its namespace; `None`: the namespace the host watches primaries in, else `default`.
    pub namespace: Option<String>,
    /// The key in its `data`.
    pub key: String,
}

impl SecretKey {
    /// `key` of the Secret `name`.
    pub fn new(name: impl Into<String>, key: impl Into<String>) -> Self {
        Self { name: name.into(), namespace: None, key: key.into() }
    }

    /// The Secret in `namespace`.
    #[must_use]
    pub fn in_namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = Some(namespace.into());
        self
    }

    fn into_wit(self) -> wit::SecretKey {
        wit::SecretKey { name: self.name, namespace: self.namespace, key: self.key }
    }
}

/// An origin the plugin may call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Origin {
    /// `http` or `https`.
    pub scheme: String,
    /// Host name or IP address.
    pub host: String,
    /// Port; `None`: the scheme's default.
    pub port: Option<u16>,
    /// Headers the host adds from Secrets: (header, secret, prefix).
    pub secret_headers: Vec<(String, SecretKey, Option<String>)>,
}

impl Origin {
    /// The origin of `url` (`https://api.example.com`, `http://127.0.0.1:8080`); a URL without
    /// a scheme or host gives an origin the host refuses at load, naming it.
    pub fn parse(url: &str) -> Self {
        let (scheme, rest) = url.split_once("://").unwrap_or(("", url));
        let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
        let (host, port) = match authority.strip_prefix('[') {
            Some(v6) => match v6.split_once("]:") {
                Some((host, port)) => (host, port.parse().ok()),
                None => (v6.trim_end_matches(']'), None),
            },
            None => match authority.rsplit_once(':') {
                Some((host, port)) => (host, port.parse().ok()),
                None => (authority, None),
            },
        };
        Self { scheme: scheme.to_owned(), host: host.to_owned(), port, secret_headers: Vec::new() }
    }

    /// Adds `header` with the value of `secret`, after `prefix` (e.g. `Bearer `), to every
    /// request to this origin.
    #[must_use]
    pub fn secret_header(mut self, header: impl Into<String>, secret: SecretKey, prefix: Option<&str>) -> Self {
        self.secret_headers.push((header.into(), secret, prefix.map(str::to_owned)));
        self
    }

    fn into_wit(self) -> wit::HttpOrigin {
        wit::HttpOrigin {
            scheme: self.scheme,
            host: self.host,
            port: self.port,
            secret_headers: self
                .secret_headers
                .into_iter()
                .map(|(header, secret, prefix)| wit::SecretHeader { header, secret: secret.into_wit(), prefix })
                .collect(),
        }
    }
}

/// The outgoing HTTP a plugin asks for: the origins, and limits per request (`None`: the host's
/// defaults: connect 5 s, total 30 s, 4 MiB, 8 at once).
///
/// ```
/// use std::time::Duration;
/// use wasmop_guest::{HttpGrant, Origin, SecretKey};
///
/// let grant = HttpGrant::new()
///     .origin(Origin::parse("https://dns.example.com").secret_header(
///         "authorization",
///         SecretKey::new("dns-token", "token"),
///         Some("Bearer "),
///     ))
///     .timeout(Duration::from_secs(5));
/// assert_eq!(grant.origins[0].host, "dns.example.com");
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HttpGrant {
    /// The origins.
    pub origins: Vec<Origin>,
    /// Connect timeout per request.
    pub connect_timeout: Option<Duration>,
    /// Total time per request.
    pub timeout: Option<Duration>,
    /// Largest response body.
    pub max_response_bytes: Option<u64>,
    /// Requests in flight at once.
    pub max_concurrent: Option<u32>,
}

impl HttpGrant {
    /// No origin yet, the host's limits.
    pub fn new() -> Self {
        Self::default()
    }

    /// Allows `origin`.
    #[must_use]
    pub fn origin(mut self, origin: Origin) -> Self {
        self.origins.push(origin);
        self
    }

    /// Connect timeout per request.
    #[must_use]
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = Some(timeout);
        self
    }

    /// Total time per request, until the whole body is read.
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Largest response body, in bytes.
    #[must_use]
    pub fn max_response_bytes(mut self, bytes: u64) -> Self {
        self.max_response_bytes = Some(bytes);
        self
    }

    /// Requests in flight at once.
    #[must_use]
    pub fn max_concurrent(mut self, requests: u32) -> Self {
        self.max_concurrent = Some(requests);
        self
    }

    pub(crate) fn into_wit(self) -> wit::HttpGrant {
        wit::HttpGrant {
            origins: self.origins.into_iter().map(Origin::into_wit).collect(),
            connect_timeout_ms: self.connect_timeout.map(millis),
            timeout_ms: self.timeout.map(millis),
            max_response_bytes: self.max_response_bytes,
            max_concurrent: self.max_concurrent,
        }
    }
}

/// Inbound events (JOSDK's inbound event sources): callers `POST /plugins/<name>/events` with
/// the bearer token held in `token`; [`Reconciler::map_inbound`](crate::Reconciler::map_inbound)
/// names the primaries to reconcile.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Inbound {
    /// The bearer token callers present.
    pub token: SecretKey,
    /// Keep the last payload per primary for `reconcile` ([`Context::inbound`](crate::Context::inbound)).
    pub caching: bool,
}

impl Inbound {
    /// Inbound events authenticated by `token`, not cached.
    pub fn new(token: SecretKey) -> Self {
        Self { token, caching: false }
    }

    /// Keeps the last payload per primary (CachingInboundEventSource).
    #[must_use]
    pub fn caching(mut self) -> Self {
        self.caching = true;
        self
    }

    pub(crate) fn into_wit(self) -> wit::Inbound {
        wit::Inbound { token: self.token.into_wit(), caching: self.caching }
    }
}

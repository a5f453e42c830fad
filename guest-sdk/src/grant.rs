//! What the host grants a plugin beyond its caches: outgoing HTTP to declared origins
//! ([`HttpGrant`]) and inbound events ([`Inbound`]); secrets for both stay with the host
//! ([`SecretKey`]).

use std::time::Duration;

use crate::bindings::wasmop::plugin::types as wit;
use crate::wire::millis;

/// A key of a Kubernetes Secret the host reads for the plugin; the plugin never sees the value.
/// Naming one is not enough: the host loads the plugin only if its ServiceAccount may get the
/// Secret or the operator allows it (`allowedSecrets` in the plugin's overrides).
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

/// Why [`Origin::try_parse`] refused a URL. Its message names the URL and what is wrong, e.g.
/// `origin "https://host:99999": port 99999 is not a port number (1 to 65535)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OriginError {
    /// No `scheme://`.
    NoScheme {
        /// The URL.
        url: String,
    },
    /// A scheme other than `http` and `https`.
    Scheme {
        /// The URL.
        url: String,
        /// Its scheme.
        scheme: String,
    },
    /// User information (`user:password@`) before the host.
    UserInfo {
        /// The URL.
        url: String,
    },
    /// No host.
    NoHost {
        /// The URL.
        url: String,
    },
    /// A `[` that opens an IPv6 address without its `]`, or text after it other than `:port`.
    Ipv6 {
        /// The URL.
        url: String,
    },
    /// A host with characters no host name or IP address has.
    Host {
        /// The URL.
        url: String,
        /// The host.
        host: String,
    },
    /// A port that is not a number from 1 to 65535.
    Port {
        /// The URL.
        url: String,
        /// The port as written.
        port: String,
    },
}

impl std::fmt::Display for OriginError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OriginError::NoScheme { url } => write!(f, "origin {url:?}: it has no scheme; write https://{url}"),
            OriginError::Scheme { url, scheme } => {
                write!(f, "origin {url:?}: the scheme is {scheme:?}; only http and https are allowed")
            }
            OriginError::UserInfo { url } => write!(
                f,
                "origin {url:?}: user information (`user@`) has no place in an origin; send credentials with a secret header"
            ),
            OriginError::NoHost { url } => write!(f, "origin {url:?}: it names no host"),
            OriginError::Ipv6 { url } => {
                write!(f, "origin {url:?}: an IPv6 address is written [address] or [address]:port")
            }
            OriginError::Host { url, host } => {
                write!(f, "origin {url:?}: the host {host:?} is not a host name or IP address")
            }
            OriginError::Port { url, port } => {
                write!(f, "origin {url:?}: port {port} is not a port number (1 to 65535)")
            }
        }
    }
}

impl std::error::Error for OriginError {}

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
    /// The origin of `url` (`https://api.example.com`, `http://127.0.0.1:8080`,
    /// `http://[::1]:8080`); a path, query or fragment is ignored: the grant is the whole
    /// origin. Scheme and host are taken in lower case.
    ///
    /// # Panics
    ///
    /// When [`Origin::try_parse`] refuses `url` (no or another scheme than `http` and `https`,
    /// user information, no host, a port that is not 1 to 65535), with its message: called in
    /// [`Reconciler::config`](crate::Reconciler::config), the plugin then fails to load, and the
    /// host's log names the URL and what is wrong.
    pub fn parse(url: &str) -> Self {
        Self::try_parse(url).unwrap_or_else(|error| panic!("{error}"))
    }

    /// The origin of `url`, as [`Origin::parse`] reads it, or why it cannot be granted.
    ///
    /// ```
    /// use wasmop_guest::Origin;
    ///
    /// assert_eq!(Origin::try_parse("https://api.example.com:8443/v1").unwrap().port, Some(8443));
    /// assert!(Origin::try_parse("https://api.example.com:99999").is_err());
    /// assert!(Origin::try_parse("https://user:password@api.example.com").is_err());
    /// ```
    pub fn try_parse(url: &str) -> Result<Self, OriginError> {
        let owned = || url.to_owned();
        let (scheme, rest) = url.split_once("://").ok_or_else(|| OriginError::NoScheme { url: owned() })?;
        let scheme = scheme.to_ascii_lowercase();
        if scheme != "http" && scheme != "https" {
            return Err(OriginError::Scheme { url: owned(), scheme });
        }
        let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
        if authority.contains('@') {
            return Err(OriginError::UserInfo { url: owned() });
        }
        let (host, port, v6) = match authority.strip_prefix('[') {
            Some(v6) => {
                let (host, after) = v6.split_once(']').ok_or_else(|| OriginError::Ipv6 { url: owned() })?;
                let port = match after {
                    "" => None,
                    after => Some(after.strip_prefix(':').ok_or_else(|| OriginError::Ipv6 { url: owned() })?),
                };
                (host, port, true)
            }
            None => match authority.rsplit_once(':') {
                Some((host, port)) => (host, Some(port), false),
                None => (authority, None, false),
            },
        };
        if host.is_empty() {
            return Err(OriginError::NoHost { url: owned() });
        }
        let allowed = |c: char| match v6 {
            true => c.is_ascii_hexdigit() || c == ':' || c == '.',
            false => c.is_alphanumeric() || "-._~%".contains(c),
        };
        if !host.chars().all(allowed) {
            return Err(OriginError::Host { url: owned(), host: host.to_owned() });
        }
        let port = match port.filter(|port| !port.is_empty()) {
            None => None,
            Some(port) => match port.parse::<u16>() {
                Ok(number) if number > 0 => Some(number),
                _ => return Err(OriginError::Port { url: owned(), port: port.to_owned() }),
            },
        };
        Ok(Self { scheme, host: host.to_lowercase(), port, secret_headers: Vec::new() })
    }

    /// Adds `header` with the value of `secret`, after `prefix` (e.g. `Bearer `), to every
    /// request to this origin. On a plain `http` origin the operator must allow it
    /// (`allowPlainHttpSecrets` in the plugin's overrides), or the host refuses the plugin.
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

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(url: &str) -> (String, String, Option<u16>) {
        let origin = Origin::try_parse(url).unwrap_or_else(|e| panic!("{url}: {e:?}"));
        (origin.scheme, origin.host, origin.port)
    }

    fn refused(url: &str) -> String {
        match Origin::try_parse(url) {
            Ok(origin) => panic!("{url} was taken as {origin:?}"),
            Err(error) => error.to_string(),
        }
    }

    /// The Python SDK's cases (`Origin.parse`), and the TypeScript SDK's.
    #[test]
    fn origins_parse_as_the_other_sdks_parse_them() {
        let origin = |scheme: &str, host: &str, port| (scheme.to_owned(), host.to_owned(), port);
        assert_eq!(parts("https://api.example.com:8443/v1"), origin("https", "api.example.com", Some(8443)));
        assert_eq!(parts("http://127.0.0.1:18053/zones"), origin("http", "127.0.0.1", Some(18053)));
        assert_eq!(parts("http://127.0.0.1:18053"), origin("http", "127.0.0.1", Some(18053)));
        assert_eq!(parts("https://example.com/path?q#f"), origin("https", "example.com", None));
        assert_eq!(parts("http://[::1]:8080/x"), origin("http", "::1", Some(8080)));
        assert_eq!(parts("http://[::1]"), origin("http", "::1", None));
        assert_eq!(parts("HTTPS://API.Example.com:"), origin("https", "api.example.com", None));
    }

    #[test]
    fn an_origin_that_cannot_be_granted_is_refused_naming_why() {
        let cases = [
            ("https://host:99999", "port 99999 is not a port number (1 to 65535)"),
            ("https://host:0", "port 0 is not a port number (1 to 65535)"),
            ("https://host:https", "port https is not a port number (1 to 65535)"),
            (
                "https://user:pw@host",
                "user information (`user@`) has no place in an origin; send credentials with a secret header",
            ),
            (
                "https://@host",
                "user information (`user@`) has no place in an origin; send credentials with a secret header",
            ),
            ("https://", "it names no host"),
            ("https://:8080/x", "it names no host"),
            ("https://[::1", "an IPv6 address is written [address] or [address]:port"),
            ("https://[::1]x", "an IPv6 address is written [address] or [address]:port"),
            ("https://exa mple.com", "the host \"exa mple.com\" is not a host name or IP address"),
            ("ftp://host", "the scheme is \"ftp\"; only http and https are allowed"),
            ("api.example.com", "it has no scheme; write https://api.example.com"),
            ("", "it has no scheme; write https://"),
        ];
        for (url, why) in cases {
            assert_eq!(refused(url), format!("origin {url:?}: {why}"));
        }
    }

    #[test]
    #[should_panic(expected = "origin \"https://host:99999\": port 99999 is not a port number (1 to 65535)")]
    fn parse_panics_at_describe_on_an_origin_it_refuses() {
        let _ = Origin::parse("https://host:99999");
    }
}

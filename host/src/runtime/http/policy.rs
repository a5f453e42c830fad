//! What a plugin's `http-grant` allows, checked at load and before every request: the exports
//! that may call out, the granted origins (scheme, host, port), the secret headers of each and
//! the per-request limits.

use std::fmt;
use std::time::Duration;

use http::HeaderName;

use crate::runtime::bindings::wasmop::plugin::types::HttpGrant;
use crate::secrets::SecretKey;

/// The exports in which outgoing HTTP is allowed; everywhere else (`reconcile`, `desired`,
/// mappers, predicates, ...) a request is refused, so a reconcile stays a function of the
/// cached state.
pub const HTTP_EXPORTS: [&str; 4] = ["fetch", "fetch-all", "apply-external", "delete-external"];

/// Connect timeout of a grant that sets none.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Total time per request (until the whole body is read) of a grant that sets none.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// Largest response body of a grant that sets none.
pub const DEFAULT_MAX_RESPONSE_BYTES: u64 = 4 << 20;
/// Requests in flight at once per plugin, for a grant that sets none.
pub const DEFAULT_MAX_CONCURRENT: u32 = 8;

/// `http` or `https`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    /// Plain HTTP, port 80 by default.
    Http,
    /// HTTP over TLS, port 443 by default.
    Https,
}

impl Scheme {
    fn parse(scheme: &str) -> Option<Self> {
        match scheme.to_ascii_lowercase().as_str() {
            "http" => Some(Self::Http),
            "https" => Some(Self::Https),
            _ => None,
        }
    }

    /// The port of URLs that name none.
    pub fn default_port(self) -> u16 {
        match self {
            Self::Http => 80,
            Self::Https => 443,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Self::Http => "http",
            Self::Https => "https",
        }
    }
}

/// A header the host adds to every request to an origin, its value taken from a Secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretHeader {
    /// The header.
    pub header: HeaderName,
    /// Where its value is.
    pub secret: SecretKey,
    /// Put before the value (`Bearer `); empty for none.
    pub prefix: String,
}

/// A granted origin.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    /// Its scheme.
    pub scheme: Scheme,
    /// Host name (lower case) or IP address (an IPv6 address without brackets).
    pub host: String,
    /// Its port, the scheme's default when the grant names none.
    pub port: u16,
    /// The headers the host adds.
    pub secret_headers: Vec<SecretHeader>,
}

impl Origin {
    fn matches(&self, scheme: Scheme, host: &str, port: u16) -> bool {
        self.scheme == scheme && self.port == port && self.host == host
    }
}

impl fmt::Display for Origin {
    /// `scheme://host:port`, the form of the metrics' `origin` label.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        RequestedOrigin { scheme: self.scheme.as_str(), host: &self.host, port: Some(self.port) }.fmt(f)
    }
}

/// The origin of a request, as the guest wrote it.
struct RequestedOrigin<'a> {
    scheme: &'a str,
    host: &'a str,
    port: Option<u16>,
}

impl fmt::Display for RequestedOrigin<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let host = self.host.trim_start_matches('[').trim_end_matches(']');
        if host.contains(':') {
            write!(f, "{}://[{host}]", self.scheme)?;
        } else {
            write!(f, "{}://{host}", self.scheme)?;
        }
        match self.port.or_else(|| Scheme::parse(self.scheme).map(Scheme::default_port)) {
            Some(port) => write!(f, ":{port}"),
            None => Ok(()),
        }
    }
}

/// Why the host refused a request before opening a socket. The message is what the plugin's
/// HTTP client reports.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The running export may not call out.
    #[error("outgoing HTTP is allowed only in fetch, fetch-all, apply-external and delete-external, not in {export}")]
    Export {
        /// The export that tried.
        export: &'static str,
    },
    /// The plugin declares no `http` grant.
    #[error("the plugin declares no http grant, so it may not call {requested}")]
    NoGrant {
        /// The requested origin.
        requested: String,
    },
    /// The origin is not granted.
    #[error("{requested} is not an origin the plugin's http grant names (granted: {granted})")]
    Origin {
        /// The requested origin, `scheme://host:port`.
        requested: String,
        /// The granted ones, comma separated.
        granted: String,
    },
}

/// A plugin's `http-grant`, checked and with the host's defaults filled in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// The granted origins.
    pub origins: Vec<Origin>,
    /// Connect timeout per request.
    pub connect_timeout: Duration,
    /// Total time per request, until the whole body is read.
    pub timeout: Duration,
    /// Largest response body, in bytes.
    pub max_response_bytes: u64,
    /// Requests in flight at once.
    pub max_concurrent: u32,
}

impl Policy {
    /// Checks `grant` (what `describe` said) and fills in the defaults; `Err` says what is wrong,
    /// for the load error.
    pub fn new(grant: &HttpGrant) -> Result<Self, String> {
        let positive = |what: &str, value: Option<u64>, default: u64| match value {
            Some(0) => Err(format!("http grant: {what} must be greater than 0")),
            Some(v) => Ok(v),
            None => Ok(default),
        };
        let millis = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        let connect_timeout =
            positive("connect-timeout-ms", grant.connect_timeout_ms, millis(DEFAULT_CONNECT_TIMEOUT))?;
        let timeout = positive("timeout-ms", grant.timeout_ms, millis(DEFAULT_TIMEOUT))?;
        let max_response_bytes = positive("max-response-bytes", grant.max_response_bytes, DEFAULT_MAX_RESPONSE_BYTES)?;
        let max_concurrent =
            positive("max-concurrent", grant.max_concurrent.map(u64::from), u64::from(DEFAULT_MAX_CONCURRENT))?;
        if grant.origins.is_empty() {
            return Err("http grant: it names no origin".into());
        }
        let origins = grant.origins.iter().map(origin).collect::<Result<Vec<_>, _>>()?;
        Ok(Self {
            origins,
            connect_timeout: Duration::from_millis(connect_timeout),
            timeout: Duration::from_millis(timeout),
            max_response_bytes,
            max_concurrent: u32::try_from(max_concurrent).unwrap_or(u32::MAX),
        })
    }

    /// The granted origin a request to `scheme://host[:port]` goes to, or why it is refused. The
    /// host is compared without case, an IPv6 address with or without brackets, and a missing
    /// port is the scheme's default.
    pub fn origin(&self, scheme: &str, host: &str, port: Option<u16>) -> Result<&Origin, Refusal> {
        let requested = || RequestedOrigin { scheme, host, port }.to_string();
        let found = Scheme::parse(scheme).and_then(|parsed| {
            let host = normalize_host(host);
            let port = port.unwrap_or(parsed.default_port());
            self.origins.iter().find(|o| o.matches(parsed, &host, port))
        });
        found.ok_or_else(|| Refusal::Origin {
            requested: requested(),
            granted: self.origins.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "),
        })
    }
}

/// The host as origins are compared: lower case, an IPv6 address without brackets.
fn normalize_host(host: &str) -> String {
    host.trim_start_matches('[').trim_end_matches(']').to_ascii_lowercase()
}

/// Checks one granted origin.
fn origin(granted: &crate::runtime::bindings::wasmop::plugin::types::HttpOrigin) -> Result<Origin, String> {
    let written = RequestedOrigin { scheme: &granted.scheme, host: &granted.host, port: granted.port };
    let scheme = Scheme::parse(&granted.scheme).ok_or_else(|| {
        format!("http grant: origin {written} has scheme {:?}; only http and https are allowed", granted.scheme)
    })?;
    let host = normalize_host(&granted.host);
    if host.is_empty() || host.contains(['/', '?', '#', '@', ' ']) {
        return Err(format!("http grant: origin {written} needs a host name or IP address, such as api.example.com"));
    }
    if granted.port == Some(0) {
        return Err(format!("http grant: origin {written} has port 0"));
    }
    let secret_headers = granted
        .secret_headers
        .iter()
        .map(|h| {
            let header = HeaderName::from_bytes(h.header.as_bytes())
                .map_err(|_| format!("http grant: origin {written}: {:?} is not a valid header name", h.header))?;
            if h.secret.name.is_empty() || h.secret.key.is_empty() {
                return Err(format!("http grant: origin {written}: header {header} needs a Secret name and key"));
            }
            Ok(SecretHeader {
                header,
                secret: SecretKey {
                    namespace: h.secret.namespace.clone(),
                    name: h.secret.name.clone(),
                    key: h.secret.key.clone(),
                },
                prefix: h.prefix.clone().unwrap_or_default(),
            })
        })
        .collect::<Result<_, String>>()?;
    Ok(Origin { scheme, host, port: granted.port.unwrap_or(scheme.default_port()), secret_headers })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::bindings::wasmop::plugin::types::{HttpOrigin, SecretHeader as WitHeader, SecretKey as WitKey};

    fn granted(scheme: &str, host: &str, port: Option<u16>) -> HttpOrigin {
        HttpOrigin { scheme: scheme.into(), host: host.into(), port, secret_headers: Vec::new() }
    }

    fn grant(origins: Vec<HttpOrigin>) -> HttpGrant {
        HttpGrant {
            origins,
            connect_timeout_ms: None,
            timeout_ms: None,
            max_response_bytes: None,
            max_concurrent: None,
        }
    }

    #[test]
    fn a_grant_without_limits_gets_the_host_defaults() {
        let policy = Policy::new(&grant(vec![granted("https", "api.example.com", None)])).unwrap();
        assert_eq!(policy.connect_timeout, Duration::from_secs(5));
        assert_eq!(policy.timeout, Duration::from_secs(30));
        assert_eq!(policy.max_response_bytes, 4 * 1024 * 1024);
        assert_eq!(policy.max_concurrent, 8);
        assert_eq!(policy.origins[0].port, 443);
        assert_eq!(policy.origins[0].to_string(), "https://api.example.com:443");
    }

    #[test]
    fn a_grant_sets_its_own_limits() {
        let mut g = grant(vec![granted("http", "127.0.0.1", Some(8080))]);
        (g.connect_timeout_ms, g.timeout_ms, g.max_response_bytes, g.max_concurrent) =
            (Some(250), Some(1500), Some(1024), Some(2));
        let policy = Policy::new(&g).unwrap();
        assert_eq!(
            (policy.connect_timeout, policy.timeout, policy.max_response_bytes, policy.max_concurrent),
            (Duration::from_millis(250), Duration::from_millis(1500), 1024, 2)
        );
    }

    #[test]
    fn requests_match_scheme_host_and_port_with_default_ports() {
        let policy = Policy::new(&grant(vec![
            granted("https", "API.Example.com", None),
            granted("http", "127.0.0.1", Some(8080)),
            granted("http", "::1", Some(9000)),
        ]))
        .unwrap();
        assert_eq!(policy.origin("https", "api.example.com", None).unwrap().host, "api.example.com");
        assert!(policy.origin("https", "api.EXAMPLE.com", Some(443)).is_ok());
        assert!(policy.origin("http", "127.0.0.1", Some(8080)).is_ok());
        assert!(policy.origin("http", "[::1]", Some(9000)).is_ok());
        // Another port, scheme or host is another origin.
        for (scheme, host, port) in [
            ("https", "api.example.com", Some(8443)),
            ("http", "api.example.com", None),
            ("https", "evil.example.com", None),
            ("https", "api.example.com.evil.com", None),
            ("http", "127.0.0.1", None),
            ("http", "127.0.0.1", Some(8081)),
            ("http", "localhost", Some(8080)),
            ("ftp", "127.0.0.1", Some(8080)),
        ] {
            assert!(policy.origin(scheme, host, port).is_err(), "{scheme}://{host}:{port:?} was allowed");
        }
    }

    #[test]
    fn a_refused_origin_is_named_with_the_granted_ones() {
        let policy =
            Policy::new(&grant(vec![granted("https", "api.example.com", None), granted("http", "::1", Some(9000))]))
                .unwrap();
        let refusal = policy.origin("http", "127.0.0.1", Some(4000)).unwrap_err();
        assert_eq!(
            refusal.to_string(),
            "http://127.0.0.1:4000 is not an origin the plugin's http grant names \
             (granted: https://api.example.com:443, http://[::1]:9000)"
        );
        let refusal = Refusal::Export { export: "reconcile" };
        assert_eq!(
            refusal.to_string(),
            "outgoing HTTP is allowed only in fetch, fetch-all, apply-external and delete-external, not in reconcile"
        );
    }

    #[test]
    fn bad_grants_are_refused_at_load_saying_why() {
        let cases = [
            (grant(vec![granted("ftp", "files.example.com", None)]), "only http and https"),
            (grant(vec![granted("https", "", None)]), "needs a host"),
            (grant(vec![granted("https", "example.com/path", None)]), "needs a host"),
            (grant(vec![granted("http", "127.0.0.1", Some(0))]), "port 0"),
            (grant(Vec::new()), "names no origin"),
            (HttpGrant { timeout_ms: Some(0), ..grant(vec![granted("http", "a", None)]) }, "timeout-ms"),
            (HttpGrant { max_concurrent: Some(0), ..grant(vec![granted("http", "a", None)]) }, "max-concurrent"),
        ];
        for (grant, expected) in cases {
            let err = Policy::new(&grant).unwrap_err();
            assert!(err.contains(expected), "{err} does not say {expected}");
        }
        let mut bad_header = granted("https", "api.example.com", None);
        bad_header.secret_headers.push(WitHeader {
            header: "bad header".into(),
            secret: WitKey { name: "s".into(), namespace: None, key: "k".into() },
            prefix: None,
        });
        let err = Policy::new(&grant(vec![bad_header])).unwrap_err();
        assert!(err.contains("\"bad header\" is not a valid header name"), "{err}");
    }

    #[test]
    fn secret_headers_keep_their_secret_and_prefix() {
        let mut with_header = granted("https", "api.example.com", None);
        with_header.secret_headers.push(WitHeader {
            header: "Authorization".into(),
            secret: WitKey { name: "token".into(), namespace: Some("ops".into()), key: "value".into() },
            prefix: Some("Bearer ".into()),
        });
        let policy = Policy::new(&grant(vec![with_header])).unwrap();
        let header = &policy.origins[0].secret_headers[0];
        assert_eq!(header.header, http::header::AUTHORIZATION);
        assert_eq!(
            header.secret,
            SecretKey { namespace: Some("ops".into()), name: "token".into(), key: "value".into() }
        );
        assert_eq!(header.prefix, "Bearer ");
    }
}

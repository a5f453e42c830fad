//! Bearer-token authentication of inbound events: the `Authorization: Bearer <token>` header
//! against the plugin's `inbound.token` Secret key, compared in constant time.

use axum::http::HeaderMap;
use axum::http::header::AUTHORIZATION;
use subtle::ConstantTimeEq as _;

use crate::secrets::{SecretError, SecretKey, SecretReader};

/// Why a request is not let through.
#[derive(Debug, thiserror::Error)]
pub enum Denied {
    /// No `Authorization: Bearer` header.
    #[error("no bearer token")]
    NoToken,
    /// A token that is not the plugin's.
    #[error("wrong bearer token")]
    WrongToken,
    /// The plugin's token cannot be had: no Secret, no such key, not text, or an empty value.
    /// No request can be authenticated until it is fixed.
    #[error("the plugin's token is not usable: {0}")]
    NoSecret(String),
    /// The API server did not give the Secret (unreachable, or the host may not read it): the
    /// token cannot be checked now.
    #[error("cannot check the token: {0}")]
    Unavailable(SecretError),
}

impl Denied {
    /// Whether the caller is at fault (401), rather than the host not able to check (503).
    pub fn unauthenticated(&self) -> bool {
        !matches!(self, Self::Unavailable(_))
    }
}

/// The token of an `Authorization` header of the `Bearer` scheme (the scheme's name in any case).
pub fn bearer(headers: &HeaderMap) -> Option<&[u8]> {
    let value = headers.get(AUTHORIZATION)?.as_bytes();
    let (scheme, token) = value.split_at_checked(7)?;
    scheme.eq_ignore_ascii_case(b"bearer ").then(|| token.trim_ascii()).filter(|t| !t.is_empty())
}

/// Whether `presented` is `expected`, in time independent of where they differ. A Secret's
/// value often ends in a newline (`echo token > file`): whitespace around it is not part of the
/// token.
pub fn matches(presented: &[u8], expected: &[u8]) -> bool {
    bool::from(presented.ct_eq(expected.trim_ascii()))
}

/// Lets the request with `headers` through if it carries the token `secret` holds.
pub async fn check(headers: &HeaderMap, secret: &SecretKey, secrets: &dyn SecretReader) -> Result<(), Denied> {
    let presented = bearer(headers).ok_or(Denied::NoToken)?;
    let expected = match secrets.read(secret).await {
        Ok(token) => token,
        Err(err @ (SecretError::Api { .. } | SecretError::NoCluster { .. })) => return Err(Denied::Unavailable(err)),
        Err(err) => return Err(Denied::NoSecret(err.to_string())),
    };
    if expected.trim_ascii().is_empty() {
        return Err(Denied::NoSecret(format!("the key {:?} of Secret {} is empty", secret.key, secret.name)));
    }
    if matches(presented, expected.as_bytes()) { Ok(()) } else { Err(Denied::WrongToken) }
}

#[cfg(test)]
mod tests {
    use futures::future::{BoxFuture, FutureExt};

    use super::*;

    fn headers(authorization: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(AUTHORIZATION, authorization.parse().unwrap());
        headers
    }

    #[test]
    fn the_bearer_scheme_carries_the_token() {
        assert_eq!(bearer(&headers("Bearer s3cret")), Some(&b"s3cret"[..]));
        assert_eq!(bearer(&headers("bearer  s3cret ")), Some(&b"s3cret"[..]), "any case, spaces around");
        assert_eq!(bearer(&headers("Basic dXNlcjpwYXNz")), None);
        assert_eq!(bearer(&headers("Bearer ")), None);
        assert_eq!(bearer(&headers("Bearer")), None);
        assert_eq!(bearer(&HeaderMap::new()), None);
    }

    #[test]
    fn tokens_match_exactly_but_for_whitespace_around_the_secret() {
        assert!(matches(b"s3cret", b"s3cret"));
        assert!(matches(b"s3cret", b"s3cret\n"));
        assert!(!matches(b"s3cre", b"s3cret"));
        assert!(!matches(b"s3cretX", b"s3cret"));
        assert!(!matches(b"", b"s3cret"));
    }

    /// A reader answering every key with one result.
    struct Fixed(fn() -> Result<String, SecretError>);

    impl SecretReader for Fixed {
        fn read<'a>(&'a self, _: &'a SecretKey) -> BoxFuture<'a, Result<String, SecretError>> {
            futures::future::ready((self.0)()).boxed()
        }
    }

    fn key() -> SecretKey {
        SecretKey { namespace: None, name: "hook".into(), key: "token".into() }
    }

    #[tokio::test]
    async fn a_request_passes_only_with_the_secrets_token() {
        let token = Fixed(|| Ok("s3cret\n".into()));
        assert!(check(&headers("Bearer s3cret"), &key(), &token).await.is_ok());
        let wrong = check(&headers("Bearer guess"), &key(), &token).await.unwrap_err();
        assert!(matches!(wrong, Denied::WrongToken) && wrong.unauthenticated());
        let none = check(&HeaderMap::new(), &key(), &token).await.unwrap_err();
        assert!(matches!(none, Denied::NoToken) && none.unauthenticated());
    }

    #[tokio::test]
    async fn without_a_usable_secret_nothing_passes_and_the_log_says_why() {
        let missing = Fixed(|| Err(SecretError::NotFound { namespace: "ns".into(), name: "hook".into() }));
        let denied = check(&headers("Bearer anything"), &key(), &missing).await.unwrap_err();
        assert!(denied.unauthenticated());
        assert_eq!(denied.to_string(), "the plugin's token is not usable: Secret ns/hook does not exist");
        let empty = Fixed(|| Ok(" \n".into()));
        let denied = check(&headers("Bearer x"), &key(), &empty).await.unwrap_err();
        assert!(matches!(denied, Denied::NoSecret(_)), "{denied}");
        let unreachable = Fixed(|| Err(SecretError::NoCluster { name: "hook".into() }));
        let denied = check(&headers("Bearer x"), &key(), &unreachable).await.unwrap_err();
        assert!(!denied.unauthenticated(), "the host cannot check: not the caller's fault");
    }
}

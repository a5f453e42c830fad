//! Which Secrets a plugin may have the host read for it, decided when it loads.
//!
//! A plugin names Secrets in its own code (`describe()`: the secret headers of its `http` grant,
//! the token of its inbound events), so naming one proves nothing: the host's identity may read
//! Secrets of other plugins or the registry's credentials, and a plugin would ship them to the
//! origin it was granted. A plugin may therefore have a Secret read only when
//!
//! - its own identity may `get` it: the ServiceAccount it is impersonated as (`serviceAccount`
//!   in its overrides), asked of the API server at load ([`Review`]) and read as that account at
//!   run time; a plugin without one has no identity of its own; or
//! - the operator allowed that Secret for that plugin outside its code: `allowedSecrets` in its
//!   overrides (its `ReconcilerPlugin`'s `spec.overrides`, or its entry in the configuration
//!   file), read as the host.
//!
//! Anything else refuses the plugin at load, naming the Secret and the rule. Secret headers also
//! go only over `https`, but to the plain `http` origins the operator lists in
//! `allowPlainHttpSecrets`.
//!
//! A plugin that has the host watch Secrets (its primary, a declared watch or a dependent of kind
//! `v1/Secret`) reads every Secret the host's watch covers, so the same rule holds for watches:
//! its ServiceAccount may `list` and `watch` Secrets where the watch looks (asked at load; the
//! watch itself is the host's, shared with other plugins), or the operator allowed it
//! (`allowSecretWatches: true`). A watch of another cluster has only the operator's word: the
//! plugin's account lives in the primary's.

use std::collections::HashSet;
use std::fmt;

use futures::future::{BoxFuture, FutureExt};
use k8s_openapi::api::authorization::v1::{ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec};
use kube::Api;
use kube::api::PostParams;
use wasmop_core::settings::{ServiceAccount, Settings};

use crate::controller::Covered;
use crate::runtime::bindings::wasmop::plugin::types::PluginConfig;
use crate::runtime::http::{Policy, Scheme};
use crate::secrets::{SecretKey, SecretRef};

/// Where the operator says what a plugin may have beyond its own identity, for the errors.
fn overrides_of(plugin: &str) -> String {
    format!("in its ReconcilerPlugin's spec.overrides or in plugins.{plugin} of the configuration file")
}

/// A Secret a plugin's configuration names, and what for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Named {
    /// The Secret.
    pub secret: SecretRef,
    /// What the plugin uses it for: `the secret header authorization of https://...`.
    pub purpose: String,
}

/// Why a plugin's own identity does not give it a Secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoRight {
    /// It runs as no ServiceAccount of its own (the host's identity is not the plugin's).
    NoAccount,
    /// Its ServiceAccount may not `get` the Secret.
    AccountMayNot(ServiceAccount),
    /// Its ServiceAccount may not `list` and `watch` the Secrets a watch covers.
    AccountMayNotWatch(ServiceAccount),
    /// The watch is of another cluster, where the plugin has no identity.
    OtherCluster(String),
}

impl fmt::Display for NoRight {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoAccount => f.write_str("it runs as no serviceAccount of its own"),
            Self::AccountMayNot(account) => {
                write!(f, "its ServiceAccount {}/{} may not get it", account.namespace, account.name)
            }
            Self::AccountMayNotWatch(account) => {
                write!(f, "its ServiceAccount {}/{} may not list and watch them", account.namespace, account.name)
            }
            Self::OtherCluster(cluster) => {
                write!(f, "they are in cluster {cluster:?}, where it has no identity of its own")
            }
        }
    }
}

/// Why a plugin is refused at load. The messages name Secrets, never their values. (Large
/// fields are boxed: the error travels in every load's `Result`.)
#[derive(Debug, thiserror::Error)]
pub enum AccessError {
    /// It names a Secret neither its identity nor the operator gives it.
    #[error(
        "plugin {plugin:?} may not read Secret {} ({}): {because}, and the operator allowed no such Secret for it (allowedSecrets {})",
        .named.secret, .named.purpose, overrides_of(.plugin)
    )]
    NotAllowed {
        /// The plugin.
        plugin: String,
        /// The Secret and what for.
        named: Box<Named>,
        /// Why its own identity does not give it the Secret.
        because: Box<NoRight>,
    },
    /// It has the host watch Secrets neither its identity nor the operator lets it read.
    #[error(
        "plugin {plugin:?} may not watch Secrets {} ({}): {because}, and the operator did not allow it (allowSecretWatches: true {})",
        .watch.place(), .watch.purpose, overrides_of(.plugin)
    )]
    WatchNotAllowed {
        /// The plugin.
        plugin: String,
        /// What the watch covers and what for.
        watch: Box<SecretWatch>,
        /// Why its own identity does not let it.
        because: Box<NoRight>,
    },
    /// The API server could not say whether its ServiceAccount may list and watch Secrets.
    #[error("cannot ask whether the ServiceAccount {}/{} of plugin {plugin:?} may watch Secrets {}: {source}", .account.namespace, .account.name, .watch.place())]
    WatchReviewFailed {
        /// The plugin.
        plugin: String,
        /// Its ServiceAccount.
        account: Box<ServiceAccount>,
        /// The watch.
        watch: Box<SecretWatch>,
        /// The client's error.
        #[source]
        source: Box<kube::Error>,
    },
    /// The API server could not say whether its ServiceAccount may get a Secret.
    #[error("cannot ask whether the ServiceAccount {}/{} of plugin {plugin:?} may get Secret {secret}: {source}", .account.namespace, .account.name)]
    ReviewFailed {
        /// The plugin.
        plugin: String,
        /// Its ServiceAccount.
        account: Box<ServiceAccount>,
        /// The Secret.
        secret: Box<SecretRef>,
        /// The client's error.
        #[source]
        source: Box<kube::Error>,
    },
    /// A secret header would go over plain `http` to an origin the operator did not allow.
    #[error(
        "plugin {plugin:?} would send the secret header {header} to {origin} over plain http, which the operator did not allow for it (allowPlainHttpSecrets {}): grant an https origin, or allow this one",
        overrides_of(.plugin)
    )]
    PlainHttp {
        /// The plugin.
        plugin: String,
        /// The origin, `http://host:port`.
        origin: String,
        /// The header.
        header: String,
    },
    /// An `allowPlainHttpSecrets` entry is not a plain http origin.
    #[error(
        "plugin {plugin:?}: allowPlainHttpSecrets entry {given:?} is not a plain http origin such as http://127.0.0.1:8080"
    )]
    NotAnOrigin {
        /// The plugin.
        plugin: String,
        /// The entry.
        given: String,
    },
    /// Its `http` grant does not stand (a module that loaded has none such).
    #[error("plugin {plugin:?}: {reason}")]
    InvalidGrant {
        /// The plugin.
        plugin: String,
        /// What is wrong.
        reason: String,
    },
}

/// What the check of a plugin's configuration decided, before asking the API server anything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// The Secrets the operator allowed it: read as the host.
    pub allowed: HashSet<SecretRef>,
    /// The Secrets it names that only its ServiceAccount's rights can give it: [`review`] them.
    pub to_review: Vec<Named>,
    /// Its watches of Secrets that only its ServiceAccount's rights can give it: [`review`] them.
    pub watches_to_review: Vec<SecretWatch>,
}

/// Where a plugin has the host watch Secrets, and what for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretWatch {
    /// The one namespace; `None`: every namespace.
    pub namespace: Option<String>,
    /// What the plugin watches them as (`its watch of v1/Secret`).
    pub purpose: String,
}

impl SecretWatch {
    /// `in namespace team`, or `in every namespace`.
    pub fn place(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("in namespace {ns}"),
            None => "in every namespace".into(),
        }
    }
}

/// Whether `kind` is the core group's Secret (discovery matches the kind by name, whatever
/// plural the plugin gives).
fn is_secret(kind: &wasmop_core::KindRef) -> bool {
    kind.group.is_empty() && kind.kind == "Secret"
}

/// The Secrets `config` names (its `http` grant's secret headers, its inbound token), those that
/// name no namespace in `default_namespace`.
pub fn named(config: &PluginConfig, policy: Option<&Policy>, default_namespace: &str) -> Vec<Named> {
    let headers = policy.into_iter().flat_map(|p| &p.origins).flat_map(|origin| {
        origin.secret_headers.iter().map(move |h| Named {
            secret: SecretRef::of(&h.secret, default_namespace),
            purpose: format!("the secret header {} of {origin}", h.header),
        })
    });
    let inbound = config.inbound.iter().map(|inbound| {
        let t = &inbound.token;
        let key = SecretKey { namespace: t.namespace.clone(), name: t.name.clone(), key: t.key.clone() };
        Named { secret: SecretRef::of(&key, default_namespace), purpose: "the token of its inbound events".into() }
    });
    headers.chain(inbound).collect()
}

/// Checks the Secrets `config` names, and its watches (`watches`, as [`crate::controller::covered`]
/// gives them) of Secrets, against the operator's `overrides`, with no request: those the
/// operator allowed pass; with a ServiceAccount the others are left to [`review`]; without one
/// they refuse the plugin. Secret headers to plain `http` origins refuse it unless the operator
/// allowed the origin.
pub fn plan(
    config: &PluginConfig,
    watches: &[Covered],
    overrides: &Settings,
    default_namespace: &str,
) -> Result<Plan, AccessError> {
    let plugin = || config.name.clone();
    let policy = config
        .http
        .as_ref()
        .map(Policy::new)
        .transpose()
        .map_err(|reason| AccessError::InvalidGrant { plugin: plugin(), reason })?;
    let allowed: HashSet<SecretRef> = overrides
        .allowed_secrets
        .iter()
        .flatten()
        .map(|a| SecretRef {
            namespace: a.namespace.clone().unwrap_or_else(|| default_namespace.into()),
            name: a.name.clone(),
        })
        .collect();
    let mut to_review = Vec::new();
    for named in named(config, policy.as_ref(), default_namespace) {
        if allowed.contains(&named.secret) || to_review.iter().any(|n: &Named| n.secret == named.secret) {
            continue;
        }
        if overrides.service_account.is_none() {
            let (named, because) = (Box::new(named), Box::new(NoRight::NoAccount));
            return Err(AccessError::NotAllowed { plugin: plugin(), named, because });
        }
        to_review.push(named);
    }
    if let Some(policy) = &policy {
        check_plain_http(&config.name, policy, overrides.allow_plain_http_secrets.as_deref().unwrap_or_default())?;
    }
    let watches_to_review = secret_watches(&config.name, watches, overrides)?;
    Ok(Plan { allowed, to_review, watches_to_review })
}

/// The watches of Secrets among `watches` that only the plugin's ServiceAccount can give it;
/// one it cannot have refuses it.
fn secret_watches(plugin: &str, watches: &[Covered], overrides: &Settings) -> Result<Vec<SecretWatch>, AccessError> {
    if overrides.allow_secret_watches == Some(true) {
        return Ok(Vec::new());
    }
    let mut to_review: Vec<SecretWatch> = Vec::new();
    for covered in watches.iter().filter(|c| is_secret(&c.kind)) {
        let watch = SecretWatch { namespace: covered.namespace.clone(), purpose: covered.purpose.clone() };
        let because = match (&covered.cluster, &overrides.service_account) {
            (Some(cluster), _) => NoRight::OtherCluster(cluster.clone()),
            (None, None) => NoRight::NoAccount,
            (None, Some(_)) => {
                if !to_review.iter().any(|w| w.namespace == watch.namespace) {
                    to_review.push(watch);
                }
                continue;
            }
        };
        let (watch, because) = (Box::new(watch), Box::new(because));
        return Err(AccessError::WatchNotAllowed { plugin: plugin.into(), watch, because });
    }
    Ok(to_review)
}

/// Refuses a secret header to a plain `http` origin that `allowed` does not list.
fn check_plain_http(plugin: &str, policy: &Policy, allowed: &[String]) -> Result<(), AccessError> {
    let mut plain = HashSet::new();
    for given in allowed {
        let not_an_origin = || AccessError::NotAnOrigin { plugin: plugin.into(), given: given.clone() };
        let uri: http::Uri = given.parse().map_err(|_| not_an_origin())?;
        let bare = uri.path_and_query().is_none_or(|p| p.as_str() == "/");
        let (Some(host), true) = (uri.host().filter(|h| !h.is_empty()), bare) else { return Err(not_an_origin()) };
        if !uri.scheme_str().is_some_and(|s| s.eq_ignore_ascii_case("http")) {
            return Err(not_an_origin());
        }
        // An origin the grant does not name allows nothing.
        if let Ok(origin) = policy.origin("http", host, uri.port_u16()) {
            plain.insert(origin.to_string());
        }
    }
    for origin in policy.origins.iter().filter(|o| o.scheme == Scheme::Http) {
        if let Some(header) = origin.secret_headers.first()
            && !plain.contains(&origin.to_string())
        {
            let (origin, header) = (origin.to_string(), header.header.to_string());
            return Err(AccessError::PlainHttp { plugin: plugin.into(), origin, header });
        }
    }
    Ok(())
}

/// Something a plugin's ServiceAccount may or may not do to Secrets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Access<'a> {
    /// `get`, `list` or `watch`.
    pub verb: &'a str,
    /// The namespace; `None`: every namespace.
    pub namespace: Option<&'a str>,
    /// The one Secret; `None`: all of them.
    pub name: Option<&'a str>,
}

/// Asks whether a plugin's ServiceAccount may do something to Secrets.
pub trait Review: Send + Sync {
    /// Whether it may do `access`.
    fn may<'a>(&'a self, access: Access<'a>) -> BoxFuture<'a, Result<bool, kube::Error>>;
}

/// Asks the API server as the ServiceAccount itself: a SelfSubjectAccessReview made with a
/// client impersonating it. Rather than a GET of the Secret, it reads no value before one is
/// needed and answers the same whether or not the Secret exists yet (one created later works, as
/// for any plugin); rather than a SubjectAccessReview, it needs no right of the host's beyond
/// the `impersonate` its writes already take (every authenticated user may review itself).
pub struct SelfReview(pub kube::Client);

impl Review for SelfReview {
    fn may<'a>(&'a self, access: Access<'a>) -> BoxFuture<'a, Result<bool, kube::Error>> {
        async move {
            let review = SelfSubjectAccessReview {
                spec: SelfSubjectAccessReviewSpec {
                    resource_attributes: Some(ResourceAttributes {
                        namespace: access.namespace.map(str::to_owned),
                        verb: Some(access.verb.into()),
                        group: Some(String::new()),
                        version: Some("v1".into()),
                        resource: Some("secrets".into()),
                        name: access.name.map(str::to_owned),
                        ..ResourceAttributes::default()
                    }),
                    ..SelfSubjectAccessReviewSpec::default()
                },
                ..SelfSubjectAccessReview::default()
            };
            let api: Api<SelfSubjectAccessReview> = Api::all(self.0.clone());
            let answered = api.create(&PostParams::default(), &review).await?;
            Ok(answered.status.is_some_and(|s| s.allowed))
        }
        .boxed()
    }
}

/// Asks `reviewer` about every Secret and watch of Secrets `plan` leaves to plugin `plugin`'s
/// `account`; the first it may not get (or list and watch) refuses the plugin.
pub async fn review(
    plugin: &str,
    plan: &Plan,
    account: &ServiceAccount,
    reviewer: &dyn Review,
) -> Result<(), AccessError> {
    for named in &plan.to_review {
        let access = Access { verb: "get", namespace: Some(&named.secret.namespace), name: Some(&named.secret.name) };
        let may = reviewer.may(access).await.map_err(|source| AccessError::ReviewFailed {
            plugin: plugin.into(),
            account: Box::new(account.clone()),
            secret: Box::new(named.secret.clone()),
            source: Box::new(source),
        })?;
        if !may {
            let because = Box::new(NoRight::AccountMayNot(account.clone()));
            return Err(AccessError::NotAllowed { plugin: plugin.into(), named: Box::new(named.clone()), because });
        }
    }
    for watch in &plan.watches_to_review {
        for verb in ["list", "watch"] {
            let access = Access { verb, namespace: watch.namespace.as_deref(), name: None };
            let may = reviewer.may(access).await.map_err(|source| AccessError::WatchReviewFailed {
                plugin: plugin.into(),
                account: Box::new(account.clone()),
                watch: Box::new(watch.clone()),
                source: Box::new(source),
            })?;
            if !may {
                let because = Box::new(NoRight::AccountMayNotWatch(account.clone()));
                return Err(AccessError::WatchNotAllowed {
                    plugin: plugin.into(),
                    watch: Box::new(watch.clone()),
                    because,
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use wasmop_core::settings::AllowedSecret;

    use super::*;
    use crate::runtime::bindings::wasmop::plugin::types::{
        HttpGrant, HttpOrigin, Inbound, SecretHeader, SecretKey as WitKey,
    };

    fn key(name: &str) -> WitKey {
        WitKey { name: name.into(), namespace: None, key: "token".into() }
    }

    fn origin(scheme: &str, host: &str, port: Option<u16>, secret: Option<&str>) -> HttpOrigin {
        let secret_headers = secret
            .map(|name| SecretHeader { header: "authorization".into(), secret: key(name), prefix: None })
            .into_iter()
            .collect();
        HttpOrigin { scheme: scheme.into(), host: host.into(), port, secret_headers }
    }

    /// Plugin `b`, whose grant sends Secret `secret` to `https://api.example.com` and whose
    /// inbound token is `hook`.
    fn config(origins: Vec<HttpOrigin>) -> PluginConfig {
        PluginConfig {
            name: "b".into(),
            http: Some(HttpGrant {
                origins,
                connect_timeout_ms: None,
                timeout_ms: None,
                max_response_bytes: None,
                max_concurrent: None,
            }),
            inbound: Some(Inbound { token: key("hook"), caching: false }),
            ..crate::runtime::bindings::test_config("K")
        }
    }

    fn naming(secret: &str) -> PluginConfig {
        config(vec![origin("https", "api.example.com", None, Some(secret))])
    }

    fn allowing(secrets: &[(&str, Option<&str>)]) -> Settings {
        let allowed =
            secrets.iter().map(|(name, ns)| AllowedSecret { namespace: ns.map(Into::into), name: (*name).into() });
        Settings { allowed_secrets: Some(allowed.collect()), ..Settings::default() }
    }

    fn account() -> ServiceAccount {
        ServiceAccount { namespace: "team".into(), name: "b".into() }
    }

    fn secret(name: &str) -> SecretRef {
        SecretRef { namespace: "ns".into(), name: name.into() }
    }

    #[test]
    fn a_plugin_without_an_account_has_only_the_secrets_the_operator_allowed_it() {
        let err = plan(&naming("wasmop-registry"), &[], &Settings::default(), "ns").unwrap_err();
        assert_eq!(
            err.to_string(),
            "plugin \"b\" may not read Secret ns/wasmop-registry (the secret header authorization of \
             https://api.example.com:443): it runs as no serviceAccount of its own, and the operator allowed no such \
             Secret for it (allowedSecrets in its ReconcilerPlugin's spec.overrides or in plugins.b of the \
             configuration file)"
        );
        // The inbound token is a Secret it names too.
        let err = plan(&naming("api"), &[], &allowing(&[("api", None)]), "ns").unwrap_err();
        assert!(err.to_string().contains("Secret ns/hook (the token of its inbound events)"), "{err}");
        // Allowed by name in the host's namespace, or by namespace and name.
        let plan = plan(&naming("api"), &[], &allowing(&[("api", None), ("hook", Some("ns"))]), "ns").unwrap();
        assert_eq!(plan.allowed, HashSet::from([secret("api"), secret("hook")]));
        assert!(plan.to_review.is_empty());
    }

    #[test]
    fn an_allowance_is_for_one_secret_in_one_namespace() {
        let err = plan(&naming("api"), &[], &allowing(&[("api", Some("other")), ("hook", None)]), "ns").unwrap_err();
        assert!(err.to_string().contains("may not read Secret ns/api"), "{err}");
        let mut named_elsewhere = config(vec![origin("https", "api.example.com", None, None)]);
        named_elsewhere.inbound =
            Some(Inbound { token: WitKey { namespace: Some("ops".into()), ..key("hook") }, caching: false });
        let err = plan(&named_elsewhere, &[], &allowing(&[("hook", None)]), "ns").unwrap_err();
        assert!(err.to_string().contains("may not read Secret ops/hook"), "{err}");
    }

    #[tokio::test]
    async fn with_an_account_what_the_operator_did_not_allow_is_asked_of_the_api_server() {
        let overrides = Settings { service_account: Some(account()), ..allowing(&[("hook", None)]) };
        let plan = plan(&naming("own"), &[], &overrides, "ns").unwrap();
        assert_eq!(plan.allowed, HashSet::from([secret("hook")]));
        assert_eq!(plan.to_review.iter().map(|n| n.secret.clone()).collect::<Vec<_>>(), [secret("own")]);

        assert!(review("b", &plan, &account(), &Answers(&[("own", true)])).await.is_ok());
        let err = review("b", &plan, &account(), &Answers(&[("own", false)])).await.unwrap_err();
        assert_eq!(
            err.to_string(),
            "plugin \"b\" may not read Secret ns/own (the secret header authorization of https://api.example.com:443): \
             its ServiceAccount team/b may not get it, and the operator allowed no such Secret for it (allowedSecrets \
             in its ReconcilerPlugin's spec.overrides or in plugins.b of the configuration file)"
        );
        let err = review("b", &plan, &account(), &Answers(&[])).await.unwrap_err();
        assert!(matches!(err, AccessError::ReviewFailed { .. }), "{err}");
    }

    #[test]
    fn secret_headers_go_over_plain_http_only_where_the_operator_allows() {
        let plain = config(vec![
            origin("http", "127.0.0.1", Some(18053), Some("api")),
            origin("http", "::1", None, Some("api")),
            origin("http", "status.example.com", None, None),
            origin("https", "api.example.com", None, Some("api")),
        ]);
        let allowed = allowing(&[("api", None), ("hook", None)]);
        let with = |origins: &[&str]| Settings {
            allow_plain_http_secrets: Some(origins.iter().map(|o| (*o).to_string()).collect()),
            ..allowed.clone()
        };
        let err = plan(&plain, &[], &allowed, "ns").unwrap_err();
        assert_eq!(
            err.to_string(),
            "plugin \"b\" would send the secret header authorization to http://127.0.0.1:18053 over plain http, which \
             the operator did not allow for it (allowPlainHttpSecrets in its ReconcilerPlugin's spec.overrides or in \
             plugins.b of the configuration file): grant an https origin, or allow this one"
        );
        let err = plan(&plain, &[], &with(&["http://127.0.0.1:18053", "http://[::1]:8080"]), "ns").unwrap_err();
        assert!(err.to_string().contains("to http://[::1]:80 over plain http"), "{err}");
        // Each origin as the grant names it, its port the scheme's default when absent; an
        // origin without secret headers and an https one need nothing.
        assert!(
            plan(&plain, &[], &with(&["http://127.0.0.1:18053", "http://[::1]", "http://localhost:1"]), "ns").is_ok()
        );
        assert!(plan(&plain, &[], &with(&["HTTP://127.0.0.1:18053/", "http://[::1]:80"]), "ns").is_ok());
        for bad in ["127.0.0.1:18053", "https://[::1]", "http://127.0.0.1:18053/path", "http://", "*"] {
            let err = plan(&plain, &[], &with(&[bad]), "ns").unwrap_err();
            assert!(matches!(err, AccessError::NotAnOrigin { .. }), "{bad}: {err}");
        }
    }

    /// Plugin `b`, naming no Secret.
    fn watching() -> PluginConfig {
        PluginConfig { name: "b".into(), ..crate::runtime::bindings::test_config("K") }
    }

    /// A watch of `kind` as plugin `b`'s `purpose`, in `namespace` of `cluster`.
    fn covering(kind: (&str, &str), namespace: Option<&str>, cluster: Option<&str>, purpose: &str) -> Covered {
        let kind = wasmop_core::KindRef {
            group: kind.0.into(),
            version: "v1".into(),
            kind: kind.1.into(),
            plural: Some("secrets".into()),
            namespaced: true,
        };
        Covered {
            kind,
            namespace: namespace.map(Into::into),
            cluster: cluster.map(Into::into),
            purpose: purpose.into(),
        }
    }

    #[tokio::test]
    async fn a_plugin_watches_secrets_only_where_its_account_may_or_the_operator_allows() {
        let bare = watching();
        let secrets = [
            covering(("", "Secret"), Some("team"), None, "its watch of v1/Secret"),
            covering(("", "Secret"), None, None, "its dependent tokens"),
            // Not a Secret: another group's kind of that name, whatever its plural.
            covering(("example.com", "Secret"), None, Some("edge"), "its primary"),
        ];
        let hook = Settings::default();
        let err = plan(&bare, &secrets, &hook, "ns").unwrap_err();
        assert_eq!(
            err.to_string(),
            "plugin \"b\" may not watch Secrets in namespace team (its watch of v1/Secret): it runs as no \
             serviceAccount of its own, and the operator did not allow it (allowSecretWatches: true in its \
             ReconcilerPlugin's spec.overrides or in plugins.b of the configuration file)"
        );
        // The operator's word.
        let allowed = Settings { allow_secret_watches: Some(true), ..hook.clone() };
        assert_eq!(plan(&bare, &secrets, &allowed, "ns").unwrap().watches_to_review, Vec::new());
        let denied = Settings { allow_secret_watches: Some(false), ..hook.clone() };
        assert!(plan(&bare, &secrets, &denied, "ns").is_err());

        // Its account's: asked to list and watch where each watch looks.
        let with_account = Settings { service_account: Some(account()), ..hook.clone() };
        let plan = plan(&bare, &secrets, &with_account, "ns").unwrap();
        let places: Vec<_> = plan.watches_to_review.iter().map(|w| w.namespace.as_deref()).collect();
        assert_eq!(places, [Some("team"), None]);
        let everywhere = &[("list team", true), ("watch team", true), ("list *", true), ("watch *", true)];
        assert!(review("b", &plan, &account(), &Answers(everywhere)).await.is_ok());
        let listing_only = &[("list team", true), ("watch team", true), ("list *", true), ("watch *", false)];
        let err = review("b", &plan, &account(), &Answers(listing_only)).await.unwrap_err();
        assert_eq!(
            err.to_string(),
            "plugin \"b\" may not watch Secrets in every namespace (its dependent tokens): its ServiceAccount team/b \
             may not list and watch them, and the operator did not allow it (allowSecretWatches: true in its \
             ReconcilerPlugin's spec.overrides or in plugins.b of the configuration file)"
        );
        let err = review("b", &plan, &account(), &Answers(&[])).await.unwrap_err();
        assert!(matches!(err, AccessError::WatchReviewFailed { .. }), "{err}");
    }

    #[test]
    fn a_watch_of_secrets_in_another_cluster_has_only_the_operators_word() {
        let remote = [covering(("", "Secret"), None, Some("edge"), "its watch of v1/Secret")];
        let with_account = Settings { service_account: Some(account()), ..Settings::default() };
        let err = plan(&watching(), &remote, &with_account, "ns").unwrap_err();
        assert!(err.to_string().contains("they are in cluster \"edge\", where it has no identity of its own"), "{err}");
        let allowed = Settings { allow_secret_watches: Some(true), ..with_account };
        assert!(plan(&watching(), &remote, &allowed, "ns").is_ok());
    }

    /// The API server's answers: a `get` by Secret name, a `list` or `watch` as `list ns` (`*`
    /// for every namespace); an absent one fails the review.
    struct Answers(&'static [(&'static str, bool)]);

    impl Review for Answers {
        fn may<'a>(&'a self, access: Access<'a>) -> BoxFuture<'a, Result<bool, kube::Error>> {
            let key = match access.name {
                Some(name) => name.to_string(),
                None => format!("{} {}", access.verb, access.namespace.unwrap_or("*")),
            };
            let answer = self.0.iter().find(|(asked, _)| *asked == key).map(|(_, may)| *may);
            let failed = || kube::Error::Service("unreachable".into());
            futures::future::ready(answer.ok_or_else(failed)).boxed()
        }
    }
}

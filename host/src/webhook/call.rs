//! One webhook request answered by the plugin's current module: the declared webhook it falls
//! under, the call with its deadline ([`super::policy`]), and the review answered from what the
//! plugin returned, or, when the call failed, as the failure policy says.

use std::sync::Arc;
use std::time::Duration;

use kube::core::admission::AdmissionResponse;
use tracing::Instrument as _;

use super::{conversion, patch, policy, review};
use crate::runtime::bindings::wasmop::plugin::types::{KindRef, Webhook, WebhookType};
use crate::runtime::{CacheReader, CallError, Module};

/// The three paths the endpoint serves per plugin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Path {
    /// `/validate/<plugin>`: `validate`.
    Validate,
    /// `/mutate/<plugin>`: `default`.
    Mutate,
    /// `/convert/<plugin>`: `convert`.
    Convert,
}

impl Path {
    /// The path's first segment, `/validate`.
    pub fn prefix(self) -> &'static str {
        match self {
            Self::Validate => "/validate",
            Self::Mutate => "/mutate",
            Self::Convert => "/convert",
        }
    }

    /// The type of the webhooks served on it, in words.
    pub fn kind(self) -> &'static str {
        match self {
            Self::Validate => "validating",
            Self::Mutate => "mutating",
            Self::Convert => "conversion",
        }
    }

    /// The webhooks served on it.
    pub fn webhook_type(self) -> WebhookType {
        match self {
            Self::Validate => WebhookType::Validating,
            Self::Mutate => WebhookType::Mutating,
            Self::Convert => WebhookType::Conversion,
        }
    }
}

/// Why a request is not answered with a review (the API server then applies its own
/// `failurePolicy`).
#[derive(Debug, thiserror::Error)]
pub enum Unanswered {
    /// No running plugin has the name: 404.
    #[error("no running plugin is named {0:?}")]
    UnknownPlugin(String),
    /// The plugin declares no webhook of that type: 404.
    #[error("plugin {plugin:?} declares no {kind} webhook")]
    NotDeclared {
        /// The plugin.
        plugin: String,
        /// Which type.
        kind: &'static str,
    },
    /// The body is no admission review: 400.
    #[error(transparent)]
    Review(#[from] review::ReviewError),
    /// The body is no conversion review: 400.
    #[error(transparent)]
    Conversion(#[from] conversion::ConversionError),
}

/// Whether the plugin declares a webhook of `path`'s type.
pub fn serves(module: &Module, path: Path) -> bool {
    module.webhooks().iter().any(|webhook| webhook.webhook_type == path.webhook_type())
}

/// The plugin's webhook of `path`'s type that serves `kind`: the one declared for its group and
/// kind (the primary when a webhook names no kinds), else the only one of the type.
pub fn declared<'a>(module: &'a Module, path: Path, kind: Option<&KindRef>) -> Option<&'a Webhook> {
    let of_type: Vec<&Webhook> = module.webhooks().iter().filter(|w| w.webhook_type == path.webhook_type()).collect();
    let primary = &module.config().primary;
    let serves = |webhook: &Webhook, kind: &KindRef| {
        let same = |k: &KindRef| k.group == kind.group && k.kind == kind.kind;
        if webhook.kinds.is_empty() { same(primary) } else { webhook.kinds.iter().any(same) }
    };
    let found = kind.and_then(|kind| of_type.iter().find(|w| serves(w, kind)).copied());
    found.or_else(|| if of_type.len() == 1 { Some(of_type[0]) } else { None })
}

/// A plugin, its current module and what its calls read.
pub struct Plugin<'a> {
    /// Its name.
    pub name: &'a str,
    /// The module that takes this request.
    pub module: &'a Module,
    /// What the call reads.
    pub cache: Arc<dyn CacheReader>,
}

/// Answers the admission review `body` with `plugin`'s `validate` or `default` (by `path`):
/// the review's JSON.
pub async fn admit(plugin: &Plugin<'_>, path: Path, body: &[u8]) -> Result<String, Unanswered> {
    let request = review::parse(body)?;
    let kind = review::kind(&request);
    let webhook = declared(plugin.module, path, Some(&kind)).ok_or_else(|| not_declared(plugin, path))?;
    let deadline = policy::deadline(policy::timeout(webhook));
    let span = tracing::info_span!("webhook", plugin = plugin.name, path = path.prefix(), kind = kind.kind,
        namespace = request.namespace.as_deref().unwrap_or(""), name = request.name, uid = request.uid,
        operation = ?request.operation);
    let response = async {
        let fail = |err: &dyn std::fmt::Display| {
            tracing::warn!(%err, "webhook call failed");
            review::failed(&request, policy::failed(plugin.name, webhook.failure_policy, &err.to_string()))
        };
        let asked = match review::to_plugin(&request) {
            Ok(asked) => asked,
            Err(err) => return fail(&err),
        };
        match path {
            Path::Mutate if request.object.is_none() => AdmissionResponse::from(&request),
            Path::Mutate => {
                let called = within(deadline, plugin.module.default_object(plugin.cache.clone(), &asked, deadline));
                match called.await {
                    Ok(Ok(defaulted)) => patched(&request, &defaulted).unwrap_or_else(|err| fail(&err)),
                    Ok(Err(message)) => review::refused(&request, &message),
                    Err(err) => fail(&err),
                }
            }
            _ => match within(deadline, plugin.module.validate(plugin.cache.clone(), &asked, deadline)).await {
                Ok(verdict) => review::verdict(&request, &verdict),
                Err(err) => fail(&err),
            },
        }
    }
    .instrument(span)
    .await;
    Ok(to_json(&response.into_review()))
}

/// The response patching the request's object into the plugin's `defaulted` one.
fn patched(request: &review::Request, defaulted: &str) -> Result<AdmissionResponse, patch::PatchError> {
    let sent = serde_json::to_value(&request.object).map_err(|e| patch::PatchError::NotAnObject(e.to_string()))?;
    let patch = patch::between(&sent, defaulted)?;
    let response = AdmissionResponse::from(request);
    if patch.0.is_empty() {
        return Ok(response);
    }
    response.with_patch(patch).map_err(|e| patch::PatchError::NotAnObject(e.to_string()))
}

/// Answers the conversion review `body` with `plugin`'s `convert`: the review's JSON.
pub async fn convert(plugin: &Plugin<'_>, body: &[u8]) -> Result<String, Unanswered> {
    let request = conversion::parse(body)?;
    let webhook = declared(plugin.module, Path::Convert, None).ok_or_else(|| not_declared(plugin, Path::Convert))?;
    let deadline = policy::deadline(policy::timeout(webhook));
    let span = tracing::info_span!(
        "webhook",
        plugin = plugin.name,
        path = "/convert",
        uid = request.uid,
        desired = request.desired_api_version,
        objects = request.objects.len()
    );
    let objects = conversion::objects(&request);
    let desired = request.desired_api_version.clone();
    let called = within(deadline, plugin.module.convert(plugin.cache.clone(), &objects, &desired, deadline));
    let answer = match called.instrument(span).await {
        Ok(Ok(converted)) => conversion::converted(plugin.name, request, &converted),
        Ok(Err(message)) => conversion::failed(plugin.name, request, &message),
        Err(err) => {
            tracing::warn!(plugin = plugin.name, %err, "conversion webhook call failed");
            conversion::failed(plugin.name, request, &err.to_string())
        }
    };
    Ok(to_json(&answer))
}

fn not_declared(plugin: &Plugin<'_>, path: Path) -> Unanswered {
    Unanswered::NotDeclared { plugin: plugin.name.to_string(), kind: path.kind() }
}

/// A call that ran past its deadline by the wall clock (waiting on a cache read included).
#[derive(Debug, thiserror::Error)]
enum Failure {
    #[error(transparent)]
    Call(#[from] CallError),
    #[error("no answer within {0:?}")]
    Late(Duration),
}

/// `call`, abandoned once `deadline` has passed by the wall clock.
async fn within<T>(
    deadline: Duration,
    call: impl std::future::Future<Output = Result<T, CallError>>,
) -> Result<T, Failure> {
    match tokio::time::timeout(deadline, call).await {
        Ok(called) => Ok(called?),
        Err(_) => Err(Failure::Late(deadline)),
    }
}

fn to_json<T: serde::Serialize>(review: &T) -> String {
    serde_json::to_string(review).expect("a review serializes")
}

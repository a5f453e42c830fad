//! [`Webhook`]: an admission or conversion webhook the plugin serves through the host, declared
//! in its [`Config`](crate::Config) (kubebuilder's `create webhook`).

use std::time::Duration;

pub use wasmop_core::webhook::{FailurePolicy, Operation, WebhookType};

use crate::bindings::wasmop::plugin::types as wit;
use crate::kind::Kind;

/// A webhook the host serves for the plugin: the API server calls the host, and the host calls
/// the plugin's [`Validator::validate`](crate::Validator::validate),
/// [`Defaulter::default`](crate::Defaulter::default) or
/// [`Converter::convert`](crate::Converter::convert) in a sandbox. Declare at most one of each
/// type with [`Config::webhook`](crate::Config::webhook).
///
/// The defaults are kubebuilder's: the primary kind, creates and updates, failure policy
/// [`FailurePolicy::Fail`] (a call that fails refuses the request) and a timeout of 10 seconds.
///
/// ```
/// use std::time::Duration;
/// use wasmop_guest::{Config, FailurePolicy, Kind, Operation, Webhook};
///
/// let config = Config::new("web", Kind::namespaced("example.com", "v1", "Web"))
///     .webhook(Webhook::validating().operations([Operation::Create, Operation::Update, Operation::Delete]))
///     .webhook(Webhook::mutating().failure_policy(FailurePolicy::Ignore).timeout(Duration::from_secs(3)));
/// assert_eq!(config.webhooks.len(), 2);
/// ```
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Webhook {
    /// Which of the plugin's functions it calls.
    pub webhook_type: WebhookType,
    /// The kinds it is called for; empty (the default): the primary.
    pub kinds: Vec<Kind>,
    /// The operations it is called for; empty (the default): create and update.
    pub operations: Vec<Operation>,
    /// What the API server does when a call fails (the plugin panics, runs past its deadline).
    pub failure_policy: FailurePolicy,
    /// How long the API server waits for an answer, 1 to 30 seconds; 10 when absent.
    pub timeout: Option<Duration>,
}

impl Webhook {
    fn of(webhook_type: WebhookType) -> Self {
        Self {
            webhook_type,
            kinds: Vec::new(),
            operations: Vec::new(),
            failure_policy: FailurePolicy::Fail,
            timeout: None,
        }
    }

    /// A validating webhook: the API server asks [`Validator::validate`](crate::Validator::validate)
    /// whether to admit each create and update (by default) of the primary.
    ///
    /// ```
    /// let webhook = wasmop_guest::Webhook::validating();
    /// assert_eq!(webhook.webhook_type, wasmop_guest::WebhookType::Validating);
    /// ```
    pub fn validating() -> Self {
        Self::of(WebhookType::Validating)
    }

    /// A mutating webhook: [`Defaulter::default`](crate::Defaulter::default) fills in the
    /// defaults of each primary created or updated, and the host answers with the patch.
    ///
    /// ```
    /// let webhook = wasmop_guest::Webhook::mutating();
    /// assert_eq!(webhook.webhook_type, wasmop_guest::WebhookType::Mutating);
    /// ```
    pub fn mutating() -> Self {
        Self::of(WebhookType::Mutating)
    }

    /// The conversion webhook of the primary's CustomResourceDefinition:
    /// [`Converter::convert`](crate::Converter::convert) turns objects of one version into
    /// another. Only for a custom resource primary.
    ///
    /// ```
    /// let webhook = wasmop_guest::Webhook::conversion();
    /// assert_eq!(webhook.webhook_type, wasmop_guest::WebhookType::Conversion);
    /// ```
    pub fn conversion() -> Self {
        Self::of(WebhookType::Conversion)
    }

    /// Calls the webhook for these kinds instead of the primary (a validating or mutating
    /// webhook only); name the primary too to keep it.
    ///
    /// ```
    /// use wasmop_guest::k8s_openapi::api::core::v1::ConfigMap;
    /// use wasmop_guest::{Kind, Webhook};
    ///
    /// let webhook = Webhook::validating().kinds([Kind::of::<ConfigMap>()]);
    /// assert_eq!(webhook.kinds, [Kind::of::<ConfigMap>()]);
    /// ```
    #[must_use]
    pub fn kinds(mut self, kinds: impl IntoIterator<Item = Kind>) -> Self {
        self.kinds = kinds.into_iter().collect();
        self
    }

    /// Calls the webhook for these operations instead of creates and updates. A mutating
    /// webhook takes creates and updates only.
    ///
    /// ```
    /// use wasmop_guest::{Operation, Webhook};
    ///
    /// let webhook = Webhook::validating().operations([Operation::Delete]);
    /// assert_eq!(webhook.operations, [Operation::Delete]);
    /// ```
    #[must_use]
    pub fn operations(mut self, operations: impl IntoIterator<Item = Operation>) -> Self {
        self.operations = operations.into_iter().collect();
        self
    }

    /// What the API server does when a call fails: [`FailurePolicy::Fail`] (the default) refuses
    /// the request, [`FailurePolicy::Ignore`] admits it.
    ///
    /// ## Warning
    ///
    /// With [`FailurePolicy::Ignore`], a plugin that panics or runs out of time admits what it
    /// would have refused.
    ///
    /// ```
    /// use wasmop_guest::{FailurePolicy, Webhook};
    ///
    /// let webhook = Webhook::validating().failure_policy(FailurePolicy::Ignore);
    /// assert_eq!(webhook.failure_policy, FailurePolicy::Ignore);
    /// ```
    #[must_use]
    pub fn failure_policy(mut self, policy: FailurePolicy) -> Self {
        self.failure_policy = policy;
        self
    }

    /// How long the API server waits for an answer: 1 to 30 seconds (10 by default). The
    /// plugin's call gets a deadline below it.
    ///
    /// ```
    /// use std::time::Duration;
    /// use wasmop_guest::Webhook;
    ///
    /// let webhook = Webhook::validating().timeout(Duration::from_secs(5));
    /// assert_eq!(webhook.timeout, Some(Duration::from_secs(5)));
    /// ```
    #[must_use]
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// The webhook as the core's rules see it.
    pub(crate) fn to_core(&self) -> wasmop_core::webhook::Webhook {
        wasmop_core::webhook::Webhook {
            webhook_type: self.webhook_type,
            kinds: self.kinds.iter().map(Kind::to_core).collect(),
            operations: self.operations.clone(),
            failure_policy: self.failure_policy,
            timeout_ms: self.timeout.map(|t| u32::try_from(t.as_millis()).unwrap_or(u32::MAX)),
        }
    }

    /// The WIT form.
    pub(crate) fn into_wit(self) -> wit::Webhook {
        let core = self.to_core();
        wit::Webhook {
            webhook_type: match self.webhook_type {
                WebhookType::Validating => wit::WebhookType::Validating,
                WebhookType::Mutating => wit::WebhookType::Mutating,
                WebhookType::Conversion => wit::WebhookType::Conversion,
            },
            kinds: self.kinds.iter().map(Kind::to_wit).collect(),
            operations: self.operations.into_iter().map(operation_to_wit).collect(),
            failure_policy: match self.failure_policy {
                FailurePolicy::Fail => wit::FailurePolicy::Fail,
                FailurePolicy::Ignore => wit::FailurePolicy::Ignore,
            },
            timeout_ms: core.timeout_ms,
        }
    }
}

/// An operation in the WIT form.
pub(crate) fn operation_to_wit(operation: Operation) -> wit::Operation {
    match operation {
        Operation::Create => wit::Operation::Create,
        Operation::Update => wit::Operation::Update,
        Operation::Delete => wit::Operation::Delete,
        Operation::Connect => wit::Operation::Connect,
    }
}

/// An operation from the WIT form.
pub(crate) fn operation_from_wit(operation: wit::Operation) -> Operation {
    match operation {
        wit::Operation::Create => Operation::Create,
        wit::Operation::Update => Operation::Update,
        wit::Operation::Delete => Operation::Delete,
        wit::Operation::Connect => Operation::Connect,
    }
}

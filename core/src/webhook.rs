//! The admission and conversion webhooks a plugin declares: the rules a declaration must follow
//! to be loaded, the defaults it gets, and which requests each webhook is called for.
//!
//! The host checks a plugin's declarations with [`declared`] when it loads the plugin, and the
//! SDK's fake host does the same, so a plugin refused by one is refused by the other; both then
//! call a webhook only for the requests [`Webhook::serves`] admits.

use std::time::Duration;

use crate::KindRef;

/// Which export a webhook calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WebhookType {
    /// `validate`: admits or denies.
    Validating,
    /// `default`: the object as it should be stored.
    Mutating,
    /// `convert`: objects between the versions of the primary's CRD.
    Conversion,
}

impl WebhookType {
    /// The word for the type, as a declaration's error names it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Validating => "validating",
            Self::Mutating => "mutating",
            Self::Conversion => "conversion",
        }
    }
}

/// What an admission request does to its object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operation {
    /// The object is created.
    Create,
    /// The object is updated.
    Update,
    /// The object is deleted.
    Delete,
    /// A connection to the object (`exec`, `proxy`).
    Connect,
}

/// What the API server does when a call of a webhook fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FailurePolicy {
    /// Refuse the request.
    Fail,
    /// Admit the request.
    Ignore,
}

/// A webhook as the plugin declares it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Webhook {
    /// Which export it calls.
    pub webhook_type: WebhookType,
    /// The kinds it is called for; empty: the primary.
    pub kinds: Vec<KindRef>,
    /// The operations it is called for; empty: create and update ([`DEFAULT_OPERATIONS`]).
    pub operations: Vec<Operation>,
    /// What the API server does when a call fails.
    pub failure_policy: FailurePolicy,
    /// How long the API server waits for an answer, in milliseconds; absent:
    /// [`DEFAULT_TIMEOUT_MS`].
    pub timeout_ms: Option<u32>,
}

/// The timeout of a webhook that declares none (kubebuilder's default).
pub const DEFAULT_TIMEOUT_MS: u32 = 10_000;
/// The shortest timeout a webhook may declare (the API server's minimum).
pub const MIN_TIMEOUT_MS: u32 = 1_000;
/// The longest timeout a webhook may declare (the API server's maximum).
pub const MAX_TIMEOUT_MS: u32 = 30_000;
/// The operations of an admission webhook that declares none.
pub const DEFAULT_OPERATIONS: [Operation; 2] = [Operation::Create, Operation::Update];

/// Why a plugin's webhooks cannot be loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused {
    /// The plugin declares webhooks but does not export the functions they call.
    NotExported {
        /// The plugin's name.
        plugin: String,
    },
    /// A declaration breaks a rule; the message names the plugin and the webhook.
    Invalid(String),
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NotExported { plugin } => {
                write!(f, "plugin {plugin:?} declares webhooks but does not export the admission interface")
            }
            Self::Invalid(message) => f.write_str(message),
        }
    }
}

impl std::error::Error for Refused {}

/// Checks the webhooks plugin `plugin`, of primary kind `primary`, declares, given whether it
/// exports the admission interface, and returns them with their defaults filled in: a timeout
/// of [`DEFAULT_TIMEOUT_MS`], and for admission webhooks the operations [`DEFAULT_OPERATIONS`].
///
/// The rules: webhooks need the admission interface; at most one webhook per type; a timeout
/// between [`MIN_TIMEOUT_MS`] and [`MAX_TIMEOUT_MS`]; every kind with a version and a kind; a
/// mutating webhook only for creates and updates (it returns the object to store); a
/// conversion webhook only for a CustomResourceDefinition primary (a group) and no other kinds.
pub fn declared(
    plugin: &str,
    primary: &KindRef,
    webhooks: &[Webhook],
    exports_admission: bool,
) -> Result<Vec<Webhook>, Refused> {
    if webhooks.is_empty() {
        return Ok(Vec::new());
    }
    if !exports_admission {
        return Err(Refused::NotExported { plugin: plugin.into() });
    }
    let invalid = |webhook: &Webhook, why: String| {
        Refused::Invalid(format!("plugin {plugin:?}: the {} webhook {why}", webhook.webhook_type.name()))
    };
    let mut checked: Vec<Webhook> = Vec::with_capacity(webhooks.len());
    for webhook in webhooks {
        if checked.iter().any(|w| w.webhook_type == webhook.webhook_type) {
            return Err(invalid(webhook, "is declared twice: declare at most one webhook per type".into()));
        }
        let timeout_ms = webhook.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS);
        if !(MIN_TIMEOUT_MS..=MAX_TIMEOUT_MS).contains(&timeout_ms) {
            return Err(invalid(
                webhook,
                format!("has a timeout of {timeout_ms} ms: it must be between 1 and 30 seconds"),
            ));
        }
        if let Some(kind) = webhook.kinds.iter().find(|k| k.version.is_empty() || k.kind.is_empty()) {
            return Err(invalid(webhook, format!("names a kind without a version or a kind ({kind})")));
        }
        let mut operations = webhook.operations.clone();
        match webhook.webhook_type {
            WebhookType::Conversion => {
                if primary.group.is_empty() {
                    return Err(invalid(
                        webhook,
                        format!("needs a custom resource primary, but {primary} is a built-in kind"),
                    ));
                }
                if !webhook.kinds.is_empty() {
                    return Err(invalid(webhook, "serves the primary's CRD only: declare no kinds".into()));
                }
            }
            WebhookType::Mutating | WebhookType::Validating => {
                if operations.is_empty() {
                    operations = DEFAULT_OPERATIONS.to_vec();
                }
                if webhook.webhook_type == WebhookType::Mutating
                    && let Some(op) = operations.iter().find(|op| !DEFAULT_OPERATIONS.contains(op))
                {
                    return Err(invalid(
                        webhook,
                        format!(
                            "is declared for {op:?}: a mutating webhook defaults objects as they are created or updated"
                        ),
                    ));
                }
            }
        }
        checked.push(Webhook { operations, timeout_ms: Some(timeout_ms), ..webhook.clone() });
    }
    Ok(checked)
}

impl Webhook {
    /// Whether this admission webhook is called for a request of `kind` doing `operation`,
    /// `primary` being the plugin's primary kind (what empty `kinds` means). Plural and scope
    /// aside; a conversion webhook serves no admission request.
    pub fn serves(&self, primary: &KindRef, kind: &KindRef, operation: Operation) -> bool {
        if self.webhook_type == WebhookType::Conversion {
            return false;
        }
        let operations: &[Operation] = if self.operations.is_empty() { &DEFAULT_OPERATIONS } else { &self.operations };
        let kinds = if self.kinds.is_empty() { std::slice::from_ref(primary) } else { &self.kinds[..] };
        operations.contains(&operation) && kinds.iter().any(|k| k.same_type(kind))
    }

    /// How long the API server waits for an answer.
    pub fn timeout(&self) -> Duration {
        Duration::from_millis(u64::from(self.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(group: &str, kind: &str) -> KindRef {
        KindRef { group: group.into(), version: "v1".into(), kind: kind.into(), plural: None, namespaced: true }
    }

    fn webhook(webhook_type: WebhookType) -> Webhook {
        Webhook {
            webhook_type,
            kinds: Vec::new(),
            operations: Vec::new(),
            failure_policy: FailurePolicy::Fail,
            timeout_ms: None,
        }
    }

    fn check(webhooks: &[Webhook]) -> Result<Vec<Webhook>, Refused> {
        declared("web", &kind("sample.wasmop.dev", "WebPage"), webhooks, true)
    }

    #[test]
    fn no_webhooks_need_no_export() {
        assert_eq!(declared("web", &kind("", "ConfigMap"), &[], false), Ok(Vec::new()));
    }

    #[test]
    fn webhooks_without_the_export_are_refused_naming_the_plugin() {
        let err = declared("web", &kind("g", "K"), &[webhook(WebhookType::Validating)], false).unwrap_err();
        assert_eq!(err, Refused::NotExported { plugin: "web".into() });
        assert!(err.to_string().contains("\"web\"") && err.to_string().contains("admission"), "{err}");
    }

    #[test]
    fn defaults_are_a_ten_second_timeout_and_create_and_update() {
        let checked = check(&[webhook(WebhookType::Validating), webhook(WebhookType::Conversion)]).unwrap();
        assert_eq!(checked[0].timeout_ms, Some(10_000));
        assert_eq!(checked[0].operations, [Operation::Create, Operation::Update]);
        assert_eq!(checked[0].timeout(), Duration::from_secs(10));
        assert_eq!(checked[1].operations, [], "conversion has no operations");
        let declared = Webhook { operations: vec![Operation::Delete], timeout_ms: Some(3_000), ..checked[0].clone() };
        let checked = check(std::slice::from_ref(&declared)).unwrap();
        assert_eq!(checked, [declared], "what is declared is kept");
    }

    #[test]
    fn timeouts_are_between_one_and_thirty_seconds() {
        for (timeout_ms, ok) in [(999, false), (1_000, true), (30_000, true), (30_001, false), (0, false)] {
            let declared = Webhook { timeout_ms: Some(timeout_ms), ..webhook(WebhookType::Mutating) };
            let result = check(&[declared]);
            assert_eq!(result.is_ok(), ok, "{timeout_ms}: {result:?}");
            if let Err(err) = result {
                assert!(err.to_string().contains("between 1 and 30 seconds"), "{err}");
            }
        }
    }

    #[test]
    fn one_webhook_per_type() {
        let err = check(&[webhook(WebhookType::Validating), webhook(WebhookType::Validating)]).unwrap_err();
        assert!(err.to_string().contains("validating webhook is declared twice"), "{err}");
        let all = [webhook(WebhookType::Validating), webhook(WebhookType::Mutating), webhook(WebhookType::Conversion)];
        assert_eq!(check(&all).unwrap().len(), 3);
    }

    #[test]
    fn conversion_needs_a_crd_primary_and_no_kinds() {
        let err = declared("cm", &kind("", "ConfigMap"), &[webhook(WebhookType::Conversion)], true).unwrap_err();
        assert!(err.to_string().contains("built-in kind"), "{err}");
        let with_kinds = Webhook { kinds: vec![kind("g", "Other")], ..webhook(WebhookType::Conversion) };
        assert!(check(&[with_kinds]).unwrap_err().to_string().contains("declare no kinds"));
    }

    #[test]
    fn mutating_webhooks_serve_creates_and_updates_only() {
        let deleting = Webhook { operations: vec![Operation::Delete], ..webhook(WebhookType::Mutating) };
        assert!(check(&[deleting]).unwrap_err().to_string().contains("created or updated"));
    }

    #[test]
    fn kinds_need_a_version_and_a_kind() {
        let mut unnamed = kind("g", "");
        unnamed.version = "v1".into();
        let declared = Webhook { kinds: vec![unnamed], ..webhook(WebhookType::Validating) };
        assert!(check(&[declared]).unwrap_err().to_string().contains("without a version or a kind"));
    }

    #[test]
    fn a_webhook_serves_its_kinds_and_operations() {
        let primary = kind("sample.wasmop.dev", "WebPage");
        let validating = &check(&[webhook(WebhookType::Validating)]).unwrap()[0];
        assert!(validating.serves(&primary, &primary, Operation::Create));
        assert!(validating.serves(&primary, &primary, Operation::Update));
        assert!(!validating.serves(&primary, &primary, Operation::Delete));
        assert!(!validating.serves(&primary, &kind("", "ConfigMap"), Operation::Create));
        let config_maps = Webhook { kinds: vec![kind("", "ConfigMap")], ..validating.clone() };
        assert!(config_maps.serves(&primary, &kind("", "ConfigMap"), Operation::Create));
        assert!(!config_maps.serves(&primary, &primary, Operation::Create), "named kinds replace the primary");
        assert!(!webhook(WebhookType::Conversion).serves(&primary, &primary, Operation::Create));
    }
}

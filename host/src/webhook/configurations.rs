//! What the host writes for a plugin's webhooks, built from what the plugin declares: a
//! `ValidatingWebhookConfiguration` and a `MutatingWebhookConfiguration` named
//! `wasmop-<plugin>` (`wasmop-<plugin>-<namespace>` for a host that watches one namespace, so
//! that several hosts keep apart), one webhook per declared one, and the conversion section of
//! the primary's CRD. Each names the endpoint by URL (`--webhook-url`) or Service
//! (`--webhook-service`) and carries the CA bundle.

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhook, MutatingWebhookConfiguration, RuleWithOperations, ServiceReference, ValidatingWebhook,
    ValidatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement};
use kube::api::ObjectMeta;
use serde_json::{Value, json};

use super::call::Path;
use super::policy;
use crate::runtime::bindings::wasmop::plugin::types::{KindRef, Operation, PluginConfig, Webhook, WebhookType};

/// The label naming the plugin whose webhooks a configuration holds.
pub const PLUGIN_LABEL: &str = "wasmop.dev/webhooks-of";

/// How the API server reaches the endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    /// At a URL (`https://127.0.0.1:9443`), the paths appended.
    Url(String),
    /// Through a Service in the cluster.
    Service {
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// Its port; `None`: 443.
        port: Option<u16>,
    },
}

impl std::str::FromStr for Endpoint {
    type Err = String;

    /// `NAMESPACE/NAME[:PORT]`, as `--webhook-service` takes it.
    fn from_str(text: &str) -> Result<Self, String> {
        let wrong = || format!("{text:?} is not NAMESPACE/NAME[:PORT]");
        let (namespace, rest) = text.split_once('/').ok_or_else(wrong)?;
        let (name, port) = match rest.split_once(':') {
            Some((name, port)) => (name, Some(port.parse().map_err(|_| wrong())?)),
            None => (rest, None),
        };
        if namespace.is_empty() || name.is_empty() {
            return Err(wrong());
        }
        Ok(Self::Service { namespace: namespace.into(), name: name.into(), port })
    }
}

impl Endpoint {
    /// The names a serving certificate must hold for the API server to reach this endpoint:
    /// the URL's host, or the Service's DNS names.
    pub fn names(&self) -> Vec<String> {
        match self {
            Self::Url(url) => {
                let host = url.parse::<http::Uri>().ok().and_then(|u| u.host().map(str::to_string));
                host.map(|h| h.trim_start_matches('[').trim_end_matches(']').to_string()).into_iter().collect()
            }
            Self::Service { namespace, name, .. } => vec![
                format!("{name}.{namespace}.svc"),
                format!("{name}.{namespace}.svc.cluster.local"),
                format!("{name}.{namespace}"),
                name.clone(),
            ],
        }
    }

    /// How the API server reaches `path` at this endpoint, trusting the CA `bundle` (none when
    /// empty: the host injects it when it runs).
    fn client_config(&self, path: &str, bundle: &[u8]) -> WebhookClientConfig {
        let ca_bundle = (!bundle.is_empty()).then(|| ByteString(bundle.to_vec()));
        match self {
            Self::Url(url) => WebhookClientConfig {
                url: Some(format!("{}{path}", url.trim_end_matches('/'))),
                ca_bundle,
                service: None,
            },
            Self::Service { namespace, name, port } => WebhookClientConfig {
                service: Some(ServiceReference {
                    namespace: namespace.clone(),
                    name: name.clone(),
                    path: Some(path.to_string()),
                    port: port.map(i32::from),
                }),
                ca_bundle,
                url: None,
            },
        }
    }
}

/// Where a host's configurations point and what they cover.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// How the API server reaches the endpoint.
    pub endpoint: Endpoint,
    /// The one namespace the host watches (`--namespace`), if any: the configurations' names
    /// carry it and their webhooks match its objects only.
    pub namespace: Option<String>,
}

impl Target {
    /// The name of `plugin`'s configurations.
    pub fn name(&self, plugin: &str) -> String {
        match &self.namespace {
            Some(namespace) => format!("wasmop-{plugin}-{namespace}"),
            None => format!("wasmop-{plugin}"),
        }
    }

    fn metadata(&self, plugin: &str) -> ObjectMeta {
        ObjectMeta {
            name: Some(self.name(plugin)),
            labels: Some(BTreeMap::from([
                ("app.kubernetes.io/managed-by".to_string(), "wasmop".to_string()),
                (PLUGIN_LABEL.to_string(), plugin.to_string()),
            ])),
            ..ObjectMeta::default()
        }
    }

    fn namespace_selector(&self) -> Option<LabelSelector> {
        self.namespace.as_ref().map(|namespace| LabelSelector {
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: "kubernetes.io/metadata.name".into(),
                operator: "In".into(),
                values: Some(vec![namespace.clone()]),
            }]),
            match_labels: None,
        })
    }
}

/// One declared webhook, as the configurations' entries share it.
struct Entry {
    name: String,
    client_config: WebhookClientConfig,
    rules: Vec<RuleWithOperations>,
    failure_policy: String,
    timeout_seconds: i32,
}

/// The entries of `plugin`'s declared webhooks of `kind`.
fn entries(config: &PluginConfig, kind: WebhookType, path: Path, target: &Target, bundle: &[u8]) -> Vec<Entry> {
    let plugin = &config.name;
    let endpoint = format!("{}/{plugin}", path.prefix());
    let short = &path.prefix()[1..];
    config
        .webhooks
        .iter()
        .filter(|webhook| webhook.webhook_type == kind)
        .enumerate()
        .map(|(i, webhook)| Entry {
            name: format!("{short}-{i}.{plugin}.wasmop.dev"),
            client_config: target.endpoint.client_config(&endpoint, bundle),
            rules: rules(webhook, &config.primary),
            failure_policy: policy::name(webhook.failure_policy).into(),
            timeout_seconds: i32::try_from(policy::timeout(webhook).as_secs()).unwrap_or(30),
        })
        .collect()
}

/// A webhook's rules: one per kind (the primary when it names none), its operations (create
/// and update when it names none).
fn rules(webhook: &Webhook, primary: &KindRef) -> Vec<RuleWithOperations> {
    let kinds = if webhook.kinds.is_empty() { std::slice::from_ref(primary) } else { &webhook.kinds[..] };
    let operations: Vec<String> = if webhook.operations.is_empty() {
        vec!["CREATE".into(), "UPDATE".into()]
    } else {
        webhook.operations.iter().map(|op| operation(*op).to_string()).collect()
    };
    kinds
        .iter()
        .map(|kind| RuleWithOperations {
            api_groups: Some(vec![kind.group.clone()]),
            api_versions: Some(vec![kind.version.clone()]),
            operations: Some(operations.clone()),
            resources: Some(vec![plural(kind)]),
            scope: Some(if kind.namespaced { "Namespaced" } else { "Cluster" }.into()),
        })
        .collect()
}

fn operation(operation: Operation) -> &'static str {
    match operation {
        Operation::Create => "CREATE",
        Operation::Update => "UPDATE",
        Operation::Delete => "DELETE",
        Operation::Connect => "CONNECT",
    }
}

/// A kind's plural: the declared one, else the kind in lower case with an `s`.
pub fn plural(kind: &KindRef) -> String {
    kind.plural.clone().unwrap_or_else(|| format!("{}s", kind.kind.to_lowercase()))
}

/// The validating configuration of `config`'s plugin; `None` when it declares no validating
/// webhook.
pub fn validating(config: &PluginConfig, target: &Target, bundle: &[u8]) -> Option<ValidatingWebhookConfiguration> {
    let entries = entries(config, WebhookType::Validating, Path::Validate, target, bundle);
    let webhooks = entries
        .into_iter()
        .map(|entry| ValidatingWebhook {
            name: entry.name,
            client_config: entry.client_config,
            rules: Some(entry.rules),
            failure_policy: Some(entry.failure_policy),
            timeout_seconds: Some(entry.timeout_seconds),
            side_effects: "None".into(),
            admission_review_versions: vec!["v1".into()],
            namespace_selector: target.namespace_selector(),
            ..ValidatingWebhook::default()
        })
        .collect::<Vec<_>>();
    (!webhooks.is_empty())
        .then(|| ValidatingWebhookConfiguration { metadata: target.metadata(&config.name), webhooks: Some(webhooks) })
}

/// The mutating configuration of `config`'s plugin; `None` when it declares no mutating
/// webhook.
pub fn mutating(config: &PluginConfig, target: &Target, bundle: &[u8]) -> Option<MutatingWebhookConfiguration> {
    let entries = entries(config, WebhookType::Mutating, Path::Mutate, target, bundle);
    let webhooks = entries
        .into_iter()
        .map(|entry| MutatingWebhook {
            name: entry.name,
            client_config: entry.client_config,
            rules: Some(entry.rules),
            failure_policy: Some(entry.failure_policy),
            timeout_seconds: Some(entry.timeout_seconds),
            side_effects: "None".into(),
            admission_review_versions: vec!["v1".into()],
            namespace_selector: target.namespace_selector(),
            ..MutatingWebhook::default()
        })
        .collect::<Vec<_>>();
    (!webhooks.is_empty())
        .then(|| MutatingWebhookConfiguration { metadata: target.metadata(&config.name), webhooks: Some(webhooks) })
}

/// The name of the primary's CRD, `<plural>.<group>`.
pub fn crd_name(primary: &KindRef) -> String {
    format!("{}.{}", plural(primary), primary.group)
}

/// The server-side apply of the primary CRD's conversion section that sends conversions to
/// the plugin; `None` when it declares no conversion webhook.
pub fn conversion(config: &PluginConfig, target: &Target, bundle: &[u8]) -> Option<Value> {
    Some(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": { "name": crd_name(&config.primary) },
        "spec": { "conversion": conversion_section(config, &target.endpoint, bundle)? },
    }))
}

/// The conversion section (`spec.conversion`) of the primary's CRD that sends conversions to
/// `config`'s plugin at `endpoint`, trusting the CA `bundle` (none when empty); `None` when it
/// declares no conversion webhook. What the host writes and what `wasmop crd --plugin` prints.
pub fn conversion_section(config: &PluginConfig, endpoint: &Endpoint, bundle: &[u8]) -> Option<Value> {
    if !crate::inspect::converts(config) {
        return None;
    }
    let client = endpoint.client_config(&format!("{}/{}", Path::Convert.prefix(), config.name), bundle);
    Some(json!({
        "strategy": "Webhook",
        "webhook": { "clientConfig": client, "conversionReviewVersions": ["v1"] },
    }))
}

/// `crd` (the primary's CRD, as `wasmop crd --plugin` prints it) with the conversion section
/// that sends conversions to `config`'s plugin at `endpoint`, without a CA bundle (the host
/// injects it), when the plugin declares a conversion webhook; as it is otherwise.
pub fn with_conversion(mut crd: Value, config: &PluginConfig, endpoint: &Endpoint) -> Value {
    let conversion = conversion_section(config, endpoint, &[]);
    if let (Some(conversion), Some(spec)) = (conversion, crd.get_mut("spec").and_then(Value::as_object_mut)) {
        spec.insert("conversion".into(), conversion);
    }
    crd
}

/// The server-side apply that takes the primary CRD's conversion back from the plugin.
pub fn no_conversion(primary: &KindRef) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": { "name": crd_name(primary) },
        "spec": { "conversion": { "strategy": "None" } },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::bindings::wasmop::plugin::types::FailurePolicy;

    fn page() -> KindRef {
        KindRef {
            group: "example.wasmop.dev".into(),
            version: "v1".into(),
            kind: "WebPage".into(),
            plural: None,
            namespaced: true,
        }
    }

    fn webhook(webhook_type: WebhookType, failure_policy: FailurePolicy) -> Webhook {
        Webhook { webhook_type, kinds: Vec::new(), operations: Vec::new(), failure_policy, timeout_ms: Some(5000) }
    }

    fn target(namespace: Option<&str>) -> Target {
        Target { endpoint: Endpoint::Url("https://127.0.0.1:9443/".into()), namespace: namespace.map(str::to_string) }
    }

    #[test]
    fn a_validating_webhook_covers_the_primary_with_its_policy_and_timeout() {
        let config = config(vec![webhook(WebhookType::Validating, FailurePolicy::Ignore)]);
        let written = serde_json::to_value(validating(&config, &target(Some("site")), b"CA").unwrap()).unwrap();
        assert_eq!(written["metadata"]["name"], "wasmop-webpage-site");
        assert_eq!(written["metadata"]["labels"][PLUGIN_LABEL], "webpage");
        let hook = &written["webhooks"][0];
        assert_eq!(hook["name"], "validate-0.webpage.wasmop.dev");
        assert_eq!(hook["clientConfig"]["url"], "https://127.0.0.1:9443/validate/webpage");
        assert_eq!(hook["clientConfig"]["caBundle"], "Q0E=");
        assert_eq!(
            hook["rules"][0],
            json!({ "apiGroups": ["example.wasmop.dev"], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
                    "resources": ["webpages"], "scope": "Namespaced" })
        );
        assert_eq!((hook["failurePolicy"].as_str(), hook["timeoutSeconds"].as_i64()), (Some("Ignore"), Some(5)));
        assert_eq!((hook["sideEffects"].as_str(), &hook["admissionReviewVersions"]), (Some("None"), &json!(["v1"])));
        assert_eq!(hook["namespaceSelector"]["matchExpressions"][0]["values"], json!(["site"]));
        assert!(mutating(&config, &target(None), b"CA").is_none());
        assert!(conversion(&config, &target(None), b"CA").is_none());
    }

    #[test]
    fn mutating_and_conversion_webhooks_go_where_they_are_served() {
        let config = config(vec![
            webhook(WebhookType::Mutating, FailurePolicy::Fail),
            webhook(WebhookType::Conversion, FailurePolicy::Fail),
        ]);
        let service = Target { endpoint: "wasmop/hooks:8443".parse().unwrap(), namespace: None };
        let written = serde_json::to_value(mutating(&config, &service, b"CA").unwrap()).unwrap();
        assert_eq!(written["metadata"]["name"], "wasmop-webpage");
        assert_eq!(
            written["webhooks"][0]["clientConfig"]["service"],
            json!({ "namespace": "wasmop", "name": "hooks", "path": "/mutate/webpage", "port": 8443 })
        );
        assert!(written["webhooks"][0].get("namespaceSelector").is_none());
        let crd = conversion(&config, &service, b"CA").unwrap();
        assert_eq!(crd["metadata"]["name"], "webpages.example.wasmop.dev");
        assert_eq!(crd["spec"]["conversion"]["webhook"]["clientConfig"]["service"]["path"], "/convert/webpage");
        assert_eq!(crd["spec"]["conversion"]["webhook"]["conversionReviewVersions"], json!(["v1"]));
        assert_eq!(crd["spec"]["conversion"]["webhook"]["clientConfig"]["caBundle"], "Q0E=");
        let printed = conversion_section(&config, &service.endpoint, b"").unwrap();
        assert_eq!(printed["strategy"], "Webhook");
        assert!(printed["webhook"]["clientConfig"].get("caBundle").is_none(), "no bundle: the host injects it");
        assert_eq!(
            printed["webhook"]["clientConfig"]["service"],
            crd["spec"]["conversion"]["webhook"]["clientConfig"]["service"]
        );
    }

    #[test]
    fn the_printed_crd_has_the_conversion_section_the_host_writes_but_the_bundle() {
        let crd = json!({ "kind": "CustomResourceDefinition", "spec": { "group": "example.wasmop.dev" } });
        let endpoint = Endpoint::Url("https://127.0.0.1:9443".into());
        let converting = config(vec![webhook(WebhookType::Conversion, FailurePolicy::Fail)]);
        let printed = with_conversion(crd.clone(), &converting, &endpoint);
        let target = Target { endpoint: endpoint.clone(), namespace: None };
        let mut written = conversion(&converting, &target, b"CA").unwrap()["spec"]["conversion"].clone();
        written["webhook"]["clientConfig"].as_object_mut().unwrap().remove("caBundle");
        assert_eq!(printed["spec"]["conversion"], written);
        assert_eq!(
            printed["spec"]["conversion"]["webhook"]["clientConfig"]["url"],
            "https://127.0.0.1:9443/convert/webpage"
        );
        assert_eq!(printed["spec"]["group"], "example.wasmop.dev", "the rest is kept");
        let validating = config(vec![webhook(WebhookType::Validating, FailurePolicy::Fail)]);
        assert_eq!(with_conversion(crd.clone(), &validating, &endpoint), crd, "no conversion webhook, no section");
    }

    #[test]
    fn the_certificate_names_follow_the_endpoint() {
        assert_eq!(Endpoint::Url("https://127.0.0.1:9443".into()).names(), vec!["127.0.0.1".to_string()]);
        let service: Endpoint = "wasmop/hooks".parse().unwrap();
        assert!(service.names().contains(&"hooks.wasmop.svc".to_string()));
        assert!("hooks".parse::<Endpoint>().is_err());
    }

    fn config(webhooks: Vec<Webhook>) -> PluginConfig {
        let mut config = crate::runtime::bindings::test_config("WebPage");
        config.name = "webpage".into();
        config.primary = page();
        config.webhooks = webhooks;
        config
    }
}

//! `wasmop inspect`: what a plugin's `describe()` says, in the words a user writes them: its
//! settings exactly as the overrides file and a `ReconcilerPlugin`'s `spec.overrides` take them,
//! kinds as `apiVersion/Kind`, and its watches and dependents as the SDK's builder names them.
//! And `wasmop crd --plugin`: the CustomResourceDefinition a plugin generates from its types.

use serde_json::{Map, Value, json};

use crate::runtime::bindings::wasmop::plugin::types::{
    Condition, Dependent, FailurePolicy, KindRef, Mapper, Operation, Owners, Ownership, PluginConfig, Watch, Webhook,
    WebhookType,
};

/// The CustomResourceDefinition `module` generates for its primary kind (its `crd` export), as
/// JSON; an error saying so when the plugin declares none.
pub async fn crd(module: &crate::runtime::Module) -> anyhow::Result<Value> {
    use anyhow::Context as _;
    let path = module.path().display();
    let json = module.crd().await.with_context(|| format!("{path}: the crd() call failed"))?;
    let Some(json) = json else {
        anyhow::bail!(
            "{path} (plugin {}) declares no CustomResourceDefinition: implement Reconciler::crd (wasmop_guest::Crd \
             builds one from the spec and status types), or write the CRD by hand",
            module.name()
        );
    };
    serde_json::from_str(&json).with_context(|| format!("{path}: crd() did not return JSON"))
}

/// Whether `config` declares a conversion webhook.
pub fn converts(config: &PluginConfig) -> bool {
    config.webhooks.iter().any(|webhook| webhook.webhook_type == WebhookType::Conversion)
}

/// The plugin's description, ready to print as YAML or JSON.
pub fn describe(config: &PluginConfig) -> Value {
    let finalizer = crate::runtime::bindings::finalizers(config).kept;
    let mut out = Map::new();
    out.insert("name".into(), json!(config.name));
    out.insert("primary".into(), kind(&config.primary));
    if let Some(paths) = &config.projection {
        out.insert("projection".into(), projection(paths));
    }
    out.insert("settings".into(), json!(crate::runtime::bindings::settings(config)));
    out.insert("cleanup".into(), json!(config.cleanup));
    out.insert("finalizer".into(), json!(finalizer));
    out.insert("conditions".into(), json!(if config.conditions { "kept by the host" } else { "kept by the plugin" }));
    out.insert("watches".into(), config.watches.iter().map(watch).collect());
    out.insert("dependents".into(), config.dependents.iter().map(dependent).collect());
    beyond(config, &mut out);
    if !config.webhooks.is_empty() {
        out.insert("webhooks".into(), config.webhooks.iter().map(|w| webhook(w, &config.primary)).collect());
    }
    Value::Object(out)
}

/// A webhook as the API server's webhook configurations name its settings; kinds that are
/// the primary's shown as the primary.
fn webhook(webhook: &Webhook, primary: &KindRef) -> Value {
    let type_ = match webhook.webhook_type {
        WebhookType::Validating => "validating (validate)",
        WebhookType::Mutating => "mutating (default)",
        WebhookType::Conversion => "conversion (convert)",
    };
    let kinds = if webhook.kinds.is_empty() { std::slice::from_ref(primary) } else { &webhook.kinds[..] };
    let mut out = json!({
        "type": type_,
        "kinds": kinds.iter().map(kind).collect::<Vec<_>>(),
        "failurePolicy": match webhook.failure_policy {
            FailurePolicy::Fail => "Fail",
            FailurePolicy::Ignore => "Ignore",
        },
    });
    if webhook.webhook_type != WebhookType::Conversion {
        let operations: Vec<&str> = webhook
            .operations
            .iter()
            .map(|op| match op {
                Operation::Create => "CREATE",
                Operation::Update => "UPDATE",
                Operation::Delete => "DELETE",
                Operation::Connect => "CONNECT",
            })
            .collect();
        out["operations"] = json!(operations);
    }
    if let Some(timeout_ms) = webhook.timeout_ms {
        out["timeoutMs"] = json!(timeout_ms);
    }
    out
}

/// What the plugin reaches beyond the API server: granted HTTP, polling, inbound events and
/// external dependents; absent keys when it reaches nothing.
fn beyond(config: &PluginConfig, out: &mut Map<String, Value>) {
    use crate::runtime::bindings::wasmop::plugin::types::{PollingMode, Tracking};
    let secret = |s: &crate::runtime::bindings::wasmop::plugin::types::SecretKey| {
        format!("{}/{} key {}", s.namespace.as_deref().unwrap_or("(host namespace)"), s.name, s.key)
    };
    if let Some(grant) = &config.http {
        let origins: Vec<Value> = grant
            .origins
            .iter()
            .map(|o| {
                let port = o.port.map(|p| format!(":{p}")).unwrap_or_default();
                let headers: Vec<Value> =
                    o.secret_headers.iter().map(|h| json!({ "header": h.header, "from": secret(&h.secret) })).collect();
                json!({ "origin": format!("{}://{}{port}", o.scheme, o.host), "secretHeaders": headers })
            })
            .collect();
        let mut http = json!({ "origins": origins });
        for (key, value) in [
            ("connectTimeoutMs", grant.connect_timeout_ms.map(Value::from)),
            ("timeoutMs", grant.timeout_ms.map(Value::from)),
            ("maxResponseBytes", grant.max_response_bytes.map(Value::from)),
            ("maxConcurrent", grant.max_concurrent.map(Value::from)),
        ] {
            if let Some(value) = value {
                http[key] = value;
            }
        }
        out.insert("http".into(), http);
    }
    if let Some(polling) = &config.polling {
        let mode = match polling.mode {
            PollingMode::PerResource => "per resource (fetch)",
            PollingMode::Global => "global (fetch-all)",
        };
        out.insert("polling".into(), json!({ "mode": mode, "periodMs": polling.period_ms }));
    }
    if let Some(inbound) = &config.inbound {
        out.insert("inbound".into(), json!({ "token": secret(&inbound.token), "caching": inbound.caching }));
    }
    if !config.external_dependents.is_empty() {
        let external: Vec<Value> = config
            .external_dependents
            .iter()
            .map(|d| {
                let tracking = match d.tracking {
                    Tracking::ConfigMap => "ConfigMap",
                    Tracking::Secret => "Secret",
                };
                let mut out = json!({ "name": d.name, "trackedIn": tracking });
                if !d.depends_on.is_empty() {
                    out["dependsOn"] = json!(d.depends_on);
                }
                if let Some(c) = &d.ready_when {
                    out["readyWhen"] = json!(condition(c));
                }
                if let Some(c) = &d.reconcile_when {
                    out["reconcileWhen"] = json!(condition(c));
                }
                out
            })
            .collect();
        out.insert("externalDependents".into(), Value::Array(external));
    }
}

/// The kinds the plugin declares on the host's own cluster, as `wasmop inspect --check-cluster`
/// checks them: the primary, the watches without a cluster of their own, the dependents.
pub fn declared_kinds(config: &PluginConfig) -> Vec<&KindRef> {
    let watches = config.watches.iter().filter(|w| w.cluster.is_none()).map(|w| &w.kind);
    std::iter::once(&config.primary).chain(watches).chain(config.dependents.iter().map(|d| &d.kind)).collect()
}

fn kind(kind: &KindRef) -> Value {
    let api_version =
        if kind.group.is_empty() { kind.version.clone() } else { format!("{}/{}", kind.group, kind.version) };
    let mut out = json!({ "apiVersion": api_version, "kind": kind.kind });
    if let Some(plural) = &kind.plural {
        out["plural"] = json!(plural);
    }
    if !kind.namespaced {
        out["scope"] = json!("Cluster");
    }
    out
}

fn watch(watch: &Watch) -> Value {
    let mapper = match watch.mapper {
        Mapper::OwnerReferences(Owners::Controller) => "owned by the primary (controller owner reference)",
        Mapper::OwnerReferences(Owners::Any) => "owned by the primary (any owner reference)",
        Mapper::Annotations => "annotated with the primary",
        Mapper::Plugin => "mapped by the plugin (map_secondary)",
        Mapper::PrimaryReferences => "referenced by the primary (secondaries_of)",
    };
    let mut out = json!({ "kind": kind(&watch.kind), "mapper": mapper });
    for (key, value) in [
        ("namespace", &watch.namespace),
        ("labelSelector", &watch.label_selector),
        ("fieldSelector", &watch.field_selector),
        ("cluster", &watch.cluster),
    ] {
        if let Some(value) = value {
            out[key] = json!(value);
        }
    }
    if let Some(paths) = &watch.projection {
        out["projection"] = projection(paths);
    }
    out
}

/// What a projection keeps, in words where it is the metadata alone.
fn projection(paths: &[String]) -> Value {
    if paths.is_empty() { json!("metadata only") } else { json!(paths) }
}

fn dependent(dependent: &Dependent) -> Value {
    let mut out = json!({ "name": dependent.name, "kind": kind(&dependent.kind) });
    if !dependent.depends_on.is_empty() {
        out["dependsOn"] = json!(dependent.depends_on);
    }
    if let Some(c) = &dependent.ready_when {
        out["readyWhen"] = json!(condition(c));
    }
    if let Some(c) = &dependent.reconcile_when {
        out["reconcileWhen"] = json!(condition(c));
    }
    if dependent.ownership == Ownership::Annotations {
        out["ownership"] = json!("annotations");
    }
    for (key, on) in [("readOnly", dependent.read_only), ("adopt", dependent.adopt)] {
        if on {
            out[key] = json!(true);
        }
    }
    if !dependent.ready_when_empty {
        out["readyWhenEmpty"] = json!(false);
    }
    if let Some(namespace) = &dependent.namespace {
        out["namespace"] = json!(namespace);
    }
    out
}

fn condition(condition: &Condition) -> String {
    match condition {
        Condition::FieldEquals(f) => format!("{} == {}", f.path, f.value),
        Condition::FieldsEqual(p) => format!("{} == {}", p.left, p.right),
        Condition::ConditionTrue(type_) => format!("condition {type_} is True"),
        Condition::Plugin(name) => format!("the plugin's check {name:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::bindings::test_config;
    use crate::runtime::bindings::wasmop::plugin::types::{RetryPolicy, Sharding};

    #[test]
    fn settings_read_as_the_overrides_file_writes_them() {
        let config = PluginConfig {
            retry: Some(RetryPolicy {
                max_attempts: 3,
                initial_interval_ms: 500,
                multiplier: 2.0,
                max_interval_ms: 10_000,
                jitter: 0.1,
            }),
            resync_period_ms: Some(60_000),
            ..test_config("Widget")
        };
        let described = describe(&config);
        assert_eq!(described["primary"], json!({ "apiVersion": "g/v1", "kind": "Widget" }));
        assert_eq!(described["settings"]["retry"]["maxAttempts"], 3);
        assert_eq!(described["settings"]["resyncPeriodMs"], 60_000);
        assert_eq!(described["settings"]["filters"]["generationAware"], true);
        assert_eq!(described["finalizer"], Value::Null, "no cleanup, no annotation-owned dependent");
        assert_eq!(described["settings"].get("sharding"), None, "not declared: the host's default");
        let leader = describe(&PluginConfig { sharding: Some(Sharding::None), ..config.clone() });
        assert_eq!(leader["settings"]["sharding"], "none");
        let back: wasmop_core::settings::Settings = serde_json::from_value(leader["settings"].clone()).unwrap();
        assert_eq!(back.sharding, Some(wasmop_core::settings::Sharding::None));
        let cleaning = describe(&PluginConfig { cleanup: true, ..config });
        assert_eq!(cleaning["finalizer"], "wasmop.dev/p");
        // What `inspect` prints under `settings` is a valid overrides block.
        let back: wasmop_core::settings::Settings = serde_json::from_value(described["settings"].clone()).unwrap();
        assert_eq!(back.retry.and_then(|r| r.initial_interval_ms), Some(500));
    }

    #[test]
    fn webhooks_read_as_the_webhook_configurations_name_them() {
        assert_eq!(describe(&test_config("Widget")).get("webhooks"), None, "none declared, none shown");
        let config = PluginConfig {
            webhooks: vec![
                Webhook {
                    webhook_type: WebhookType::Validating,
                    kinds: Vec::new(),
                    operations: vec![Operation::Create, Operation::Delete],
                    failure_policy: FailurePolicy::Ignore,
                    timeout_ms: Some(5_000),
                },
                Webhook {
                    webhook_type: WebhookType::Conversion,
                    kinds: Vec::new(),
                    operations: Vec::new(),
                    failure_policy: FailurePolicy::Fail,
                    timeout_ms: Some(10_000),
                },
            ],
            ..test_config("Widget")
        };
        let described = describe(&config);
        assert_eq!(
            described["webhooks"][0],
            json!({
                "type": "validating (validate)",
                "kinds": [{ "apiVersion": "g/v1", "kind": "Widget" }],
                "operations": ["CREATE", "DELETE"],
                "failurePolicy": "Ignore",
                "timeoutMs": 5000,
            })
        );
        assert_eq!(described["webhooks"][1].get("operations"), None, "conversion has none");
    }

    #[test]
    fn the_cluster_check_covers_the_primary_local_watches_and_dependents() {
        let mut config = test_config("Widget");
        let watch_of = |kind: &str, cluster: Option<&str>| Watch {
            kind: KindRef {
                group: String::new(),
                version: "v1".into(),
                kind: kind.into(),
                plural: None,
                namespaced: true,
            },
            namespace: None,
            label_selector: None,
            field_selector: None,
            cluster: cluster.map(String::from),
            mapper: Mapper::Annotations,
            projection: None,
            predicate: None,
        };
        config.watches = vec![watch_of("ConfigMap", None), watch_of("Secret", Some("edge"))];
        let kinds: Vec<&str> = declared_kinds(&config).into_iter().map(|k| k.kind.as_str()).collect();
        assert_eq!(kinds, ["Widget", "ConfigMap"], "a watch of another cluster is not this cluster's to serve");
    }
}

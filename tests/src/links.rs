//! Helpers for the secondary-resource tests with the `fixture-link` and `fixture-remote`
//! plugins. Both reconcile `Link` objects (`test.wasmop.dev/v1`) and write in `.status` the
//! wall-clock time of the last reconcile (`lastReconcileNanos`) and every secondary the plugin
//! read through the `secondaries` import (`seen`: kind, namespace, name, resourceVersion).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use futures::TryStreamExt;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
use kube::runtime::wait::await_condition;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use crate::{apply, apply_file, within, workspace_root};

/// How long a reconcile may take to show.
pub const WAIT: Duration = Duration::from_secs(60);

/// Links in one namespace.
pub struct Links {
    api: Api<DynamicObject>,
    namespace: String,
    client: Client,
}

/// A secondary as the plugin reported it: kind, namespace, name, resourceVersion.
pub type Seen = (String, String, String, String);

impl Links {
    /// Installs the Link CRD (idempotent) and returns the Links of `namespace`.
    pub async fn new(client: &Client, namespace: &str) -> anyhow::Result<Self> {
        apply_file(client, &workspace_root().join("plugins/fixtures/link/crd.yaml"), None).await?;
        let api = Api::namespaced_with(client.clone(), namespace, &resource());
        Ok(Self { api, namespace: namespace.to_string(), client: client.clone() })
    }

    /// The API of the Links of this namespace.
    pub fn api(&self) -> &Api<DynamicObject> {
        &self.api
    }

    /// Creates the Link `name` for the plugin `fixture-<fixture>` using `config_maps`.
    pub async fn create(&self, name: &str, fixture: &str, config_maps: &[&str]) -> anyhow::Result<DynamicObject> {
        let link = json!({
            "apiVersion": "test.wasmop.dev/v1",
            "kind": "Link",
            "metadata": { "name": name, "labels": { "wasmop.dev/fixture": fixture } },
            "spec": { "configMaps": config_maps },
        });
        apply(&self.client, link, Some(&self.namespace)).await
    }

    /// The Link `name` as the API server has it.
    pub async fn get(&self, name: &str) -> anyhow::Result<DynamicObject> {
        Ok(self.api.get(name).await?)
    }

    /// Waits until the Link `name` satisfies `condition`; returns it.
    pub async fn wait_for(
        &self,
        name: &str,
        what: &str,
        condition: impl Fn(&DynamicObject) -> bool + Send + 'static,
    ) -> anyhow::Result<DynamicObject> {
        let what = format!("{}/{name}: {what}", self.namespace);
        let found = within(
            WAIT,
            &what,
            await_condition(self.api.clone(), name, move |o: Option<&DynamicObject>| o.is_some_and(&condition)),
        )
        .await??;
        found.ok_or_else(|| anyhow::anyhow!("deleted while waiting for {what}"))
    }

    /// Waits for a reconcile of `name` that saw `secondary` at its current resourceVersion;
    /// returns the time of that reconcile.
    pub async fn saw(&self, name: &str, secondary: &DynamicObject) -> anyhow::Result<u64> {
        let expected = seen_entry(secondary);
        let what = format!("a reconcile that saw {expected:?}");
        let link = self.wait_for(name, &what, move |o| seen(o).contains(&expected)).await?;
        Ok(last_reconcile(&link))
    }

    /// Waits until every Link named in `expected` shows a reconcile that saw the secondary given
    /// for it (at that resourceVersion), with one watch on the namespace's Links however many
    /// are awaited; fails after `limit`.
    pub async fn all_saw(&self, expected: &BTreeMap<String, Seen>, limit: Duration) -> anyhow::Result<()> {
        let mut pending: BTreeSet<&str> = expected.keys().map(String::as_str).collect();
        let wait = async {
            let links = watcher(self.api.clone(), watcher::Config::default()).default_backoff().applied_objects();
            let mut links = std::pin::pin!(links);
            while !pending.is_empty() {
                let Some(link) = links.try_next().await? else { anyhow::bail!("the watch of Links ended") };
                let name = link.name_any();
                if expected.get(&name).is_some_and(|secondary| seen(&link).contains(secondary)) {
                    pending.remove(name.as_str());
                }
            }
            anyhow::Ok(())
        };
        let what = format!("{} Links of {} to see their secondaries", expected.len(), self.namespace);
        within(limit, &what, wait).await?
    }

    /// Waits for the first reconcile of `name`; returns its time.
    pub async fn reconciled(&self, name: &str) -> anyhow::Result<u64> {
        Ok(last_reconcile(&self.wait_for(name, "reconciled", |o| last_reconcile(o) > 0).await?))
    }

    /// The time of the last reconcile of `name`, without waiting.
    pub async fn last_reconcile(&self, name: &str) -> anyhow::Result<u64> {
        Ok(last_reconcile(&self.get(name).await?))
    }
}

/// The Link kind (`test.wasmop.dev/v1`, plural `links`).
pub fn resource() -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("test.wasmop.dev", "v1", "Link"), "links")
}

/// When the Link was last reconciled (nanoseconds since the epoch), 0 if never.
pub fn last_reconcile(link: &DynamicObject) -> u64 {
    link.data["status"]["lastReconcileNanos"].as_u64().unwrap_or(0)
}

/// The secondaries the last reconcile of the Link read.
pub fn seen(link: &DynamicObject) -> Vec<Seen> {
    let entries = link.data["status"]["seen"].as_array().cloned().unwrap_or_default();
    let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
    entries
        .iter()
        .map(|e| (text(&e["kind"]), text(&e["namespace"]), text(&e["name"]), text(&e["resourceVersion"])))
        .collect()
}

/// How the plugin reports `object` in `seen`.
pub fn seen_entry(object: &DynamicObject) -> Seen {
    let kind = object.types.as_ref().map(|t| t.kind.clone()).unwrap_or_default();
    (kind, object.namespace().unwrap_or_default(), object.name_any(), object.resource_version().unwrap_or_default())
}

/// A ConfigMap or Secret to apply.
pub struct Secondary<'a> {
    /// `ConfigMap` or `Secret`.
    pub kind: &'a str,
    /// Its namespace.
    pub namespace: &'a str,
    /// Its name.
    pub name: &'a str,
    /// Its labels.
    pub labels: BTreeMap<&'a str, &'a str>,
    /// Its annotations.
    pub annotations: BTreeMap<&'a str, &'a str>,
    /// The owner, made its controller, if any.
    pub owner: Option<&'a DynamicObject>,
    /// `data` (for a Secret: `stringData`).
    pub data: BTreeMap<&'a str, &'a str>,
}

impl<'a> Secondary<'a> {
    /// A ConfigMap with one label.
    pub fn config_map(namespace: &'a str, name: &'a str, label: (&'a str, &'a str)) -> Self {
        Self {
            kind: "ConfigMap",
            namespace,
            name,
            labels: BTreeMap::from([label]),
            annotations: BTreeMap::new(),
            owner: None,
            data: BTreeMap::new(),
        }
    }

    /// Applies it on the cluster of `client`; returns it as stored.
    pub async fn apply(&self, client: &Client) -> anyhow::Result<DynamicObject> {
        let mut object = json!({
            "apiVersion": "v1",
            "kind": self.kind,
            "metadata": { "name": self.name, "namespace": self.namespace, "labels": self.labels, "annotations": self.annotations },
        });
        object[if self.kind == "Secret" { "stringData" } else { "data" }] = json!(self.data);
        if let Some(owner) = self.owner {
            let types = owner.types.clone().unwrap_or_default();
            object["metadata"]["ownerReferences"] = json!([{
                "apiVersion": types.api_version, "kind": types.kind, "name": owner.name_any(),
                "uid": owner.uid().unwrap_or_default(), "controller": true,
            }]);
        }
        let mut applied = apply(client, object, None).await?;
        // A Secret's stringData is write-only: compare what the API server stores.
        if applied.types.is_none() {
            applied.types = Some(kube::api::TypeMeta { api_version: "v1".into(), kind: self.kind.into() });
        }
        Ok(applied)
    }
}

/// Sets `data.<key>` of the ConfigMap `name` (a new resourceVersion); returns it as stored.
pub async fn touch_config_map(
    client: &Client,
    namespace: &str,
    name: &str,
    key: &str,
    value: &str,
) -> anyhow::Result<DynamicObject> {
    let api: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        namespace,
        &ApiResource::from_gvk(&GroupVersionKind::gvk("", "v1", "ConfigMap")),
    );
    let patch = json!({ "data": { key: value } });
    let mut patched = api.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await?;
    patched.types = Some(kube::api::TypeMeta { api_version: "v1".into(), kind: "ConfigMap".into() });
    Ok(patched)
}

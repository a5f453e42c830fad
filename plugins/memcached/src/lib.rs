//! The Operator SDK's Memcached tutorial as a wasmop plugin: each Memcached
//! (`cache.wasmop.dev/v1`) gets a Deployment with `spec.size` memcached replicas, and its status
//! lists the names of the pods, found through a watch on Pods mapped by their `memcached_cr`
//! label.

use serde::Deserialize;
use wasmop_guest::k8s_openapi::api::core::v1::Pod;
use wasmop_guest::serde_json::{Value, json};
use wasmop_guest::{
    Config, Context, Dependent, Desired, Error, Kind, Outcome, PrimaryRef, Reconciler, Resource, Watch,
};

/// A Memcached's spec; the host sets the status's `observedGeneration` and conditions.
#[derive(Deserialize)]
struct MemcachedSpec {
    size: i32,
}

type Memcached = Resource<MemcachedSpec>;

/// The label naming a pod's Memcached.
const OWNER_LABEL: &str = "memcached_cr";

fn pods() -> Kind {
    Kind::namespaced("", "v1", "Pod").plural("pods")
}

/// Reconciles Memcacheds.
struct MemcachedReconciler;

impl Reconciler for MemcachedReconciler {
    type Primary = Memcached;

    // ANCHOR: config
    fn config() -> Config {
        Config::new("memcached", Kind::namespaced("cache.wasmop.dev", "v1", "Memcached").plural("memcacheds"))
            .dependent(Dependent::new("deployment", Kind::namespaced("apps", "v1", "Deployment").plural("deployments")))
            .watch(Watch::new(pods()).label_selector("app=memcached").mapped_by_plugin())
    }
    // ANCHOR_END: config

    fn desired(memcached: &Memcached, _ctx: &Context) -> Result<Vec<Desired>, Error> {
        let name = memcached.metadata.name.as_deref().ok_or_else(|| Error::invalid("the Memcached has no name"))?;
        let labels = json!({ "app": "memcached", OWNER_LABEL: name });
        Ok(vec![Desired::new(
            "deployment",
            &json!({
                "apiVersion": "apps/v1", "kind": "Deployment", "metadata": { "name": name },
                "spec": {
                    "replicas": memcached.spec.size,
                    "selector": { "matchLabels": labels },
                    "template": {
                        "metadata": { "labels": labels },
                        "spec": { "containers": [{
                            "name": "memcached", "image": "memcached:1.6-alpine",
                            "args": ["-m=64", "-o", "modern", "-v"],
                            "ports": [{ "name": "memcached", "containerPort": 11211 }],
                        }] },
                    },
                },
            }),
        )])
    }

    // ANCHOR: reconcile
    fn reconcile(memcached: Memcached, ctx: &Context) -> Result<Outcome, Error> {
        let pods: Vec<Pod> = ctx.secondaries(&pods())?;
        let mut nodes: Vec<String> = pods.into_iter().filter_map(|p| p.metadata.name).collect();
        nodes.sort();
        ctx.info(format!("{} of {} memcached pods exist", nodes.len(), memcached.spec.size));
        Ok(Outcome::done().status(json!({ "nodes": nodes })))
    }

    fn map_secondary(pod: &Value, _previous: Option<&Value>, _: &Context) -> Result<Vec<PrimaryRef>, String> {
        let namespace = pod["metadata"]["namespace"].as_str().unwrap_or_default();
        let owner = pod["metadata"]["labels"][OWNER_LABEL].as_str();
        Ok(owner.map(|name| PrimaryRef::namespaced(namespace, name)).into_iter().collect())
    }
    // ANCHOR_END: reconcile
}

wasmop_guest::export!(MemcachedReconciler);

#[cfg(test)]
mod tests {
    use wasmop_guest::testing::FakeHost;

    use super::*;

    fn memcached(size: i32) -> Value {
        json!({
            "apiVersion": "cache.wasmop.dev/v1", "kind": "Memcached",
            "metadata": { "name": "cache", "namespace": "default", "generation": 2 },
            "spec": { "size": size },
        })
    }

    fn pod(name: &str) -> Value {
        json!({ "metadata": { "name": name, "namespace": "default", "labels": { "app": "memcached", OWNER_LABEL: "cache" } } })
    }

    #[test]
    fn the_deployment_follows_the_size() {
        let desired = FakeHost::new().desired::<MemcachedReconciler>(&memcached(3)).expect("desired");
        assert_eq!(desired.len(), 1);
        assert_eq!(desired[0].dependent, "deployment");
        assert_eq!(desired[0].object["spec"]["replicas"], 3);
        assert_eq!(desired[0].object["spec"]["selector"]["matchLabels"][OWNER_LABEL], "cache");
    }

    #[test]
    fn the_status_lists_the_pods_sorted() {
        let mut host =
            FakeHost::new().with_secondary(&pods(), &pod("cache-b")).with_secondary(&pods(), &pod("cache-a"));
        let stable = host.run_until_stable::<MemcachedReconciler>(&memcached(2));
        // The plugin writes the nodes; the host adds observedGeneration and the conditions.
        assert_eq!(stable.status()["nodes"], json!(["cache-a", "cache-b"]));
        assert_eq!(stable.status()["observedGeneration"], 2);
        assert_eq!(stable.condition("Ready").map(|c| &c["status"]), Some(&json!("True")));
    }

    #[test]
    fn pods_map_to_the_memcached_their_label_names() {
        let refs = FakeHost::new().map_secondary::<MemcachedReconciler>(&pod("cache-a"), None).expect("mapped");
        assert_eq!(refs, [PrimaryRef::namespaced("default", "cache")]);
        let stray = json!({ "metadata": { "name": "x", "namespace": "default" } });
        assert!(FakeHost::new().map_secondary::<MemcachedReconciler>(&stray, None).expect("mapped").is_empty());
    }
}

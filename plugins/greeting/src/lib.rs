//! A status-only plugin: greets `spec.name` in `status.message`; the host keeps `Ready`.
use serde::Deserialize;
use wasmop_guest::{Config, Context, Error, Kind, Outcome, Reconciler, Resource, serde_json::json};

/// Whom to greet.
#[derive(Deserialize)]
pub struct Spec {
    name: String,
}

/// The plugin.
pub struct Greeter;

impl Reconciler for Greeter {
    type Primary = Resource<Spec>;

    fn config() -> Config {
        // The host caches only what the plugin reads: the spec (and the status it keeps).
        Config::new("greeting", Kind::namespaced("example.wasmop.dev", "v1", "Greeting")).project(["spec"])
    }

    fn reconcile(greeting: Resource<Spec>, _: &Context) -> Result<Outcome, Error> {
        Ok(Outcome::ready("greeted").status(json!({ "message": format!("Hello, {}!", greeting.spec.name) })))
    }
}

/// Nothing to clean up; built with feature `cleanup` only (the bench's finalizer case).
#[cfg(feature = "cleanup")]
impl wasmop_guest::Cleaner for Greeter {
    fn cleanup(_: Resource<Spec>, _: &Context) -> Result<wasmop_guest::Cleanup, Error> {
        Ok(wasmop_guest::Cleanup::done())
    }
}

wasmop_guest::export!(Greeter);

//! Keeps the webhook configurations of the running plugins written ([`super::configurations`]):
//! when a plugin with webhooks starts or a new version declares other ones, its
//! configurations are applied (server-side apply, field manager [`MANAGER`], forced: the host
//! owns them); when it stops or is removed they are deleted, and its CRD's conversion goes back
//! to `None`; when the CA bundle changes, every plugin's are applied again. A write that fails
//! is tried again after [`RETRY`].
//!
//! Every replica writes, leader or not: every replica serves the webhooks, and the
//! configurations do not depend on which one writes them (the same plugins, the same bundle
//! from the shared Secret, the same Service), so the writes are idempotent and the admission of
//! a request never waits for an election. Replicas reached by URL (`--webhook-url`, one address
//! each) point the configurations at the last one that wrote them.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::{MutatingWebhookConfiguration, ValidatingWebhookConfiguration};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::configurations::{self, Target};
use crate::host::Host;
use crate::runtime::bindings::wasmop::plugin::types::{KindRef, PluginConfig};

/// The field manager of the host's writes of webhook configurations.
pub const MANAGER: &str = "wasmop-webhooks";

/// How long a failed write waits to be tried again.
pub const RETRY: Duration = Duration::from_secs(5);

/// Why a configuration was not written.
#[derive(Debug, thiserror::Error)]
#[error("cannot write {what}: {source}")]
pub struct WriteError {
    what: String,
    #[source]
    source: kube::Error,
}

/// What was written for a plugin.
struct Written {
    /// Its webhooks, primary and CA bundle, as written.
    fingerprint: String,
    primary: KindRef,
    conversion: bool,
}

/// Writes the configurations of `host`'s plugins for `target` with `client`, with the CA
/// bundle `bundle` holds, until `shutdown`.
pub async fn run(
    host: Arc<Host>,
    client: Client,
    target: Target,
    mut bundle: watch::Receiver<Vec<u8>>,
    shutdown: CancellationToken,
) {
    let mut changes = host.changes();
    let writer = Writer { client, target };
    let mut written: BTreeMap<String, Written> = BTreeMap::new();
    loop {
        let _ = changes.borrow_and_update();
        let ca = bundle.borrow_and_update().clone();
        let wanted: BTreeMap<String, PluginConfig> = host
            .plugins()
            .into_iter()
            .filter_map(|name| host.module(&name).map(|module| (name, module.config().clone())))
            .filter(|(_, config)| !config.webhooks.is_empty())
            .collect();
        let mut failed = false;
        for (name, config) in &wanted {
            let fingerprint = serde_json::to_string(&(&config.webhooks, &config.primary, &ca)).unwrap_or_default();
            if written.get(name).is_some_and(|w| w.fingerprint == fingerprint) {
                continue;
            }
            let before = written.get(name).map(|w| w.conversion).unwrap_or_default();
            match writer.apply(config, &ca, before).await {
                Ok(conversion) => {
                    tracing::info!(plugin = name, "webhook configurations written");
                    written.insert(name.clone(), Written { fingerprint, primary: config.primary.clone(), conversion });
                }
                Err(err) => {
                    tracing::warn!(plugin = name, %err, "webhook configurations not written; trying again");
                    failed = true;
                }
            }
        }
        let gone: Vec<String> = written.keys().filter(|name| !wanted.contains_key(*name)).cloned().collect();
        for name in gone {
            let (primary, conversion) = (written[&name].primary.clone(), written[&name].conversion);
            match writer.remove(&name, &primary, conversion).await {
                Ok(()) => {
                    tracing::info!(plugin = name, "webhook configurations removed");
                    written.remove(&name);
                }
                Err(err) => {
                    tracing::warn!(plugin = name, %err, "webhook configurations not removed; trying again");
                    failed = true;
                }
            }
        }
        tokio::select! {
            () = shutdown.cancelled() => return,
            Ok(()) = changes.changed() => {}
            Ok(()) = bundle.changed() => {}
            () = tokio::time::sleep(RETRY), if failed => {}
        }
    }
}

/// Writes configurations with the host's client.
struct Writer {
    client: Client,
    target: Target,
}

impl Writer {
    /// Applies `config`'s configurations with the CA `bundle`, deleting those of a type it no
    /// longer declares; whether it has a conversion webhook. `converted`: it had one before.
    async fn apply(&self, config: &PluginConfig, bundle: &[u8], converted: bool) -> Result<bool, WriteError> {
        let name = self.target.name(&config.name);
        let params = PatchParams::apply(MANAGER).force();
        let validating: Api<ValidatingWebhookConfiguration> = Api::all(self.client.clone());
        match configurations::validating(config, &self.target, bundle) {
            Some(written) => {
                let what = || format!("ValidatingWebhookConfiguration {name}");
                validating.patch(&name, &params, &Patch::Apply(&written)).await.map_err(failed(what))?;
            }
            None => delete(&validating, &name, "ValidatingWebhookConfiguration").await?,
        }
        let mutating: Api<MutatingWebhookConfiguration> = Api::all(self.client.clone());
        match configurations::mutating(config, &self.target, bundle) {
            Some(written) => {
                let what = || format!("MutatingWebhookConfiguration {name}");
                mutating.patch(&name, &params, &Patch::Apply(&written)).await.map_err(failed(what))?;
            }
            None => delete(&mutating, &name, "MutatingWebhookConfiguration").await?,
        }
        let crds: Api<CustomResourceDefinition> = Api::all(self.client.clone());
        let crd = configurations::crd_name(&config.primary);
        let what = || format!("the conversion of CustomResourceDefinition {crd}");
        match configurations::conversion(config, &self.target, bundle) {
            Some(conversion) => {
                crds.patch(&crd, &params, &Patch::Apply(&conversion)).await.map_err(failed(what))?;
                Ok(true)
            }
            None if converted => {
                let none = configurations::no_conversion(&config.primary);
                crds.patch(&crd, &params, &Patch::Apply(&none)).await.map_err(failed(what))?;
                Ok(false)
            }
            None => Ok(false),
        }
    }

    /// Deletes `plugin`'s configurations, and takes its CRD's conversion back if it had one.
    async fn remove(&self, plugin: &str, primary: &KindRef, conversion: bool) -> Result<(), WriteError> {
        let name = self.target.name(plugin);
        let validating: Api<ValidatingWebhookConfiguration> = Api::all(self.client.clone());
        delete(&validating, &name, "ValidatingWebhookConfiguration").await?;
        let mutating: Api<MutatingWebhookConfiguration> = Api::all(self.client.clone());
        delete(&mutating, &name, "MutatingWebhookConfiguration").await?;
        if conversion {
            let crds: Api<CustomResourceDefinition> = Api::all(self.client.clone());
            let crd = configurations::crd_name(primary);
            let what = || format!("the conversion of CustomResourceDefinition {crd}");
            let none = configurations::no_conversion(primary);
            match crds.patch(&crd, &PatchParams::apply(MANAGER).force(), &Patch::Apply(&none)).await {
                // The CRD is gone: nothing converts any more.
                Err(kube::Error::Api(status)) if status.code == 404 => {}
                done => {
                    done.map_err(failed(what))?;
                }
            }
        }
        Ok(())
    }
}

fn failed(what: impl FnOnce() -> String) -> impl FnOnce(kube::Error) -> WriteError {
    move |source| WriteError { what: what(), source }
}

/// Deletes the object `name` of `api`, if it exists.
async fn delete<K>(api: &Api<K>, name: &str, kind: &str) -> Result<(), WriteError>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(source) => Err(WriteError { what: format!("{kind} {name}"), source }),
    }
}

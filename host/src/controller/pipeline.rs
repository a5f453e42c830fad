//! Call and write: assembles the per-object pipeline every run goes through ([`Reconciler`], in
//! `reconcile.rs`) from the caches the controller watches, with the dependents' workflow, what
//! the plugin knows beyond the API server, and the plugin's recording.

use std::sync::Arc;

use kube::Client;
use tokio::sync::mpsc::UnboundedReceiver;

use super::reconcile::{self, Reconciler};
use super::watch::Watched;
use crate::dependents::{DependentKind, Dependents, OwnWrites};
use crate::external::poller::FetchNow;
use crate::external::{ExternalState, TrackingRecords};
use crate::metrics::Metrics;
use crate::object::ObjectKey;
use crate::runtime::Current;
use crate::runtime::bindings::wasmop::plugin::types::PluginConfig;
use crate::settings::Resolved;
use crate::source::Sink;
use crate::source::inbound::Payloads;
use crate::writer::Writer;
use wasmop_core::dependent::DependentSpec;

/// What a reconcile knows of the primary beyond the API server, and the candidate version that
/// shadows it.
pub(super) struct Outside {
    /// The plugin's external state and its poller's request channel, when it polls or has
    /// external dependents.
    external: Option<(Arc<ExternalState>, FetchNow)>,
    /// The last inbound payload per primary, when the plugin caches inbound events.
    inbound: Option<Arc<Payloads>>,
    /// The plugin's candidate version, whose runs see what the live version's saw.
    shadow: Arc<crate::shadow::Shadow>,
}

/// The plugin's external state and the requests its poller takes.
pub(super) type Polled = (Arc<ExternalState>, UnboundedReceiver<ObjectKey>);

impl Outside {
    /// What `config`'s runs know beyond the API server: its external state (tracked in records
    /// `writes` writes in `namespace`, `default` without one), with the part its poller takes,
    /// when it polls or has external dependents; the `inbound` payloads; its `shadow`.
    pub(super) fn new(
        config: &PluginConfig,
        (writes, fence): (&Client, &crate::fence::Fence),
        namespace: Option<&str>,
        inbound: Option<Arc<Payloads>>,
        shadow: &Arc<crate::shadow::Shadow>,
    ) -> (Self, Option<Polled>) {
        let namespace = namespace.map(str::to_string).unwrap_or_else(|| "default".to_string());
        let records = TrackingRecords::new(writes.clone(), fence.clone(), namespace);
        let external = ExternalState::new(config, records).map(|state| (state, FetchNow::channel()));
        let (external, polled) = match external {
            Some((state, (fetch_now, requests))) => (Some((state.clone(), fetch_now)), Some((state, requests))),
            None => (None, None),
        };
        (Self { external, inbound, shadow: shadow.clone() }, polled)
    }
}

/// The plugin's recording, when `settings` record (`--record DIR`); one that cannot start is
/// logged, and the plugin runs unrecorded.
pub fn records(
    config: &PluginConfig,
    settings: &Resolved,
    metrics: &Arc<Metrics>,
) -> Option<Arc<crate::record::Records>> {
    settings.record.as_ref().and_then(|to| {
        let described = crate::inspect::describe(config);
        crate::record::Records::new(&config.name, to, described, metrics.clone())
            .inspect_err(|err| tracing::error!(plugin = config.name, %err, "not recording"))
            .ok()
            .map(Arc::new)
    })
}

/// Call and write: the per-object pipeline every run goes through (`reconcile.rs`), with the
/// dependents' workflow. `None` when the dependents are invalid (checked at load already).
#[allow(clippy::too_many_arguments, reason = "one call site; the stage's inputs, named")]
pub(super) fn reconciler(
    module: &Arc<Current>,
    config: &PluginConfig,
    watched: &Watched,
    writes: Client,
    events: Client,
    metrics: &Arc<Metrics>,
    runs_sink: Arc<dyn Sink>,
    fence: &crate::fence::Fence,
    outside: Outside,
    records: Option<Arc<crate::record::Records>>,
) -> Option<Arc<Reconciler>> {
    let Outside { external, inbound, shadow } = outside;
    let plugin = &config.name;
    let dependents = if config.dependents.is_empty() && config.external_dependents.is_empty() {
        None
    } else {
        Some(dependents(config, watched, &writes, metrics, &runs_sink, fence)?)
    };
    let resource = watched.resource.clone();
    Some(Arc::new(Reconciler {
        module: module.clone(),
        cache: watched.cache.clone(),
        writer: Writer::new(writes, events, resource.clone(), plugin, metrics.clone(), fence.clone()),
        metrics: metrics.clone(),
        resource,
        primary_kind: (&config.primary).into(),
        reads: watched.cache.primary_reads(),
        conditions: config.conditions,
        primaries: watched.primaries.clone(),
        finalizers: module.get().finalizers(),
        dependents,
        own: Arc::new(OwnWrites::counted_in(metrics.own_write_records(plugin))),
        sink: runs_sink,
        replaced: reconcile::ReplacedConditions::default(),
        external,
        fence: fence.clone(),
        inbound,
        records,
        shadow,
    }))
}

/// The dependents' workflow of a plugin that has dependents: each dependent kind with its
/// watch, and the external dependents. `None` when they are invalid (checked at load already).
fn dependents(
    config: &PluginConfig,
    watched: &Watched,
    writes: &Client,
    metrics: &Arc<Metrics>,
    runs_sink: &Arc<dyn Sink>,
    fence: &crate::fence::Fence,
) -> Option<Dependents> {
    let plugin = &config.name;
    let declared = config.watches.len();
    let (specs, kinds): (Vec<_>, Vec<_>) = config
        .dependents
        .iter()
        .zip(&watched.secondaries[declared..])
        .zip(&watched.owns[declared..])
        .map(|((spec, secondary), own)| {
            let own = own.clone().expect("every dependent watch records its own writes");
            let kind = DependentKind {
                resource: secondary.resource.clone(),
                cache: secondary.subscription.cache(),
                links: secondary.links.clone(),
                own,
            };
            (DependentSpec::from(spec), kind)
        })
        .unzip();
    // External dependents join the same workflow; they have no kind to watch.
    let specs = specs.into_iter().chain(config.external_dependents.iter().map(DependentSpec::from)).collect();
    match Dependents::new(writes.clone(), plugin, specs, kinds, metrics.clone(), runs_sink.clone(), fence.clone()) {
        Ok(dependents) => Some(dependents),
        Err(err) => {
            // `describe()` was validated at load; this is a safety net.
            tracing::error!(plugin, %err, "invalid dependents");
            None
        }
    }
}

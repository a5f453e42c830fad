//! A plugin's configuration in the terms of the host's loop (`wasmop_core::settle`).

use wasmop_core::settle::{Mapper, PluginSpec, WatchSpec};

use crate::Config;

/// The plugin's configuration in the loop's terms; panics when a predicate is malformed, as the
/// host refuses to load such a plugin.
pub(super) fn spec_of(config: &Config) -> PluginSpec {
    use wasmop_core::mapping::Owners;
    let checked = |predicate: Option<&crate::Predicate>, what: &dyn Fn() -> String| {
        predicate.map(|p| p.to_core().unwrap_or_else(|e| panic!("FakeHost: {} is malformed: {e}", what())))
    };
    let watches = config.watches.iter().map(|watch| WatchSpec {
        kind: watch.kind.to_core(),
        namespace: watch.namespace.clone(),
        label_selector: watch.label_selector.clone(),
        projection: watch.projection.clone(),
        mapper: match watch.mapper {
            crate::Mapper::ControllerOwner => Mapper::Owners(Owners::Controller),
            crate::Mapper::AnyOwner => Mapper::Owners(Owners::Any),
            crate::Mapper::Annotations => Mapper::Annotations,
            crate::Mapper::Plugin => Mapper::Plugin,
            crate::Mapper::PrimaryReferences => Mapper::PrimaryReferences,
        },
        predicate: checked(watch.predicate.as_ref(), &|| format!("the predicate of the watch of {}", watch.kind)),
    });
    let tracking = |t: crate::Tracking| match t {
        crate::Tracking::ConfigMap => wasmop_core::external::Tracking::ConfigMap,
        crate::Tracking::Secret => wasmop_core::external::Tracking::Secret,
    };
    PluginSpec {
        name: config.name.clone(),
        primary: config.primary.to_core(),
        label_selector: config.label_selector.clone(),
        projection: config.projection.clone(),
        filters: config.filters.to_core(config.generation_aware),
        predicate: checked(config.predicate.as_ref(), &|| "the primary's predicate".into()),
        watches: watches.collect(),
        dependents: config.dependents.iter().map(crate::Dependent::to_core).collect(),
        external: config.external_dependents.iter().map(|d| (d.to_core(), tracking(d.tracking))).collect(),
        conditions: config.conditions,
    }
}

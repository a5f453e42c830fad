//! [`PrimaryReads`]: what a plugin reads of its primaries, which is less than the host keeps.
//!
//! The host's cache of a plugin's primaries keeps what the plugin's projection names, plus the
//! metadata and the whole `status`, which the host reads to write only changes. The plugin is
//! given only what its projection names (`wasmop_core::projection`, the rule the `FakeHost`
//! follows): with `project(["spec"])` no `status`, which saves decoding it in the guest on every
//! call. Without a projection, the whole object.

use std::sync::Arc;

use super::Object;

/// The field the host keeps of every primary, whatever its plugin reads.
const STATUS: &str = "status";

/// What a plugin reads of its primaries: its projection, if it has one.
#[derive(Clone, Debug, Default)]
pub struct PrimaryReads {
    /// The projection's paths, and how much of `status` they name; `None` without a projection.
    projection: Option<(Arc<[String]>, Status)>,
}

/// How much of the primary's `status` a projection names.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Status {
    /// All of it (`status`).
    Whole,
    /// Parts of it only (`status.phase`): it is cut to them.
    Parts,
    /// Nothing of it.
    Nothing,
}

impl PrimaryReads {
    /// What a plugin with primary projection `paths` reads (`None`: everything).
    pub fn new(paths: Option<&[String]>) -> Self {
        let projection = paths.map(|paths| {
            let mut status = Status::Nothing;
            for path in paths {
                let mut keys = path.split('.').filter(|k| !k.is_empty());
                if keys.next() != Some(STATUS) {
                    continue;
                }
                status = match (status, keys.next()) {
                    (Status::Whole, _) | (_, None) => Status::Whole,
                    _ => Status::Parts,
                };
            }
            (paths.into(), status)
        });
        Self { projection }
    }

    /// The JSON text of the primary `object`, as the host caches it, as the plugin reads it.
    pub fn json(&self, object: &Object) -> serde_json::Result<String> {
        match &self.projection {
            None | Some((_, Status::Whole)) => serde_json::to_string(object),
            Some((_, Status::Nothing)) => serde_json::to_string(&object.without(STATUS)),
            Some((paths, Status::Parts)) => {
                let mut cut = object.clone();
                cut.data.project(paths);
                serde_json::to_string(&cut)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn primary() -> Value {
        json!({ "apiVersion": "example.wasmop.dev/v1", "kind": "Greeting",
                "metadata": { "name": "a", "namespace": "ns", "generation": 2 },
                "spec": { "name": "Ada", "other": 1 },
                "status": { "message": "Hello", "phase": "Up", "conditions": [{ "type": "Ready" }] } })
    }

    /// The host's cache holds the projection plus the status; the plugin reads what the core's
    /// projection rule gives, as the `FakeHost` does.
    #[test]
    fn a_plugin_reads_what_its_projection_names_of_the_cached_primary() {
        let projections: [Option<&[&str]>; 6] = [
            None,
            Some(&["spec"]),
            Some(&["spec.name"]),
            Some(&["spec", "status"]),
            Some(&["spec", "status.phase"]),
            Some(&["status.phase", "status", "spec"]),
        ];
        for paths in projections {
            let paths: Option<Vec<String>> = paths.map(|p| p.iter().map(ToString::to_string).collect());
            let mut cached: Object = serde_json::from_value(primary()).unwrap();
            if let Some(paths) = &paths {
                let mut kept = paths.clone();
                kept.push(STATUS.into());
                cached.data.project(&kept);
            }
            let read: Value =
                serde_json::from_str(&PrimaryReads::new(paths.as_deref()).json(&cached).unwrap()).unwrap();
            let mut expected = primary();
            if let Some(paths) = &paths {
                wasmop_core::projection::project(&mut expected, paths);
            }
            assert_eq!(read, expected, "{paths:?}");
        }
    }

    #[test]
    fn without_a_projection_the_text_is_the_object_s_own() {
        let object: Object = serde_json::from_value(primary()).unwrap();
        assert_eq!(PrimaryReads::default().json(&object).unwrap(), serde_json::to_string(&object).unwrap());
    }
}

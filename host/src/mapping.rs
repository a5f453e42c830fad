//! The host's side of secondary-to-primary mapping: the rules are `wasmop_core::mapping`'s; this
//! module hands them an object's typed metadata and the plugin's WIT answers.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
pub use wasmop_core::dependent::{PRIMARY_NAME_ANNOTATION, PRIMARY_NAMESPACE_ANNOTATION};
pub use wasmop_core::mapping::{Links, OwnerRef, PrimaryKind, Relation, Target};

use crate::runtime::bindings::wasmop::plugin::types::{Mapper, ObjectRef, Owners};

/// The empty links a watch with `mapper` fills.
pub fn links_for(mapper: &Mapper) -> Links {
    Links::new(matches!(mapper, Mapper::PrimaryReferences))
}

/// The primaries of `kind` the owner references in `meta` name.
pub fn owners(kind: &PrimaryKind, meta: &ObjectMeta, which: Owners) -> Vec<Target> {
    let which = match which {
        Owners::Controller => wasmop_core::mapping::Owners::Controller,
        Owners::Any => wasmop_core::mapping::Owners::Any,
    };
    let refs = meta.owner_references.as_deref().unwrap_or_default().iter().map(|r| OwnerRef {
        api_version: &r.api_version,
        kind: &r.kind,
        name: &r.name,
        uid: &r.uid,
        controller: r.controller == Some(true),
    });
    kind.owners(meta.namespace.as_deref(), refs, which)
}

/// The primary of `kind` the annotations in `meta` name, if any.
pub fn annotated(kind: &PrimaryKind, meta: &ObjectMeta) -> Option<Target> {
    let annotations = meta.annotations.as_ref()?;
    kind.annotated(meta.namespace.as_deref(), |key| annotations.get(key).map(String::as_str))
}

/// The primaries of `kind` a plugin's `map-secondary` named for a secondary in `namespace`.
pub fn named(kind: &PrimaryKind, namespace: Option<&str>, refs: Vec<ObjectRef>) -> Vec<Target> {
    kind.named(namespace, refs.into_iter().map(|r| (r.namespace, r.name)))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    use super::*;

    #[test]
    fn typed_metadata_maps_as_the_core_says() {
        let link = PrimaryKind { group: "test.wasmop.dev".into(), kind: "Link".into(), namespaced: true };
        let meta = ObjectMeta {
            namespace: Some("ns".into()),
            owner_references: Some(vec![OwnerReference {
                api_version: "test.wasmop.dev/v1".into(),
                kind: "Link".into(),
                name: "a".into(),
                uid: "u".into(),
                controller: Some(true),
                block_owner_deletion: None,
            }]),
            annotations: Some(BTreeMap::from([(PRIMARY_NAME_ANNOTATION.to_string(), "b".to_string())])),
            ..ObjectMeta::default()
        };
        assert_eq!(owners(&link, &meta, Owners::Controller)[0].key.name, "a");
        assert_eq!(annotated(&link, &meta).map(|t| t.key.name), Some("b".into()));
        let refs = vec![ObjectRef { namespace: None, name: "c".into() }];
        assert_eq!(named(&link, Some("ns"), refs)[0].key.namespace.as_deref(), Some("ns"));
        assert!(matches!(links_for(&Mapper::PrimaryReferences), Links::FromPrimary(_)));
    }
}

//! What a plugin may write: objects of the kinds it declares as dependents, in its primary's
//! namespace, nothing else. Every desired object is checked before the first write of a
//! reconcile, so a refused one leaves the cluster untouched.
//!
//! - The object's `apiVersion` and `kind` must be the declared dependent's; an object that
//!   leaves them out gets the declared ones.
//! - A namespaced dependent of a namespaced primary stays in the primary's namespace: the
//!   object's `metadata.namespace` may be left out (it becomes the primary's) or name the
//!   primary's, no other. Only a dependent declared as owned by annotations, which exists for
//!   objects in other namespaces, and a read-only one, which is never written, may name another.
//!   A namespaced dependent of a cluster-scoped primary names its namespace freely.

use serde_json::Value;

use crate::dependent::{DependentSpec, Ownership, PrimaryRef};

/// Whether the plugin may have `object` under its dependent `spec` for `primary`. The error
/// names the object and why it is refused, e.g.
/// `v1/Secret "x": dependent "bulk" is declared as v1/ConfigMap`.
pub fn check(spec: &DependentSpec, primary: &PrimaryRef, object: &Value) -> Result<(), String> {
    let declared = &spec.kind;
    let api_version = declared.api_version();
    let ownership = spec.ownership(&primary.kind);
    let primary_namespace = primary.key.namespace.as_deref();
    let given = |field: &str| object.get(field).and_then(Value::as_str);
    let given_version = given("apiVersion").unwrap_or(&api_version);
    let given_kind = given("kind").unwrap_or(&declared.kind);
    let name = object.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
    let what = format!("{given_version}/{given_kind} {name:?}");
    if given_version != api_version || given_kind != declared.kind {
        return Err(format!("{what}: dependent {:?} is declared as {api_version}/{}", spec.name, declared.kind));
    }
    let namespace = object.pointer("/metadata/namespace").and_then(Value::as_str).filter(|ns| !ns.is_empty());
    if let (Some(namespace), Some(declared)) = (namespace, &spec.namespace)
        && namespace != declared
    {
        return Err(format!(
            "{what} in namespace {namespace:?}: dependent {:?} is declared in namespace {declared:?}",
            spec.name
        ));
    }
    let may_leave = spec.read_only || ownership == Ownership::Annotations || !declared.namespaced;
    if let (Some(namespace), Some(primary_namespace)) = (namespace, primary_namespace)
        && namespace != primary_namespace
        && !may_leave
    {
        return Err(format!(
            "{what} in namespace {namespace:?}: the objects of dependent {:?} stay in their primary's namespace \
             {primary_namespace:?} (only a dependent owned by annotations may be written into another)",
            spec.name
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::kind::{KindRef, ObjectKey};

    fn dependent(group: &str, version: &str, kind: &str, namespaced: bool) -> DependentSpec {
        DependentSpec {
            name: "bulk".into(),
            kind: KindRef { group: group.into(), version: version.into(), kind: kind.into(), plural: None, namespaced },
            ..crate::dependent::tests::config_maps("bulk", &[])
        }
    }

    fn config_maps() -> DependentSpec {
        dependent("", "v1", "ConfigMap", true)
    }

    /// A primary in `namespace`; cluster-scoped without one.
    fn primary(namespace: Option<&str>) -> PrimaryRef {
        let mut primary = crate::dependent::tests::primary();
        primary.kind.namespaced = namespace.is_some();
        primary.key = ObjectKey { namespace: namespace.map(str::to_owned), name: "m".into() };
        primary
    }

    fn owned(spec: &DependentSpec, primary_namespace: Option<&str>, object: &Value) -> Result<(), String> {
        check(spec, &primary(primary_namespace), object)
    }

    fn annotated(spec: &DependentSpec, primary_namespace: Option<&str>, object: &Value) -> Result<(), String> {
        let spec = DependentSpec { declared_ownership: Ownership::Annotations, ..spec.clone() };
        check(&spec, &primary(primary_namespace), object)
    }

    #[test]
    fn the_declared_kind_or_none_is_permitted() {
        let object = json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": "a" } });
        assert_eq!(owned(&config_maps(), Some("ns"), &object), Ok(()));
        assert_eq!(owned(&config_maps(), Some("ns"), &json!({ "metadata": { "name": "a" } })), Ok(()));
        let deployments = dependent("apps", "v1", "Deployment", true);
        let deployment = json!({ "apiVersion": "apps/v1", "kind": "Deployment", "metadata": { "name": "d" } });
        assert_eq!(owned(&deployments, Some("ns"), &deployment), Ok(()));
    }

    #[test]
    fn another_kind_or_version_is_refused_naming_both() {
        let secret = json!({ "apiVersion": "v1", "kind": "Secret", "metadata": { "name": "x-rogue" } });
        assert_eq!(
            owned(&config_maps(), Some("ns"), &secret),
            Err("v1/Secret \"x-rogue\": dependent \"bulk\" is declared as v1/ConfigMap".into())
        );
        let deployments = dependent("apps", "v1", "Deployment", true);
        let other_version = json!({ "apiVersion": "apps/v1beta1", "kind": "Deployment", "metadata": { "name": "d" } });
        assert_eq!(
            owned(&deployments, Some("ns"), &other_version),
            Err("apps/v1beta1/Deployment \"d\": dependent \"bulk\" is declared as apps/v1/Deployment".into())
        );
        // A type left half out is completed with the declared one, and still refused.
        let only_kind = json!({ "kind": "Secret" });
        assert_eq!(
            owned(&config_maps(), Some("ns"), &only_kind),
            Err("v1/Secret \"\": dependent \"bulk\" is declared as v1/ConfigMap".into())
        );
        let other_group = json!({ "apiVersion": "example.com/v1", "metadata": { "name": "c" } });
        assert!(owned(&config_maps(), Some("ns"), &other_group).is_err());
    }

    #[test]
    fn a_read_only_dependent_is_held_to_its_kind_too() {
        let mut observed = config_maps();
        observed.read_only = true;
        let secret = json!({ "apiVersion": "v1", "kind": "Secret", "metadata": { "name": "s" } });
        assert!(owned(&observed, Some("ns"), &secret).is_err());
    }

    #[test]
    fn a_declared_namespace_is_the_only_one() {
        let spec = DependentSpec {
            namespace: Some("mirror".into()),
            declared_ownership: Ownership::Annotations,
            ..config_maps()
        };
        let there = json!({ "metadata": { "name": "a", "namespace": "mirror" } });
        assert_eq!(owned(&spec, Some("ns"), &there), Ok(()));
        let elsewhere = json!({ "metadata": { "name": "a", "namespace": "kube-system" } });
        let refused = owned(&spec, Some("ns"), &elsewhere).unwrap_err();
        assert!(refused.contains("declared in namespace \"mirror\""), "{refused}");
    }

    #[test]
    fn the_primarys_namespace_or_none_is_permitted() {
        let here = json!({ "metadata": { "name": "a", "namespace": "ns" } });
        assert_eq!(owned(&config_maps(), Some("ns"), &here), Ok(()));
        let empty = json!({ "metadata": { "name": "a", "namespace": "" } });
        assert_eq!(owned(&config_maps(), Some("ns"), &empty), Ok(()));
    }

    #[test]
    fn another_namespace_is_refused_for_an_owned_dependent() {
        let elsewhere =
            json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": "a", "namespace": "kube-system" } });
        let refused = owned(&config_maps(), Some("ns"), &elsewhere).unwrap_err();
        assert!(refused.starts_with("v1/ConfigMap \"a\" in namespace \"kube-system\": "), "{refused}");
        assert!(refused.contains("dependent \"bulk\" stay in their primary's namespace \"ns\""), "{refused}");
    }

    #[test]
    fn another_namespace_is_permitted_where_declared_read_only_or_without_a_primary_namespace() {
        let elsewhere = json!({ "metadata": { "name": "a", "namespace": "other" } });
        assert_eq!(annotated(&config_maps(), Some("ns"), &elsewhere), Ok(()));
        let mut observed = config_maps();
        observed.read_only = true;
        assert_eq!(owned(&observed, Some("ns"), &elsewhere), Ok(()));
        // A namespaced dependent of a cluster-scoped primary names its namespace.
        assert_eq!(owned(&config_maps(), None, &elsewhere), Ok(()));
        // A cluster-scoped dependent has no namespace: one given is not where it goes.
        let namespaces = dependent("", "v1", "Namespace", false);
        assert_eq!(owned(&namespaces, Some("ns"), &elsewhere), Ok(()));
    }
}

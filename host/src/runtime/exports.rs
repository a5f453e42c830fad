//! The functions of the exported reconciler interface, and of the admission interface when the
//! plugin exports it, found and type-checked once per module.
//!
//! `bindgen!`'s `PluginPre::instantiate_async` looks up and type-checks every export of the
//! interface on every instantiation (`GuestIndices::load`): 15 functions for a call that uses
//! one, about a sixth of a Rust plugin's call. Here each export is looked up and checked when
//! the module loads, and a call takes the one it runs from its instance by index. The signatures
//! mirror the generated `call_*` methods (the WIT's types in the generated Rust types, borrowed
//! as bindgen borrows them); the check at load holds them to the component, so one that differs
//! from the contract is refused there, naming the export.

use wasmtime::component::types::ComponentItem;
use wasmtime::component::{ComponentExportIndex, ComponentNamedList, Instance, InstancePre, Lift, Lower, TypedFunc};
use wasmtime::{Store, format_err};

use super::bindings::wasmop::plugin::types::{
    AdmissionRequest, CleanupOutcome, DesiredObject, EventKind, ExternalObject, ObjectRef, Outcome, PluginConfig,
    PrimaryState, ReconcileError, ReconcileRequest, SecondaryRef, TrackedId, Verdict,
};
use super::bindings::{ADMISSION_INTERFACE, RECONCILER_INTERFACE};
use super::sandbox::Sandbox;

/// The index of `name` in `interface`, once its type is checked to be `(Params) -> Results`
/// (the check wasmtime's typed lookups make; `bindgen!`'s code makes it for a world's functions).
fn find<Params, Results>(
    pre: &InstancePre<Sandbox>,
    interface: &ComponentExportIndex,
    name: &str,
) -> Result<ComponentExportIndex, String>
where
    Params: ComponentNamedList + Lower,
    Results: ComponentNamedList + Lift,
{
    let (item, index) =
        pre.component().get_export(Some(interface), name).ok_or_else(|| format!("it has no function `{name}`"))?;
    let ComponentItem::ComponentFunc(func) = item else { return Err(format!("its export `{name}` is not a function")) };
    func.typecheck::<Params, Results>(&pre.instance_type())
        .map_err(|e| format!("its function `{name}` has another type than the contract's: {e:#}"))?;
    Ok(index)
}

/// Declares a struct of the functions of one exported interface: one field per function,
/// checked in its `find`, and a method that calls it with the same signature.
macro_rules! exports {
    (
        $(#[$struct_doc:meta])* struct $struct:ident in $interface:ident;
        $($(#[$doc:meta])* $field:ident = $name:literal ($($arg:ident: $ty:ty),*) -> $ret:ty;)*
    ) => {
        $(#[$struct_doc])*
        pub(crate) struct $struct {
            $($field: ComponentExportIndex,)*
        }

        impl $struct {
            /// Finds every function of the interface in the component and checks its type;
            /// `Ok(None)` when the component does not export the interface, `Err` says which
            /// function is missing or differs.
            pub(crate) fn find(pre: &InstancePre<Sandbox>, version: &str) -> Result<Option<Self>, String> {
                let interface = format!("{}@{version}", $interface);
                let Some(interface) = pre.component().get_export_index(None, &interface) else { return Ok(None) };
                Ok(Some(Self { $($field: find::<($($ty,)*), ($ret,)>(pre, &interface, $name)?,)* }))
            }

            $(
                $(#[$doc])*
                pub(crate) async fn $field(
                    &self,
                    store: &mut Store<Sandbox>,
                    instance: Instance,
                    $($arg: $ty),*
                ) -> wasmtime::Result<$ret> {
                    let func = instance
                        .get_func(&mut *store, &self.$field)
                        .ok_or_else(|| format_err!("the instance has no function `{}`", $name))?;
                    #[allow(unsafe_code, reason = "the type was checked at load; see the comment")]
                    // SAFETY: `find` checked this function against these very types (the
                    // macro writes one signature for both), in the component `instance` is of:
                    // `get_func` refuses an index of another component.
                    let func = unsafe { TypedFunc::<($($ty,)*), ($ret,)>::new_unchecked(func) };
                    Ok(func.call_async(store, ($($arg,)*)).await?.0)
                }
            )*
        }
    };
}

impl Exports {
    /// Finds every function of the component's reconciler interface of contract `version` and
    /// checks its type; `Err` says which is missing or differs, or that the interface is not
    /// exported.
    pub(crate) fn new(pre: &InstancePre<Sandbox>, version: &str) -> Result<Self, String> {
        Self::find(pre, version)?.ok_or_else(|| format!("it does not export {RECONCILER_INTERFACE}@{version}"))
    }
}

exports! {
    /// The functions of the reconciler interface, each checked against its signature here.
    struct Exports in RECONCILER_INTERFACE;
    /// `describe`: the plugin's configuration.
    describe = "describe"() -> PluginConfig;
    /// `reconcile`: the plugin's outcome for the primary in `request`.
    reconcile = "reconcile"(request: &ReconcileRequest) -> Result<Outcome, ReconcileError>;
    /// `desired`: the desired objects of the plugin's dependents.
    desired = "desired"(request: &ReconcileRequest) -> Result<Vec<DesiredObject>, ReconcileError>;
    /// `cleanup`: cleans up for a primary marked for deletion.
    cleanup = "cleanup"(request: &ReconcileRequest) -> Result<CleanupOutcome, ReconcileError>;
    /// `check`: whether the plugin condition `name` holds.
    check = "check"(name: &str, primary: &str, dependent: Option<&str>) -> bool;
    /// `update-error-status`: the status to merge after a failure no retry follows.
    update_error_status = "update-error-status"(request: &ReconcileRequest, error: &ReconcileError)
        -> Option<String>;
    /// `map-secondary`: the primaries a change of a secondary concerns.
    map_secondary = "map-secondary"(secondary: &str, previous: Option<&str>) -> Result<Vec<ObjectRef>, String>;
    /// `secondaries-of`: the secondaries a primary names.
    secondaries_of = "secondaries-of"(primary: &str) -> Result<Vec<SecondaryRef>, String>;
    /// `crd`: the CustomResourceDefinition of the primary kind, if the plugin makes one.
    crd = "crd"() -> Option<String>;
    /// `fetch`: the external state of a primary.
    fetch = "fetch"(primary: &str, tracked: &[TrackedId]) -> Result<Vec<ExternalObject>, String>;
    /// `fetch-all`: the external state of every primary.
    fetch_all = "fetch-all"() -> Result<Vec<PrimaryState>, String>;
    /// `apply-external`: makes the external system hold `desired`.
    apply_external = "apply-external"(primary: &str, desired: &ExternalObject, actual: Option<&ExternalObject>)
        -> Result<ExternalObject, ReconcileError>;
    /// `delete-external`: deletes `actual` from the external system.
    delete_external = "delete-external"(primary: &str, actual: &ExternalObject) -> Result<(), ReconcileError>;
    /// `map-inbound`: the primaries an inbound payload concerns.
    map_inbound = "map-inbound"(payload: &str) -> Result<Vec<ObjectRef>, String>;
    /// `filter`: whether the plugin predicate `name` holds for a watch event.
    filter = "filter"(name: &str, event: EventKind, object: &str, old: Option<&str>) -> bool;
}

exports! {
    /// The functions of the admission interface, each checked against its signature here; a
    /// plugin of the `plugin` world has none.
    struct Admission in ADMISSION_INTERFACE;
    /// `validate`: admits or denies an admission request.
    validate = "validate"(request: &AdmissionRequest) -> Verdict;
    /// `default`: the object as it should be stored, or the plugin's refusal.
    default = "default"(request: &AdmissionRequest) -> Result<String, String>;
    /// `convert`: objects in another version of the primary's CRD, or the plugin's refusal.
    convert = "convert"(objects: &[String], desired_api_version: &str) -> Result<Vec<String>, String>;
}

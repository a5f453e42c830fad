//! What the loop knows of a plugin, as its `describe()` states it.

use crate::dependent::DependentSpec;
use crate::external::Tracking;
use crate::filter::Filters;
use crate::kind::KindRef;
use crate::mapping::Owners;
use crate::predicate::Predicate;

/// How a watch's changes find their primaries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mapper {
    /// Owner references to the primary's kind.
    Owners(Owners),
    /// The `wasmop.dev/primary-name` and `-namespace` annotations.
    Annotations,
    /// The plugin's `map-secondary`.
    Plugin,
    /// The plugin's `secondaries-of` answer for the primary.
    PrimaryReferences,
}

/// A declared watch of a secondary kind.
#[derive(Debug, Clone)]
pub struct WatchSpec {
    /// The watched kind.
    pub kind: KindRef,
    /// Only this namespace.
    pub namespace: Option<String>,
    /// Only objects matching this label selector.
    pub label_selector: Option<String>,
    /// The paths the cache keeps; `None`: whole objects.
    pub projection: Option<Vec<String>>,
    /// How changes map to primaries.
    pub mapper: Mapper,
    /// Only changes for which this holds map to primaries.
    pub predicate: Option<Predicate>,
}

/// What the loop needs to know of a plugin, as its `describe()` states it.
#[derive(Debug, Clone)]
pub struct PluginSpec {
    /// The plugin's name.
    pub name: String,
    /// The primary kind.
    pub primary: KindRef,
    /// The primaries' label selector.
    pub label_selector: Option<String>,
    /// The paths of the primary the plugin reads; `None`: all of it.
    pub projection: Option<Vec<String>>,
    /// Which changes of a primary reconcile.
    pub filters: Filters,
    /// The primary's predicate.
    pub predicate: Option<Predicate>,
    /// Declared watches.
    pub watches: Vec<WatchSpec>,
    /// Declared dependents (Kubernetes objects).
    pub dependents: Vec<DependentSpec>,
    /// Declared external dependents, with where their IDs are tracked.
    pub external: Vec<(DependentSpec, Tracking)>,
    /// Whether the host keeps the `Ready`, `Reconciling` and `Degraded` conditions.
    pub conditions: bool,
}

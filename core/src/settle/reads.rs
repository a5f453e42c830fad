//! What a plugin reads during a call: the objects the host's caches hold, cut to their
//! projections, and the refusals of kinds it does not watch.

use serde_json::Value;

use super::spec::PluginSpec;
use super::world::DependentState;
use crate::external::ExternalObject;
use crate::kind::KindRef;
use crate::selector::LabelSelector;

/// One of the host's watches: what it caches (kind, label selector, namespace) and what of
/// each object it keeps (the projection; `None`: all of it).
#[derive(Clone, Debug)]
struct Cached {
    kind: KindRef,
    selector: Option<LabelSelector>,
    namespace: Option<String>,
    projection: Option<Vec<String>>,
}

impl Cached {
    fn holds(&self, kind: &KindRef, object: &Value) -> bool {
        self.kind.same_type(kind)
            && self.selector.as_ref().is_none_or(|s| s.matches_object(object))
            && self.namespace.as_deref().is_none_or(|ns| object["metadata"]["namespace"].as_str() == Some(ns))
    }
}

/// What the host's caches hold for a plugin: the primary's watch, each declared watch and each
/// dependent's watch, and the kinds related to its primaries (watched and dependent kinds).
#[derive(Clone, Debug)]
pub struct Caches {
    name: String,
    primary: KindRef,
    related: Vec<KindRef>,
    /// In the order the host reads them: the primary's first.
    caches: Vec<Cached>,
}

impl Caches {
    /// The caches of the plugin `spec` describes.
    pub fn new(spec: &PluginSpec) -> Self {
        let selector = |s: Option<&String>| s.and_then(|s| s.parse::<LabelSelector>().ok());
        let managed = format!("{}={}", crate::dependent::MANAGED_BY_LABEL, spec.name);
        // The host's cache keeps the primary's status too, for its own writes, but the plugin
        // reads only what its projection names.
        let mut caches = vec![Cached {
            kind: spec.primary.clone(),
            selector: selector(spec.label_selector.as_ref()),
            namespace: None,
            projection: spec.projection.clone(),
        }];
        caches.extend(spec.watches.iter().map(|w| Cached {
            kind: w.kind.clone(),
            selector: selector(w.label_selector.as_ref()),
            namespace: w.namespace.clone(),
            projection: w.projection.clone(),
        }));
        caches.extend(spec.dependents.iter().map(|d| Cached {
            // A dependent's watch: the plugin's objects by the management label; all of a
            // read-only dependent's kind; whole objects.
            kind: d.kind.clone(),
            selector: if d.read_only { None } else { selector(Some(&managed)) },
            namespace: d.namespace.clone(),
            projection: None,
        }));
        let watched = spec.watches.iter().map(|watch| watch.kind.clone());
        let related = watched.chain(spec.dependents.iter().map(|d| d.kind.clone())).collect();
        Self { name: spec.name.clone(), primary: spec.primary.clone(), related, caches }
    }

    /// Whether the primary's watch holds `object` (its label selector).
    pub fn holds_primary(&self, object: &Value) -> bool {
        self.caches[0].holds(&self.primary, object)
    }

    /// Whether the primary's cache keeps only part of it (a projection).
    pub fn projects_primary(&self) -> bool {
        self.caches[0].projection.is_some()
    }

    /// Whether one of the host's watches would cache `object` of `kind`: the primary's, a
    /// declared watch's (its label selector and namespace) or a dependent's.
    pub fn caches(&self, kind: &KindRef, object: &Value) -> bool {
        self.caches.iter().any(|cached| cached.holds(kind, object))
    }

    /// `object` of `kind` as the plugin reads it from the host's caches: cut to the projection
    /// of the first watch that caches it (a secondary given as such: the first watch of its
    /// kind). The host's cache of primaries keeps their `status` too, which the plugin does not
    /// read unless its projection names it.
    pub fn shaped(&self, kind: &KindRef, object: &Value) -> Value {
        let cached = self
            .caches
            .iter()
            .find(|cached| cached.holds(kind, object))
            .or_else(|| self.caches.iter().find(|cached| cached.kind.same_type(kind)));
        let mut object = object.clone();
        if let Some(paths) = cached.and_then(|c| c.projection.as_deref()) {
            crate::projection::project(&mut object, paths);
        }
        object
    }

    /// As the host: only the primary kind and the related kinds are cached, so reading any
    /// other kind fails.
    pub fn reads(&self, kind: &KindRef) -> Result<(), String> {
        if self.primary.same_type(kind) || self.related.iter().any(|related| related.same_type(kind)) {
            return Ok(());
        }
        Err(format!(
            "{kind} is not watched by this plugin ({}); only the primary and watched kinds can be read",
            self.name
        ))
    }

    /// Whether `kind` has secondaries: a watched or dependent kind.
    pub fn related(&self, kind: &KindRef) -> Result<(), String> {
        if self.related.iter().any(|related| related.same_type(kind)) {
            return Ok(());
        }
        Err(format!("{kind} is not watched by plugin {}: only watched and dependent kinds have secondaries", self.name))
    }
}

/// The host as a plugin sees it during one call: the cached objects, the primary's
/// secondaries, the dependents' states, the external state and the last inbound payload.
/// [`View::get`], [`View::list`] and [`View::secondaries`] answer the host imports.
#[derive(Clone, Debug)]
pub struct View {
    /// What the host's caches hold.
    pub caches: Caches,
    /// Stored objects; only those a cache holds are read.
    pub objects: Vec<(KindRef, Value)>,
    /// The primary's secondaries (read whatever the caches hold).
    pub secondaries: Vec<(KindRef, Value)>,
    /// The dependents' states, for `reconcile`.
    pub dependents: Vec<DependentState>,
    /// The primary's external state.
    pub external: Vec<ExternalObject>,
    /// The last inbound payload mapped to the primary.
    pub inbound: Option<Value>,
}

fn meta_str<'a>(object: &'a Value, field: &str) -> Option<&'a str> {
    object["metadata"][field].as_str()
}

impl View {
    /// The cached objects of `kind`: the stored ones the host's watches would cache, and the
    /// secondaries.
    fn of_kind<'a>(&'a self, kind: &'a KindRef) -> impl Iterator<Item = &'a Value> + 'a {
        let stored = self.objects.iter().filter(move |(k, object)| k.same_type(kind) && self.caches.caches(k, object));
        stored.chain(self.secondaries.iter().filter(move |(k, _)| k.same_type(kind))).map(|(_, object)| object)
    }

    /// The `get` import: one cached object as JSON.
    pub fn get(&self, kind: &KindRef, namespace: Option<&str>, name: &str) -> Result<Option<String>, String> {
        self.caches.reads(kind)?;
        Ok(self
            .of_kind(kind)
            .find(|object| meta_str(object, "name") == Some(name) && meta_str(object, "namespace") == namespace)
            .map(|object| self.caches.shaped(kind, object).to_string()))
    }

    /// The `list` import: cached objects of `kind`, in `namespace` (all when `None`), matching
    /// `label_selector`.
    pub fn list(
        &self,
        kind: &KindRef,
        namespace: Option<&str>,
        label_selector: Option<&str>,
    ) -> Result<Vec<String>, String> {
        self.caches.reads(kind)?;
        let selector = label_selector.map(str::parse::<LabelSelector>).transpose().map_err(|e| e.to_string())?;
        Ok(self
            .of_kind(kind)
            .filter(|object| namespace.is_none() || meta_str(object, "namespace") == namespace)
            .filter(|object| selector.as_ref().is_none_or(|selector| selector.matches_object(object)))
            .map(|object| self.caches.shaped(kind, object).to_string())
            .collect())
    }

    /// The `secondaries` import: the primary's secondaries of `kind`, sorted by namespace and
    /// name.
    pub fn secondaries(&self, kind: &KindRef) -> Result<Vec<String>, String> {
        self.caches.related(kind)?;
        let mut secondaries: Vec<&Value> =
            self.secondaries.iter().filter(|(k, _)| k.same_type(kind)).map(|(_, object)| object).collect();
        secondaries.sort_by_key(|object| (meta_str(object, "namespace"), meta_str(object, "name")));
        Ok(secondaries.into_iter().map(|object| self.caches.shaped(kind, object).to_string()).collect())
    }
}

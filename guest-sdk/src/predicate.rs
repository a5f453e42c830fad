//! Predicates on watch events (controller-runtime's `predicate.Funcs` combined with `And`, `Or`,
//! `Not`): built-in ones and the plugin's own [`Reconciler::filter`](crate::Reconciler::filter).

use wasmop_core::predicate::Term;

use crate::bindings::wasmop::plugin::types as wit;

/// A watch event, as [`Reconciler::filter`](crate::Reconciler::filter) sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventKind {
    /// First seen: created, or listed at start.
    Create,
    /// A new version.
    Update,
    /// Marked for deletion, or deleted.
    Delete,
    /// Anything else.
    Generic,
}

impl EventKind {
    pub(crate) fn from_wit(event: wit::EventKind) -> Self {
        match event {
            wit::EventKind::Create => Self::Create,
            wit::EventKind::Update => Self::Update,
            wit::EventKind::Delete => Self::Delete,
            wit::EventKind::Generic => Self::Generic,
        }
    }

    pub(crate) fn from_core(event: wasmop_core::predicate::EventKind) -> Self {
        use wasmop_core::predicate::EventKind as Core;
        match event {
            Core::Create => Self::Create,
            Core::Update => Self::Update,
            Core::Delete => Self::Delete,
            Core::Generic => Self::Generic,
        }
    }

    /// The core's name for it.
    pub fn to_core(self) -> wasmop_core::predicate::EventKind {
        use wasmop_core::predicate::EventKind as Core;
        match self {
            Self::Create => Core::Create,
            Self::Update => Core::Update,
            Self::Delete => Core::Delete,
            Self::Generic => Core::Generic,
        }
    }
}

/// A predicate: which watch events count. For the primary it replaces the update filtering
/// (generation-aware, label and annotation changes; the create, update and delete switches still apply);
/// for a watch, only the changes it passes map to primaries. The host evaluates the built-in
/// terms itself and calls the plugin only for [`Predicate::plugin`] terms.
///
/// ```
/// use wasmop_guest::Predicate;
///
/// // Reconcile spec changes, and label changes except those the plugin's "tier-only" rejects.
/// let p = Predicate::generation_changed().or(Predicate::labels_changed().and(Predicate::plugin("tier-only")));
/// assert_eq!(p.terms().len(), 5);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Predicate(Vec<Term>);

impl Predicate {
    /// The plugin's [`Reconciler::filter`](crate::Reconciler::filter), asked with `name`.
    pub fn plugin(name: impl Into<String>) -> Self {
        Self(vec![Term::Plugin(name.into())])
    }

    /// Not an update, or the generation (or the finalizers) changed.
    pub fn generation_changed() -> Self {
        Self(vec![Term::GenerationChanged])
    }

    /// Not an update, or the labels changed.
    pub fn labels_changed() -> Self {
        Self(vec![Term::LabelsChanged])
    }

    /// Not an update, or the annotations changed.
    pub fn annotations_changed() -> Self {
        Self(vec![Term::AnnotationsChanged])
    }

    /// Both hold.
    #[must_use]
    pub fn and(mut self, other: Predicate) -> Self {
        self.0.extend(other.0);
        self.0.push(Term::And);
        self
    }

    /// Either holds.
    #[must_use]
    pub fn or(mut self, other: Predicate) -> Self {
        self.0.extend(other.0);
        self.0.push(Term::Or);
        self
    }

    /// Does not hold.
    #[allow(clippy::should_implement_trait, reason = "reads as the combinator it is")]
    #[must_use]
    pub fn not(mut self) -> Self {
        self.0.push(Term::Not);
        self
    }

    /// The terms in postfix order.
    pub fn terms(&self) -> &[Term] {
        &self.0
    }

    pub(crate) fn into_wit(self) -> Vec<wit::PredicateTerm> {
        self.0
            .into_iter()
            .map(|term| match term {
                Term::Plugin(name) => wit::PredicateTerm::Plugin(name),
                Term::GenerationChanged => wit::PredicateTerm::GenerationChanged,
                Term::LabelsChanged => wit::PredicateTerm::LabelsChanged,
                Term::AnnotationsChanged => wit::PredicateTerm::AnnotationsChanged,
                Term::And => wit::PredicateTerm::And,
                Term::Or => wit::PredicateTerm::Or,
                Term::Not => wit::PredicateTerm::Not,
            })
            .collect()
    }

    /// The checked predicate of the rules crate; an error says what is malformed (the host
    /// refuses such a plugin at load).
    pub fn to_core(&self) -> Result<wasmop_core::predicate::Predicate, String> {
        wasmop_core::predicate::Predicate::new(self.0.clone())
    }

    /// The names of the plugin predicates it asks.
    pub fn plugin_names(&self) -> impl Iterator<Item = &str> {
        self.0.iter().filter_map(|term| match term {
            Term::Plugin(name) => Some(name.as_str()),
            _ => None,
        })
    }
}

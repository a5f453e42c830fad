//! [`FakeHost::reconciles_on`] and [`FakeHost::reconciles_on_watched`]: which watch events
//! reconcile a primary, by the host's rules (`wasmop_core::settle`, on `wasmop_core::filter`): the plugin's filters and
//! predicates, with [`Reconciler::filter`] answering plugin terms natively, asked only when the
//! host would ask it (the same short circuit), with the objects as the host's caches hold them.

use serde::Serialize;
use serde_json::Value;
use wasmop_core::settle::Settle;

use super::host::FakeHost;
use super::spec::spec_of;
use super::until_stable::Native;
use crate::{Kind, Reconciler};

impl FakeHost {
    /// Whether the host reconciles `R`'s primary when its watch delivers `new`, the version
    /// after `old` (`None`: first seen, a create), by `R`'s [`Filters`](crate::Filters),
    /// generation awareness and [`Config::predicate`](crate::Config::predicate). Plugin terms
    /// call [`Reconciler::filter`] with the objects cut to the primary's projection, `old` only
    /// for an update. Give the objects as the API server has them: `metadata.generation`
    /// changes with the spec; a missing `resourceVersion` is filled in (`old` at 1, `new` at 2).
    /// A version that does not match `R`'s label selector never reaches the host.
    ///
    /// Panics when `R`'s predicate is malformed (the host refuses to load such a plugin).
    ///
    /// ```
    /// use wasmop_guest::serde_json::{Value, json};
    /// use wasmop_guest::testing::FakeHost;
    /// use wasmop_guest::{Config, Context, Error, EventKind, Kind, Outcome, Predicate, Reconciler};
    ///
    /// struct Tiered;
    ///
    /// impl Reconciler for Tiered {
    ///     type Primary = Value;
    ///
    ///     fn config() -> Config {
    ///         Config::new("tiered", Kind::namespaced("example.com", "v1", "App")).predicate(
    ///             Predicate::generation_changed().or(Predicate::labels_changed().and(Predicate::plugin("not-tier"))),
    ///         )
    ///     }
    ///
    ///     fn reconcile(_: Value, _: &Context) -> Result<Outcome, Error> {
    ///         Ok(Outcome::done())
    ///     }
    ///
    ///     fn filter(_: &str, event: EventKind, new: &Value, old: Option<&Value>) -> bool {
    ///         let without_tier = |o: &Value| {
    ///             let mut labels = o["metadata"]["labels"].clone();
    ///             labels.as_object_mut().map(|l| l.remove("tier"));
    ///             labels
    ///         };
    ///         event != EventKind::Update || old.is_none_or(|old| without_tier(old) != without_tier(new))
    ///     }
    /// }
    ///
    /// let app = |generation: i64, tier: &str, team: &str| {
    ///     json!({ "metadata": { "name": "a", "namespace": "ns", "generation": generation,
    ///                           "labels": { "tier": tier, "team": team } } })
    /// };
    /// let host = FakeHost::new();
    /// assert!(host.reconciles_on::<Tiered>(&app(1, "a", "x"), None), "a create");
    /// assert!(!host.reconciles_on::<Tiered>(&app(1, "b", "x"), Some(&app(1, "a", "x"))), "the tier only");
    /// assert!(host.reconciles_on::<Tiered>(&app(1, "a", "y"), Some(&app(1, "a", "x"))), "another label");
    /// assert!(host.reconciles_on::<Tiered>(&app(2, "b", "x"), Some(&app(1, "a", "x"))), "the spec");
    /// ```
    pub fn reconciles_on<R: Reconciler>(&self, new: &impl Serialize, old: Option<&Value>) -> bool {
        let config = R::config();
        let new = super::host::to_object("reconciles_on", &config.primary, new);
        let guest = Native::<R>::new(self.failures.clone());
        let settle = Settle::new(spec_of(&config), &guest)
            .unwrap_or_else(|e| panic!("FakeHost::reconciles_on: the plugin's dependents are invalid: {e}"));
        settle.reconciles_on(new, old.cloned()).unwrap_or_else(|e| panic!("FakeHost::reconciles_on: {e}"))
    }

    /// Whether a change of an object of `kind` reconciles `primary`: `new` after `old` (`old`
    /// `None`: created; `new` `None`: deleted, `old` its last version). As the host's watches
    /// do: one of `R`'s [`Watch`](crate::Watch)es of `kind` selects the object (its label
    /// selector), its [`Mapper`](crate::Mapper) relates the new or the old version to `primary`,
    /// and its [`Watch::predicate`](crate::Watch::predicate) holds, plugin terms calling
    /// [`Reconciler::filter`] natively with the objects cut to the watch's projection. A missing
    /// `resourceVersion` is filled in as for [`FakeHost::reconciles_on`]; `map_secondary` and
    /// `secondaries_of` read this host's objects.
    ///
    /// Panics when a watch's predicate is malformed, or when neither version is given.
    ///
    /// ```
    /// use wasmop_guest::serde_json::{Value, json};
    /// use wasmop_guest::testing::FakeHost;
    /// use wasmop_guest::{Config, Context, Error, EventKind, Kind, Outcome, Predicate, Reconciler, Watch};
    ///
    /// struct Settings;
    ///
    /// impl Reconciler for Settings {
    ///     type Primary = Value;
    ///
    ///     fn config() -> Config {
    ///         Config::new("settings", Kind::namespaced("example.com", "v1", "App")).watch(
    ///             Watch::new(Kind::namespaced("", "v1", "ConfigMap")).annotated().predicate(Predicate::plugin("data")),
    ///         )
    ///     }
    ///
    ///     fn reconcile(_: Value, _: &Context) -> Result<Outcome, Error> {
    ///         Ok(Outcome::done())
    ///     }
    ///
    ///     fn filter(_: &str, event: EventKind, new: &Value, old: Option<&Value>) -> bool {
    ///         event != EventKind::Update || old.is_none_or(|old| old["data"] != new["data"])
    ///     }
    /// }
    ///
    /// let app = json!({ "metadata": { "name": "a", "namespace": "ns" } });
    /// let map = |value: &str, label: &str| {
    ///     json!({ "metadata": { "name": "m", "namespace": "ns", "labels": { "l": label },
    ///                           "annotations": { "wasmop.dev/primary-name": "a" } },
    ///             "data": { "v": value } })
    /// };
    /// let host = FakeHost::new();
    /// let kind = Kind::namespaced("", "v1", "ConfigMap");
    /// assert!(host.reconciles_on_watched::<Settings>(&app, &kind, Some(&map("1", "x")), None));
    /// assert!(!host.reconciles_on_watched::<Settings>(&app, &kind, Some(&map("1", "y")), Some(&map("1", "x"))));
    /// assert!(host.reconciles_on_watched::<Settings>(&app, &kind, Some(&map("2", "x")), Some(&map("1", "x"))));
    /// assert!(host.reconciles_on_watched::<Settings>(&app, &kind, None, Some(&map("2", "x"))), "deleted");
    /// ```
    pub fn reconciles_on_watched<R: Reconciler>(
        &self,
        primary: &impl Serialize,
        kind: &Kind,
        new: Option<&Value>,
        old: Option<&Value>,
    ) -> bool {
        assert!(new.is_some() || old.is_some(), "FakeHost::reconciles_on_watched: give the new or the old version");
        let config = R::config();
        let primary = super::host::to_object("reconciles_on_watched", &config.primary, primary);
        let guest = Native::<R>::new(self.failures.clone());
        let settle = Settle::new(spec_of(&config), &guest)
            .unwrap_or_else(|e| panic!("FakeHost::reconciles_on_watched: the plugin's dependents are invalid: {e}"));
        settle
            .reconciles_on_watched(&self.world(), &primary, &kind.to_core(), new.cloned(), old.cloned())
            .unwrap_or_else(|e| panic!("FakeHost::reconciles_on_watched: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use serde_json::json;

    use super::*;
    use crate::{Config, Context, Error, EventKind, Outcome, Predicate, Watch};

    /// One call of the plugin's filter: name, event, the object's keys, and whether `old` was
    /// given.
    type Asked = (String, EventKind, Vec<String>, bool);

    thread_local! {
        static ASKED: RefCell<Vec<Asked>> = const { RefCell::new(Vec::new()) };
    }

    fn asked() -> Vec<Asked> {
        ASKED.with(|asked| asked.take())
    }

    /// Its primary passes spec changes, and label changes its `labels` filter passes; its watch
    /// of owned ConfigMaps passes annotation changes its `data` filter passes, and caches
    /// `data.kept` only.
    struct Recorded;

    impl Reconciler for Recorded {
        type Primary = Value;

        fn config() -> Config {
            Config::new("recorded", Kind::namespaced("example.com", "v1", "App"))
                .label_selector("selected")
                .project(["spec.wanted"])
                .predicate(
                    Predicate::generation_changed().or(Predicate::labels_changed().and(Predicate::plugin("labels"))),
                )
                .watch(
                    Watch::new(Kind::namespaced("", "v1", "ConfigMap"))
                        .project(["data.kept"])
                        .predicate(Predicate::annotations_changed().and(Predicate::plugin("data"))),
                )
        }

        fn reconcile(_: Value, _: &Context) -> Result<Outcome, Error> {
            Ok(Outcome::done())
        }

        fn filter(name: &str, event: EventKind, object: &Value, old: Option<&Value>) -> bool {
            let keys = object.as_object().map(|o| o.keys().cloned().collect()).unwrap_or_default();
            ASKED.with(|asked| asked.borrow_mut().push((name.to_owned(), event, keys, old.is_some())));
            match name {
                "labels" => object["metadata"]["labels"]["pass"] == "yes",
                _ => object["data"]["kept"] != "reject",
            }
        }
    }

    fn app(generation: i64, pass: &str) -> Value {
        json!({ "metadata": { "name": "a", "namespace": "ns", "uid": "u", "generation": generation,
                              "labels": { "selected": "", "pass": pass } },
                "spec": { "wanted": 1, "other": 2 } })
    }

    #[test]
    fn the_primary_s_plugin_term_is_asked_only_when_it_matters_with_the_cached_objects() {
        let host = FakeHost::new();
        assert!(host.reconciles_on::<Recorded>(&app(1, "no"), None));
        assert!(host.reconciles_on::<Recorded>(&app(2, "no"), Some(&app(1, "no"))), "the spec");
        assert!(!host.reconciles_on::<Recorded>(&app(1, "no"), Some(&app(1, "no"))), "a status update");
        assert_eq!(asked(), [], "built-in terms decided");
        assert!(!host.reconciles_on::<Recorded>(&app(1, "maybe"), Some(&app(1, "no"))));
        assert!(host.reconciles_on::<Recorded>(&app(1, "yes"), Some(&app(1, "no"))));
        let asked = asked();
        assert_eq!(asked.len(), 2);
        assert_eq!(asked[0].0, "labels");
        assert_eq!(asked[0].1, EventKind::Update);
        assert!(asked[0].3, "an update gives the old version");
        assert_eq!(asked[0].2, ["metadata", "spec"], "cut to the projection");
        let mut unselected = app(1, "yes");
        unselected["metadata"]["labels"].as_object_mut().unwrap().remove("selected");
        assert!(!host.reconciles_on::<Recorded>(&unselected, None), "not selected: never seen");
    }

    #[test]
    fn a_status_update_is_not_a_change_of_the_generation_or_labels() {
        let mut status = app(1, "no");
        status["status"] = json!({ "phase": "Ready" });
        status["metadata"]["resourceVersion"] = json!("3");
        let mut before = app(1, "no");
        before["metadata"]["resourceVersion"] = json!("2");
        assert!(!FakeHost::new().reconciles_on::<Recorded>(&status, Some(&before)));
        assert_eq!(asked(), []);
    }

    fn owned(name: &str, owner_uid: &str, kept: &str, note: &str) -> Value {
        json!({ "metadata": { "name": name, "namespace": "ns", "annotations": { "note": note },
                              "ownerReferences": [{ "apiVersion": "example.com/v1", "kind": "App", "name": "a",
                                                    "uid": owner_uid, "controller": true }] },
                "data": { "kept": kept, "dropped": "x" } })
    }

    #[test]
    fn a_watched_change_reconciles_the_primary_its_mapper_names_when_the_watch_s_predicate_holds() {
        let host = FakeHost::new();
        let kind = Kind::namespaced("", "v1", "ConfigMap");
        let primary = app(1, "no");
        let change = |new: Option<&Value>, old: Option<&Value>| {
            host.reconciles_on_watched::<Recorded>(&primary, &kind, new, old)
        };
        assert!(change(Some(&owned("m", "u", "1", "a")), None), "created");
        let asked_now = asked();
        assert_eq!(asked_now.len(), 1);
        assert_eq!((asked_now[0].1, asked_now[0].3), (EventKind::Create, false));
        assert!(!change(Some(&owned("m", "u", "2", "a")), Some(&owned("m", "u", "1", "a"))), "annotations unchanged");
        assert_eq!(asked(), [], "decided without the plugin");
        assert!(!change(Some(&owned("m", "u", "reject", "b")), Some(&owned("m", "u", "1", "a"))), "the plugin says no");
        assert!(change(Some(&owned("m", "u", "2", "b")), Some(&owned("m", "u", "1", "a"))));
        let asked_now = asked();
        assert_eq!(asked_now.len(), 2);
        assert!(asked_now.iter().all(|(name, event, _, old)| name == "data" && *event == EventKind::Update && *old));
        assert_eq!(asked_now[0].2, ["data", "metadata"], "cut to the watch's projection");
        assert!(change(None, Some(&owned("m", "u", "2", "a"))), "deleted");
        assert_eq!(asked()[0].1, EventKind::Delete);
        assert!(!change(Some(&owned("m", "another", "1", "a")), None), "owned by another App");
        assert!(
            !host.reconciles_on_watched::<Recorded>(
                &primary,
                &Kind::namespaced("", "v1", "Secret"),
                Some(&owned("s", "u", "1", "a")),
                None
            ),
            "not watched"
        );
    }

    #[test]
    #[should_panic(
        expected = "FakeHost: the primary's predicate is malformed: term 0 is a plugin predicate without a name"
    )]
    fn a_malformed_predicate_panics_as_the_host_refuses_it() {
        struct Malformed;
        impl Reconciler for Malformed {
            type Primary = Value;
            fn config() -> Config {
                Config::new("malformed", Kind::namespaced("example.com", "v1", "App")).predicate(Predicate::plugin(""))
            }
            fn reconcile(_: Value, _: &Context) -> Result<Outcome, Error> {
                Ok(Outcome::done())
            }
        }
        let _ = FakeHost::new().reconciles_on::<Malformed>(&app(1, "no"), None);
    }
}

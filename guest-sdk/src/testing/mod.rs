//! Native unit tests for plugins: a fake host and a way to run a [`Reconciler`] against it.
//!
//! [`FakeHost`] holds the objects that [`Context::get`](crate::Context::get),
//! [`Context::list`](crate::Context::list) and [`Context::secondaries`](crate::Context::secondaries)
//! see and records the plugin's logs. Its `reconcile` methods run the plugin's code natively,
//! through the same decode and check steps as the component export, and return a [`Run`] to
//! inspect. Its `error_status` methods, and [`Run::error_status`] after a failed run, call the
//! plugin's [`Reconciler::error_status`] hook the same way. [`FakeHost::reconciles_on`] and
//! [`FakeHost::reconciles_on_watched`] say which watch events would reconcile, by the plugin's
//! filters and predicates (calling [`Reconciler::filter`] for its plugin terms).
//! [`FakeHost::from_record`] loads a record `wasmop run --record` wrote, and [`FakeHost::replay`]
//! runs its reconcile again, comparing the outcome with the recorded one.
//! [`FakeHost::validate`], [`FakeHost::default_object`] and [`FakeHost::convert`] call the
//! plugin's webhooks for the requests the API server would send it, by the host's rules. Nothing
//! here calls the host imports, so it works under a plain `cargo test`.
//!
//! ```
//! use wasmop_guest::serde_json::{json, Value};
//! use wasmop_guest::testing::FakeHost;
//! use wasmop_guest::{Config, Context, Error, Kind, Outcome, Reconciler};
//!
//! struct CountKeys;
//!
//! impl Reconciler for CountKeys {
//!     type Primary = Value;
//!
//!     fn config() -> Config {
//!         Config::new("count-keys", Kind::namespaced("", "v1", "ConfigMap"))
//!     }
//!
//!     fn reconcile(cm: Value, ctx: &Context) -> Result<Outcome, Error> {
//!         let keys = cm["data"].as_object().map_or(0, |data| data.len());
//!         ctx.info(format!("{keys} keys"));
//!         Ok(Outcome::done().status(json!({ "keys": keys })))
//!     }
//! }
//!
//! let run = FakeHost::new().reconcile::<CountKeys>(&json!({
//!     "metadata": { "name": "settings", "namespace": "default" },
//!     "data": { "a": "1", "b": "2" },
//! }));
//! assert_eq!(run.status(), Some(&json!({ "keys": 2 })));
//! assert_eq!(run.logs()[0].message, "2 keys");
//! ```

mod admission;
mod events;
mod host;
mod record;
mod recorded;
mod spec;
mod until_stable;

pub use host::{FakeHost, LogLine, Run};
pub use record::{RecordError, Replayed};
pub use until_stable::{FAKE_NOW, Stable};
/// How a replay's outcome differs from the recorded one ([`Replayed::diff`]).
pub use wasmop_core::record::diff::Diff as RecordDiff;

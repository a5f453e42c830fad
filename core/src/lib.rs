//! The rules of a wasmop reconcile, as plain data in and decisions out.
//!
//! Two drivers carry these rules out: the host (`wasmop`), against the API server, and the
//! SDK's `FakeHost` (`wasmop_guest::testing`), against an in-memory store. Because both call
//! this crate, a plugin's unit tests see what the cluster would do: the same selectors, change
//! filters, capability checks, dependent workflow, pruning, readiness and status conditions.
//!
//! This crate depends on serde and serde_json only: no kube, wasmtime or wit-bindgen types. The
//! edges convert their types into these once, where they meet the core.
//!
//! | module | rule |
//! |---|---|
//! | [`kind`] | a resource type and an object's key |
//! | [`selector`] | label selectors (`=`, `!=`, `in`, `notin`, `key`, `!key`) |
//! | [`finalizer`] | whether primaries carry the plugin's finalizer, and which names are released |
//! | [`fixture`] | fixtures (the conformance scenarios' format): what must hold, and running one through [`settle`] |
//! | [`filter`] | which versions of a primary reconcile, and which watch events count (generation awareness, predicates) |
//! | [`predicate`] | predicates on watch events: built-in and plugin terms combined with and, or, not |
//! | [`check`] | declarative conditions on objects (ready-when, reconcile-when) |
//! | [`dependent`] | a declared dependent and how its desired objects are completed |
//! | [`diff`] | what changed between two versions of an object (kopf's `diff`, `on.field`) |
//! | [`duration`] | durations in Go's syntax (`1h30m`, `500ms`), parsed and written back |
//! | [`capability`] | which objects a plugin may write |
//! | [`workflow`] | dependency order, skips, deletes, pruning, collected errors |
//! | [`mapping`] | which primaries a secondary's change concerns; the secondaries of a primary |
//! | [`matching`] | whether the cluster already holds a desired object (SSA-aware) |
//! | [`projection`] | which parts of an object a cache keeps |
//! | [`quantity`] | Kubernetes quantities (`500m`, `2Gi`): parsed, compared, written canonically |
//! | [`record`] | recording a reconcile and replaying it: the record, what is recorded, redaction, size and budget, the replay tape, the diff |
//! | [`retry`] | when a failed reconcile runs again: the backoff, or the delay the plugin asked for |
//! | [`refusal`] | which failed API requests are worth retrying; a refusal in plain words |
//! | [`served`] | a kind the API server does not serve, and the served kind closest to it |
//! | [`settings`] | a plugin's settings in the words users write them, and their precedence |
//! | [`settle`] | the whole reconcile loop in memory, for a plugin behind a trait (the FakeHost, `wasmop test`) |
//! | [`shadow`] | a candidate version's ending compared with the live one's, and the summary its shadow runs come to |
//! | [`shard`] | which replica owns an object (the API server's FNV-1a, rendezvous-hashed buckets), and when it may run it during a handover |
//! | [`status`] | the status patch, `observedGeneration` and the host's conditions |
//! | [`webhook`] | the admission and conversion webhooks a plugin declares: the rules, the defaults, which requests each serves |

pub mod capability;
pub mod check;
pub mod dependent;
pub mod diff;
pub mod duration;
pub mod external;
pub mod filter;
pub mod finalizer;
pub mod fixture;
pub mod kind;
pub mod mapping;
pub mod matching;
pub mod predicate;
pub mod projection;
pub mod quantity;
pub mod record;
pub mod refusal;
pub mod retry;
pub mod selector;
pub mod served;
pub mod settings;
pub mod settle;
pub mod shadow;
pub mod shard;
pub mod status;
pub mod table;
pub mod webhook;
pub mod workflow;

#[cfg(test)]
mod vectors;

pub use kind::{KindRef, ObjectKey};

//! The integration tests that may run side by side in one process: each works in namespaces of
//! its own and shares nothing cluster-wide with another module, so `make test` runs them with
//! more threads than cores (they mostly wait on the API server). Tests that hold a fixed port,
//! run a resource loader over every `ReconcilerPlugin` of the cluster, or remove a CRD others use
//! are binaries of their own under `tests/tests/`, run one after the other.

mod bounded_cache;
mod cli;
mod cluster;
mod compiled_cache;
mod config_file;
mod dependents;
mod greeting;
mod hot_reload;
mod impersonation;
mod informer;
mod leader;
mod limits;
mod metrics;
mod predicates;
mod quota;
mod remote;
mod runtime;
mod secondary;
mod semantics;
mod shards;
mod shared_watch;

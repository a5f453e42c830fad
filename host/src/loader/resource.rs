//! `ReconcilerPlugin` resources: the cluster says which plugins run.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::host::Host;

/// Runs the plugins `ReconcilerPlugin` resources name, and reports on their status, until
/// `shutdown` fires.
pub async fn run(host: Arc<Host>, shutdown: CancellationToken) {
    let _ = host;
    shutdown.cancelled().await;
}

/// The `ReconcilerPlugin` CustomResourceDefinition as YAML.
pub fn crd_yaml() -> String {
    String::new()
}

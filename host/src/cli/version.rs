//! `wasmop version`: what the host is made of.

use wasmop::runtime::bindings::{CONTRACT_VERSION, RECONCILER_INTERFACE};

use super::output::print_out;

/// The host's version: the crate's, with the git revision it was built from when the build was
/// given one (`GIT_REVISION`; the image's build gives it). `--version` prints it too.
pub const VERSION: &str = env!("WASMOP_VERSION");

/// The wasmtime version the host runs plugins on, as `Cargo.lock` resolved it.
const WASMTIME_VERSION: &str = env!("WASMOP_WASMTIME_VERSION");

/// Print the host's version (with the git revision it was built from, when known), the plugin
/// contract versions it serves and the wasmtime version it runs plugins on.
#[derive(Debug, clap::Args)]
pub struct VersionArgs {}

/// `wasmop version`: one line each.
pub fn version(_: VersionArgs) -> anyhow::Result<()> {
    print_out(&text())
}

/// What `wasmop version` prints: `wasmop VERSION`, `contract: PACKAGE@VERSION` and
/// `wasmtime: VERSION`.
fn text() -> String {
    // The package of the contract's interface (`wasmop:plugin/reconciler`).
    let package = RECONCILER_INTERFACE.split_once('/').map_or(RECONCILER_INTERFACE, |(package, _)| package);
    format!("wasmop {VERSION}\ncontract: {package}@{CONTRACT_VERSION}\nwasmtime: {WASMTIME_VERSION}\n")
}

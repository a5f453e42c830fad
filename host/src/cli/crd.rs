//! `wasmop crd`: a CustomResourceDefinition as YAML.

use std::path::PathBuf;

use super::output::print_out;
use super::runtime::RuntimeArgs;

/// Print a CustomResourceDefinition as YAML, to `kubectl apply -f -`: with `--plugin`, the
/// one the plugin generates from its spec and status types (`Reconciler::crd`); without,
/// the host's own ReconcilerPlugin CRD.
#[derive(Debug, clap::Args)]
pub struct CrdArgs {
    /// The plugin file whose primary's CRD to print.
    #[arg(long, value_name = "FILE.wasm")]
    plugin: Option<PathBuf>,
    #[command(flatten)]
    runtime: RuntimeArgs,
}

/// `wasmop crd`: prints the plugin's CRD, or the host's own.
pub async fn crd(args: CrdArgs) -> anyhow::Result<()> {
    let Some(file) = args.plugin else { return print_out(&wasmop::loader::resource::crd_yaml()) };
    let module = args.runtime.runtime(None)?.load(&file)?;
    print_out(&wasmop::inspect::crd_yaml(&module).await?)
}

//! `wasmop crd`: a CustomResourceDefinition as YAML.

use std::path::PathBuf;

use wasmop::webhook::configurations::{Endpoint, with_conversion};

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
    /// Where the API server reaches the host's webhook endpoint, as `wasmop run --webhook-url`
    /// takes it: the CRD of a plugin with a conversion webhook then has its conversion section.
    #[arg(long, value_name = "URL", requires = "plugin", conflicts_with = "webhook_service")]
    webhook_url: Option<String>,
    /// The Service through which the API server reaches the host's webhook endpoint, as `wasmop
    /// run --webhook-service` takes it: the CRD of a plugin with a conversion webhook then has
    /// its conversion section.
    #[arg(long, value_name = "NAMESPACE/NAME[:PORT]", requires = "plugin")]
    webhook_service: Option<Endpoint>,
    #[command(flatten)]
    runtime: RuntimeArgs,
}

/// `wasmop crd`: prints the plugin's CRD, or the host's own.
pub async fn crd(args: CrdArgs) -> anyhow::Result<()> {
    let Some(file) = args.plugin else { return print_out(&wasmop::loader::resource::crd_yaml()) };
    let module = args.runtime.runtime(None)?.load(&file)?;
    let endpoint = args.webhook_url.map(Endpoint::Url).or(args.webhook_service);
    if endpoint.is_none() && wasmop::inspect::converts(module.config()) {
        eprintln!(
            "wasmop crd: plugin {} converts between its CRD's versions; the host writes the conversion section \
             when it serves webhooks (--webhook-addr); give --webhook-url or --webhook-service to print it here",
            module.name()
        );
    }
    let mut crd = wasmop::inspect::crd(&module).await?;
    if let Some(endpoint) = &endpoint {
        crd = with_conversion(crd, module.config(), endpoint);
    }
    print_out(&serde_saphyr::to_string(&crd)?)
}

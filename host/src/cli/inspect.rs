//! `wasmop inspect`: what a plugin declares, in the words of the overrides file.

use std::path::PathBuf;

use anyhow::Context as _;
use clap::ValueEnum;

use super::output::print_out;
use super::runtime::RuntimeArgs;

/// Print what a plugin's describe() says, in the words of the overrides file: its settings
/// (the block `--config` and a ReconcilerPlugin's overrides take), watches and dependents.
#[derive(Debug, clap::Args)]
pub struct InspectArgs {
    /// The plugin file.
    file: PathBuf,
    /// Output format.
    #[arg(long, short, value_enum, default_value_t = Output::Yaml)]
    output: Output,
    /// Also check that the cluster of the current kubeconfig serves every kind the plugin
    /// declares; fails naming each one it does not, and the closest kind it does.
    #[arg(long)]
    check_cluster: bool,
    #[command(flatten)]
    runtime: RuntimeArgs,
}

/// How `wasmop inspect` prints.
#[derive(Debug, Clone, Copy, ValueEnum)]
enum Output {
    Json,
    Yaml,
}

/// `wasmop inspect`: prints the plugin's description, then checks the cluster if asked to.
pub async fn inspect(args: InspectArgs) -> anyhow::Result<()> {
    let InspectArgs { file, output, check_cluster, runtime } = args;
    let module = runtime.runtime(None)?.load(&file)?;
    let described = wasmop::inspect::describe(module.config());
    let text = match output {
        Output::Json => serde_json::to_string_pretty(&described)?,
        Output::Yaml => serde_saphyr::to_string(&described)?,
    };
    print_out(&format!("{text}\n"))?;
    if check_cluster {
        check_kinds(module.config()).await?;
    }
    Ok(())
}

/// Fails naming every kind `config` declares that the current kubeconfig's cluster does not
/// serve, as the host reports it when the plugin runs.
async fn check_kinds(config: &wasmop::runtime::bindings::wasmop::plugin::types::PluginConfig) -> anyhow::Result<()> {
    let kube_config = kube::Config::infer().await.context("cannot find a Kubernetes configuration")?;
    let client = kube::Client::try_from(kube_config)?;
    let mut unserved = Vec::new();
    for kind in wasmop::inspect::declared_kinds(config) {
        match wasmop::informer::resolve(&client, kind).await {
            Ok(_) => {}
            Err(err) if err.unreachable() => return Err(err.into()),
            Err(_) => unserved.push(wasmop::informer::not_served(&client, kind).await),
        }
    }
    anyhow::ensure!(unserved.is_empty(), "{}", unserved.join("; "));
    Ok(())
}

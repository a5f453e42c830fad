//! `wasmop push`: a built plugin published to an OCI registry.

use std::path::PathBuf;

use anyhow::Context as _;
use wasmop::loader::oci::{Credentials, Registries};

use super::output::print_out;

/// Publish a built plugin to an OCI registry as a Wasm OCI artifact (config
/// application/vnd.wasm.config.v0+json, one application/wasm layer), the layout a
/// ReconcilerPlugin's `spec.module.oci` pulls, and print its reference with the manifest's
/// digest (REF@sha256:...), to paste there. Credentials: --username with the password on
/// stdin (--password-stdin), else the registry's entry in the docker config file
/// (REGISTRY_AUTH_FILE, else ~/.docker/config.json; `auth` or `username`/`password` fields,
/// not credential helpers), else none.
#[derive(Debug, clap::Args)]
pub struct PushArgs {
    /// The plugin file.
    file: PathBuf,
    /// Where to push: REGISTRY/REPOSITORY:TAG.
    reference: String,
    /// Speak plain http to this registry (HOST:PORT); repeat for more. Every other is https.
    #[arg(long = "insecure-registry", value_name = "HOST:PORT")]
    insecure_registries: Vec<String>,
    /// The registry user; the password is read from stdin (--password-stdin).
    #[arg(long, requires = "password_stdin")]
    username: Option<String>,
    /// Read the password of --username from stdin (one line).
    #[arg(long, requires = "username")]
    password_stdin: bool,
}

/// `wasmop push`: pushes the plugin and prints its reference by digest.
pub async fn push(args: PushArgs) -> anyhow::Result<()> {
    let PushArgs { file, reference, insecure_registries, username, password_stdin: _ } = args;
    let module = std::fs::read(&file).with_context(|| format!("cannot read {}", file.display()))?;
    anyhow::ensure!(module.starts_with(b"\0asm"), "{} is not a WebAssembly file", file.display());
    let most = wasmop::loader::cap::MAX_MODULE_BYTES;
    anyhow::ensure!(module.len() <= most, "{} is larger than the {most} bytes hosts pull", file.display());
    let mut credentials = Credentials::default();
    let registry = reference.parse::<oci_client::Reference>().map(|r| r.registry().to_string()).unwrap_or_default();
    if let Some(username) = username {
        let mut password = String::new();
        std::io::stdin().read_line(&mut password).context("cannot read the password from stdin")?;
        credentials.insert(&registry, username, password.trim_end_matches(['\r', '\n']).to_string());
    } else if let Some(path) = docker_config_path()
        && let Ok(text) = std::fs::read(&path)
    {
        credentials.add_docker_config(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    }
    let registries = Registries::new(insecure_registries, None);
    let digest = registries.push(&reference, module, &credentials).await.map_err(|e| anyhow::anyhow!(e))?;
    print_out(&format!("{reference}@{digest}\n"))
}

/// The docker config file `wasmop push` reads credentials from: `REGISTRY_AUTH_FILE` (as podman
/// and skopeo), else `~/.docker/config.json`.
fn docker_config_path() -> Option<PathBuf> {
    std::env::var_os("REGISTRY_AUTH_FILE")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".docker/config.json")))
}

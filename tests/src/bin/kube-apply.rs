//! `kube-apply [--check] FILE...`: server-side applies YAML files to the cluster of the current
//! kubeconfig (namespaced objects without a namespace go to `default`), waiting for CRDs to be
//! established. `--check` only tests that the cluster answers within 5 s.
//! Used by `make run` so that it needs no kubectl.

use std::time::Duration;

use anyhow::Context as _;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let client = kube::Client::try_default().await.context("no usable kubeconfig")?;
    if args.first().map(String::as_str) == Some("--check") {
        wasmop_tests::within(Duration::from_secs(5), "the API server", client.apiserver_version()).await??;
        return Ok(());
    }
    for file in &args {
        for object in wasmop_tests::apply_file(&client, std::path::Path::new(file), Some("default")).await? {
            let kind = object.types.map(|t| t.kind).unwrap_or_default();
            println!("{kind} {} applied", object.metadata.name.unwrap_or_default());
        }
    }
    Ok(())
}

//! The pinned helm that `tests/testbed/build-helm.sh` builds, run on the chart in
//! `deploy/helm/wasmop` with its state (cache, configuration, data) in a directory of its own.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use anyhow::Context as _;

use crate::workspace_root;

/// The chart's directory.
pub fn chart() -> PathBuf {
    workspace_root().join("deploy/helm/wasmop")
}

/// The helm binary: `WASMOP_TEST_HELM`, else what `build-helm.sh` prints (it builds it once into
/// the cache).
fn binary() -> anyhow::Result<&'static Path> {
    static BINARY: OnceLock<PathBuf> = OnceLock::new();
    if let Some(path) = BINARY.get() {
        return Ok(path);
    }
    let path = match std::env::var_os("WASMOP_TEST_HELM") {
        Some(path) => PathBuf::from(path),
        None => {
            let script = workspace_root().join("tests/testbed/build-helm.sh");
            let out = Command::new(&script)
                .stderr(Stdio::inherit())
                .output()
                .with_context(|| format!("running {}", script.display()))?;
            anyhow::ensure!(out.status.success(), "{} failed", script.display());
            PathBuf::from(String::from_utf8(out.stdout)?.trim())
        }
    };
    Ok(BINARY.get_or_init(|| path))
}

/// What one helm command printed.
#[derive(Debug)]
pub struct Output {
    /// Whether it exited 0.
    pub success: bool,
    /// Its standard output.
    pub stdout: String,
    /// Its standard error.
    pub stderr: String,
}

/// Runs `helm ARGS` with its cache, configuration and data in a directory of this process, so no
/// user's repositories or plugins take part.
pub fn run<I, S>(args: I) -> anyhow::Result<Output>
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    let home = std::env::temp_dir().join(format!("wasmop-helm-{}", std::process::id()));
    let mut command = Command::new(binary()?);
    command.args(args).env("HELM_CACHE_HOME", home.join("cache"));
    command.env("HELM_CONFIG_HOME", home.join("config")).env("HELM_DATA_HOME", home.join("data"));
    let out = command.output().context("running helm")?;
    Ok(Output {
        success: out.status.success(),
        stdout: String::from_utf8(out.stdout)?,
        stderr: String::from_utf8(out.stderr)?,
    })
}

/// `helm template RELEASE CHART --namespace NAMESPACE ARGS`: the documents it renders, in order.
pub fn template(release: &str, namespace: &str, args: &[&str]) -> anyhow::Result<Vec<serde_json::Value>> {
    let chart = chart();
    let mut all = vec!["template", release, chart.to_str().context("a UTF-8 path")?, "--namespace", namespace];
    all.extend_from_slice(args);
    let out = run(&all)?;
    anyhow::ensure!(out.success, "helm {}: {}", all.join(" "), out.stderr);
    let documents = serde_saphyr::from_multiple::<serde_json::Value>(&out.stdout)?;
    Ok(documents.into_iter().filter(|d| !d.is_null()).collect())
}

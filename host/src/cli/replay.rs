//! `wasmop replay`: a record of a reconcile replayed without a cluster, bit-exact or against
//! another version of the plugin.

use std::path::PathBuf;

use anyhow::Context as _;

use super::output::print_out;
use super::runtime::RuntimeArgs;

/// Replay a record `wasmop run --record DIR` wrote, without a cluster, every import the
/// plugin makes answered from the record. With the module it was made with (`--module`,
/// checked against the record's digest): prints `bit-exact` and exits 0, or names the first
/// import call (or ending) that differs and exits 1. With another version (`--plugin`):
/// prints a diff of the status, labels, desired objects and events between the recorded
/// reconcile and the new version's (`no difference` when there is none) and exits 0, or 1
/// when the new version made a call the record cannot answer. Exits 2 when the record or
/// the module cannot be loaded. A recorded webhook call (a `*.yaml` webhook fixture) is
/// answered again by either module: its answer is printed, with what differs from the
/// recorded one (exit 1) or `ok`.
#[derive(Debug, clap::Args)]
pub struct ReplayArgs {
    /// The record file.
    record: PathBuf,
    /// The module the record was made with (its digest is checked).
    #[arg(long, value_name = "FILE.wasm", required_unless_present = "plugin")]
    module: Option<PathBuf>,
    /// Another version of the plugin, to compare with the record.
    #[arg(long, value_name = "FILE.wasm", conflicts_with = "module")]
    plugin: Option<PathBuf>,
    #[command(flatten)]
    runtime: RuntimeArgs,
}

/// `wasmop replay`: the exit code (0 bit-exact or compared, 1 diverged, 2 nothing could be
/// replayed).
pub async fn replay(args: ReplayArgs) -> i32 {
    let ReplayArgs { record, module, plugin, runtime } = &args;
    let (record, module, plugin) = (record.as_path(), module.as_deref(), plugin.as_deref());
    if let Some(text) = std::fs::read_to_string(record).ok().filter(|text| wasmop::webhook::fixture::is_fixture(text)) {
        return review(record, &text, plugin.or(module), runtime).await;
    }
    let loaded = (|| -> anyhow::Result<_> {
        let bytes = std::fs::read(record).with_context(|| format!("cannot read {}", record.display()))?;
        let record = wasmop_core::record::Record::from_slice(&bytes)
            .map_err(|e| anyhow::anyhow!("{}: {e}", record.display()))?;
        // The record lives as long as this process, which replays it once.
        let record: &'static wasmop_core::record::Record = Box::leak(Box::new(record));
        let path = plugin.or(module).context("give the recorded module with --module, or another with --plugin")?;
        let wasm = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
        if plugin.is_none() {
            wasmop::replay::check_digest(record, &wasm).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        }
        let module = runtime.runtime(None)?.load_bytes(path, &wasm)?;
        Ok((record, module))
    })();
    let (record, module) = match loaded {
        Ok(loaded) => loaded,
        Err(e) => {
            eprintln!("error: {e:#}");
            return 2;
        }
    };
    if plugin.is_none() {
        return match wasmop::replay::exact(&module, record).await {
            Ok(()) => i32::from(print_out("bit-exact\n").is_err()),
            Err(divergence) => {
                eprintln!("{divergence}");
                1
            }
        };
    }
    let against = wasmop::replay::against(&module, record).await;
    // An empty diff says "no differences: ...".
    if print_out(&against.diff.to_string()).is_err() {
        return 2;
    }
    match against.unanswered {
        None => 0,
        Some(error) => {
            eprintln!("the new version made a call the record cannot answer (it saw an error instead): {error}");
            1
        }
    }
}

/// Replays the recorded webhook call `text` (from `file`) with the module at `path`: as `wasmop
/// test` answers a webhook fixture.
async fn review(file: &std::path::Path, text: &str, path: Option<&std::path::Path>, runtime: &RuntimeArgs) -> i32 {
    let loaded = (|| -> anyhow::Result<_> {
        let path = path.context("give the module with --module or --plugin")?;
        Ok(runtime.runtime(None)?.load(path)?)
    })();
    let module = match loaded {
        Ok(module) => module,
        Err(e) => {
            eprintln!("error: {e:#}");
            return 2;
        }
    };
    let name = file.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    let text = text.to_string();
    let answered = tokio::task::spawn_blocking(move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())?;
        wasmop::harness::reviews::answer(&module, &runtime, &name, &text)
    })
    .await
    .unwrap_or_else(|e| Err(e.to_string()));
    let answered = match answered {
        Ok(answered) => answered,
        Err(e) => {
            eprintln!("error: {}: {e}", file.display());
            return 2;
        }
    };
    let shown = serde_saphyr::to_string(&answered.shown()).unwrap_or_else(|e| format!("# not printable: {e}\n"));
    if print_out(&shown).is_err() {
        return 2;
    }
    i32::from(!answered.failures.is_empty())
}

//! The flags of the commands that load plugins: the sandbox's limits and the compiled-plugin
//! cache.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use wasmop::metrics::Metrics;
use wasmop::runtime::dev::DevSource;
use wasmop::runtime::{Limits, MemoryMib, Runtime, RuntimeConfig};

/// How plugins are compiled and run.
#[derive(Debug, clap::Args)]
pub struct RuntimeArgs {
    /// Running-time limit of one call into a plugin, e.g. 5s or 500ms: the time its code runs,
    /// not the time it waits for a thread; by the wall clock a call may take 10x this.
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
    deadline: Duration,
    /// Memory limit of one plugin instance, in MiB (1 to 4096).
    #[arg(long, default_value = "64", value_name = "MIB")]
    memory_limit_mib: MemoryMib,
    /// Fuel budget of one call (instructions, roughly); unset runs plugins unmetered, which is
    /// faster. A plugin's own `limits.fuel` override beats it.
    #[arg(long)]
    fuel: Option<u64>,
    /// Directory for compiled plugins (default: `$WASMOP_CACHE/modules` when WASMOP_CACHE is
    /// set, else `modules` in the user cache directory, e.g. ~/.cache/wasmop/modules).
    #[arg(long, env = "WASMOP_CACHE_DIR")]
    cache_dir: Option<PathBuf>,
    /// Compile plugins every time instead of using the on-disk cache.
    #[arg(long)]
    no_cache: bool,
}

impl RuntimeArgs {
    /// The directory of compiled plugins, unless `--no-cache`.
    fn cache_dir(&self) -> Option<PathBuf> {
        if self.no_cache {
            return None;
        }
        self.cache_dir
            .clone()
            .or_else(|| std::env::var_os("WASMOP_CACHE").map(|dir| PathBuf::from(dir).join("modules")))
            .or_else(|| {
                directories::ProjectDirs::from("dev", "wasmop", "wasmop").map(|d| d.cache_dir().join("modules"))
            })
    }

    /// Where modules pulled from OCI registries are stored by digest: `oci/` in the cache
    /// directory (none with `--no-cache`: every new digest is pulled again).
    pub fn oci_store(&self) -> Option<PathBuf> {
        self.cache_dir().map(|dir| dir.join("oci"))
    }

    /// The plugin runtime these flags configure, reporting its calls to `observer`.
    pub fn runtime(&self, observer: Option<Arc<Metrics>>) -> anyhow::Result<Runtime> {
        self.runtime_with_source(observer, None)
    }

    /// Like [`RuntimeArgs::runtime`], giving every plugin instance `dev_source`'s directory.
    pub fn runtime_with_source(
        &self,
        observer: Option<Arc<Metrics>>,
        dev_source: Option<DevSource>,
    ) -> anyhow::Result<Runtime> {
        let cache_dir = self.cache_dir();
        let limits = Limits { deadline: self.deadline, memory_bytes: self.memory_limit_mib.bytes(), fuel: self.fuel };
        let observer = observer.map(|m| m as Arc<dyn wasmop::runtime::CallObserver>);
        Ok(Runtime::new(RuntimeConfig { cache_dir, limits, observer, dev_source })?)
    }
}

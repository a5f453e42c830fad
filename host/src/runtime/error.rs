//! Errors of loading a plugin and of calling into one.

use std::path::PathBuf;
use std::time::Duration;

use super::limits::MemoryLimitExceeded;

/// Why a file could not become a running plugin.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The wasm engine could not be set up.
    #[error("cannot set up the wasm engine: {0}")]
    EngineSetupFailed(String),
    /// The file could not be read.
    #[error("cannot read plugin {}: {source}", path.display())]
    ReadFailed {
        /// The plugin file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The bytes are not a valid WebAssembly component.
    #[error("{} is not a valid WebAssembly component: {reason}", path.display())]
    CompileFailed {
        /// The plugin file.
        path: PathBuf,
        /// The compiler's message.
        reason: String,
    },
    /// The component does not export the reconciler interface.
    #[error("{} is not a wasmop plugin: it does not export wasmop:plugin/reconciler", path.display())]
    NotAPlugin {
        /// The plugin file.
        path: PathBuf,
    },
    /// The component was built against a contract version this host does not support.
    #[error("{} was built against contract wasmop:plugin@{found}, but this host supports wasmop:plugin@{supported}", path.display())]
    ContractMismatch {
        /// The plugin file.
        path: PathBuf,
        /// The version the plugin exports.
        found: String,
        /// The version the host implements.
        supported: &'static str,
    },
    /// An interface the component exports (the reconciler, the admission interface) lacks a
    /// function of the contract, or one has another type.
    #[error("{} does not implement {interface}: {reason}", path.display())]
    ExportMismatch {
        /// The plugin file.
        path: PathBuf,
        /// The interface, with its version.
        interface: String,
        /// Which function is missing or differs, and how.
        reason: String,
    },
    /// The component imports something the host does not provide.
    #[error("{} cannot be linked: {reason}", path.display())]
    LinkFailed {
        /// The plugin file.
        path: PathBuf,
        /// The linker's message.
        reason: String,
    },
    /// `describe()` trapped.
    #[error("{}: describe() failed: {source}", path.display())]
    DescribeFailed {
        /// The plugin file.
        path: PathBuf,
        /// What went wrong in the call.
        #[source]
        source: CallError,
    },
    /// The component imports `wasi:http` but `describe()` declares no `http` grant.
    #[error(
        "{}: the plugin imports wasi:http but declares no http grant; declare the origins it calls \
         (Config::http) or drop its outgoing HTTP", path.display()
    )]
    HttpNotGranted {
        /// The plugin file.
        path: PathBuf,
    },
    /// `describe()` declares webhooks, but the component does not export the admission
    /// interface their calls need.
    #[error(
        "{}: plugin {plugin:?} declares webhooks but does not export {}@{}: implement the functions its \
         webhooks call (validate, default, convert) and export them (the operator world), or declare no \
         webhooks",
        path.display(), super::bindings::ADMISSION_INTERFACE, super::bindings::CONTRACT_VERSION
    )]
    AdmissionNotExported {
        /// The plugin file.
        path: PathBuf,
        /// The plugin's name.
        plugin: String,
    },
    /// `describe()` returned an unusable configuration.
    #[error("{}: invalid plugin configuration: {reason}", path.display())]
    InvalidConfig {
        /// The plugin file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
}

impl LoadError {
    pub(crate) fn engine(err: wasmtime::Error) -> Self {
        Self::EngineSetupFailed(format!("{err:#}"))
    }
}

/// Why a call into a plugin did not return a value. These are traps or setup failures, never
/// errors the plugin returned on purpose.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// The call ran past its deadline and was interrupted.
    #[error("deadline of {0:?} exceeded; the call was interrupted")]
    DeadlineExceeded(Duration),
    /// The call took longer than its wall-clock backstop ([`super::Limits::wall_clock`]),
    /// waiting included (on a host import, for a thread), and was cancelled.
    #[error("deadline of {0:?} exceeded by the wall clock (waiting included); the call was cancelled")]
    WallClockExceeded(Duration),
    /// The plugin tried to grow its memory past the cap.
    #[error(transparent)]
    MemoryLimitExceeded(#[from] MemoryLimitExceeded),
    /// The call used up its fuel budget and was stopped.
    #[error("fuel budget of {0} exhausted; the call was stopped")]
    FuelExhausted(u64),
    /// The plugin panicked.
    #[error("plugin panicked: {0}")]
    Panicked(String),
    /// Any other trap.
    #[error("plugin trapped: {0}")]
    Trapped(String),
    /// A fresh instance could not be created.
    #[error("cannot instantiate plugin: {0}")]
    InstantiateFailed(String),
    /// The plugin does not export the function called (an admission function of a plugin that
    /// declares no webhooks).
    #[error("{0}")]
    NotExported(String),
}

impl CallError {
    /// A short CamelCase name of the kind of failure, for Event reasons and metric labels:
    /// a deadline, a memory-limit hit, fuel, a panic and any other trap stay apart.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::DeadlineExceeded(_) => "DeadlineExceeded",
            Self::WallClockExceeded(_) => "WallClockExceeded",
            Self::MemoryLimitExceeded(_) => "MemoryLimitExceeded",
            Self::FuelExhausted(_) => "FuelExhausted",
            Self::Panicked(_) => "PluginPanicked",
            Self::Trapped(_) => "PluginTrapped",
            Self::InstantiateFailed(_) => "InstantiateFailed",
            Self::NotExported(_) => "NotExported",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_of_call_failure_has_its_own_reason() {
        let errors = [
            CallError::DeadlineExceeded(Duration::from_millis(300)),
            CallError::WallClockExceeded(Duration::from_secs(3)),
            CallError::FuelExhausted(10),
            CallError::Panicked("p".into()),
            CallError::Trapped("t".into()),
            CallError::InstantiateFailed("i".into()),
            CallError::NotExported("n".into()),
        ];
        let reasons: std::collections::HashSet<_> = errors.iter().map(CallError::reason).collect();
        assert_eq!(reasons.len(), errors.len());
        assert!(reasons.contains("DeadlineExceeded") && reasons.contains("PluginPanicked"));
    }
}

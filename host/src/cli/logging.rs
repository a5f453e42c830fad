//! The host's log: to stderr, as text or JSON lines, at the verbosity `RUST_LOG` says.

use clap::ValueEnum;

/// How log lines are written.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// Whether log lines carry colour codes: only on a terminal, and not when `NO_COLOR` is set to
/// anything but the empty string (https://no-color.org).
fn colours(terminal: bool, no_color: Option<&std::ffi::OsStr>) -> bool {
    terminal && no_color.is_none_or(|v| v.is_empty())
}

/// Logs to stderr in `format`, filtered by `RUST_LOG`.
pub fn init_tracing(format: LogFormat) {
    use std::io::IsTerminal as _;
    let given = std::env::var(tracing_subscriber::EnvFilter::DEFAULT_ENV).ok();
    let filter = tracing_subscriber::EnvFilter::try_new(wasmop::api_error::log_filter(given.as_deref()))
        .unwrap_or_else(|_| wasmop::api_error::log_filter(None).into());
    let ansi = colours(std::io::stderr().is_terminal(), std::env::var_os("NO_COLOR").as_deref());
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(ansi);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colours_only_on_a_terminal_without_no_color() {
        assert!(colours(true, None));
        assert!(colours(true, Some("".as_ref())), "an empty NO_COLOR is unset");
        assert!(!colours(true, Some("1".as_ref())));
        assert!(!colours(false, None));
    }
}

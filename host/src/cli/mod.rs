//! The `wasmop` command line: one module per command, each with its arguments beside its body.

pub mod crd;
pub mod inspect;
pub mod logging;
pub mod new;
pub mod output;
pub mod push;
pub mod replay;
pub mod run;
pub mod runtime;
pub mod test;
pub mod version;

use clap::{Parser, Subcommand};

use crd::CrdArgs;
use inspect::InspectArgs;
use logging::LogFormat;
use new::NewArgs;
use push::PushArgs;
use replay::ReplayArgs;
use run::RunArgs;
use test::TestArgs;
use version::VersionArgs;

/// Runs Kubernetes controllers as sandboxed WebAssembly plugins.
#[derive(Debug, Parser)]
#[command(version = version::VERSION, about, long_about = None)]
pub struct Cli {
    /// Log format.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text, env = "WASMOP_LOG_FORMAT")]
    pub log_format: LogFormat,
    #[command(subcommand)]
    pub command: Command,
}

/// The commands, each in its module.
#[derive(Debug, Subcommand)]
pub enum Command {
    Run(Box<RunArgs>),
    Crd(CrdArgs),
    New(NewArgs),
    Test(TestArgs),
    Replay(ReplayArgs),
    Inspect(InspectArgs),
    Push(PushArgs),
    Version(VersionArgs),
}

/// Runs `command` on the process's runtime; `wasmop test` runs before it starts. The commands
/// that end with an exit code of their own exit here.
pub async fn serve(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Inspect(args) => inspect::inspect(args).await,
        Command::New(args) => new::new(args),
        Command::Crd(args) => crd::crd(args).await,
        Command::Run(args) => run::run(*args).await,
        Command::Replay(args) => std::process::exit(replay::replay(args).await),
        Command::Test(_) => unreachable!("`wasmop test` runs before the runtime starts"),
        Command::Push(args) => push::push(args).await,
        Command::Version(args) => version::version(args),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_is_well_formed() {
        use clap::CommandFactory as _;
        Cli::command().debug_assert();
    }
}

//! The `wasmop` command line: `run` plugins against a cluster, `inspect` a plugin, `test` one
//! against fixtures without a cluster (the commands are in [`cli`]).

mod allocator;
mod cli;

use clap::Parser as _;

use cli::{Cli, Command};

/// Blocking threads: file reads of the loaders, compiling plugins, DNS. Calls into plugins run
/// on the runtime's own threads (tokio's default allows 512 blocking threads, each with its
/// own stack and malloc arena).
const BLOCKING_THREADS: usize = 4;

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    cli::logging::init_tracing(cli.log_format);
    if let Command::Test(args) = &cli.command {
        // The harness calls the plugin on a runtime of its own, blocking this thread.
        std::process::exit(cli::test::test(args));
    }
    let workers = match &cli.command {
        Command::Run(args) => args.worker_threads(),
        _ => 1,
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .max_blocking_threads(BLOCKING_THREADS)
        .build()?;
    runtime.block_on(cli::serve(cli.command))
}

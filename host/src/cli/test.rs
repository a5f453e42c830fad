//! `wasmop test`: a plugin through the host's rules against fixtures, without a cluster.

use std::path::PathBuf;

use super::output::print_out;
use super::runtime::RuntimeArgs;

/// Run a plugin through the host's rules without a cluster: each fixture's primary and
/// objects (a file, or a directory of *.yaml; the conformance scenarios' format) reconciled
/// until nothing changes, printing the writes, events and requeues the host would make, then
/// `ok` or `FAILED` with the unmet expectations. A fixture may be a record `wasmop run
/// --record` wrote (*.json): `ok` when the plugin ends as the recorded reconcile did (as
/// `wasmop replay --plugin` compares), else `FAILED` with the diff. Exits 1 when a fixture
/// fails, 2 when the plugin or a fixture cannot be loaded. `--output json` prints one JSON list
/// of the fixtures instead, each with the store as its loop left it (`end`: the primary, every
/// object and the external system's objects): what the Python and TypeScript SDKs'
/// `FakeHost.run_until_stable` read.
#[derive(Debug, clap::Args)]
pub struct TestArgs {
    /// The plugin file.
    plugin: PathBuf,
    /// Fixture files and records, or directories of them.
    #[arg(required = true, value_name = "FIXTURES")]
    fixtures: Vec<PathBuf>,
    /// The namespace of the fixtures' primaries and objects (`$NS` in a fixture).
    #[arg(long, short, default_value = "default")]
    namespace: String,
    /// A second namespace (`$OTHER` in a fixture).
    #[arg(long, default_value = "other")]
    other_namespace: String,
    /// Output format: YAML documents for a person, or one JSON list with the stores at the end.
    #[arg(long, short, value_enum, default_value_t = Output::Yaml)]
    output: Output,
    #[command(flatten)]
    runtime: RuntimeArgs,
}

/// How `wasmop test` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Output {
    /// A YAML document per fixture, then a summary line.
    Yaml,
    /// One JSON list: every fixture with the store as its loop left it.
    Json,
}

/// `wasmop test`: the exit code (0 every fixture held, 1 one failed, 2 nothing could be run).
pub fn test(args: &TestArgs) -> i32 {
    let TestArgs { plugin, fixtures, namespace, other_namespace: other, output, runtime } = args;
    let module = match runtime
        .runtime(None)
        .map_err(|e| format!("{e:#}"))
        .and_then(|r| r.load(plugin).map_err(|e| format!("{e:#}")))
    {
        Ok(module) => module,
        Err(e) => {
            // One line: a parser's message may spread its detail over several.
            eprintln!("error: {}", e.split_whitespace().collect::<Vec<_>>().join(" "));
            return 2;
        }
    };
    let ran = wasmop::harness::fixture_files(fixtures)
        .and_then(|files| wasmop::harness::run(&module, &files, namespace, other));
    let ran = match ran {
        Ok(ran) => ran,
        Err(e) => {
            eprintln!("error: {e}");
            return 2;
        }
    };
    let failed: Vec<&str> = ran.iter().filter(|f| !f.held()).map(|f| f.name()).collect();
    let code = if failed.is_empty() { 0 } else { 1 };
    if *output == Output::Json {
        let shown: Vec<_> = ran.iter().map(wasmop::harness::Ran::shown_with_end).collect();
        let printed = serde_json::to_string(&shown).map_err(anyhow::Error::from).and_then(|text| print_out(&text));
        return if printed.is_ok() { code } else { 2 };
    }
    for fixture in &ran {
        let text = serde_saphyr::to_string(&fixture.shown()).unwrap_or_else(|e| format!("# not printable: {e}\n"));
        if print_out(&format!("---\n{text}")).is_err() {
            return 2;
        }
    }
    let summary = match failed.as_slice() {
        [] => format!("# {} fixtures, all held\n", ran.len()),
        names => format!("# {} fixtures, {} FAILED: {}\n", ran.len(), names.len(), names.join(", ")),
    };
    if print_out(&summary).is_err() {
        return 2;
    }
    code
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use super::*;
    use crate::cli::{Cli, Command};

    #[test]
    fn test_takes_a_plugin_and_fixtures() {
        let cli = Cli::try_parse_from(["wasmop", "test", "p.wasm", "a.yaml", "dir", "-n", "ns"]).unwrap();
        let Command::Test(args) = cli.command else { panic!("test") };
        let TestArgs { plugin, fixtures, namespace, other_namespace, output, .. } = args;
        assert_eq!((plugin, fixtures), (PathBuf::from("p.wasm"), vec![PathBuf::from("a.yaml"), PathBuf::from("dir")]));
        assert_eq!((namespace.as_str(), other_namespace.as_str()), ("ns", "other"));
        assert_eq!(output, Output::Yaml);
        assert!(Cli::try_parse_from(["wasmop", "test", "p.wasm"]).is_err(), "fixtures are required");
        let cli = Cli::try_parse_from(["wasmop", "test", "p.wasm", "a.yaml", "-o", "json"]).unwrap();
        let Command::Test(args) = cli.command else { panic!("test") };
        assert_eq!(args.output, Output::Json);
    }
}

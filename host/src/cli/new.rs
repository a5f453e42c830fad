//! `wasmop new`: a plugin scaffold that builds and passes its tests as generated.

use std::path::PathBuf;

use anyhow::Context as _;
use wasmop::scaffold::Lang;

use super::output::print_out;

/// Scaffold a plugin: in Rust (default) a crate, Cargo.toml and src/lib.rs (a reconciler, a
/// validating webhook beside it, and their unit tests); in Python app.py and test_app.py; in
/// TypeScript plugin.ts and its test; each with the CRD, an example object and how to build it.
/// It builds and passes its tests as generated.
#[derive(Debug, clap::Args)]
pub struct NewArgs {
    /// The plugin's name, also its crate's and directory's, e.g. hello-op.
    name: String,
    /// The primary's API group, e.g. demo.example.com.
    #[arg(long)]
    group: String,
    /// The primary's kind, e.g. Hello.
    #[arg(long)]
    kind: String,
    /// Where to create the crate's directory.
    #[arg(long, default_value = ".")]
    dir: PathBuf,
    /// The SDK to depend on by path (guest-sdk, guest-sdk/python or guest-sdk/js); default:
    /// the one this binary was built from, if it is still there, else the published package.
    #[arg(long, value_name = "DIR")]
    sdk: Option<PathBuf>,
    /// The plugin's language.
    #[arg(long, value_enum, default_value_t = Lang::Rust)]
    lang: Lang,
}

/// `wasmop new`: writes the scaffold into a new directory `DIR/NAME`.
pub fn new(args: NewArgs) -> anyhow::Result<()> {
    let NewArgs { name, group, kind, dir, sdk, lang } = args;
    let sdk = sdk.or_else(|| wasmop::scaffold::local_sdk(lang));
    let files = wasmop::scaffold::Scaffold { name: name.clone(), group, kind, sdk, lang }.files()?;
    let root = dir.join(&name);
    anyhow::ensure!(!root.exists(), "{} exists already", root.display());
    for (path, text) in files {
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().expect("files are in the crate"))?;
        std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))?;
    }
    print_out(&format!("created {}: {}\n", root.display(), lang.next_steps()))
}

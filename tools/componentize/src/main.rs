//! `wasmop-componentize WIT_DIR CORE.wasm OUT.wasm`: wraps a core WebAssembly module built for
//! WASI preview 1 as a reactor (Go's `GOOS=wasip1 -buildmode=c-shared`) into a component of the
//! plugin contract's `operator` world (the package in `WIT_DIR`, the repository's `wit/`, with the
//! WASI packages it refers to in `WIT_DIR/deps`), with WASI preview 1 calls adapted to WASI 0.2.
//!
//! The module exports the world's functions under their canonical ABI names
//! (`wasmop:plugin/reconciler@0.8.1#reconcile`, their `cabi_post_` functions and
//! `cabi_realloc`) and imports the host's functions under the interface's name.

use std::path::PathBuf;
use std::process::ExitCode;

use wasi_preview1_component_adapter_provider::WASI_SNAPSHOT_PREVIEW1_REACTOR_ADAPTER;
use wit_component::{ComponentEncoder, StringEncoding, embed_component_metadata};
use wit_parser::Resolve;

/// Why a module could not be made a component.
#[derive(Debug, thiserror::Error)]
enum Error {
    /// The arguments are not `WIT_DIR CORE.wasm OUT.wasm`.
    #[error("usage: wasmop-componentize WIT_DIR CORE.wasm OUT.wasm")]
    Usage,
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        source: std::io::Error,
    },
    /// The WIT package, the world, the module or the encoding was refused.
    #[error("{0}")]
    Component(String),
}

fn component(err: impl std::fmt::Display) -> Error {
    Error::Component(format!("{err:#}"))
}

fn run(args: &[String]) -> Result<(), Error> {
    let [wit, core, out] = args else {
        return Err(Error::Usage);
    };
    let mut resolve = Resolve::default();
    let (package, _) = resolve.push_path(wit).map_err(component)?;
    let world = resolve.select_world(&[package], Some("operator")).map_err(component)?;
    let mut module = std::fs::read(core).map_err(|source| Error::Io { path: core.into(), source })?;
    embed_component_metadata(&mut module, &resolve, world, StringEncoding::UTF8, false).map_err(component)?;
    let bytes = ComponentEncoder::default()
        .validate(true)
        .module(&module)
        .map_err(component)?
        .adapter("wasi_snapshot_preview1", WASI_SNAPSHOT_PREVIEW1_REACTOR_ADAPTER)
        .map_err(component)?
        .encode()
        .map_err(component)?;
    let tmp = format!("{out}.tmp");
    std::fs::write(&tmp, bytes).map_err(|source| Error::Io { path: tmp.clone().into(), source })?;
    std::fs::rename(&tmp, out).map_err(|source| Error::Io { path: out.into(), source })
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("wasmop-componentize: {err}");
            ExitCode::FAILURE
        }
    }
}

//! Links the release `wasmop` binary with the functions a host runs placed together, in the
//! order of `layout/<target>.order` (a symbol ordering file, written by `make layout` from a
//! profile of hosts at work). Scattered among the functions a host never runs, its code would
//! touch pages across most of the binary's text, and each page touched is resident in every
//! replica. Only the linker's placement changes, not the code.
//!
//! It applies where the linker is rust-lld, rustc's default on `x86_64-unknown-linux-gnu`.
//! Set `WASMOP_LAYOUT=off` to link in the compiler's order, e.g. with a linker of your own.
//! The image's `x86_64-unknown-linux-musl` build has no layout: its symbols are named
//! otherwise, and `make layout` profiles the gnu build only.

use std::env;
use std::path::PathBuf;

fn main() {
    println!("cargo::rerun-if-env-changed=WASMOP_LAYOUT");
    let target = env::var("TARGET").unwrap_or_default();
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap_or_default());
    let order = manifest.join("layout").join(format!("{target}.order"));
    // Watched only where it exists: a path that does not would rerun this script, and rebuild
    // the crate, on every build.
    let exists = order.exists();
    if exists {
        println!("cargo::rerun-if-changed={}", order.display());
    }
    // PROFILE is `release` for `--release` and for profiles that inherit it.
    let release = env::var("PROFILE").is_ok_and(|p| p == "release");
    let off = env::var("WASMOP_LAYOUT").is_ok_and(|v| v == "off");
    if !release || off || target != "x86_64-unknown-linux-gnu" || !exists {
        return;
    }
    println!("cargo::rustc-link-arg-bin=wasmop=-Wl,--symbol-ordering-file={}", order.display());
    // Names the file has that this build does not define (another version of a dependency,
    // or a function inlined here) are skipped without a warning.
    println!("cargo::rustc-link-arg-bin=wasmop=-Wl,--no-warn-symbol-ordering");
}

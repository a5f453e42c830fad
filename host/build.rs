//! Links the release `wasmop` binary with the functions a host runs placed together, in the
//! order of `layout/<target>.order` (a symbol ordering file, written by `make layout` from a
//! profile of hosts at work). Scattered among the functions a host never runs, its code would
//! touch pages across most of the binary's text, and each page touched is resident in every
//! replica. Only the linker's placement changes, not the code.
//!
//! The linker must be lld: rust-lld is rustc's default on `x86_64-unknown-linux-gnu`; on
//! `x86_64-unknown-linux-musl` (the image) rustc links with the C compiler, which is pointed at
//! the toolchain's own lld (its `gcc-ld` directory). Each target's file names the functions as
//! its profile names them: `x86_64-unknown-linux-gnu.order` the `release` profile's,
//! `x86_64-unknown-linux-musl.order` the `image` profile's.
//!
//! The image's binary also packs its relocations (`-z pack-relative-relocs`, `DT_RELR`): as a
//! static PIE it relocates itself at start, and read 1.6 MiB of `.rela.dyn` to do so, resident
//! in every replica; packed, they take 19 KB. Its libc is linked in (Rust's musl reads
//! `DT_RELR`); the gnu build is not packed, since a glibc before 2.36 could not load it.
//!
//! Set `WASMOP_LAYOUT=off` to link as rustc does by default (the compiler's order, the default
//! linker, relocations unpacked), e.g. with a linker of your own.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

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
    // PROFILE is `release` for `--release` and for profiles that inherit it (`image`).
    let release = env::var("PROFILE").is_ok_and(|p| p == "release");
    let off = env::var("WASMOP_LAYOUT").is_ok_and(|v| v == "off");
    if !release || off || !exists {
        return;
    }
    match target.as_str() {
        "x86_64-unknown-linux-gnu" => {}
        "x86_64-unknown-linux-musl" => match gcc_ld() {
            Some(dir) => {
                link_arg("-fuse-ld=lld");
                link_arg(&format!("-B{}", dir.display()));
                link_arg("-Wl,-z,pack-relative-relocs");
            }
            None => {
                println!("cargo::warning=no lld in the toolchain (its gcc-ld directory): linked without the layout");
                return;
            }
        },
        _ => return,
    }
    link_arg(&format!("-Wl,--symbol-ordering-file={}", order.display()));
    // Names the file has that this build does not define (another version of a dependency,
    // or a function inlined here) are skipped without a warning.
    link_arg("-Wl,--no-warn-symbol-ordering");
}

/// An argument to the link of the `wasmop` binary.
fn link_arg(arg: &str) {
    println!("cargo::rustc-link-arg-bin=wasmop={arg}");
}

/// The toolchain's directory of lld for a C compiler's `-fuse-ld=lld`
/// (`<sysroot>/lib/rustlib/<host>/bin/gcc-ld`), where it has one.
fn gcc_ld() -> Option<PathBuf> {
    let rustc = env::var("RUSTC").ok()?;
    let host = env::var("HOST").ok()?;
    let out = Command::new(rustc).args(["--print", "sysroot"]).output().ok()?;
    let sysroot = String::from_utf8(out.stdout).ok()?;
    let dir = Path::new(sysroot.trim()).join("lib/rustlib").join(host).join("bin/gcc-ld");
    dir.join("ld.lld").exists().then_some(dir)
}

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
//! `x86_64-unknown-linux-musl.order` the `image` profile's. Our crates compile as one codegen
//! unit each there (`Cargo.toml`), so an edit of them keeps their functions' names; the
//! dependencies' promoted functions (`.llvm.N`) are named by a hash that covers where their
//! sources lie under `$CARGO_HOME`, and are found only under the `CARGO_HOME` the order was
//! written with.
//!
//! The binary also packs its relocations (`-z pack-relative-relocs`, `DT_RELR`): as a PIE it is
//! relocated at start, which reads all of `.rela.dyn` (1.6 MiB), resident in every replica;
//! packed, they take 19 KB. The image (release) is packed, its libc linked in (Rust's musl reads
//! `DT_RELR`). Every gnu build for this machine (dev builds too, so the tests run a packed host)
//! is packed where this machine's glibc is 2.36 or later, the first to load `DT_RELR`: such a
//! binary needs that glibc (lld marks it `GLIBC_ABI_DT_RELR`, so an older one refuses it by
//! name), as it already needs the glibc it was linked against for its symbols.
//!
//! It also names what the build is made of, for `wasmop version` (and `--version`):
//! `WASMOP_VERSION`, the crate's version with the git revision the build was given in
//! `GIT_REVISION` (`deploy/image/build.sh` sets it; without it, or without git, there is none),
//! and `WASMOP_WASMTIME_VERSION`, the wasmtime version `Cargo.lock` resolved.
//!
//! Set `WASMOP_LAYOUT=off` to link as rustc does by default (the compiler's order, the default
//! linker, relocations unpacked), e.g. with a linker of your own. Set `WASMOP_LINK_MAP=<file>`
//! to have the linker write its map there: every function's address, even in the stripped
//! image, which is where `make layout` finds the image's functions for its tracer.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    versions();
    println!("cargo::rerun-if-env-changed=WASMOP_LAYOUT");
    println!("cargo::rerun-if-env-changed=WASMOP_LINK_MAP");
    if let Ok(map) = env::var("WASMOP_LINK_MAP") {
        link_arg(&format!("-Wl,-Map={map}"));
        // The names as the symbol ordering file needs them, not demangled.
        link_arg("-Wl,--no-demangle");
    }
    if env::var("WASMOP_LAYOUT").is_ok_and(|v| v == "off") {
        return;
    }
    let target = env::var("TARGET").unwrap_or_default();
    // Every gnu build for this machine, the tests' too, so that they run the host as packed.
    let gnu = target == "x86_64-unknown-linux-gnu";
    if gnu && env::var("HOST").is_ok_and(|host| host == target) && glibc().is_some_and(|v| v >= (2, 36)) {
        link_arg("-Wl,-z,pack-relative-relocs");
    }
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
    if !release || !exists {
        return;
    }
    match target.as_str() {
        _ if gnu => {}
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

/// Sets `WASMOP_VERSION` and `WASMOP_WASMTIME_VERSION` for the crate's code.
fn versions() {
    println!("cargo::rerun-if-env-changed=GIT_REVISION");
    let version = env::var("CARGO_PKG_VERSION").unwrap_or_default();
    let version = match env::var("GIT_REVISION") {
        Ok(revision) if !revision.trim().is_empty() => format!("{version} (revision {})", revision.trim()),
        _ => version,
    };
    println!("cargo::rustc-env=WASMOP_VERSION={version}");
    let wasmtime = lock_file().and_then(|lock| {
        println!("cargo::rerun-if-changed={}", lock.display());
        locked_version(&std::fs::read_to_string(lock).ok()?, "wasmtime")
    });
    let wasmtime = wasmtime.unwrap_or_else(|| {
        println!("cargo::warning=no Cargo.lock names wasmtime: `wasmop version` says `unknown`");
        "unknown".to_string()
    });
    println!("cargo::rustc-env=WASMOP_WASMTIME_VERSION={wasmtime}");
}

/// The `Cargo.lock` of the build: the workspace's, in the crate's directory or above it.
fn lock_file() -> Option<PathBuf> {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").ok()?);
    manifest.ancestors().map(|dir| dir.join("Cargo.lock")).find(|lock| lock.exists())
}

/// The version of the package `name` in the text of a `Cargo.lock` (its first, were there several).
fn locked_version(lock: &str, name: &str) -> Option<String> {
    let entry = format!("name = \"{name}\"");
    let mut lines = lock.lines();
    lines.find(|line| *line == entry)?;
    Some(lines.next()?.strip_prefix("version = \"")?.strip_suffix('"')?.to_string())
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

/// The version of this machine's glibc (`getconf GNU_LIBC_VERSION`, e.g. `glibc 2.36`), which a
/// binary built here for this machine's target links against: `(major, minor)`; `None` without
/// glibc.
fn glibc() -> Option<(u32, u32)> {
    let out = Command::new("getconf").arg("GNU_LIBC_VERSION").output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    let mut parts = text.trim().strip_prefix("glibc ")?.split('.');
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

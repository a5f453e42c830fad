#!/usr/bin/env bash
# `make layout`: writes host/layout/<target>.order, the order in which the linker places the
# release host's functions (host/build.rs), from a profile of hosts at work:
#   1. builds the host with `-Cprofile-generate` (in target/layout; RUSTFLAGS do not change
#      symbol names, so a plain `cargo build --release -p wasmop` names its functions alike);
#   2. runs the bench's parts burst, finalizer and scale (10,000 objects) with
#      the wasmop side only, its hosts shut down with SIGTERM so that each writes its profile;
#   3. merges the profiles (the toolchain's llvm-profdata, rustup component `llvm-tools`) and
#      writes the functions that ran, hottest first, as the plain release build names them.
# Uses WASMOP_TEST_KUBECONFIG when set, else the bench starts a local control plane. Run it
# again after a change of dependencies: their symbols' names change, and the linker skips the
# names it does not find. x86_64-unknown-linux-gnu only (the image's musl build names its
# symbols otherwise; see host/build.rs).
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$HOME/.cargo/bin:$PATH"
log() { echo "layout: $*" >&2; }

dir=target/layout
raw="$PWD/$dir/raw"
rm -rf "$raw"
mkdir -p "$raw"
timeout 300 rustup component add llvm-tools >&2
sysroot=$(rustc --print sysroot)
host=$(rustc -vV | sed -n 's/^host: //p')
profdata="$sysroot/lib/rustlib/$host/bin/llvm-profdata"

# The host alone, as `make build` and `make bench` build it: built together with the tests,
# its dependencies' features would differ, and so would its symbols.
log "building the instrumented host in $dir, and the bench"
CARGO_TARGET_DIR=$dir RUSTFLAGS="-Cprofile-generate=$raw" cargo build --locked --release -p wasmop >&2
cargo build --locked --release -p wasmop >&2
cargo build --locked --release -p wasmop-tests --bin wasmop-bench >&2
cp target/release/wasmop-bench "$dir/release/wasmop-bench"
# The build scripts compiled with the instrumentation wrote profiles of their own.
rm -f "$raw"/*

log "running the bench's wasmop side (its hosts: $dir/release/wasmop) for the profile"
BENCH_STOP=term BENCH_SIDES=wasmop BENCH_ROUNDS=1 BENCH_PARTS=burst,finalizer,scale \
  BENCH_SCALE_OBJECTS=10000 "$dir/release/wasmop-bench" > "$dir/bench.md"
"$profdata" merge -o "$dir/host.profdata" "$raw"/*.profraw
"$profdata" show --all-functions --counts "$dir/host.profdata" > "$dir/host.txt"

mkdir -p host/layout
# Named as the plain build names them, whose `.llvm.N` suffixes may differ from the instrumented
# build's.
tests/testbed/layout-order.py "$dir/host.txt" target/release/wasmop host/layout/x86_64-unknown-linux-gnu.order

log "wrote host/layout/x86_64-unknown-linux-gnu.order"

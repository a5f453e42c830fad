#!/usr/bin/env bash
# `make layout`: writes host/layout/<target>.order, the order in which the linker places the
# host's functions (host/build.rs), from a profile of hosts at work, for each target given
# (default: both):
#   x86_64-unknown-linux-gnu   the release build (`make build`, `make bench`);
#   x86_64-unknown-linux-musl  the image's build (`make image`: the `image` profile), whose
#                              toolchain `make image` installs.
# For each:
#   1. builds the host with `-Cprofile-generate` (in target/layout-gnu or target/layout-musl;
#      RUSTFLAGS do not change symbol names, so the plain build names its functions alike), and
#      the plain host as `make build` or `make image` builds it;
#   2. runs the bench's parts burst, finalizer and scale (10,000 objects) with the wasmop side
#      only, on the instrumented host, its hosts shut down with SIGTERM so that each writes its
#      profile;
#   3. merges the profiles (the toolchain's llvm-profdata, rustup component `llvm-tools`) and
#      writes the functions that ran, hottest first, as the plain build names them: the gnu
#      binary's own symbols; the rlibs the musl binary was linked from, since it is stripped.
# Uses WASMOP_TEST_KUBECONFIG when set, else the bench starts a local control plane. Run it
# again after a change of dependencies or of the `release` or `image` profile: their symbols'
# names change, and the linker skips the names it does not find.
#
# `layout.sh --rename [TARGET...]` profiles nothing: it builds the plain host and names the
# committed order's functions as that build does. An edit of our sources changes the `.llvm.N`
# suffix of the functions ThinLTO promoted in each codegen unit it touched, not which functions
# a host runs (see layout-order.py).
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$HOME/.cargo/bin:$PATH"
log() { echo "layout: $*" >&2; }

rename=false
if [[ "${1:-}" == --rename ]]; then
  rename=true
  shift
fi
targets=("$@")
((${#targets[@]})) || targets=(x86_64-unknown-linux-gnu x86_64-unknown-linux-musl)
if ! $rename; then
  timeout 300 rustup component add llvm-tools >&2
  sysroot=$(rustc --print sysroot)
  host=$(rustc -vV | sed -n 's/^host: //p')
  profdata="$sysroot/lib/rustlib/$host/bin/llvm-profdata"
  log "building the bench"
  cargo build --locked --release -p wasmop-tests --bin wasmop-bench >&2
fi

# What the plain build of $1 (its output directory $2) names its functions in: the gnu binary's
# own symbols; the rlibs the musl binary was linked from, since it is stripped.
objects() {
  if [[ "$1" == x86_64-unknown-linux-musl ]]; then
    printf '%s\n' "target/$2/deps/"*.rlib
  else
    echo "target/$2/wasmop"
  fi
}

for target in "${targets[@]}"; do
  dir="target/layout-${target##*-}"
  raw="$PWD/$dir/raw"
  # The host alone, as `make build` and `make image` build it: built together with the tests,
  # its dependencies' features would differ, and so would its symbols.
  case "$target" in
    x86_64-unknown-linux-gnu)
      build=(cargo build --locked --release -p wasmop)
      out=release
      ;;
    x86_64-unknown-linux-musl)
      build=(env CC_x86_64_unknown_linux_musl=musl-gcc cargo build --locked --profile image --target "$target" -p wasmop)
      out="$target/image"
      ;;
    *)
      echo "layout: no layout for $target (x86_64-unknown-linux-gnu or x86_64-unknown-linux-musl)" >&2
      exit 2
      ;;
  esac
  if $rename; then
    log "building the plain host for $target"
    "${build[@]}" >&2
    mapfile -t linked < <(objects "$target" "$out")
    tests/testbed/layout-order.py --rename "host/layout/$target.order" "$dir.order" "${linked[@]}"
    mv "$dir.order" "host/layout/$target.order"
    log "renamed host/layout/$target.order"
    continue
  fi
  rm -rf "$raw"
  mkdir -p "$raw"
  log "building the instrumented host for $target in $dir, and the plain one"
  CARGO_TARGET_DIR=$dir RUSTFLAGS="-Cprofile-generate=$raw" "${build[@]}" >&2
  "${build[@]}" >&2
  cp target/release/wasmop-bench "$dir/$out/wasmop-bench"
  # The plugins compiled into the module cache by the plain host: the profile is then of hosts
  # at work, as on every start but a machine's first, not of the compiler (whose code would be
  # laid out among theirs).
  for plugin in greeting fixture-greeting-cleanup fixture-shard; do
    "target/$out/wasmop" inspect "plugins/dist/$plugin.wasm" >/dev/null
  done
  # The build scripts compiled with the instrumentation wrote profiles of their own.
  rm -f "$raw"/*

  log "running the bench's wasmop side (its hosts: $dir/$out/wasmop) for the profile"
  BENCH_STOP=term BENCH_SIDES=wasmop BENCH_ROUNDS=1 BENCH_PARTS=burst,finalizer,scale \
    BENCH_SCALE_OBJECTS=10000 "$dir/$out/wasmop-bench" > "$dir/bench.md"
  "$profdata" merge -o "$dir/host.profdata" "$raw"/*.profraw
  "$profdata" show --all-functions --counts "$dir/host.profdata" > "$dir/host.txt"

  mkdir -p host/layout
  # Named as the plain build names them, whose `.llvm.N` suffixes may differ from the
  # instrumented build's.
  mapfile -t linked < <(objects "$target" "$out")
  tests/testbed/layout-order.py "$dir/host.txt" "host/layout/$target.order" "${linked[@]}"
  log "wrote host/layout/$target.order"
done

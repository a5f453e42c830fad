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
#   4. runs the same parts again on the plain host under layout-touched.c, which stops once at
#      the entry of each function the order lacks, and appends those the hosts entered: the
#      standard library's and C code's (built without the instrumentation), and ours that the
#      instrumented build inlined elsewhere. Placed apart, each would keep 64 KiB of code
#      resident (the kernel maps a file's pages around a fault 16 at a time); together they
#      take a few pages. The stripped musl binary's functions are read from the linker's map
#      (`WASMOP_LINK_MAP`, host/build.rs), and its order is named from the standard library's
#      rlibs and the C archives too.
# Uses WASMOP_TEST_KUBECONFIG when set, else the bench starts a local control plane. Run it
# again after a change of dependencies or of the `release` or `image` profile: their symbols'
# names change, and the linker skips the names it does not find.
#
# `layout.sh --rename [TARGET...]` profiles nothing: it builds the plain host and names the
# committed order's functions as that build does. An edit of our sources changes the `.llvm.N`
# suffix of the functions ThinLTO promoted in each codegen unit it touched, not which functions
# a host runs (see layout-order.py).
#
# `layout.sh --touched [TARGET...]` runs only step 4, on the committed order.
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$HOME/.cargo/bin:$PATH"
log() { echo "layout: $*" >&2; }

mode=profile
if [[ "${1:-}" == --rename || "${1:-}" == --touched ]]; then
  mode=${1#--}
  shift
fi
targets=("$@")
((${#targets[@]})) || targets=(x86_64-unknown-linux-gnu x86_64-unknown-linux-musl)
if [[ $mode == profile ]]; then
  timeout 300 rustup component add llvm-tools >&2
  sysroot=$(rustc --print sysroot)
  host=$(rustc -vV | sed -n 's/^host: //p')
  profdata="$sysroot/lib/rustlib/$host/bin/llvm-profdata"
fi
if [[ $mode != rename ]]; then
  log "building the bench"
  cargo build --locked --release -p wasmop-tests --bin wasmop-bench >&2
fi

# The bench's parts the profile is made of, with the wasmop side only, its hosts shut down with
# SIGTERM (so that an instrumented one writes its profile), from $1/wasmop-bench (whose hosts
# are $1/wasmop), written to $2.
bench_parts() {
  BENCH_STOP=term BENCH_SIDES=wasmop BENCH_ROUNDS=1 BENCH_PARTS=burst,finalizer,scale \
    BENCH_SCALE_OBJECTS=10000 "$1/wasmop-bench" > "$2"
}

# Step 4 in $1 for the plain host target/$2/wasmop (built; $3 lists its functions, "<address>
# <name>" a line): appends to ORDER ($4) the functions it lacks that the bench's hosts entered.
touched() {
  local dir=$PWD/$1 plain=$PWD/target/$2/wasmop functions=$3 order=$4
  rm -rf "$dir/touched"
  mkdir -p "$dir/touched"
  cc -O2 -o "$dir/touched/layout-touched" tests/testbed/layout-touched.c
  # Every function of the binary the order lacks, by its address in the file.
  awk -v order="$order" 'BEGIN { while ((getline name < order) > 0) known[name] = 1 }
    !($2 in known)' "$functions" > "$dir/touched/candidates"
  cp target/release/wasmop-bench "$dir/touched/wasmop-bench"
  printf '#!/bin/sh\nexec "%s" "%s" "%s" "%s" "$@"\n' "$dir/touched/layout-touched" \
    "$dir/touched/candidates" "$dir/touched/entered" "$plain" > "$dir/touched/wasmop"
  chmod +x "$dir/touched/wasmop"
  log "running the bench's wasmop side again, its hosts traced ($(wc -l < "$dir/touched/candidates") candidates)"
  bench_parts "$dir/touched" "$dir/touched/bench.md"
  # Once each, in the order the hosts first entered them, after the profile's.
  awk '!seen[$0]++' "$order" "$dir/touched/entered" > "$dir/touched/order"
  log "$(($(wc -l < "$dir/touched/order") - $(wc -l < "$order"))) functions entered beyond the order"
  mv "$dir/touched/order" "$order"
}

# The plain host of $1 built (command "${build[@]}", output directory target/$2), and its
# functions listed to $3 ("<address> <name>" a line): the gnu binary's own symbols; the musl
# binary's from the linker's map, since it is stripped.
plain_functions() {
  if [[ "$1" == x86_64-unknown-linux-musl ]]; then
    WASMOP_LINK_MAP=$PWD/$3.map "${build[@]}" >&2
    tests/testbed/layout-order.py --functions "$3.map" > "$3"
  else
    "${build[@]}" >&2
    nm --defined-only "target/$2/wasmop" | awk '$2 ~ /^[tTwW]$/ { print $1, $3 }' > "$3"
  fi
}

# What the plain build of $1 (its output directory $2) names its functions in: the gnu binary's
# own symbols; the rlibs the musl binary was linked from, since it is stripped.
objects() {
  if [[ "$1" == x86_64-unknown-linux-musl ]]; then
    local lib
    lib="$(rustc --print sysroot)/lib/rustlib/$1/lib"
    printf '%s\n' "target/$2/deps/"*.rlib "$lib/"*.rlib "$lib/self-contained/libc.a"
    find "target/$2/build" -name '*.a'
  else
    echo "target/$2/wasmop"
  fi
}

# The bench's plugins compiled into the module cache by the plain host of target/$1: the profile
# is then of hosts at work, as on every start but a machine's first, not of the compiler (whose
# code would be laid out among theirs).
precompile() {
  for plugin in greeting fixture-greeting-cleanup fixture-shard; do
    "target/$1/wasmop" inspect "plugins/dist/$plugin.wasm" >/dev/null
  done
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
  if [[ $mode == rename ]]; then
    log "building the plain host for $target"
    "${build[@]}" >&2
    mapfile -t linked < <(objects "$target" "$out")
    tests/testbed/layout-order.py --rename "host/layout/$target.order" "$dir.order" "${linked[@]}"
    mv "$dir.order" "host/layout/$target.order"
    log "renamed host/layout/$target.order"
    continue
  fi
  if [[ $mode == touched ]]; then
    log "building the plain host for $target"
    plain_functions "$target" "$out" "$dir.functions"
    precompile "$out"
    touched "$dir" "$out" "$dir.functions" "host/layout/$target.order"
    log "wrote host/layout/$target.order"
    continue
  fi
  rm -rf "$raw"
  mkdir -p "$raw"
  log "building the instrumented host for $target in $dir, and the plain one"
  CARGO_TARGET_DIR=$dir RUSTFLAGS="-Cprofile-generate=$raw" "${build[@]}" >&2
  "${build[@]}" >&2
  cp target/release/wasmop-bench "$dir/$out/wasmop-bench"
  precompile "$out"
  # The build scripts compiled with the instrumentation wrote profiles of their own.
  rm -f "$raw"/*

  log "running the bench's wasmop side (its hosts: $dir/$out/wasmop) for the profile"
  bench_parts "$dir/$out" "$dir/bench.md"
  "$profdata" merge -o "$dir/host.profdata" "$raw"/*.profraw
  "$profdata" show --all-functions --counts "$dir/host.profdata" > "$dir/host.txt"

  mkdir -p host/layout
  # Named as the plain build names them, whose `.llvm.N` suffixes may differ from the
  # instrumented build's.
  mapfile -t linked < <(objects "$target" "$out")
  tests/testbed/layout-order.py "$dir/host.txt" "host/layout/$target.order" "${linked[@]}"
  plain_functions "$target" "$out" "$dir.functions"
  touched "$dir" "$out" "$dir.functions" "host/layout/$target.order"
  log "wrote host/layout/$target.order"
done

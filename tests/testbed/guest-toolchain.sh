#!/usr/bin/env bash
# Makes a wasm32-wasip2 Rust toolchain available for building plugins. Idempotent.
#
# Routes, chosen automatically (or forced with WASMOP_GUEST_ROUTE=rustup|debian):
#   rustup  `rustup target add wasm32-wasip2`: what users have. Needs the rustup toolchain server.
#   debian  Debian's Rust 1.96 (rustc-web) building std for the target with -Zbuild-std. For
#           machines where the rustup target cannot be installed. Uses its own target directory
#           so it never clobbers the host's build, which stays on the rustup toolchain.
#
# Run it to install and print the route. Source it to get, after `guest_toolchain_ensure`:
#   WASMOP_GUEST_ROUTE    rustup or debian
#   WASMOP_GUEST_TARGET_DIR  the cargo target directory the route builds into
#   WASMOP_GUEST_OUT      directory holding the release artifacts (<crate_name>.wasm)
#   guest_cargo ARGS...   cargo for the chosen route, with the target flags appended,
#                         e.g. `guest_cargo build --release -p webpage`

GUEST_TARGET=wasm32-wasip2
GUEST_DEBIAN_PACKAGES=(rustc-web cargo-web rust-web-src lld-19 wasi-libc)

if [[ -d "$HOME/.cargo/bin" && ":$PATH:" != *":$HOME/.cargo/bin:"* ]]; then
  export PATH="$HOME/.cargo/bin:$PATH"
fi

guest_log() { echo "guest-toolchain: $*" >&2; }

# Route 1: the rustup target. The timeout matters: without the toolchain server rustup hangs.
guest_try_rustup() {
  command -v rustup >/dev/null 2>&1 || return 1
  if rustup target list --installed 2>/dev/null | grep -qx "$GUEST_TARGET"; then
    return 0
  fi
  guest_log "installing the $GUEST_TARGET target with rustup"
  timeout 120 rustup target add "$GUEST_TARGET" >&2
}

guest_debian_ready() {
  [[ -x /usr/bin/rustc && -x /usr/bin/cargo && -x /usr/lib/llvm-19/bin/wasm-ld \
     && -d /usr/lib/wasm32-wasi ]] || return 1
  local sysroot
  sysroot=$(/usr/bin/rustc --print sysroot 2>/dev/null) || return 1
  [[ -d "$sysroot/lib/rustlib/src/rust/library" ]]
}

# Route 2: Debian's Rust with its standard library source.
guest_try_debian() {
  guest_debian_ready && return 0
  command -v apt-get >/dev/null 2>&1 || { guest_log "apt-get not found"; return 1; }
  local sudo=()
  if [[ $(id -u) -ne 0 ]]; then
    command -v sudo >/dev/null 2>&1 || { guest_log "need root to apt-get install"; return 1; }
    sudo=(sudo)
  fi
  guest_log "installing ${GUEST_DEBIAN_PACKAGES[*]} with apt-get"
  export DEBIAN_FRONTEND=noninteractive
  if ! "${sudo[@]}" apt-get install -y "${GUEST_DEBIAN_PACKAGES[@]}" >&2; then
    "${sudo[@]}" apt-get update >&2 || return 1
    "${sudo[@]}" apt-get install -y "${GUEST_DEBIAN_PACKAGES[@]}" >&2 || return 1
  fi
  guest_debian_ready || { guest_log "Debian's Rust is installed but incomplete"; return 1; }
}

guest_toolchain_ensure() {
  local root
  root=$(cargo locate-project --workspace --message-format plain 2>/dev/null | xargs -r dirname)
  root=${root:-$PWD}
  case "${WASMOP_GUEST_ROUTE:-}" in
    rustup)
      guest_try_rustup || { guest_log "rustup cannot provide $GUEST_TARGET"; return 1; } ;;
    debian)
      guest_try_debian || { guest_log "the Debian route failed"; return 1; } ;;
    "")
      if guest_try_rustup; then
        WASMOP_GUEST_ROUTE=rustup
      else
        guest_log "rustup route unavailable; falling back to Debian's Rust with -Zbuild-std"
        guest_try_debian || { guest_log "no route to a $GUEST_TARGET toolchain"; return 1; }
        WASMOP_GUEST_ROUTE=debian
      fi ;;
    *)
      guest_log "WASMOP_GUEST_ROUTE must be rustup or debian, not $WASMOP_GUEST_ROUTE"; return 1 ;;
  esac
  WASMOP_GUEST_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
  if [[ $WASMOP_GUEST_ROUTE == debian ]]; then
    WASMOP_GUEST_TARGET_DIR="$WASMOP_GUEST_TARGET_DIR/guest-debian"
  fi
  WASMOP_GUEST_OUT="$WASMOP_GUEST_TARGET_DIR/$GUEST_TARGET/release"
  export WASMOP_GUEST_ROUTE WASMOP_GUEST_TARGET_DIR WASMOP_GUEST_OUT
}

# Plugins ship without DWARF: the release profile's line tables plus std's debuginfo add ~7 MB to
# every component. The name section stays, so the host's trap backtraces still name functions.
# RUSTFLAGS only reach the wasm32 units (cargo gets --target), never the host's.
GUEST_RUSTFLAGS="-C strip=debuginfo"

guest_cargo() {
  case "$WASMOP_GUEST_ROUTE" in
    rustup)
      RUSTFLAGS="$GUEST_RUSTFLAGS" cargo "$@" --target "$GUEST_TARGET" ;;
    debian)
      # wasm-component-ld (shipped with rustc-web) needs wasm-ld from llvm-19 on PATH; the
      # preview-1 wasi-libc lives in /usr/lib/wasm32-wasi.
      PATH="/usr/lib/llvm-19/bin:/usr/bin:$PATH" RUSTC=/usr/bin/rustc RUSTC_BOOTSTRAP=1 \
        RUSTFLAGS="-L /usr/lib/wasm32-wasi $GUEST_RUSTFLAGS" CARGO_TARGET_DIR="$WASMOP_GUEST_TARGET_DIR" \
        /usr/bin/cargo "$@" -Zbuild-std=std,panic_abort --target "$GUEST_TARGET" ;;
    *)
      guest_log "call guest_toolchain_ensure first"; return 1 ;;
  esac
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
  set -euo pipefail
  guest_toolchain_ensure
  echo "$WASMOP_GUEST_ROUTE"
fi

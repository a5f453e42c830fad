#!/usr/bin/env bash
# Installs mdBook, the generator of the book in docs/, into a cache directory, once. Idempotent:
# an installed binary is reused as is. Prints the binary's path.
#
# The version is pinned here and installed with `cargo install --locked`: cargo resolves mdBook's
# dependencies from the lockfile published with that version and checks every crate against the
# registry's checksums, so a new upstream release never changes what a fresh machine builds. Only
# the `search` feature is built (no `serve` or `watch`: the build needs neither), unoptimized
# (`--debug`): it renders this book in about a second either way, and compiles in a fraction of
# the time. To move to
# another release, change MDBOOK_VERSION; the directory's name carries it, so a change installs.
set -euo pipefail

MDBOOK_VERSION=0.5.4
CACHE="${WASMOP_CACHE:-$HOME/.cache/wasmop}"
ROOT="$CACHE/mdbook-$MDBOOK_VERSION"
BIN="$ROOT/bin/mdbook"

if [[ -x "$BIN" ]]; then
  echo "$BIN"
  exit 0
fi
command -v cargo >/dev/null || { echo "cargo is required to install mdbook" >&2; exit 1; }
echo "build-mdbook: installing mdbook $MDBOOK_VERSION into $ROOT" >&2
# From the repository, so that rust-toolchain.toml's toolchain builds it; into a temporary root
# renamed at the end, so an interrupted install leaves nothing that looks complete.
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
mkdir -p "$CACHE"
tmp="$ROOT.tmp.$$"
trap 'rm -rf "$tmp"' EXIT
cargo install mdbook --locked --debug --version "=$MDBOOK_VERSION" --no-default-features --features search \
  --root "$tmp" >&2
rm -f "$tmp/.crates.toml" "$tmp/.crates2.json"
mv "$tmp" "$ROOT"
echo "$BIN"

# Sourced by the scripts that build a Go command of the test bed from a committed, pinned module
# (build-registry.sh, build-helm.sh). Needs CACHE set.

# pins DIR FILE...: a digest of the module's pinning files, to key the cached binary by.
pins() {
  local dir=$1
  shift
  (cd "$dir" && cat "$@") | sha256sum | cut -c1-12
}

command -v go >/dev/null || { echo "go is required to build the test bed's Go commands" >&2; exit 1; }

# build_cached BIN DIR PACKAGE [LDFLAGS]: prints BIN, first building PACKAGE of the module in DIR
# into it (atomically, with -mod=readonly: nothing resolved, every module checked against go.sum)
# unless it is there already.
build_cached() {
  local bin=$1 dir=$2 package=$3 ld=${4:-}
  if [[ ! -x "$bin" ]]; then
    mkdir -p "$(dirname "$bin")"
    echo "building $package into $bin" >&2
    (cd "$dir" && CGO_ENABLED=0 GOFLAGS=-mod=readonly go build -trimpath -ldflags "$ld" -o "$bin.tmp.$$" "$package" >&2)
    mv "$bin.tmp.$$" "$bin"
  fi
  echo "$bin"
}

#!/usr/bin/env bash
# Makes the Python plugin toolchain available: a virtual environment holding the pins of
# guest-sdk/python/requirements.lock (componentize-py, pytest, flit_core), installed with
# `pip install --require-hashes`, plus the wasmop-guest SDK built from guest-sdk/python as a wheel.
# Idempotent: a complete environment is reused; the SDK is rebuilt only when its sources change.
#
# The environment lives in ${WASMOP_CACHE:-~/.cache/wasmop}/python/<python version>-<lock digest>,
# so a new lock (or another interpreter, WASMOP_PYTHON=python3.12) gets a fresh one and never
# touches the interpreter's own site-packages.
#
# Run it to install and print the environment's directory. Source it to get, after
# `python_toolchain_ensure`:
#   WASMOP_PYTHON_VENV   the environment's directory
#   WASMOP_PY            its python (run pytest as "$WASMOP_PY" -m pytest)
#   WASMOP_COMPONENTIZE  its componentize-py

python_log() { echo "python-toolchain: $*" >&2; }

PYTHON_TOOLCHAIN_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PYTHON_SDK="$PYTHON_TOOLCHAIN_ROOT/guest-sdk/python"

# A digest of the files that make the SDK wheel: a change of any of them reinstalls it.
python_sdk_digest() {
  (cd "$PYTHON_SDK" && find pyproject.toml README.md src -type f ! -name '*.pyc' -print0 | sort -z \
    | xargs -0 sha256sum | sha256sum | cut -c1-16)
}

python_toolchain_ensure() {
  local python=${WASMOP_PYTHON:-python3}
  command -v "$python" >/dev/null 2>&1 || { python_log "$python not found"; return 1; }
  "$python" -c 'import sys; sys.exit(sys.version_info < (3, 10))' ||
    { python_log "$python is older than 3.10, which pytest needs"; return 1; }
  local version lock digest
  version=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  lock="$PYTHON_SDK/requirements.lock"
  digest=$(sha256sum "$lock" | cut -c1-12)
  WASMOP_PYTHON_VENV="${WASMOP_CACHE:-$HOME/.cache/wasmop}/python/$version-$digest"
  WASMOP_PY="$WASMOP_PYTHON_VENV/bin/python"
  WASMOP_COMPONENTIZE="$WASMOP_PYTHON_VENV/bin/componentize-py"

  # The marker is written last, so an interrupted install starts over.
  if [[ ! -f "$WASMOP_PYTHON_VENV/.complete" ]]; then
    python_log "installing the pins of ${lock#"$PYTHON_TOOLCHAIN_ROOT"/} into $WASMOP_PYTHON_VENV"
    rm -rf "$WASMOP_PYTHON_VENV"
    "$python" -m venv "$WASMOP_PYTHON_VENV" || return 1
    # No --find-links from the environment: everything comes from the index, checked by hash.
    PIP_FIND_LINKS= "$WASMOP_PY" -m pip install --quiet --disable-pip-version-check \
      --require-hashes --only-binary :all: -r "$lock" >&2 || return 1
    touch "$WASMOP_PYTHON_VENV/.complete"
  fi

  # The SDK, as the wheel its pyproject.toml describes, built offline with the pinned flit_core.
  local sdk wheels
  sdk=$(python_sdk_digest) || return 1
  if [[ ! -f "$WASMOP_PYTHON_VENV/.sdk-$sdk" ]]; then
    python_log "building and installing the wasmop-guest wheel"
    wheels=$(mktemp -d) || return 1
    "$WASMOP_PY" -m pip wheel --quiet --disable-pip-version-check --no-build-isolation --no-deps \
      --no-index --wheel-dir "$wheels" "$PYTHON_SDK" >&2 &&
      "$WASMOP_PY" -m pip install --quiet --disable-pip-version-check --no-deps --no-index \
        --force-reinstall "$wheels"/wasmop_guest-*.whl >&2
    local built=$?
    rm -rf "$wheels"
    [[ $built -eq 0 ]] || return 1
    rm -f "$WASMOP_PYTHON_VENV"/.sdk-*
    touch "$WASMOP_PYTHON_VENV/.sdk-$sdk"
  fi
  export WASMOP_PYTHON_VENV WASMOP_PY WASMOP_COMPONENTIZE
}

if [[ "${BASH_SOURCE[0]}" == "$0" ]]; then
  set -euo pipefail
  python_toolchain_ensure
  echo "$WASMOP_PYTHON_VENV"
fi

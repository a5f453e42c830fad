#!/usr/bin/env bash
# Builds the wasmop image into target/image/wasmop.tar, an OCI archive tagged wasmop:dev
# (WASMOP_IMAGE overrides): the host built statically for x86_64-unknown-linux-musl with the
# `image` profile (release, stripped), FROM scratch, user 65532. WASMOP_IMAGE_PROFILE and
# WASMOP_IMAGE_DIR build it with another cargo profile into another directory (`make test-image`:
# the `image-test` profile into target/test-image). Labelled (its config's Labels)
# with the host's version, the git revision it was built from (GIT_REVISION, else
# HEAD, `-dirty` when tracked files differ from it; the host's `wasmop version` reports the
# same) and where its source is (WASMOP_SOURCE, else the git remote `origin` without
# credentials). Builder: `docker build` where a Docker daemon answers, else buildah without a
# daemon (vfs storage under target/image, chroot isolation). Idempotent: installs what is
# missing (the rustup musl target, and pinned Debian packages: musl-tools for the C parts,
# buildah to build, umoci for the tests to unpack with).
set -euo pipefail
cd "$(dirname "$0")/../.."
export PATH="$HOME/.cargo/bin:$PATH"

target=x86_64-unknown-linux-musl
profile="${WASMOP_IMAGE_PROFILE:-image}"
out="${WASMOP_IMAGE_DIR:-target/image}"
tag="${WASMOP_IMAGE:-wasmop:dev}"
# Pinned: Debian 12's versions, checked by apt against the signed archive.
packages=(musl-tools=1.2.3-1 umoci=0.4.7+ds-3+b7)
docker_daemon=false
if command -v docker >/dev/null 2>&1 && timeout 10 docker info >/dev/null 2>&1; then
  docker_daemon=true
else
  packages+=(buildah=1.28.2+ds1-3+deb12u1+b3)
fi

log() { echo "image: $*" >&2; }

missing=()
for package in "${packages[@]}"; do
  name="${package%%=*}" version="${package#*=}"
  [[ "$(dpkg-query -W -f='${Version}' "$name" 2>/dev/null || true)" == "$version" ]] || missing+=("$package")
done
if ((${#missing[@]})); then
  sudo=()
  [[ $(id -u) -eq 0 ]] || sudo=(sudo)
  log "installing ${missing[*]} with apt-get"
  export DEBIAN_FRONTEND=noninteractive
  if ! "${sudo[@]}" apt-get install -y --no-install-recommends "${missing[@]}" >&2; then
    "${sudo[@]}" apt-get update >&2
    "${sudo[@]}" apt-get install -y --no-install-recommends "${missing[@]}" >&2
  fi
fi

# The target of the toolchain rust-toolchain.toml pins; rustup hangs where its server is out of
# reach, hence the timeout.
if ! rustup target list --installed | grep -qx "$target"; then
  log "installing the $target target with rustup"
  timeout 300 rustup target add "$target" >&2
fi
# What the labels say; none of them needs git.
version="$(cargo pkgid -p wasmop)"
version="${version##*[#@]}"
if [[ -z "${GIT_REVISION:-}" ]] && git rev-parse --git-dir >/dev/null 2>&1; then
  GIT_REVISION="$(git rev-parse HEAD)"
  git diff --quiet HEAD -- 2>/dev/null || GIT_REVISION+="-dirty"
fi
export GIT_REVISION="${GIT_REVISION:-}"
source_url="${WASMOP_SOURCE:-$(git remote get-url origin 2>/dev/null || true)}"
# A URL's user and password stay out of the image.
source_url="$(sed -E 's#^([a-z+]+://)[^/@]*@#\1#' <<<"$source_url")"
labels=(--build-arg "VERSION=$version" --build-arg "REVISION=$GIT_REVISION" --build-arg "SOURCE=$source_url")

log "building the host for $target, profile $profile (version $version, revision ${GIT_REVISION:-unknown})"
CC_x86_64_unknown_linux_musl=musl-gcc cargo build --locked --profile "$profile" --target "$target" -p wasmop >&2

context="$out/context"
rm -rf "$context" && mkdir -p "$context"
# Where cargo put it: CARGO_TARGET_DIR or a cargo configuration may move it out of target/.
built="$(cargo metadata --no-deps --format-version 1 | sed -E 's/.*"target_directory":"([^"]*)".*/\1/')"
cp "$built/$target/$profile/wasmop" "$context/wasmop"
archive="$out/wasmop.tar"
rm -f "$archive"
if $docker_daemon; then
  log "building $tag with docker"
  docker build "${labels[@]}" -f deploy/image/Containerfile -t "$tag" "$context" >&2
  docker save "$tag" -o "$archive"
else
  log "building $tag with buildah (no daemon: vfs storage, chroot isolation)"
  buildah=(buildah --storage-driver vfs --root "$PWD/$out/storage" --runroot "$PWD/$out/run")
  "${buildah[@]}" bud --isolation chroot --timestamp 0 --signature-policy deploy/image/policy.json \
    "${labels[@]}" -f deploy/image/Containerfile -t "$tag" "$context" >&2
  "${buildah[@]}" push --signature-policy deploy/image/policy.json "$tag" "oci-archive:$archive:$tag" >&2
  "${buildah[@]}" rmi --all >/dev/null 2>&1 || true
fi
log "$archive: $(du -h "$archive" | cut -f1) (the host binary: $(du -h "$context/wasmop" | cut -f1))"
echo "$archive"

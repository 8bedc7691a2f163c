#!/usr/bin/env bash
# Makes a wheel of the Python package fgl that carries this build's op
# library ($FGL_OPS_LIBRARY, else $FGL_BUILD_DIR/ops/libfgl_ops.so), so that
# after `pip install` fgl.load_library() needs no path. The wheel goes to the
# folder given (default: dist/). Build first (scripts/build.sh); the wheel
# runs with the torch version it was built against (pinned in pyproject.toml).
# Usage: scripts/build_wheel.sh [OUT_DIR]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"

library="${FGL_OPS_LIBRARY:-$FGL_BUILD_DIR/ops/libfgl_ops.so}"
[ -f "$library" ] || {
  echo "build_wheel: no op library at $library; run scripts/build.sh" >&2
  exit 1
}
out="$(mkdir -p "${1:-$FGL_ROOT/dist}" && cd "${1:-$FGL_ROOT/dist}" && pwd)"
staging="$(mktemp -d)"
trap 'rm -rf "$staging"' EXIT
cp -r "$FGL_ROOT/python/." "$staging/"
find "$staging" -name __pycache__ -prune -exec rm -rf {} +
mkdir -p "$staging/fgl/lib"
cp "$library" "$staging/fgl/lib/libfgl_ops.so"
# No build isolation: the setuptools of this environment builds it, nothing
# is downloaded.
"$FGL_PYTHON" -m pip wheel --quiet --no-deps --no-build-isolation \
  --wheel-dir "$out" "$staging"
ls "$out"/fgl-*.whl

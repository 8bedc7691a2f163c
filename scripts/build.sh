#!/usr/bin/env bash
# Configures and builds fgl into $FGL_BUILD_DIR (default: build/). Extra
# arguments go to the CMake configure step, e.g. -DFGL_ENABLE_CUDA=OFF.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"

generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
if [ -f "$FGL_BUILD_DIR/CMakeCache.txt" ]; then
  generator=()  # keep the generator the tree was made with
fi
cmake -S "$FGL_ROOT" -B "$FGL_BUILD_DIR" "${generator[@]}" \
  -DFGL_PYTHON="$FGL_PYTHON" "$@"
cmake --build "$FGL_BUILD_DIR" --parallel "$(nproc)"

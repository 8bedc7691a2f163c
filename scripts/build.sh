#!/usr/bin/env bash
# Configures and builds fgl into $FGL_BUILD_DIR (default: build/). Extra
# arguments go to the CMake configure step, e.g. -DFGL_ENABLE_CUDA=OFF.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"

mapfile -t generator < <(cmake_generator "$FGL_BUILD_DIR")
cmake -S "$FGL_ROOT" -B "$FGL_BUILD_DIR" "${generator[@]}" \
  -DFGL_PYTHON="$FGL_PYTHON" "$@"
cmake --build "$FGL_BUILD_DIR" --parallel "$(nproc)"

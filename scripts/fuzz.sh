#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/, clang) into $FGL_FUZZ_BUILD_DIR
# (default build-fuzz/) and runs each for FGL_FUZZ_SECONDS (default 20) from
# its seed corpus in tests/fuzz_corpus/ (fixed seed and run count: see
# fuzz/CMakeLists.txt). A crash fails the run and leaves its
# input as crash-* in the build directory.
set -euo pipefail
"$(dirname "${BASH_SOURCE[0]}")/setup.sh" --fuzz
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
build_dir="${FGL_FUZZ_BUILD_DIR:-$FGL_ROOT/build-fuzz}"
torch_root="$("$FGL_PYTHON" -c \
  'import os, torch; print(os.path.dirname(torch.__file__))')"

mapfile -t generator < <(cmake_generator "$build_dir")
cmake -S "$FGL_ROOT/fuzz" -B "$build_dir" "${generator[@]}" \
  -DCMAKE_CXX_COMPILER="${FGL_FUZZ_CXX:-clang++}" \
  -DFGL_TORCH_ROOT="$torch_root" \
  -DFGL_FUZZ_SECONDS="${FGL_FUZZ_SECONDS:-20}"
cmake --build "$build_dir" --parallel "$(nproc)"
ctest --test-dir "$build_dir" --output-on-failure

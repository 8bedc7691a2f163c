#!/usr/bin/env bash
# The CPU GoogleTest suite built with AddressSanitizer + UBSan in its own
# build directory ($FGL_ASAN_BUILD_DIR, default build-asan/). Only the test
# binary: the Python tests would need the sanitizer runtime preloaded into
# python. Tests that allocate many GB of (untouched) address space are
# filtered out, since ASan maps shadow memory for them.
set -euo pipefail
"$(dirname "${BASH_SOURCE[0]}")/setup.sh"
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
build_dir="${FGL_ASAN_BUILD_DIR:-$FGL_ROOT/build-asan}"
filter="${FGL_ASAN_FILTER:--GatherLinearLarge.*}"

mapfile -t generator < <(cmake_generator "$build_dir")
cmake -S "$FGL_ROOT" -B "$build_dir" "${generator[@]}" \
  -DFGL_PYTHON="$FGL_PYTHON" -DFGL_SANITIZE=ON -DFGL_ENABLE_CUDA=OFF \
  -DFGL_BUILD_BENCH=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build "$build_dir" --parallel "$(nproc)" --target fgl_tests

# Leak checking is off: libtorch keeps allocations for the process's life.
# protect_shadow_gap=0 lets the CUDA runtime, loaded by libtorch, map memory.
export ASAN_OPTIONS="detect_leaks=0:protect_shadow_gap=0:abort_on_error=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
"$build_dir/tests/fgl_tests" --gtest_filter="$filter" --gtest_brief=1

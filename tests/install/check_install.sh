#!/usr/bin/env bash
# Installs the build into a staging prefix and uses it the way the runtime
# container and downstream projects do:
#   1. the installed fgl_infer runs its demo in a clean environment (no
#      LD_LIBRARY_PATH: its RUNPATH finds fgl's and libtorch's libraries),
#      and again with libtorch on the library path, as the runtime container
#      runs it;
#   2. a separate CMake project finds the package (find_package(fgl)), links
#      fgl::ops and fgl::models, and runs in a clean environment.
# Usage: check_install.sh BUILD_DIR TORCH_CMAKE_PREFIX WORK_DIR
set -euo pipefail
build="$1" torch_prefix="$2" work="$3"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
torch_lib="$(cd "$torch_prefix/../../lib" && pwd)"  # torch/share/cmake -> torch/lib
stage="$work/stage"
rm -rf "$work"
mkdir -p "$work"

cmake --install "$build" --prefix "$stage" >"$work/install.log"
for f in bin/fgl_infer lib/libfgl_ops.so lib/libfgl_models.a lib/libfgl_io.a \
         include/fgl/gather_linear.h include/fgl/models/weights.h \
         include/fgl/io/tensor_file.h \
         lib/cmake/fgl/fglConfig.cmake lib/cmake/fgl/fglTargets.cmake; do
  [ -e "$stage/$f" ] || { echo "missing from the install: $f" >&2; exit 1; }
done

echo "== installed fgl_infer, clean environment"
env -i PATH=/usr/bin:/bin "$stage/bin/fgl_infer" --device cpu
echo "== installed fgl_infer, libtorch on the library path"
env -i PATH=/usr/bin:/bin LD_LIBRARY_PATH="$torch_lib" \
  "$stage/bin/fgl_infer" --device cpu
# ldd's output is kept whole before matching: `ldd | grep -q` stops reading at
# the first match, and under pipefail ldd's SIGPIPE would fail the check.
deps="$(env -i PATH=/usr/bin:/bin LD_LIBRARY_PATH="$torch_lib" ldd "$stage/bin/fgl_infer")"
grep -qE "libfgl_ops.so => $stage/(bin/\.\./)?lib/" <<<"$deps" \
  || { echo "fgl_infer does not load the staged libfgl_ops.so:" >&2; echo "$deps" >&2; exit 1; }

echo "== consumer project: find_package(fgl)"
cmake -S "$here/consumer" -B "$work/consumer" \
  -DCMAKE_PREFIX_PATH="$stage;$torch_prefix" \
  -DTORCH_CUDA_ARCH_LIST="${TORCH_CUDA_ARCH_LIST:-8.0}" >"$work/consumer.log"
cmake --build "$work/consumer" >>"$work/consumer.log"
env -i PATH=/usr/bin:/bin "$work/consumer/fgl_consumer" \
  "$work/consumer/weights.pt"

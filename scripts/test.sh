#!/usr/bin/env bash
# The test command: set up, build, run the whole suite (GoogleTest + pytest
# through ctest). CUDA tests skip on machines without a GPU.
set -euo pipefail
here="$(dirname "${BASH_SOURCE[0]}")"
"$here/setup.sh"
"$here/build.sh"
source "$here/env.sh"
ctest --test-dir "$FGL_BUILD_DIR" --output-on-failure --parallel "$(nproc)"

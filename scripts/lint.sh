#!/usr/bin/env bash
# Lints what has no compiler to check it: the Dockerfile (hadolint, from the
# Python environment scripts/setup.sh makes, or $HADOLINT) and every shell script
# (shellcheck).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$FGL_ROOT"
"${HADOLINT:-$(dirname "$FGL_PYTHON")/hadolint}" Dockerfile
git ls-files -z -- '*.sh' .ci/run | xargs -0 -r shellcheck -x
echo "lint: Dockerfile and shell scripts clean"

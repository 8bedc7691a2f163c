#!/usr/bin/env bash
# The main job: set up, build, run fgl_infer. With no arguments it runs the
# built-in demo problem; arguments are passed to fgl_infer.
set -euo pipefail
here="$(dirname "${BASH_SOURCE[0]}")"
"$here/setup.sh" >&2
"$here/build.sh" >&2
source "$here/env.sh"
exec "$FGL_BUILD_DIR/app/fgl_infer" "$@"

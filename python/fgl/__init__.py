"""Python side of fgl: finds and loads the built op library, which registers
torch.ops.fgl.gather_linear (CPU, CUDA, Meta and Autograd kernels), and the
model that the export scripts and fgl_infer use (GatherLinear). fgl.parallel
runs the op tensor-parallel over a torch.distributed group."""
import os
from pathlib import Path

import torch

from .models import GatherLinear

__version__ = "0.1.0"  # the project's version (CMakeLists.txt); tested
__all__ = ["GatherLinear", "library_path", "load_library", "__version__"]

_PACKAGE = Path(__file__).resolve().parent
_REPO = _PACKAGE.parents[1]
_LIBRARY_NAME = "libfgl_ops.so"
_loaded = None


def library_path(path=None):
    """The op library to load: `path`, else $FGL_OPS_LIBRARY, else the one
    this package carries (a wheel from scripts/build_wheel.sh), else the
    first one built in the repository's build/ or build-gpu/ folder (a
    source checkout)."""
    candidates = [path, os.environ.get("FGL_OPS_LIBRARY"),
                  _PACKAGE / "lib" / _LIBRARY_NAME,
                  os.environ.get("FGL_BUILD_DIR") and
                  Path(os.environ["FGL_BUILD_DIR"]) / "ops" / _LIBRARY_NAME,
                  _REPO / "build" / "ops" / _LIBRARY_NAME,
                  _REPO / "build-gpu" / "ops" / _LIBRARY_NAME]
    for candidate in candidates:
        if candidate and Path(candidate).is_file():
            return str(Path(candidate).resolve())
    raise FileNotFoundError(
        f"fgl: {_LIBRARY_NAME} not found (tried {path!r}, $FGL_OPS_LIBRARY, "
        f"{_PACKAGE}/lib, $FGL_BUILD_DIR/ops, {_REPO}/build/ops, "
        f"{_REPO}/build-gpu/ops); build it with scripts/build.sh, install a "
        "wheel from scripts/build_wheel.sh, or pass its path")


def load_library(path=None):
    """Loads the op library once per process and returns its path."""
    global _loaded
    if _loaded is None:
        _loaded = library_path(path)
        torch.ops.load_library(_loaded)
    return _loaded

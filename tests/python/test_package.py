"""The Python package fgl: its version is the project's, its model is at the
top level, `pip install ./python` gives a package that loads the op library
from a path or $FGL_OPS_LIBRARY, and a wheel from scripts/build_wheel.sh
carries the library and loads it with no path given, installed away from
this repository."""
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import fgl
import fgl.models

REPO = Path(__file__).resolve().parents[2]

# Runs in a fresh process; prints the version, the model's name and the
# library it loaded.
CHECK_INSTALLED = r"""
import torch
import fgl
import fgl.parallel

path = fgl.load_library()
assert fgl.parallel.shard_heads(5, 2, 1) == range(3, 5)
x, w, b = torch.randn(3, 5, 8), torch.randn(7, 24), torch.randn(7)
out = torch.ops.fgl.gather_linear(x, w, b)
ref = torch.nn.functional.linear(torch.cat(x.unbind(0), -1).double(),
                                 w.double(), b.double())
assert float((out.double() - ref).abs().max()) < 1e-4
print(fgl.__version__, fgl.GatherLinear.__name__, path)
"""


def test_version_is_the_projects():
    cmake = (REPO / "CMakeLists.txt").read_text()
    assert re.search(r"project\(fgl VERSION ([0-9.]+)", cmake)[1] == \
        fgl.__version__


def test_model_is_at_the_top_level():
    assert fgl.GatherLinear is fgl.models.GatherLinear


def clean_env(site, **extra):
    """The environment of a user's process: the installed package on the
    path, no hint of this repository's build."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("FGL_OPS_LIBRARY", "FGL_BUILD_DIR", "PYTHONPATH")}
    env.update(PYTHONPATH=str(site), **extra)
    return env


def pip_install(target, what):
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet",
                    "--no-deps", "--no-index", "--no-build-isolation",
                    "--target", str(target), str(what)],
                   check=True, capture_output=True)


def run_installed(site, env):
    return subprocess.run([sys.executable, "-c", CHECK_INSTALLED],
                          cwd=site.parent, env=env, capture_output=True,
                          text=True)


def test_wheel_carries_the_op_library(tmp_path):
    subprocess.run(["bash", str(REPO / "scripts" / "build_wheel.sh"),
                    str(tmp_path / "dist")], check=True, capture_output=True,
                   env={**os.environ, "FGL_PYTHON": sys.executable})
    wheels = list((tmp_path / "dist").glob("fgl-*.whl"))
    assert len(wheels) == 1, wheels
    assert not wheels[0].name.endswith("-none-any.whl"), wheels[0].name
    site = tmp_path / "site"
    pip_install(site, wheels[0])
    done = run_installed(site, clean_env(site))
    assert done.returncode == 0, done.stderr
    version, model, library = done.stdout.split()
    assert (version, model) == (fgl.__version__, "GatherLinear")
    assert library == str(site / "fgl" / "lib" / "libfgl_ops.so")


def test_source_install_loads_the_library_it_is_shown(tmp_path):
    # Built from a copy: pip builds in place.
    source = tmp_path / "source"
    shutil.copytree(REPO / "python", source,
                    ignore=shutil.ignore_patterns("__pycache__", "build",
                                                  "*.egg-info", "lib"))
    site = tmp_path / "site"
    pip_install(site, source)
    assert not (site / "fgl" / "lib").exists()
    done = run_installed(site, clean_env(site))
    assert done.returncode != 0
    assert "libfgl_ops.so not found" in done.stderr
    assert "FGL_OPS_LIBRARY" in done.stderr
    library = fgl.library_path()
    done = run_installed(site, clean_env(site, FGL_OPS_LIBRARY=library))
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [fgl.__version__, "GatherLinear", library]

"""The Triton model repository example (serving/triton): the layout the
PyTorch backend expects, a config.pbtxt that matches the model, and a model
file that loads and computes the reference with the installed op library
(the staged install tree, as the server would preload it)."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
STAGE = Path(os.environ["FGL_STAGE"])
STAGED_LIBRARY = STAGE / "lib" / "libfgl_ops.so"
MODEL = "fgl_gather_linear"


@pytest.fixture(scope="module")
def repository(tmp_path_factory):
    out = tmp_path_factory.mktemp("triton")
    subprocess.run([sys.executable,
                    str(REPO / "serving" / "triton" / "make_model_repository.py"),
                    str(out), "--library", str(STAGED_LIBRARY)], check=True)
    return out


def config_of(repository):
    return (repository / MODEL / "config.pbtxt").read_text()


def test_layout_is_what_the_pytorch_backend_loads(repository):
    assert (repository / MODEL / "config.pbtxt").is_file()
    assert (repository / MODEL / "1" / "model.pt").is_file()
    config = config_of(repository)
    assert re.search(r'^name:\s*"fgl_gather_linear"', config, re.M)
    assert re.search(r'^platform:\s*"pytorch_libtorch"', config, re.M)
    # The libtorch backend binds tensors by the <name>__<index> convention.
    assert re.findall(r'name:\s*"(\w+__\d+)"', config) == ["x__0", "out__0"]


def run_in_fresh_process(code, *args):
    return subprocess.run([sys.executable, "-c", code, *map(str, args)],
                          capture_output=True, text=True)


LOAD_AND_CHECK = """
import sys, torch
library, model_path, R, H, K = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:])
if library != "-":
    torch.ops.load_library(library)
model = torch.jit.load(model_path)
x = torch.randn(7, R, H).transpose(0, 1)
out = model(x)
assert out.shape == (7, K), out.shape
ref = torch.nn.functional.linear(torch.cat(x.double().unbind(0), -1),
                                 model.proj.weight.double(), model.proj.bias.double())
err = ((out.double() - ref).norm() / ref.norm()).item()
assert err < 1e-5, err
print("ok", err)
"""


def test_model_runs_with_the_installed_library(repository):
    dims = re.findall(r"dims:\s*\[([^\]]*)\]", config_of(repository))
    R, _, H = (int(d) for d in dims[0].split(","))
    K = int(dims[1].split(",")[1])
    result = run_in_fresh_process(LOAD_AND_CHECK, STAGED_LIBRARY,
                                  repository / MODEL / "1" / "model.pt", R, H, K)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("ok")


def test_model_needs_the_library_preloaded(repository):
    result = run_in_fresh_process(LOAD_AND_CHECK, "-",
                                  repository / MODEL / "1" / "model.pt", 4, 32, 56)
    assert result.returncode != 0
    assert "Unknown builtin op: fgl::gather_linear" in result.stderr


def test_installed_fgl_infer_runs_the_model(repository, tmp_path):
    """The same model file through the installed C++ program (libtorch on
    the library path only, as in the runtime container)."""
    x_path = tmp_path / "x.pt"
    torch.save(torch.randn(4, 9, 32), x_path)
    env = {"PATH": "/usr/bin:/bin",
           "LD_LIBRARY_PATH": str(Path(torch.__file__).parent / "lib")}
    result = subprocess.run(
        [str(STAGE / "bin" / "fgl_infer"), "--device", "cpu",
         "--model", str(repository / MODEL / "1" / "model.pt"),
         "--input", str(x_path)], env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "check passed" in result.stdout

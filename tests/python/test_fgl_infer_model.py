"""fgl_infer --model end to end: a TorchScript file and an AOTInductor package
of GatherLinear (made at test time by python/fgl/export.py) run on saved inputs,
checked against the reference from the model's own weights; outputs are read
back with torch.load and compared with a float64 reference computed here.
Error cases: a model calling an operator fgl_infer lacks, a forward with two
arguments, a file that is not a model, a model without proj weights, --model
with --weights, a package run on the wrong device or dtype."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))
from fgl import export  # noqa: E402
from fgl.models import reference  # noqa: E402

pytestmark = pytest.mark.filterwarnings(
    "ignore:`torch.jit.*deprecated:DeprecationWarning")

BINARY = os.environ["FGL_INFER"]
OK, USAGE, DATAERR = 0, 64, 65
R, H, K = 3, 16, 10
HAS_GPU = torch.cuda.is_available()
needs_gpu = pytest.mark.skipif(not HAS_GPU, reason="needs a CUDA GPU")


def run(*args):
    return subprocess.run([BINARY, *map(str, args)], capture_output=True,
                          text=True, timeout=300)


def assert_error(result, code, *parts, output=None):
    assert result.returncode == code, result.stdout + result.stderr
    assert "fgl_infer: error:" in result.stderr
    assert "fgl_infer: hint:" in result.stderr
    for part in parts:
        assert part in result.stderr, result.stderr
    if output is not None:
        assert not output.exists()
        assert not list(output.parent.glob(output.name + ".*"))


def assert_close(out, want):
    assert out.shape == want.shape and out.dtype == torch.float32
    scale = want.abs() + want.pow(2).mean().sqrt()
    err = ((out.double() - want).abs() / scale).max()
    assert float(err) <= 2e-5, float(err)


def inputs(tmp_path):
    """A dict of two batches (R, B, H) on disk."""
    xs = {"a": torch.randn(R, 7, H), "b": torch.randn(5, R, H).transpose(0, 1)}
    torch.save({k: v.contiguous() for k, v in xs.items()}, tmp_path / "x.pt")
    return xs


@pytest.fixture(scope="session")
def gather_proj():
    return export.make_model(R, H, K, seed=3)


@pytest.fixture(scope="session")
def torchscript_file(gather_proj, tmp_path_factory):
    path = tmp_path_factory.mktemp("ts") / "model.pt"
    export.save_torchscript(gather_proj, path)
    return path


def make_package(model, device, tmp_path_factory):
    path = tmp_path_factory.mktemp("aoti_" + device) / "model.pt2"
    model = model.to(device)
    export.save_aoti_package(model, export.example_input(model, 4, device),
                             path)
    return path


@pytest.fixture(scope="session")
def aoti_cpu(gather_proj, tmp_path_factory):
    # One AOTInductor compile per session (~30-60 s here).
    return make_package(gather_proj, "cpu", tmp_path_factory)


def check_run(model_path, proj, tmp_path, *extra):
    xs = inputs(tmp_path)
    out_path = tmp_path / "y.pt"
    result = run("--input", tmp_path / "x.pt", "--model", model_path,
                 "--output", out_path, "--batch-size", 4, *extra)
    assert result.returncode == OK, result.stdout + result.stderr
    assert "check passed" in result.stdout
    out = torch.load(out_path, weights_only=True)
    assert list(out) == ["a", "b"]
    for name, x in xs.items():
        assert_close(out[name], reference(x, proj.proj.weight,
                                          proj.proj.bias))
    return result


# ---------------------------------------------------------------- successes

def test_torchscript_model(torchscript_file, gather_proj, tmp_path):
    result = check_run(torchscript_file, gather_proj.cpu(), tmp_path,
                       "--device", "cpu")
    assert "(torchscript)" in result.stdout


def test_torchscript_json_and_benchmark(torchscript_file, tmp_path):
    inputs(tmp_path)
    result = run("--input", tmp_path / "x.pt", "--model", torchscript_file,
                 "--device", "cpu", "--json", "--warmup", 1, "--iters", 3)
    assert result.returncode == OK, result.stderr
    summary = json.loads(result.stdout)
    assert summary["model_format"] == "torchscript"
    assert (summary["R"], summary["H"], summary["K"]) == (R, H, K)
    assert summary["check"]["passed"] and summary["bias"]
    assert summary["benchmark"]["fused"]["samples"] == 3
    assert summary["benchmark"]["reference"]["samples"] == 3


def test_torchscript_float64(torchscript_file, gather_proj, tmp_path):
    xs = inputs(tmp_path)
    result = run("--input", tmp_path / "x.pt", "--model", torchscript_file,
                 "--device", "cpu", "--dtype", "float64",
                 "--output", tmp_path / "y.pt")
    assert result.returncode == OK, result.stderr
    out = torch.load(tmp_path / "y.pt", weights_only=True)
    want = reference(xs["a"], gather_proj.proj.weight, gather_proj.proj.bias)
    assert out["a"].dtype == torch.float64
    torch.testing.assert_close(out["a"], want, rtol=1e-6, atol=1e-6)


def test_aoti_package_on_cpu(aoti_cpu, gather_proj, tmp_path):
    result = check_run(aoti_cpu, gather_proj.cpu(), tmp_path,
                       "--device", "cpu")
    assert "(aoti)" in result.stdout


def test_aoti_package_with_a_folded_bias(tmp_path):
    # A plain export of nn.Linear under no_grad: AOTInductor folds the bias
    # into the package's code and keeps only proj.weight as a constant.
    class CatLinear(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(3 * 8, 5)

        def forward(self, x):
            return self.proj(torch.cat(x.unbind(0), -1))

    model = CatLinear().eval()
    with torch.no_grad():
        model.proj.bias.uniform_(1, 2)
    x = torch.randn(3, 4, 8)
    torch.save(x, tmp_path / "x.pt")
    with torch.no_grad():
        package = torch._inductor.aoti_compile_and_package(
            torch.export.export(model, (x,)),
            package_path=str(tmp_path / "linear.pt2"))
    result = run("--input", tmp_path / "x.pt", "--model", package,
                 "--device", "cpu", "--output", tmp_path / "y.pt", "--json")
    assert result.returncode == OK, result.stdout + result.stderr
    assert json.loads(result.stdout)["check"]["passed"] is True
    with torch.no_grad():
        want = model(x)
    assert_close(torch.load(tmp_path / "y.pt", weights_only=True), want)


def test_aoti_package_benchmark_json(aoti_cpu, tmp_path):
    inputs(tmp_path)
    result = run("--input", tmp_path / "x.pt", "--model", aoti_cpu,
                 "--device", "cpu", "--json", "--warmup", 1, "--iters", 2)
    assert result.returncode == OK, result.stderr
    summary = json.loads(result.stdout)
    assert summary["model_format"] == "aoti" and summary["check"]["passed"]
    assert summary["K"] == K and summary["benchmark"]["speedup"] > 0


@needs_gpu
def test_torchscript_model_on_cuda(torchscript_file, gather_proj, tmp_path):
    check_run(torchscript_file, gather_proj.cpu(), tmp_path,
              "--device", "cuda")


@needs_gpu
def test_aoti_package_on_cuda(gather_proj, tmp_path, tmp_path_factory):
    package = make_package(gather_proj, "cuda", tmp_path_factory)
    check_run(package, gather_proj.cpu(), tmp_path, "--device", "cuda")
    result = run("--input", tmp_path / "x.pt", "--model", package,
                 "--device", "cpu", "--output", tmp_path / "z.pt")
    assert_error(result, USAGE, "compiled for cuda", "--device cuda",
                 output=tmp_path / "z.pt")


# ---------------------------------------------------------------- errors

def test_unregistered_operator(tmp_path):
    # An op that only this Python process defines: fgl_infer lacks it.
    lib = torch.library.Library("fgltest_other", "DEF")
    lib.define("op(Tensor x) -> Tensor")
    lib.impl("op", lambda x: x.sum(0), "CompositeExplicitAutograd")

    class CallsOtherOp(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.ops.fgltest_other.op(x)

    torch.jit.script(CallsOtherOp()).save(str(tmp_path / "other.pt"))
    inputs(tmp_path)
    result = run("--input", tmp_path / "x.pt", "--model", tmp_path / "other.pt",
                 "--output", tmp_path / "y.pt")
    assert_error(result, DATAERR,
                 "the model calls an operator that is not registered",
                 "fgltest_other::op", "load the library that defines it",
                 output=tmp_path / "y.pt")


def test_forward_with_two_arguments(tmp_path):
    class TwoArgs(torch.nn.Module):
        def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
            return x + y

    torch.jit.script(TwoArgs()).save(str(tmp_path / "two.pt"))
    inputs(tmp_path)
    result = run("--input", tmp_path / "x.pt", "--model", tmp_path / "two.pt",
                 "--output", tmp_path / "y.pt")
    assert_error(result, DATAERR, "forward must take one Tensor",
                 "Tensor y", output=tmp_path / "y.pt")


@pytest.mark.parametrize("content", ["tensor", "text"])
def test_not_a_model(tmp_path, content):
    inputs(tmp_path)
    if content == "tensor":
        torch.save(torch.randn(3), tmp_path / "m.pt")
    else:
        (tmp_path / "m.pt").write_text("not a model")
    result = run("--input", tmp_path / "x.pt", "--model", tmp_path / "m.pt",
                 "--output", tmp_path / "y.pt")
    assert_error(result, DATAERR, "not a TorchScript archive",
                 output=tmp_path / "y.pt")


def test_missing_model_file(tmp_path):
    inputs(tmp_path)
    result = run("--input", tmp_path / "x.pt", "--model", tmp_path / "no.pt")
    assert_error(result, 66, "model", "does not exist")


def test_model_without_proj_needs_no_check(tmp_path, gather_proj):
    class NoProj(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(gather_proj.proj.weight.detach())

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.ops.fgl.gather_linear(x, self.w, None)

    torch.jit.script(NoProj()).save(str(tmp_path / "noproj.pt"))
    xs = inputs(tmp_path)
    args = ["--input", tmp_path / "x.pt", "--model", tmp_path / "noproj.pt",
            "--output", tmp_path / "y.pt"]
    assert_error(run(*args), DATAERR, "no proj.weight", "--no-check",
                 output=tmp_path / "y.pt")
    result = run(*args, "--no-check", "--iters", 2, "--warmup", 0)
    assert result.returncode == OK, result.stderr
    out = torch.load(tmp_path / "y.pt", weights_only=True)
    assert_close(out["a"], reference(xs["a"], gather_proj.proj.weight, None))
    # Only what was measured is reported: K from the output, the bias and
    # the errors unknown.
    assert f"K={K} bias unknown" in result.stdout
    assert "check skipped" in result.stdout
    report = json.loads(run(*args, "--no-check", "--json").stdout)
    assert report["K"] == K and report["bias"] is None
    assert report["check"]["passed"] is None
    assert all(b["max_abs_err"] is None and b["passed"] is None
               for b in report["batches"])
    # The model's forward is its own: fgl_infer does not know its route.
    assert all(b["route"] is None for b in report["batches"])


def test_weights_prefix_names_the_models_layer(tmp_path, gather_proj):
    class OutProj(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.out_proj = torch.nn.Linear(R * H, K)
            with torch.no_grad():
                self.out_proj.weight.copy_(gather_proj.proj.weight)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.ops.fgl.gather_linear(x, self.out_proj.weight,
                                               self.out_proj.bias)

    model = OutProj()
    torch.jit.script(model).save(str(tmp_path / "outproj.pt"))
    xs = inputs(tmp_path)
    args = ["--input", tmp_path / "x.pt", "--model", tmp_path / "outproj.pt",
            "--output", tmp_path / "y.pt"]
    assert_error(run(*args), DATAERR, "no proj.weight", "--weights-prefix",
                 output=tmp_path / "y.pt")
    for prefix in ("out_proj", "out_proj."):
        result = run(*args, "--weights-prefix", prefix, "--json")
        assert result.returncode == OK, result.stderr
        report = json.loads(result.stdout)
        assert report["check"]["passed"] is True and report["bias"] is True
        out = torch.load(tmp_path / "y.pt", weights_only=True)
        assert_close(out["a"], reference(xs["a"], model.out_proj.weight,
                                         model.out_proj.bias))


def test_model_and_weights_are_exclusive(torchscript_file, tmp_path):
    inputs(tmp_path)
    torch.save(torch.nn.Linear(R * H, K).state_dict(), tmp_path / "w.pt")
    result = run("--input", tmp_path / "x.pt", "--model", torchscript_file,
                 "--weights", tmp_path / "w.pt")
    assert_error(result, USAGE, "mutually exclusive")
    assert_error(run("--model", torchscript_file), USAGE,
                 "--model needs --input")


def test_model_and_input_disagree(torchscript_file, tmp_path):
    torch.save(torch.randn(R + 1, 4, H), tmp_path / "x.pt")
    result = run("--input", tmp_path / "x.pt", "--model", torchscript_file)
    assert_error(result, DATAERR, "R=3", "R=4")


def test_aoti_package_errors(aoti_cpu, tmp_path):
    inputs(tmp_path)
    result = run("--input", tmp_path / "x.pt", "--model", aoti_cpu,
                 "--device", "cpu", "--dtype", "float64",
                 "--output", tmp_path / "y.pt")
    assert_error(result, USAGE, "compiled for", "--dtype is float64",
                 output=tmp_path / "y.pt")
    if HAS_GPU:
        result = run("--input", tmp_path / "x.pt", "--model", aoti_cpu,
                     "--device", "cuda", "--output", tmp_path / "y.pt")
        assert_error(result, USAGE, "compiled for cpu",
                     output=tmp_path / "y.pt")


def test_export_script_example_is_an_input_fgl_infer_runs(tmp_path):
    # examples/export_model.py's --example is what --input reads, and its
    # --example-output what --output writes for it.
    script = Path(__file__).resolve().parents[2] / "examples" / "export_model.py"
    ts, x, eager = (tmp_path / n for n in ("m.pt", "x.pt", "eager.pt"))
    subprocess.run([sys.executable, str(script), "--torchscript", str(ts),
                    "--example", str(x), "--example-output", str(eager),
                    "--R", str(R), "--H", str(H), "--K", str(K)],
                   check=True, capture_output=True, timeout=300)
    out = tmp_path / "y.pt"
    result = run("--model", ts, "--input", x, "--output", out)
    assert result.returncode == OK, result.stdout + result.stderr
    assert_close(torch.load(out)["x"], torch.load(eager)["x"].double())

"""The model files of examples/export_model.py: a TorchScript file and an
AOTInductor package (torch.export with a dynamic batch), each loaded back in
a fresh Python process that has loaded only the op library, and compared with
the eager result and the float64 cat + linear reference."""
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
R, H, K, B = 3, 8, 10, 5

# Runs in a fresh process: argv = model.pt model.pt2 example.pt
# example_output.pt device python/.
CHECK_LOADED_MODELS = r"""
import sys
import torch
sys.path.insert(0, sys.argv[6])
import fgl
fgl.load_library()
from fgl.models import reference

ts_path, pt2_path, example_path, output_path, device = sys.argv[1:6]
x = torch.load(example_path)["x"].to(device)
eager_out = torch.load(output_path)["x"]

scripted = torch.jit.load(ts_path, map_location=device)
assert (scripted.R, scripted.H, scripted.K) == ({R}, {H}, {K})
weight, bias = scripted.proj.weight, scripted.proj.bias
package = torch._inductor.aoti_load_package(pt2_path)
assert package.get_metadata()["R"] == "{R}", package.get_metadata()


def check(out, ref, tol):
    scale = ref.abs() + ref.pow(2).mean().sqrt()
    err = float(((out.double().cpu() - ref) / scale).abs().max())
    assert err <= tol, err


with torch.no_grad():
    for name, model in (("torchscript", scripted), ("aoti", package)):
        check(model(x), eager_out.double(), 1e-5)
        # Other batch sizes: the package's batch is dynamic.
        for batch in (1, 7):
            xb = torch.randn(batch, {R}, {H}, device=device).transpose(0, 1)
            out = model(xb)
            assert out.shape == (batch, {K}) and out.device == xb.device
            check(out, reference(xb, weight, bias), 2e-5)
        print(name, "ok")
""".replace("{R}", str(R)).replace("{H}", str(H)).replace("{K}", str(K))


def run(args):
    done = subprocess.run([sys.executable, *map(str, args)], env=os.environ,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_export_script_models_load_in_a_fresh_process(device, tmp_path):
    ts, pt2, example, output = (tmp_path / n for n in
                                ("m.pt", "m.pt2", "x.pt", "y.pt"))
    printed = run([REPO / "examples" / "export_model.py", "--torchscript", ts,
                   "--aoti", pt2, "--example", example, "--example-output",
                   output, "--device", device, "--R", R, "--H", H, "--K", K,
                   "--batch", B])
    assert "compiling the AOTInductor package" in printed
    assert all(p.is_file() for p in (ts, pt2, example, output))
    out = run(["-c", CHECK_LOADED_MODELS, ts, pt2, example, output, device,
               REPO / "python"])
    assert "torchscript ok" in out and "aoti ok" in out


def test_export_script_takes_a_layer_from_a_checkpoint(tmp_path):
    # A checkpoint holding more than the layer; one of R and H given.
    from fgl.models import reference
    weight, bias = torch.randn(K, R * H), torch.randn(K)
    torch.save({"layers.0.attn.out_proj.weight": weight,
                "layers.0.attn.out_proj.bias": bias,
                "layers.0.mlp.weight": torch.randn(4, 4),
                "step": torch.tensor(7)}, tmp_path / "ckpt.pt")
    ts, example, output = (tmp_path / n for n in ("m.pt", "x.pt", "y.pt"))
    run([REPO / "examples" / "export_model.py", "--torchscript", ts,
         "--weights", tmp_path / "ckpt.pt", "--weights-prefix",
         "layers.0.attn.out_proj.", "--H", H, "--dtype", "bfloat16",
         "--example", example, "--example-output", output, "--batch", B])
    scripted = torch.jit.load(str(ts))
    assert (scripted.R, scripted.H, scripted.K) == (R, H, K)
    assert scripted.proj.weight.dtype == torch.bfloat16
    assert torch.equal(scripted.proj.weight, weight.bfloat16())
    assert torch.equal(scripted.proj.bias, bias.bfloat16())
    x = torch.load(example)["x"]
    assert x.dtype == torch.bfloat16 and x.shape == (R, B, H)
    out = torch.load(output)["x"]
    want = reference(x, weight.bfloat16(), bias.bfloat16())
    scale = want.abs() + want.pow(2).mean().sqrt()
    assert float(((out.double() - want) / scale).abs().max()) <= 1e-2


class NotATensor:
    """A pickled object of a class: torch.load(weights_only=True) refuses
    it rather than running its code."""


def test_export_script_reads_checkpoints_as_data_only(tmp_path):
    torch.save({"weight": torch.randn(K, R * H), "obj": NotATensor()},
               tmp_path / "ckpt.pt")
    done = subprocess.run(
        [sys.executable, str(REPO / "examples" / "export_model.py"),
         "--torchscript", str(tmp_path / "m.pt"), "--weights",
         str(tmp_path / "ckpt.pt"), "--R", str(R)],
        capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode != 0 and "Weights only load failed" in done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert not (tmp_path / "m.pt").exists()


@pytest.mark.parametrize("args,message", [
    (["--weights", "CKPT"], "one of --R and --H"),
    (["--weights", "CKPT", "--R", "3", "--K", "4"], "come from --weights"),
    (["--weights-prefix", "a."], "--weights-prefix needs --weights"),
    (["--weights", "CKPT", "--weights-prefix", "nope.", "--R", "3"],
     "no 2-D tensor nope.weight"),
    (["--weights", "CKPT", "--R", "5"], "not a multiple of R = 5"),
    (["--example-output", "y.pt"], "--example-output needs --example"),
    (["--batch", "0"], "--batch must be >= 1"),
])
def test_export_script_refuses_what_it_cannot_make(tmp_path, args, message):
    torch.save({"weight": torch.randn(K, R * H)}, tmp_path / "ckpt.pt")
    args = [str(tmp_path / "ckpt.pt") if a == "CKPT" else a for a in args]
    done = subprocess.run(
        [sys.executable, str(REPO / "examples" / "export_model.py"),
         "--torchscript", str(tmp_path / "m.pt"), *args],
        capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode != 0 and message in done.stderr, done.stderr
    assert not (tmp_path / "m.pt").exists()


def test_script_needs_an_output_path():
    done = subprocess.run(
        [sys.executable, str(REPO / "examples" / "export_model.py")],
        capture_output=True, text=True)
    assert done.returncode != 0 and "--torchscript" in done.stderr


def test_torchscript_without_bias_in_process(tmp_path):
    from fgl import export
    from fgl.models import reference
    model = export.make_model(R, H, K, bias=False, seed=1)
    export.save_torchscript(model, tmp_path / "nobias.pt")
    loaded = torch.jit.load(str(tmp_path / "nobias.pt"))
    x = export.example_input(model, B)
    want = reference(x, model.proj.weight, None)
    torch.testing.assert_close(loaded(x).double(), want, rtol=2e-5,
                               atol=2e-5 * float(want.abs().max()))

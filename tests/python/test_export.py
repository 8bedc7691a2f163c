"""The model files of examples/export_model.py: a TorchScript file and an
AOTInductor package (torch.export with a dynamic batch), each loaded back in
a fresh Python process that has loaded only the op library, and compared with
the eager result and the float64 cat + linear reference."""
import os
import subprocess
import sys
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[2]
R, H, K, B = 3, 8, 10, 5

# Runs in a fresh process: argv = model.pt model.pt2 example.pt device.
CHECK_LOADED_MODELS = r"""
import sys
import torch
sys.path.insert(0, sys.argv[5])
import fgl
fgl.load_library()
from fgl.models import reference

ts_path, pt2_path, example_path, device = sys.argv[1:5]
example = torch.load(example_path)
x, eager_out = example["x"].to(device), example["out"]

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
    ts, pt2, example = (tmp_path / n for n in ("m.pt", "m.pt2", "ex.pt"))
    run([REPO / "examples" / "export_model.py", "--torchscript", ts,
         "--aoti", pt2, "--example", example, "--device", device,
         "--R", R, "--H", H, "--K", K, "--batch", B])
    assert ts.is_file() and pt2.is_file() and example.is_file()
    out = run(["-c", CHECK_LOADED_MODELS, ts, pt2, example, device,
               REPO / "python"])
    assert "torchscript ok" in out and "aoti ok" in out


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

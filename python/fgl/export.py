"""Serialised forms of GatherLinear for programs without Python (fgl_infer):
a TorchScript file (torch.jit.load / torch::jit::load) and an AOTInductor
package (.pt2, aoti_load_package / torch::inductor::AOTIModelPackageLoader).
Both call torch.ops.fgl.gather_linear, so the loading process must have the
op library loaded (C++ programs link libfgl_ops.so)."""
import torch
from torch.export import Dim

from .models import GatherLinear


def make_model(R, H, K, bias=True, device="cpu", seed=0):
    """A GatherLinear with weights drawn from `seed`, in eval mode."""
    torch.manual_seed(seed)
    return GatherLinear(R, H, K, bias=bias).to(device).eval()


def example_input(model, B, device="cpu"):
    """x (R, B, H) for `model`, laid out as attention produces it: a
    (B, R, H) buffer viewed head-major."""
    return torch.randn(B, model.R, model.H, device=device).transpose(0, 1)


def save_torchscript(model, path):
    """torch.jit.script's `model` and saves it; R, H, K stay readable as the
    scripted module's attributes."""
    scripted = torch.jit.script(model)
    scripted.save(str(path))
    return scripted


def save_aoti_package(model, example, path, max_batch=None):
    """Exports `model` with a dynamic batch (x's dim 1) and compiles it with
    AOTInductor into the .pt2 package `path`, for example's device. R, H, K
    go into the package metadata."""
    batch = Dim("batch", min=1, max=max_batch) if max_batch else Dim("batch")
    with torch.no_grad():
        exported = torch.export.export(model, (example,),
                                       dynamic_shapes={"x": {1: batch}})
    metadata = {"R": str(model.R), "H": str(model.H), "K": str(model.K),
                "device": example.device.type}
    return torch._inductor.aoti_compile_and_package(
        exported, package_path=str(path),
        inductor_configs={"aot_inductor.metadata": metadata})


def save_example(model, example, path):
    """torch.save's {"x": ..., "out": model(x)} on the CPU: one input and the
    eager result, for checking a loaded model (torch::pickle_load in C++)."""
    with torch.no_grad():
        out = model(example)
    torch.save({"x": example.cpu().contiguous(), "out": out.cpu()}, str(path))

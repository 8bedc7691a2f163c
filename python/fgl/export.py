"""Serialised forms of GatherLinear for programs without Python (fgl_infer):
a TorchScript file (torch.jit.load / torch::jit::load) and an AOTInductor
package (.pt2, aoti_load_package / torch::inductor::AOTIModelPackageLoader).
Both call torch.ops.fgl.gather_linear, so the loading process must have the
op library loaded (C++ programs link libfgl_ops.so)."""
import torch
from torch.export import Dim

from .models import GatherLinear


def make_model(R, H, K, bias=True, device="cpu", seed=0, dtype=None):
    """A GatherLinear with weights drawn from `seed`, in eval mode."""
    torch.manual_seed(seed)
    return GatherLinear(R, H, K, bias=bias).to(device, dtype).eval()


def read_state_dict(path):
    """The tensors of a state_dict file: torch.save (read with
    weights_only=True: data, never code) or safetensors."""
    if str(path).endswith(".safetensors"):
        try:
            from safetensors.torch import load_file
        except ImportError as err:
            raise ValueError(f"{path}: reading .safetensors needs the "
                             "safetensors package (pip install safetensors)"
                             ) from err
        return load_file(str(path))
    state = torch.load(str(path), map_location="cpu", weights_only=True)
    if not isinstance(state, dict):
        raise ValueError(f"{path}: expected a state_dict (a dict of tensors), "
                         f"got {type(state).__name__}")
    return state


def model_from_weights(state, prefix="", R=None, H=None, device="cpu",
                       dtype=None):
    """A GatherLinear holding `state`'s `<prefix>weight` (K, R*H) and
    `<prefix>bias` (K) if present. One of R and H is needed (the other is
    R*H divided by it); K comes from the weight."""
    weight = state.get(prefix + "weight")
    if not isinstance(weight, torch.Tensor) or weight.dim() != 2:
        found = ", ".join(sorted(k for k in state if k.endswith("weight")))
        raise ValueError(f"no 2-D tensor {prefix}weight (K, R*H) in the "
                         f"weights; weight entries there: {found or 'none'}")
    K, C = weight.shape
    if (R is None) == (H is None):
        raise ValueError("give one of R and H with weights: the other is "
                         f"R*H = {C} divided by it")
    if C % (R or H) != 0:
        raise ValueError(f"{prefix}weight has {C} columns, not a multiple of "
                         f"{'R' if R else 'H'} = {R or H}")
    R, H = (R, C // R) if R else (C // H, H)
    bias = state.get(prefix + "bias")
    if bias is not None and tuple(bias.shape) != (K,):
        raise ValueError(f"{prefix}bias has shape {tuple(bias.shape)}, "
                         f"expected ({K},)")
    model = GatherLinear(R, H, K, bias=bias is not None)
    with torch.no_grad():
        model.proj.weight.copy_(weight)
        if bias is not None:
            model.proj.bias.copy_(bias)
    return model.to(device, dtype).eval()


def example_input(model, B, device="cpu"):
    """x (R, B, H) for `model`, in its dtype, laid out as attention produces
    it: a (B, R, H) buffer viewed head-major."""
    dtype = model.proj.weight.dtype
    return torch.randn(B, model.R, model.H, device=device,
                       dtype=dtype).transpose(0, 1)


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


def save_example(model, example, path, output_path=None):
    """torch.save's {"x": x} on the CPU, the input file fgl_infer --input
    reads; and, at `output_path`, the eager result {"x": model(x)}, shaped as
    fgl_infer --output writes it."""
    torch.save({"x": example.cpu().contiguous()}, str(path))
    if output_path:
        with torch.no_grad():
            out = model(example)
        torch.save({"x": out.cpu()}, str(output_path))

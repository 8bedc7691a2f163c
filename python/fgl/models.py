"""The model that fgl's export paths (TorchScript, torch.export + AOTInductor)
and fgl_infer share: the output projection over head-major outputs."""
import torch
from torch import nn


class GatherLinear(nn.Module):
    """x (R, B, H) -> (B, K) = proj(cat(x.unbind(0), -1)), computed by
    fgl::gather_linear without the cat. `proj` holds weight (K, R*H) and bias
    so that checkpoints of an nn.Linear projection load unchanged."""

    def __init__(self, R: int, H: int, K: int, bias: bool = True):
        super().__init__()
        self.R, self.H, self.K = R, H, K
        self.proj = nn.Linear(R * H, K, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.fgl.gather_linear(x, self.proj.weight, self.proj.bias)


def reference(x, weight, bias=None):
    """The unfused path in float64 on the CPU: linear(cat(x.unbind(0), -1))."""
    gathered = torch.cat(x.detach().double().cpu().unbind(0), -1)
    b64 = None if bias is None else bias.detach().double().cpu()
    return nn.functional.linear(gathered, weight.detach().double().cpu(), b64)

"""libfgl_ops.so loaded into Python with torch.ops.load_library gives
torch.ops.fgl.gather_linear, which matches cat + linear in float64, and
torch.ops.fgl.gather_linear_route, which names the route it takes."""
import os

import pytest
import torch

torch.ops.load_library(os.environ["FGL_OPS_LIBRARY"])

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
TOLERANCE = {torch.float64: 1e-12, torch.float32: 2e-5,
             torch.float16: 2e-3, torch.bfloat16: 1e-2}


def reference(x, weight, bias):
    x64 = x.double().cpu()
    gathered = torch.cat([x64[r] for r in range(x64.shape[0])], -1)
    b64 = None if bias is None else bias.double().cpu()
    return torch.nn.functional.linear(gathered, weight.double().cpu(), b64)


def assert_matches(out, ref):
    scale = ref.abs() + ref.pow(2).mean().sqrt()
    err = (out.double().cpu() - ref).abs()
    assert bool((err <= TOLERANCE[out.dtype] * scale).all()), float(
        (err / scale).max())


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", list(TOLERANCE))
@pytest.mark.parametrize("with_bias", [True, False])
@pytest.mark.parametrize("R,B,H,K", [(4, 12, 32, 56), (1, 1, 33, 1000),
                                     (7, 5, 17, 9)])
def test_matches_cat_linear(device, dtype, with_bias, R, B, H, K):
    x = torch.randn(B, R, H, dtype=dtype, device=device).transpose(0, 1)
    weight = torch.randn(K, R * H, dtype=dtype, device=device)
    bias = torch.randn(K, dtype=dtype, device=device) if with_bias else None
    out = torch.ops.fgl.gather_linear(x, weight, bias)
    assert out.shape == (B, K) and out.dtype == dtype
    assert out.device == x.device
    assert_matches(out, reference(x, weight, bias))


def test_out_variant_writes_every_element():
    x = torch.randn(3, 6, 10)
    weight = torch.randn(20, 30)
    out = torch.full((6, 20), float("nan"))
    torch.ops.fgl.gather_linear.out(x, weight, None, out=out)
    assert_matches(out, reference(x, weight, None))


def test_bad_input_raises_with_the_argument_named():
    with pytest.raises(RuntimeError, match=r"weight must have R\*H = 8"):
        torch.ops.fgl.gather_linear(torch.randn(2, 3, 4), torch.randn(5, 9))


def test_meta_tensors_give_the_result_shape():
    out = torch.ops.fgl.gather_linear(torch.empty(4, 2, 8, device="meta"),
                                      torch.empty(16, 32, device="meta"))
    assert out.device.type == "meta" and out.shape == (2, 16)


CPU_ROUTES = {"dot", "gemm-view", "gemm-cat", "gemm-slices"}


def test_route_is_named_without_touching_gradients():
    x = torch.randn(4, 12, 32, requires_grad=True)
    weight = torch.randn(56, 128)
    route = torch.ops.fgl.gather_linear_route(x, weight, None)
    assert isinstance(route, str) and route in CPU_ROUTES
    # A batch-major buffer seen head-major is a gathered view: never cat.
    view = torch.randn(12, 4, 32).transpose(0, 1)
    assert torch.ops.fgl.gather_linear_route(view, weight) != "gemm-cat"
    assert torch.ops.fgl.gather_linear_route(
        torch.randn(4, 0, 32), weight) == "empty"


def test_route_rejects_what_the_op_rejects():
    with pytest.raises(RuntimeError, match=r"weight must have R\*H = 8"):
        torch.ops.fgl.gather_linear_route(torch.randn(2, 3, 4),
                                          torch.randn(5, 9))

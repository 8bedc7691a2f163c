"""Gradients of torch.ops.fgl.gather_linear (the C++ Autograd kernel) for x,
weight and bias: float64 gradcheck on the CPU, CUDA against CPU, half types
against the float64 cat + linear reference."""
import pytest
import torch
from torch.autograd import gradcheck

from fgl.models import reference

op = torch.ops.fgl.gather_linear


def make_inputs(R, B, H, K, dtype=torch.float64, device="cpu", bias=True,
                batch_major=False):
    if batch_major:  # a (B, R, H) buffer viewed head-major: non-contiguous
        x = torch.randn(B, R, H, dtype=dtype, device=device).transpose(0, 1)
    else:
        x = torch.randn(R, B, H, dtype=dtype, device=device)
    w = torch.randn(K, R * H, dtype=dtype, device=device)
    b = torch.randn(K, dtype=dtype, device=device) if bias else None
    return [t.requires_grad_() if t is not None else None for t in (x, w, b)]


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("batch_major", [False, True])
@pytest.mark.parametrize("R,B,H,K", [(3, 4, 5, 6), (1, 3, 7, 5),
                                     (4, 1, 3, 1), (2, 5, 9, 11)])
def test_gradcheck_float64(R, B, H, K, bias, batch_major):
    inputs = make_inputs(R, B, H, K, bias=bias, batch_major=batch_major)
    assert gradcheck(op, inputs)


def test_gradcheck_transposed_weight():
    x = torch.randn(3, 4, 5, dtype=torch.float64, requires_grad=True)
    w = torch.randn(15, 6, dtype=torch.float64).t().requires_grad_()
    assert gradcheck(op, (x, w, None))


def grads(x, w, b, grad_out):
    leaves = [t for t in (x, w, b) if t is not None]
    return torch.autograd.grad(op(x, w, b), leaves, grad_out)


def reference_grads(x, w, b, grad_out):
    """Float64 CPU gradients of the unfused linear(cat(x.unbind(0), -1))."""
    x64, w64 = (t.detach().double().cpu().requires_grad_() for t in (x, w))
    b64 = None if b is None else b.detach().double().cpu().requires_grad_()
    out = torch.nn.functional.linear(torch.cat(x64.unbind(0), -1), w64, b64)
    leaves = [t for t in (x64, w64, b64) if t is not None]
    return torch.autograd.grad(out, leaves, grad_out.double().cpu())


TOLERANCE = {torch.float64: 1e-12, torch.float32: 2e-5,
             torch.float16: 2e-3, torch.bfloat16: 1e-2}


def assert_close_scaled(got, ref):
    scale = ref.abs() + ref.pow(2).mean().sqrt()
    err = (got.double().cpu() - ref).abs()
    assert bool((err <= TOLERANCE[got.dtype] * scale).all()), float(
        (err / scale).max())


@pytest.mark.parametrize("dtype", list(TOLERANCE))
@pytest.mark.parametrize("bias", [True, False])
def test_gradients_match_cat_linear(device, dtype, bias):
    x, w, b = make_inputs(5, 7, 33, 20, dtype, device, bias, batch_major=True)
    grad_out = torch.randn(7, 20, dtype=dtype, device=device)
    got = grads(x, w, b, grad_out)
    ref = reference_grads(x, w, b, grad_out)
    assert len(got) == len(ref)
    for g, r, leaf in zip(got, ref, (x, w, b)):
        assert g.shape == leaf.shape and g.dtype == dtype
        assert g.device == leaf.device
        assert_close_scaled(g, r)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_cuda_gradients_match_cpu(dtype):
    cpu = make_inputs(4, 6, 17, 9, dtype, "cpu", bias=True, batch_major=True)
    # .cuda() keeps x's batch-major strides.
    cuda = [t.detach().cuda().requires_grad_() for t in cpu]
    assert not cuda[0].is_contiguous()
    grad_out = torch.randn(6, 9, dtype=dtype)
    for g_cuda, g_cpu in zip(grads(*cuda, grad_out.cuda()),
                             grads(*cpu, grad_out)):
        torch.testing.assert_close(g_cuda.cpu(), g_cpu)


def test_only_requested_gradients_are_computed():
    x, w, b = make_inputs(3, 4, 5, 6)
    w.requires_grad_(False)
    b.requires_grad_(False)
    out = op(x, w, b)
    (gx,) = torch.autograd.grad(out, x, torch.ones_like(out))
    assert_close_scaled(gx, reference_grads(x, w, b, torch.ones_like(out))[0])
    # Weight alone: autograd asks only for grad_weight.
    x, w, b = make_inputs(3, 4, 5, 6)
    out = op(x, w, b)
    (gw,) = torch.autograd.grad(out, w, torch.ones_like(out))
    assert gw.shape == w.shape


def test_backward_accumulates_into_leaf_grads():
    x, w, b = make_inputs(2, 3, 4, 5)
    op(x, w, b).sum().backward()
    ref = reference_grads(x, w, b, torch.ones(3, 5, dtype=torch.float64))
    for leaf, r in zip((x, w, b), ref):
        assert_close_scaled(leaf.grad, r)


def test_double_backward_raises_a_clear_error():
    x, w, b = make_inputs(2, 3, 4, 5)
    out = op(x, w, b)
    with pytest.raises(RuntimeError, match="double backward"):
        torch.autograd.grad(out.sum(), x, create_graph=True)


def test_out_variant_refuses_inputs_that_require_grad():
    x, w, b = make_inputs(2, 3, 4, 5)
    out = torch.empty(3, 5, dtype=torch.float64)
    with pytest.raises(RuntimeError, match="don't support automatic"):
        torch.ops.fgl.gather_linear.out(x, w, b, out=out)
    with torch.no_grad():
        torch.ops.fgl.gather_linear.out(x, w, b, out=out)
    assert_close_scaled(out, reference(x, w, b))


class RecordOps(torch.utils._python_dispatch.TorchDispatchMode):
    """Records every aten op dispatched, C++ backward kernels' included."""

    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(func)
        return func(*args, **(kwargs or {}))


def test_backward_is_one_gemm_per_slice_without_a_concat():
    R, B, H, K = 4, 3, 5, 6
    x, w, b = make_inputs(R, B, H, K, batch_major=True)
    out = op(x, w, b)
    with RecordOps() as recorded:
        gx, gw, gb = torch.autograd.grad(out, (x, w, b), torch.ones_like(out))
    names = [str(f) for f in recorded.ops]
    assert not any("cat" in n or "clone" in n or "contiguous" in n
                   for n in names), names
    assert names.count("aten.mm.out") == 2 * R, names
    # grad_x is written in the (R, B, H) layout, not as a (B, R*H) matrix.
    assert gx.shape == (R, B, H) and gx.is_contiguous()

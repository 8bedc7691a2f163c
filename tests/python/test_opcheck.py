"""PyTorch's own conformance checks of the op (torch.library.opcheck): schema
and aliasing, the Autograd registration, the Meta kernel under fake tensors,
and AOTAutograd tracing with dynamic shapes (forward and backward)."""
import pytest
import torch

ALL_CHECKS = ("test_schema", "test_autograd_registration",
              "test_faketensor", "test_aot_dispatch_dynamic")


def samples(device):
    def rand(*shape, dtype=torch.float32):
        return torch.randn(*shape, dtype=dtype, device=device)

    yield "contiguous", (rand(3, 4, 5), rand(6, 15), rand(6))
    yield "requires_grad", (rand(3, 4, 5).requires_grad_(),
                            rand(6, 15).requires_grad_(),
                            rand(6).requires_grad_())
    yield "no_bias_requires_grad", (rand(2, 5, 7).requires_grad_(),
                                    rand(9, 14).requires_grad_(), None)
    # A (B, R, H) buffer viewed head-major, and a transposed weight.
    yield "batch_major_x", (rand(4, 3, 5).transpose(0, 1).requires_grad_(),
                            rand(15, 6).t().requires_grad_(),
                            rand(6).requires_grad_())
    yield "r1_float64", (rand(1, 3, 33, dtype=torch.float64).requires_grad_(),
                         rand(10, 33, dtype=torch.float64), None)
    # Only the weight trains (a frozen activation).
    yield "weight_only_grad", (rand(3, 2, 4), rand(5, 12).requires_grad_(),
                               rand(5))


@pytest.mark.parametrize("name", [name for name, _ in samples("cpu")])
def test_opcheck_gather_linear(device, name):
    args = dict(samples(device))[name]
    result = torch.library.opcheck(torch.ops.fgl.gather_linear.default, args,
                                   test_utils=ALL_CHECKS)
    assert result == {check: "SUCCESS" for check in ALL_CHECKS}


def test_opcheck_out_variant(device):
    x = torch.randn(3, 4, 5, device=device)
    w = torch.randn(6, 15, device=device)
    out = torch.empty(4, 6, device=device)
    result = torch.library.opcheck(torch.ops.fgl.gather_linear.out, (x, w),
                                   {"out": out},
                                   test_utils=("test_schema",
                                               "test_faketensor"))
    assert set(result.values()) == {"SUCCESS"}

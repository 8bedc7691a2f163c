"""torch.compile(fullgraph=True) of a model calling torch.ops.fgl.gather_linear:
no graph breaks, eager results, a dynamic batch without recompiles, and a
compiled backward (AOTAutograd traces the op's C++ Autograd kernel)."""
import pytest
import torch
from torch._dynamo.testing import CompileCounterWithBackend

from fgl.models import GatherLinear

R, H, K = 3, 8, 10


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def batch_input(B, device, requires_grad=False):
    # A (B, R, H) buffer viewed head-major, as attention produces it.
    x = torch.randn(B, R, H, device=device).transpose(0, 1)
    return x.requires_grad_(requires_grad)


def test_inference_dynamic_batch_compiles_once(device):
    model = GatherLinear(R, H, K).to(device)
    counter = CompileCounterWithBackend("inductor")
    compiled = torch.compile(model, fullgraph=True, backend=counter)
    with torch.no_grad():
        for B in (5, 3, 8):
            x = batch_input(B, device)
            torch._dynamo.mark_dynamic(x, 1)
            torch.testing.assert_close(compiled(x), model(x))
    assert counter.frame_count == 1
    # The op stays one call in the graph: Dynamo did not split or inline it.
    assert counter.op_count == 1


def test_training_step_matches_eager(device):
    model = GatherLinear(R, H, K, bias=False).to(device)
    counter = CompileCounterWithBackend("inductor")
    compiled = torch.compile(model, fullgraph=True, backend=counter)
    for B in (4, 7):
        x = batch_input(B, device, requires_grad=True)
        torch._dynamo.mark_dynamic(x, 1)
        grad_out = torch.randn(B, K, device=device)
        got = compiled(x)
        got_grads = torch.autograd.grad(got, (x, model.proj.weight), grad_out)
        want = model(x)
        want_grads = torch.autograd.grad(want, (x, model.proj.weight),
                                         grad_out)
        torch.testing.assert_close(got, want)
        for g, w in zip(got_grads, want_grads):
            torch.testing.assert_close(g, w)
    assert counter.frame_count == 1

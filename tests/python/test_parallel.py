"""fgl.parallel: tensor-parallel gather_linear over torch.distributed, run
as separate processes (Gloo on the CPU here; NCCL where the machine has the
GPUs) and compared with the single-process op."""
import os
import sys
import traceback
from datetime import timedelta
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import fgl
from fgl import parallel
from fgl.models import reference

TIMEOUT = timedelta(seconds=20)


def _init(rank, world_size, store_file, backend="gloo"):
    dist.init_process_group(backend, init_method=f"file://{store_file}",
                            rank=rank, world_size=world_size,
                            timeout=TIMEOUT)


def _run_shards(rank, world_size, store_file, cases, results, backend):
    # A spawned process: load the op and join the group; under NCCL, rank p
    # computes on GPU p.
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))
    fgl.load_library(os.environ.get("FGL_OPS_LIBRARY"))
    device = torch.device("cpu")
    if backend == "nccl":
        device = torch.device("cuda", rank)
        torch.cuda.set_device(device)
    _init(rank, world_size, store_file, backend)
    try:
        for i, (x, w, b) in enumerate(cases):
            xs, ws = parallel.shard(x, w, world_size, rank)
            out = parallel.gather_linear(
                xs.to(device), ws.to(device),
                None if b is None else b.to(device))
            results[(rank, i)] = out.cpu()
    except Exception:
        results[(rank, "error")] = traceback.format_exc()
    finally:
        dist.destroy_process_group()


def run_group(world_size, cases, tmp_path, backend="gloo"):
    with mp.Manager() as manager:
        results = manager.dict()
        mp.spawn(_run_shards,
                 args=(world_size, str(tmp_path / "store"), cases, results,
                       backend),
                 nprocs=world_size, join=True)
        return dict(results)


def make_case(R, B, H, K, dtype, bias=True):
    x = torch.randn(R, B, H, dtype=dtype)
    w = torch.randn(K, R * H, dtype=dtype)
    b = torch.randn(K, dtype=dtype) if bias else None
    return x, w, b


@pytest.mark.parametrize("R,world_size,heads", [
    (5, 2, [range(0, 3), range(3, 5)]),
    (7, 3, [range(0, 3), range(3, 5), range(5, 7)]),
    (4, 4, [range(0, 1), range(1, 2), range(2, 3), range(3, 4)]),
    (3, 1, [range(0, 3)])])
def test_shard_heads_are_contiguous_and_cover_r(R, world_size, heads):
    assert [parallel.shard_heads(R, world_size, p)
            for p in range(world_size)] == heads


def test_shard_errors_name_what_is_wrong():
    with pytest.raises(ValueError, match="rank 2 is not in a group of 2"):
        parallel.shard_heads(4, 2, 2)
    with pytest.raises(ValueError, match="R = 2 heads cannot be split"):
        parallel.shard_heads(2, 3, 0)
    with pytest.raises(ValueError, match=r"weight must be \(K, R\*H\)"):
        parallel.shard(torch.randn(2, 3, 4), torch.randn(5, 7), 2, 0)


def nccl_group(world_size):
    """The NCCL parameter of a group of world_size GPUs: skipped where the
    machine has fewer."""
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    return pytest.param(
        world_size, "nccl", id=f"nccl-{world_size}",
        marks=pytest.mark.skipif(
            gpus < world_size or not dist.is_nccl_available(),
            reason=f"needs {world_size} CUDA devices and NCCL, has {gpus}"))


@pytest.mark.parametrize("world_size,backend", [
    (1, "gloo"), (2, "gloo"), (3, "gloo"), nccl_group(1), nccl_group(2)])
def test_sums_over_ranks_match_the_single_process_op(world_size, backend,
                                                     tmp_path, monkeypatch):
    # NVLink multicast off: it can take a shared host's GPUs out of service.
    monkeypatch.setenv("NCCL_NVLS_ENABLE", "0")
    monkeypatch.setenv("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
    # Uneven splits (R = 5 and 7 over 2 and 3 ranks), B = 1, no bias, and
    # every dtype; the decode problem's shape over the GPUs.
    cases = [make_case(5, 4, 8, 6, torch.float32),
             make_case(7, 1, 16, 9, torch.float64),
             make_case(5, 3, 8, 5, torch.float32, bias=False),
             make_case(6, 2, 8, 7, torch.bfloat16),
             make_case(3, 2, 8, 4, torch.float16)]
    if backend == "nccl":
        cases += [make_case(32, 16, 128, 4096, dtype)
                  for dtype in (torch.float32, torch.bfloat16)]
    results = run_group(world_size, cases, tmp_path, backend)
    assert not any(key[1] == "error" for key in results), results
    for i, (x, w, b) in enumerate(cases):
        ref = reference(x.double(), w.double(),
                        None if b is None else b.double())
        scale = reference(x.double().abs(), w.double().abs(),
                          None if b is None else b.double().abs())
        # Partial sums rounded to the dtype once per rank, then summed;
        # rounding errors grow with the square root of the contraction.
        eps = {torch.float32: 1e-6, torch.float64: 1e-14,
               torch.bfloat16: 1e-2, torch.float16: 2e-3}[x.dtype]
        eps *= max(1.0, (w.shape[1] / 64) ** 0.5)
        for rank in range(world_size):
            out = results[(rank, i)]
            assert out.dtype == x.dtype and out.shape == ref.shape
            err = ((out.double() - ref).abs() / scale.clamp_min(1e-30)).max()
            assert err <= eps * (world_size + 1), (i, rank, float(err))
        # Every rank holds the same result.
        for rank in range(1, world_size):
            assert torch.equal(results[(rank, i)], results[(0, i)])


def _run_and_die(rank, world_size, store_file, results):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))
    fgl.load_library(os.environ.get("FGL_OPS_LIBRARY"))
    _init(rank, world_size, store_file)
    # Both ranks connected before one dies: a rank that left during the
    # group's set-up fails init_process_group instead, before the op runs.
    dist.barrier()
    if rank == 1:
        os._exit(0)  # dies without a word
    x, w, b = make_case(4, 2, 8, 3, torch.float32)
    xs, ws = parallel.shard(x, w, world_size, rank)
    try:
        parallel.gather_linear(xs, ws, b)
        results["error"] = None
    except RuntimeError as e:
        results["error"] = str(e)


def test_a_rank_that_dies_makes_the_others_fail_with_a_message(tmp_path):
    with mp.Manager() as manager:
        results = manager.dict()
        ctx = mp.start_processes(
            _run_and_die, args=(2, str(tmp_path / "store"), results),
            nprocs=2, join=False, start_method="spawn")
        for process in ctx.processes:
            process.join(timeout=120)
        assert all(not p.is_alive() for p in ctx.processes)
        error = results.get("error")
    assert error is not None and "rank 0" in error, error
    assert "all-reduce" in error


def test_errors_name_the_rank(tmp_path):
    # One process, a group of one: a shard of the wrong width.
    _init(0, 1, str(tmp_path / "store"))
    try:
        with pytest.raises(RuntimeError, match="rank 0: .*weight"):
            parallel.gather_linear(torch.randn(2, 3, 4), torch.randn(5, 9))
    finally:
        dist.destroy_process_group()

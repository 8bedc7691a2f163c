"""Tensor-parallel gather_linear, split the way Megatron-LM's row-parallel
linear splits a projection: rank p of the group holds the heads
r in [r_p, r_{p+1}) of x and the matching columns W[:, r_p*H : r_{p+1}*H];
each computes gather_linear over its shard (the bias on rank 0 only) and an
all-reduce sums the partial outputs. R is the shard dimension, so no rank
builds a concatenation either.

Works under torchrun and any torch.distributed backend that sums the
dtype (NCCL on GPUs, Gloo on CPUs)."""
import torch
import torch.distributed as dist

__all__ = ["shard_heads", "shard", "gather_linear"]


def shard_heads(R, world_size, rank):
    """The heads of R that `rank` of `world_size` holds: contiguous, the
    first R % world_size ranks one more than the others."""
    if world_size < 1 or not 0 <= rank < world_size:
        raise ValueError(f"shard_heads: rank {rank} is not in a group of "
                         f"{world_size}")
    if R < world_size:
        raise ValueError(f"shard_heads: R = {R} heads cannot be split over "
                         f"{world_size} ranks (every rank needs one)")
    base, extra = divmod(R, world_size)
    begin = rank * base + min(rank, extra)
    return range(begin, begin + base + (1 if rank < extra else 0))


def shard(x, weight, world_size, rank):
    """`rank`'s shard of x (R, B, H) and of weight (K, R*H): views, no
    copies."""
    R, _, H = x.shape
    if weight.dim() != 2 or weight.shape[1] != R * H:
        raise ValueError(f"shard: weight must be (K, R*H) = (K, {R * H}) "
                         f"for x {tuple(x.shape)}, got {tuple(weight.shape)}")
    heads = shard_heads(R, world_size, rank)
    return (x[heads.start:heads.stop],
            weight[:, heads.start * H:heads.stop * H])


def gather_linear(x_shard, weight_shard, bias=None, group=None):
    """linear(cat(x.unbind(0), -1), weight, bias) from this rank's shards
    (see shard()), summed over `group` (default: the whole world). Every
    rank passes the same bias (or none); rank 0 adds it. Errors say which
    rank raised them; a rank that dies makes the others fail when the
    backend's timeout (init_process_group(timeout=...)) runs out."""
    rank = dist.get_rank(group)
    try:
        out = torch.ops.fgl.gather_linear(x_shard, weight_shard,
                                          bias if rank == 0 else None)
    except Exception as e:
        raise RuntimeError(f"fgl tensor parallel: rank {rank}: {e}") from e
    try:
        dist.all_reduce(out, group=group)
    except Exception as e:
        raise RuntimeError(
            f"fgl tensor parallel: rank {rank}: the all-reduce of the "
            f"partial outputs {tuple(out.shape)} {out.dtype} failed (a rank "
            f"died, timed out, or passed another shape): {e}") from e
    return out

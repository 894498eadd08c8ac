r"""Process-group set-up for ``torchrun``, and the two collective steps the
training command needs: gathering evaluation shards and agreeing on a
value. A single process (no ``torchrun``) is world size 1."""
import os
from typing import Any, List, NamedTuple

import torch
import torch.distributed as dist


class Context(NamedTuple):
    r"""Where this process stands: :obj:`rank` of :obj:`world_size`, its
    :obj:`device`."""
    rank: int
    world_size: int
    device: torch.device

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1


def resolve_device(name: str, local_rank: int = 0) -> torch.device:
    r"""``'cpu'``, ``'cuda'`` or ``'auto'`` (CUDA when available) →
    device; a clear error for ``'cuda'`` without a GPU."""
    if name not in ('cpu', 'cuda', 'auto'):
        raise ValueError(f"'--device' must be cpu, cuda or auto, got {name!r}")
    if name == 'auto':
        name = 'cuda' if torch.cuda.is_available() else 'cpu'
    if name == 'cuda':
        if not torch.cuda.is_available():
            raise ValueError("'--device cuda' was asked for but torch sees no "
                             "CUDA device (is a CUDA build of torch "
                             "installed?)")
        return torch.device('cuda', local_rank % torch.cuda.device_count())
    return torch.device('cpu')


def setup(device: str) -> Context:
    r"""Joins the process group that ``torchrun`` describes in the
    environment (gloo on CPU, nccl on CUDA), or returns a one-process
    context."""
    world_size = int(os.environ.get('WORLD_SIZE', '1'))
    local_rank = int(os.environ.get('LOCAL_RANK', '0'))
    target = resolve_device(device, local_rank)
    if world_size == 1:
        return Context(0, 1, target)
    if not dist.is_initialized():
        dist.init_process_group(
            'nccl' if target.type == 'cuda' else 'gloo')
    if target.type == 'cuda':
        torch.cuda.set_device(target)
    return Context(dist.get_rank(), dist.get_world_size(), target)


def teardown(ctx: Context) -> None:
    if ctx.distributed and dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()


def barrier(ctx: Context) -> None:
    if ctx.distributed:
        dist.barrier()


def gather(ctx: Context, value: Any) -> List[Any]:
    r"""Every rank's :obj:`value` (picklable, on the CPU), in rank order."""
    if not ctx.distributed:
        return [value]
    out: List[Any] = [None] * ctx.world_size
    dist.all_gather_object(out, value)
    return out


def agree(ctx: Context, value: Any) -> Any:
    r"""Rank 0's :obj:`value` on every rank."""
    if not ctx.distributed:
        return value
    box = [value]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def sync_buffers(ctx: Context, module: torch.nn.Module) -> None:
    r"""Copies rank 0's buffers (e.g. batch-norm running statistics, which
    every rank updates from its own batches) to every rank, so that all
    ranks evaluate and save one model."""
    if ctx.distributed:
        for buffer in module.buffers():
            dist.broadcast(buffer.data, src=0)

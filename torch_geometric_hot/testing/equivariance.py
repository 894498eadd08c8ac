r"""Public assertion helpers: permutation equivariance and batch
independence of anything that maps a PyG :class:`~torch_geometric.data.Data`
(or :class:`~torch_geometric.data.Batch`) to tensors."""
from typing import Callable, List, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor
from torch_geometric.data import Batch, Data

Outputs = Union[Tensor, Tuple[Tensor, ...]]
Level = Union[str, Callable[[Data], int]]


def permute_nodes(data: Data, perm: Tensor) -> Data:
    r"""Relabels the nodes of :obj:`data`: node :obj:`i` of the result is
    node :obj:`perm[i]` of the input.

    Node-level attributes (as PyG's :meth:`Data.is_node_attr` sees them) are
    reordered; every attribute whose name contains ``"index"`` has its
    values renamed; all other attributes (edge-, entry- and graph-level) keep
    their row order.
    """
    n = data.num_nodes
    nodes = torch.arange(n, device=perm.device)
    if perm.numel() != n or not torch.equal(perm.sort()[0], nodes):
        raise ValueError(f"'perm' must be a permutation of {n} nodes")
    inverse = torch.empty_like(perm)
    inverse[perm] = nodes
    out = data.clone()
    for key, value in data.items():
        if not isinstance(value, Tensor):
            continue
        if 'index' in key:
            out[key] = torch.where(value >= 0, inverse.to(
                value.device)[value.clamp(min=0)], value)
        elif data.is_node_attr(key) and value.dim() > 0 and value.size(
                0) == n:
            out[key] = value[perm.to(value.device)]
    out.num_nodes = n
    return out


def _as_tuple(out: Outputs) -> Tuple[Tensor, ...]:
    return out if isinstance(out, tuple) else (out, )


def _levels(levels: Union[Level, Sequence[Level]], count: int) -> List[Level]:
    if isinstance(levels, (str, )) or callable(levels):
        return [levels] * count
    levels = list(levels)
    if len(levels) != count:
        raise ValueError(f"got {len(levels)} levels for {count} outputs")
    return levels


def assert_permutation_equivariant(
    fn: Callable[[Data], Outputs],
    data: Data,
    levels: Union[Level, Sequence[Level]] = 'node',
    perm: Optional[Tensor] = None,
    atol: float = 1e-10,
    rtol: float = 1e-8,
    seed: int = 0,
) -> None:
    r"""Asserts :math:`f(\pi \cdot G) = \pi \cdot f(G)`.

    Args:
        fn (callable): Maps a graph to one tensor or a tuple of tensors.
        data (Data): The graph (use float64 features for tight tolerances).
        levels (str or list): Per output, ``'node'`` (rows follow the node
            permutation) or anything else (``'graph'``, ``'edge'``,
            ``'entry'``: rows are invariant because edge-level rows keep
            their order under :func:`permute_nodes`).
        perm (torch.Tensor, optional): The permutation; random if omitted
            (drawn on the CPU from :obj:`seed`, the same on every device).
        atol (float): Absolute tolerance.
        rtol (float): Relative tolerance.
        seed (int): Seed of the random permutation.
    """
    if perm is None:
        perm = torch.randperm(data.num_nodes,
                              generator=torch.Generator().manual_seed(seed))
    expected = _as_tuple(fn(data))
    actual = _as_tuple(fn(permute_nodes(data, perm)))
    for k, (level, a, b) in enumerate(
            zip(_levels(levels, len(expected)), actual, expected)):
        if level == 'node':
            b = b[perm.to(b.device)]
        torch.testing.assert_close(
            a, b, atol=atol, rtol=rtol,
            msg=lambda m, k=k, level=level:
            f"output {k} ({level}-level) is not permutation "
            f"{'equivariant' if level == 'node' else 'invariant'}: {m}")


def _count(data: Data, level: Level) -> int:
    if callable(level):
        return int(level(data))
    if level == 'node':
        return data.num_nodes
    if level == 'edge':
        return data.num_edges
    if level == 'graph':
        return 1
    value = data[level]
    return value.size(-1) if 'index' in level else value.size(0)


def assert_batch_independent(
    fn: Callable[[Data], Outputs],
    data_list: Sequence[Data],
    levels: Union[Level, Sequence[Level]] = 'node',
    atol: float = 1e-10,
    rtol: float = 1e-8,
) -> None:
    r"""Asserts that each graph's output is the same alone and inside a
    batch of all of :obj:`data_list`.

    Args:
        fn (callable): Maps a (batched) graph to a tensor or a tuple.
        data_list (list): Graphs; include 1-node and 0-edge graphs.
        levels (str, callable or list): Per output, how many rows belong to
            each graph: ``'node'``, ``'edge'``, ``'graph'``, the name of an
            attribute (its size; the last dimension for ``*index`` keys) or
            a callable :obj:`data -> int`.
        atol (float): Absolute tolerance.
        rtol (float): Relative tolerance.
    """
    batched = _as_tuple(fn(Batch.from_data_list(list(data_list))))
    levels = _levels(levels, len(batched))
    offsets = [0] * len(batched)
    for g, data in enumerate(data_list):
        alone = _as_tuple(fn(Batch.from_data_list([data])))
        for k, level in enumerate(levels):
            count = _count(data, level)
            part = batched[k][offsets[k]:offsets[k] + count]
            offsets[k] += count
            torch.testing.assert_close(
                part, alone[k], atol=atol, rtol=rtol,
                msg=lambda m, g=g, k=k:
                f"graph {g}, output {k}: batched result differs from the "
                f"graph alone: {m}")
    for k, out in enumerate(batched):
        if offsets[k] != out.size(0):
            raise AssertionError(f"output {k} has {out.size(0)} rows, the "
                                 f"graphs account for {offsets[k]}")

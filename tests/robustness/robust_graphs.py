r"""Hypothesis strategies for the robustness suite: small graphs with the
cases real data brings (0 or 1 node, no edges, self-loops, duplicate and
one-way edges, disconnected parts, a hub of very skewed degree), batches of
them, and node permutations."""
import torch
from hypothesis import strategies as st
from torch_geometric.data import Batch, Data

from torch_geometric_hot.testing import permute_nodes

CHANNELS = 4


@st.composite
def graphs(draw, max_nodes: int = 6) -> Data:
    r"""One graph with float64 :obj:`x` and :obj:`edge_attr` of width
    :data:`CHANNELS`."""
    n = draw(st.integers(0, max_nodes))
    pairs = []
    if n and draw(st.booleans()):  # a hub: every node points to node 0
        pairs += [(v, 0) for v in range(1, n)]  # one-way into the hub
        pairs += [(0, v) for v in range(1, n, 2)]  # some of them back
    if n:
        node = st.integers(0, n - 1)
        pairs += draw(st.lists(st.tuples(node, node), max_size=2 * n + 2))
    seed = draw(st.integers(0, 2**31 - 1))
    gen = torch.Generator().manual_seed(seed)
    edge_index = torch.tensor(pairs, dtype=torch.long).t().reshape(2, -1)
    return Data(x=torch.randn(n, CHANNELS, generator=gen,
                              dtype=torch.float64),
                edge_index=edge_index,
                edge_attr=torch.randn(edge_index.size(1), CHANNELS,
                                      generator=gen, dtype=torch.float64),
                num_nodes=n)


def batches(max_graphs: int = 3):
    r"""Lists of 1 to :obj:`max_graphs` graphs."""
    return st.lists(graphs(), min_size=1, max_size=max_graphs)


@st.composite
def permutations(draw, n: int) -> torch.Tensor:
    r"""A permutation of :obj:`n` nodes."""
    return torch.tensor(draw(st.permutations(list(range(n)))),
                        dtype=torch.long).reshape(n)


def shuffled_batch(data_list, perm_seed: int) -> tuple:
    r"""The batch of :obj:`data_list` and the same batch with its nodes
    shuffled across graphs (an unsorted :obj:`batch` vector), with the
    permutation: node :obj:`i` of the second is node :obj:`perm[i]` of the
    first."""
    batch = Batch.from_data_list(data_list)
    gen = torch.Generator().manual_seed(perm_seed)
    perm = torch.randperm(batch.num_nodes, generator=gen)
    shuffled = permute_nodes(Data(**{k: v for k, v in batch.items()
                                     if k not in ('ptr', )}), perm)
    shuffled.num_nodes, shuffled.num_graphs = batch.num_nodes, batch.num_graphs
    return batch, shuffled, perm

r"""Small graphs for tests: random ones and the edge cases every layer must
accept (1-node, edgeless, self-loops, duplicate edges, isolated nodes).

Every graph is drawn on the CPU from its seed and then moved to
:obj:`device`, so a seed gives the same graph on every device."""
from typing import List, Optional, Union

import torch
from torch_geometric.data import Data

Device = Union[torch.device, str, None]


def _with_features(edge_index, num_nodes: int, num_features: int,
                   edge_dim: Optional[int], dtype: torch.dtype,
                   gen: torch.Generator) -> Data:
    # random node features, then (optionally) random edge features
    data = Data(x=torch.randn(num_nodes, num_features, generator=gen,
                              dtype=dtype), edge_index=edge_index,
                num_nodes=num_nodes)
    if edge_dim is not None:
        data.edge_attr = torch.randn(edge_index.size(1), edge_dim,
                                     generator=gen, dtype=dtype)
    return data


def random_graph(num_nodes: int, num_edges: int, num_features: int = 4,
                 edge_dim: Optional[int] = None,
                 dtype: torch.dtype = torch.float64, seed: int = 0,
                 undirected: bool = True, device: Device = None) -> Data:
    r"""A random graph without self-loops or duplicate edges.

    Args:
        num_nodes (int): Number of nodes.
        num_edges (int): Number of (undirected, if :obj:`undirected`) edges
            to draw; fewer remain after removing loops and duplicates.
        num_features (int): Node feature width of :obj:`x`.
        edge_dim (int, optional): Edge feature width of :obj:`edge_attr`.
        dtype (torch.dtype): Feature dtype.
        seed (int): Seed.
        undirected (bool): Add both directions of every edge.
        device (torch.device, optional): Device of the result (default:
            the CPU).
    """
    gen = torch.Generator().manual_seed(seed)
    edge_index = torch.randint(max(num_nodes, 1), (2, num_edges),
                               generator=gen)
    if num_nodes == 0:
        edge_index = edge_index[:, :0]
    edge_index = edge_index[:, edge_index[0] != edge_index[1]]
    if undirected:
        edge_index = torch.cat([edge_index, edge_index.flip(0)], dim=1)
    edge_index = torch.unique(edge_index, dim=1) if edge_index.numel() else (
        edge_index)
    return _with_features(edge_index, num_nodes, num_features, edge_dim,
                          dtype, gen).to(device or 'cpu')


def complete_graph(num_nodes: int, num_features: int = 4,
                   edge_dim: Optional[int] = None,
                   dtype: torch.dtype = torch.float64, seed: int = 0,
                   device: Device = None) -> Data:
    r"""The complete directed graph without self-loops (every ordered pair
    of distinct nodes), on which sparse layers equal their dense oracle,
    on :obj:`device` (default: the CPU)."""
    gen = torch.Generator().manual_seed(seed)
    row, col = torch.meshgrid(torch.arange(num_nodes), torch.arange(num_nodes),
                              indexing='ij')
    mask = row != col
    edge_index = torch.stack([row[mask], col[mask]])
    return _with_features(edge_index, num_nodes, num_features, edge_dim,
                          dtype, gen).to(device or 'cpu')


def edge_case_graphs(num_features: int = 4, edge_dim: Optional[int] = None,
                     dtype: torch.dtype = torch.float64, seed: int = 0,
                     device: Device = None) -> List[Data]:
    r"""Graphs every layer must handle, in this order: a random graph with
    an isolated node, a 1-node graph, a 3-node edgeless graph, a 2-node
    graph, and a 4-node graph with a self-loop and a duplicated edge, on
    :obj:`device` (default: the CPU)."""
    gen = torch.Generator().manual_seed(seed)

    def make(num_nodes: int, edges: List[List[int]]) -> Data:
        edge_index = torch.tensor(edges, dtype=torch.long).t().reshape(2, -1)
        return _with_features(edge_index, num_nodes, num_features, edge_dim,
                              dtype, gen)

    base = random_graph(6, 7, num_features, edge_dim, dtype, seed)
    isolated = make(7, base.edge_index.t().tolist())
    graphs = [
        isolated,
        make(1, []),
        make(3, []),
        make(2, [[0, 1], [1, 0]]),
        make(4, [[0, 1], [1, 0], [2, 2], [1, 2], [1, 2], [2, 1], [3, 0]]),
    ]
    return [data.to(device or 'cpu') for data in graphs]


def chain_molecule(num_nodes: int, seed: int = 0,
                   device: Device = None) -> Data:
    r"""A chain of :obj:`num_nodes` atoms with both bond directions and
    OGB-shaped categorical features (9 atom and 3 bond columns, values 0
    or 1) drawn from :obj:`seed`."""
    g = torch.Generator().manual_seed(seed)
    src = torch.arange(num_nodes - 1)
    edge_index = torch.cat([torch.stack([src, src + 1]),
                            torch.stack([src + 1, src])], 1)
    return Data(x=torch.randint(0, 2, (num_nodes, 9), generator=g),
                edge_index=edge_index,
                edge_attr=torch.randint(0, 2, (edge_index.size(1), 3),
                                        generator=g)).to(device)

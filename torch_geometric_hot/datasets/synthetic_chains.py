from typing import List, Optional

import torch
from torch_geometric.data import Data


def synthetic_chains(num_graphs: int, num_nodes: int, seed: int = 0,
                     transform: Optional[callable] = None) -> List[Data]:
    r"""The synthetic chains task of `HOT <https://arxiv.org/abs/2110.14416>`_
    (App. A.2.4, after Gu et al. 2020): undirected paths of
    :obj:`num_nodes` nodes, each with a random binary label written as a
    one-hot vector on one terminal node (all other nodes have zero
    features); every node must be classified with its chain's label, so
    information has to travel the whole chain. The paper trains on 20-node
    chains and tests on 200-node chains.

    Args:
        num_graphs (int): Number of chains.
        num_nodes (int): Nodes per chain (at least 1).
        seed (int, optional): Seed of the labels and terminal choice.
        transform (callable, optional): Applied to every chain.

    Returns:
        A list of :class:`~torch_geometric.data.Data` with :obj:`x`
        :obj:`[n, 2]`, :obj:`edge_index` (both directions) and :obj:`y`
        :obj:`[n]` (the chain's label on every node).
    """
    if num_nodes < 1 or num_graphs < 0:
        raise ValueError(f"'num_nodes' must be positive and 'num_graphs' "
                         f"non-negative, got {num_nodes}, {num_graphs}")
    gen = torch.Generator().manual_seed(seed)
    path = torch.arange(num_nodes - 1)
    edge_index = torch.cat([torch.stack([path, path + 1]),
                            torch.stack([path + 1, path])], dim=1)
    out = []
    for _ in range(num_graphs):
        label = int(torch.randint(2, (1, ), generator=gen))
        terminal = (num_nodes - 1) * int(torch.randint(2, (1, ),
                                                       generator=gen))
        x = torch.zeros(num_nodes, 2)
        x[terminal, label] = 1.0
        data = Data(x=x, edge_index=edge_index.clone(),
                    y=torch.full((num_nodes, ), label, dtype=torch.long),
                    num_nodes=num_nodes)
        out.append(transform(data) if transform is not None else data)
    return out

r"""k-uniform hyperedge prediction data: a reader for the file layout of the
public benchmarks used by DHNE, Hyper-SAGNN and `HOT
<https://arxiv.org/abs/2110.14416>`_ (Table 4: GPS, MovieLens, drug,
wordnet) and an offline planted-hypergraph generator in the same form."""
import os.path as osp
from typing import Sequence

import torch
from torch import Tensor
from torch_geometric.data import Data


def _global_ids(tuples, nums_type: Tensor, name: str) -> Tensor:
    index = torch.as_tensor(tuples, dtype=torch.long)
    if index.dim() != 2 or index.size(1) != nums_type.numel():
        raise ValueError(f"'{name}' must have shape [num_hyperedges, "
                         f"{nums_type.numel()}] (one node per type), got "
                         f"{list(index.shape)}")
    if index.numel() and (bool((index < 0).any()) or bool(
            (index >= nums_type).any())):
        raise ValueError(f"'{name}' holds node ids outside [0, nums_type) "
                         f"of their type (nums_type = "
                         f"{nums_type.tolist()})")
    offset = torch.cumsum(nums_type, 0) - nums_type
    return (index + offset).t().contiguous()


def read_hyperedge_npz(folder: str) -> Data:
    r"""Reads a k-partite, k-uniform hypergraph stored as
    ``train_data.npz`` and ``test_data.npz`` in :obj:`folder` (the layout
    of the DHNE / Hyper-SAGNN benchmark releases): arrays ``train_data`` /
    ``test_data`` of shape :obj:`[num_hyperedges, k]` whose column
    :math:`t` holds a node id of type :math:`t` counted within its type,
    and ``nums_type`` :obj:`[k]`, the number of nodes of each type.

    Node ids become global (type :math:`t`'s nodes follow those of types
    :math:`0 .. t-1`).

    Returns:
        :class:`~torch_geometric.data.Data` with :obj:`num_nodes`,
        :obj:`node_type` :obj:`[n]`, :obj:`nums_type` :obj:`[k]`,
        :obj:`train_hyperedges` and :obj:`test_hyperedges` (each
        :obj:`[k, h]`, one column per hyperedge).
    """
    import numpy as np
    paths = [osp.join(folder, f'{split}_data.npz')
             for split in ('train', 'test')]
    for path in paths:
        if not osp.isfile(path):
            raise FileNotFoundError(
                f"{path} is missing: the folder must hold train_data.npz "
                f"and test_data.npz (arrays 'train_data'/'test_data' and "
                f"'nums_type')")
    with np.load(paths[0], allow_pickle=False) as train, \
            np.load(paths[1], allow_pickle=False) as test:
        for file, archive, key in ((paths[0], train, 'train_data'),
                                   (paths[1], test, 'test_data'),
                                   (paths[0], train, 'nums_type')):
            if key not in archive:
                raise ValueError(f"{file} has no array '{key}' (found "
                                 f"{sorted(archive.keys())})")
        nums_type = torch.as_tensor(train['nums_type'], dtype=torch.long)
        train_index = _global_ids(train['train_data'], nums_type,
                                  'train_data')
        test_index = _global_ids(test['test_data'], nums_type, 'test_data')
    return _hypergraph(nums_type, train_index, test_index)


def planted_hypergraph(nums_type: Sequence[int] = (60, 40, 10),
                       num_hyperedges: int = 1200,
                       num_communities: int = 4, p_in: float = 0.9,
                       test_ratio: float = 0.2, seed: int = 0) -> Data:
    r"""A k-partite, k-uniform hypergraph with planted communities, in the
    form :func:`read_hyperedge_npz` returns: every node gets a community
    uniformly at random; a hyperedge picks a community and, with
    probability :obj:`p_in` per slot, a node of that community of the
    slot's type (otherwise any node of the type). Duplicate hyperedges are
    dropped; a random :obj:`test_ratio` of them is held out. The planted
    community of every node is kept in :obj:`community` :obj:`[n]`.

    Args:
        nums_type (Sequence[int]): Nodes per type (:math:`k` types).
        num_hyperedges (int): Hyperedges drawn (before deduplication).
        num_communities (int): Planted communities.
        p_in (float): Probability that a slot follows the community.
        test_ratio (float): Held-out fraction.
        seed (int): Seed of everything.
    """
    nums_type = torch.as_tensor(list(nums_type), dtype=torch.long)
    if nums_type.numel() < 2 or bool((nums_type < 1).any()):
        raise ValueError(f"'nums_type' must list at least 2 positive "
                         f"counts, got {nums_type.tolist()}")
    if not 0.0 <= p_in <= 1.0 or not 0.0 <= test_ratio < 1.0:
        raise ValueError(f"'p_in' must lie in [0, 1] and 'test_ratio' in "
                         f"[0, 1), got {p_in}, {test_ratio}")
    gen = torch.Generator().manual_seed(seed)
    community = [torch.randint(num_communities, (int(c), ), generator=gen)
                 for c in nums_type]
    picked = torch.randint(num_communities, (num_hyperedges, ),
                           generator=gen)
    columns = []
    for t, members in enumerate(community):
        # A random member of the hyperedge's community (any node when the
        # community has none of this type), or any node of the type.
        scores = torch.rand(num_hyperedges, members.numel(), generator=gen)
        inside = members[None, :] == picked[:, None]
        follow = torch.rand(num_hyperedges, generator=gen) < p_in
        follow &= inside.any(1)
        scores = torch.where(inside | ~follow[:, None], scores, -1.0)
        columns.append(scores.argmax(1))
    tuples = torch.unique(torch.stack(columns, 1), dim=0)
    order = torch.randperm(tuples.size(0), generator=gen)
    num_test = int(round(test_ratio * tuples.size(0)))
    offset = torch.cumsum(nums_type, 0) - nums_type
    tuples = (tuples + offset).t()
    data = _hypergraph(nums_type, tuples[:, order[num_test:]],
                       tuples[:, order[:num_test]])
    data.community = torch.cat(community)
    return data


def _hypergraph(nums_type: Tensor, train_index: Tensor,
                test_index: Tensor) -> Data:
    node_type = torch.arange(nums_type.numel()).repeat_interleave(nums_type)
    return Data(num_nodes=int(nums_type.sum()), node_type=node_type,
                nums_type=nums_type, train_hyperedges=train_index,
                test_hyperedges=test_index)

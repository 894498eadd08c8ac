import pytest
import torch
from torch_geometric.data import Batch, Data
from torch_geometric.loader.dataloader import Collater

from torch_geometric_hot.data.collate import GraphCollater, _plan, \
    collate_graphs
from torch_geometric_hot.testing import random_graph
from torch_geometric_hot.transforms import AddLaplacianNodeId, \
    AddSecondOrderView


def graph(num_nodes, num_edges, seed, **kwargs):
    data = random_graph(num_nodes, num_edges, 3, seed=seed, **kwargs)
    del data.num_nodes  # as a molecule: the nodes are those of x
    return data


def molecules(count=5):
    out = []
    for g in range(count):
        data = graph(2 + 3 * g, 1 + 4 * g, g, edge_dim=2)
        data.y = torch.randn(1, 1)
        out.append(AddLaplacianNodeId(2)(AddSecondOrderView()(data)))
    return out


def assert_same_batch(got, want):
    assert type(got) is type(want)
    assert list(got._store._mapping) == list(want._store._mapping)
    for key, value in want._store._mapping.items():
        assert_same(got[key], value, key)
    assert got.num_graphs == want.num_graphs
    for name in ('_slice_dict', '_inc_dict'):
        have, expected = getattr(got, name), getattr(want, name)
        assert list(have) == list(expected)
        for key, value in expected.items():
            assert have[key].dtype == value.dtype, (name, key)
            assert torch.equal(have[key], value), (name, key)
    for i in range(want.num_graphs):
        a, b = got.get_example(i), want.get_example(i)
        assert list(a._store._mapping) == list(b._store._mapping)
        for key, value in b._store._mapping.items():
            assert_same(a[key], value, (i, key))


def assert_same(got, want, where):
    if isinstance(want, torch.Tensor):
        assert got.dtype == want.dtype and torch.equal(got, want), where
    else:
        assert got == want, where


def test_collate_graphs_is_pygs_batch(device):
    data_list = [data.to(device) for data in molecules()]
    assert _plan(data_list) is not None  # collated on whole attributes
    assert_same_batch(collate_graphs(data_list),
                      Batch.from_data_list(data_list))
    assert_same_batch(collate_graphs(data_list[:1]),
                      Batch.from_data_list(data_list[:1]))


def test_collate_graphs_keeps_dtypes_and_empty_graphs():
    data_list = []
    for g, edges in enumerate([0, 3, 0, 5]):
        data = graph(1 + g, edges, g)
        data.edge_index = data.edge_index.int()  # an int32 index
        data.node_index = torch.zeros(2, 1 + g, dtype=torch.bool)
        data.mask = torch.ones(1 + g, dtype=torch.bool)
        data.pos_index = torch.zeros(3, dtype=torch.float16)
        data_list.append(data)
    data_list.insert(1, Data(x=torch.zeros(0, 3, dtype=torch.float64),
                             edge_index=torch.zeros(2, 0, dtype=torch.int32),
                             node_index=torch.zeros(2, 0, dtype=torch.bool),
                             mask=torch.ones(0, dtype=torch.bool),
                             pos_index=torch.zeros(3, dtype=torch.float16)))
    assert _plan(data_list) is not None
    got, want = collate_graphs(data_list), Batch.from_data_list(data_list)
    assert got.edge_index.dtype == torch.int32
    assert got.node_index.dtype == torch.long  # bool plus an offset
    assert_same_batch(got, want)


def test_collate_graphs_hands_other_lists_to_pyg():
    data_list = molecules(3)
    for data in data_list:
        data.num_nodes = data.x.size(0)
    assert _plan(data_list) is None
    assert_same_batch(collate_graphs(data_list),
                      Batch.from_data_list(data_list))
    data_list = molecules(3)
    assert_same_batch(
        collate_graphs(data_list, follow_batch=['pair_index']),
        Batch.from_data_list(data_list, follow_batch=['pair_index']))
    # no node attribute: PyG infers the nodes from the edges
    edges = [Data(edge_index=torch.tensor([[0, 1], [1, 2]])),
             Data(edge_index=torch.tensor([[0], [1]]))]
    with pytest.warns(UserWarning):
        want = Batch.from_data_list(edges)
    with pytest.warns(UserWarning):
        assert_same_batch(collate_graphs(edges), want)


def test_graph_collater_passes_its_options():
    data_list = molecules(3)
    collater = GraphCollater(Collater(data_list, ['pair_index'], ['y']))
    assert_same_batch(collater(data_list), Batch.from_data_list(
        data_list, follow_batch=['pair_index'], exclude_keys=['y']))
    tensors = [torch.ones(2), torch.zeros(2)]
    assert torch.equal(collater(tensors), torch.stack(tensors))

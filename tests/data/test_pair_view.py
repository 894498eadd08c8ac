import pytest
import torch
from torch_geometric.data import Batch
from torch_geometric.loader import DataLoader

from torch_geometric_hot.data import NodeView, PairView, build_pair_index
from torch_geometric_hot.testing import edge_case_graphs, random_graph
from torch_geometric_hot.transforms import AddSecondOrderView


def test_layout_transpose_and_edge_map(device):
    edge_index = torch.tensor([[0, 1, 1, 2, 2, 1, 0], [1, 0, 2, 2, 0, 2, 0]],
                              device=device)
    pair_index, transpose, edge_entry = build_pair_index(edge_index, 3)
    assert pair_index.device == transpose.device == edge_index.device
    # diagonal first, then distinct off-diagonal edges sorted by (row, col)
    assert pair_index.tolist() == [[0, 1, 2, 0, 1, 1, 2],
                                   [0, 1, 2, 1, 0, 2, 0]]
    assert transpose.tolist() == [0, 1, 2, 4, 3, -1, -1]
    # duplicates (1, 2) share an entry; self-loops land on the diagonal
    assert edge_entry.tolist() == [3, 4, 5, 2, 6, 5, 0]


def test_transpose_round_trips_in_batches(device):
    graphs = [AddSecondOrderView()(g) for g in edge_case_graphs(device=device)]
    batch = Batch.from_data_list(graphs)
    view = PairView.from_data(batch)
    t = view.transpose
    has = t >= 0
    assert torch.equal(t[t[has]], torch.nonzero(has).view(-1))
    assert torch.equal(view.row[t[has]], view.col[has])
    built = PairView.build(batch.edge_index, batch.num_nodes, batch.batch)
    assert built.num_entries == view.num_entries
    assert view.num_entries == batch.num_nodes + sum(
        int((g.pair_index[0] != g.pair_index[1]).sum()) for g in graphs)


def test_stock_dataloader_batches_the_view(device):
    graphs = [
        AddSecondOrderView(pair_x=True)(g)
        for g in edge_case_graphs(edge_dim=2, device=device)
    ]
    batch = next(iter(DataLoader(graphs, batch_size=len(graphs))))
    view = PairView.from_data(batch)
    expected = view.lift(
        torch.cat([batch.x, batch.x.new_zeros(batch.num_nodes, 2)], 1),
        torch.cat([batch.edge_attr.new_zeros(batch.num_edges, 4),
                   batch.edge_attr], 1))
    torch.testing.assert_close(batch.pair_x, expected)


def test_lift_averages_duplicates_and_self_loops(device):
    edge_index = torch.tensor([[0, 0, 1, 1], [1, 1, 1, 0]], device=device)
    view = PairView.build(edge_index, 2)
    node = torch.tensor([[1.0], [2.0]], device=device)
    edge = torch.tensor([[10.0], [20.0], [5.0], [7.0]], device=device)
    out = view.lift(node, edge)
    dense = torch.zeros(2, 2, device=device)
    dense[view.row, view.col] = out.view(-1)
    assert dense.tolist() == [[1.0, 15.0], [7.0, 7.0]]


def test_errors_name_the_argument():
    with pytest.raises(ValueError, match="'edge_index'.*shape"):
        build_pair_index(torch.zeros(3, 4, dtype=torch.long), 5)
    with pytest.raises(TypeError, match="'edge_index'.*integer"):
        build_pair_index(torch.zeros(2, 4), 5)
    with pytest.raises(ValueError, match="'edge_index'.*5 nodes"):
        build_pair_index(torch.tensor([[0], [5]]), 5)
    data = AddSecondOrderView()(random_graph(5, 6))
    other = random_graph(6, 6, seed=1)
    data.num_nodes = 6  # view built for a different graph
    with pytest.raises(ValueError, match='different graph'):
        PairView.from_data(data)
    data = AddSecondOrderView()(random_graph(5, 6))
    data.pair_transpose = data.pair_transpose.flip(0)
    with pytest.raises(ValueError, match="'pair_transpose'"):
        PairView.from_data(data)
    view = PairView.from_data(AddSecondOrderView()(random_graph(5, 6)))
    with pytest.raises(ValueError, match='not entries'):
        view.locate(other.edge_index.clamp(max=4))
    with pytest.raises(ValueError, match="'node_feat'"):
        view.lift(torch.zeros(4, 2))
    with pytest.raises(ValueError, match="'batch'"):
        NodeView(3, torch.zeros(2, dtype=torch.long))


def test_empty_and_single_node_graphs(device):
    empty = torch.zeros(2, 0, dtype=torch.long, device=device)
    view = PairView.build(empty, 1)
    assert view.num_entries == 1 and view.off_pos.numel() == 0
    view = PairView.build(empty, 0)
    assert view.num_entries == 0
    assert repr(AddSecondOrderView(pair_x=True)) == \
        'AddSecondOrderView(pair_x=True)'

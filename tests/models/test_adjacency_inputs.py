r"""Every model (and :class:`HOTNodeConv`) takes the adjacency types PyG's
convolutions take, with the outputs it gives on the plain edge list."""
import pytest
import torch
from torch_geometric import EdgeIndex
from torch_geometric.data import Data
from torch_geometric.nn import GINEConv
from torch_geometric.transforms import ToSparseTensor
from torch_geometric.typing import WITH_TORCH_SPARSE, SparseTensor
from torch_geometric.utils import (sort_edge_index, to_torch_coo_tensor,
                                   to_torch_csc_tensor, to_torch_csr_tensor)

from torch_geometric_hot.data import resolve_adjacency
from torch_geometric_hot.models import (HOTGraphModel, HOTNodeModel,
                                        HOTSetToGraph, HybridGPS,
                                        InvariantMLP, TokenGT)
from torch_geometric_hot.nn import HOTNodeConv
from torch_geometric_hot.testing import random_graph

F, D = 4, 3  # node and edge feature widths


def graph() -> Data:
    # directed (the two directions of an edge differ for HOT), no
    # duplicates (a sparse adjacency merges them)
    data = random_graph(6, 10, F, D, undirected=False, seed=3)
    data.edge_index = data.edge_index.contiguous()  # EdgeIndex needs it
    return data


def build(name: str) -> torch.nn.Module:
    torch.manual_seed(0)
    enc = {'node_encoder': torch.nn.Linear(F, 8),
           'edge_encoder': torch.nn.Linear(D, 8)}
    models = {
        'HOTNodeConv': lambda: HOTNodeConv(F, 8, heads=2, edge_dim=D,
                                           attention='softmax'),
        'HOTGraphModel': lambda: HOTGraphModel(
            8, 2, num_layers=1, heads=2, attention='softmax', **enc),
        'HOTNodeModel-kernel': lambda: HOTNodeModel(
            8, 2, num_layers=1, heads=2, attention='kernel', seed=0, **enc),
        'InvariantMLP': lambda: InvariantMLP(8, 2, num_layers=2, **enc),
        'TokenGT-graph': lambda: TokenGT(F, 8, 2, 1, heads=2, edge_dim=D,
                                         node_id='laplacian'),
        'TokenGT-edge': lambda: TokenGT(F, 8, 2, 1, task='edge', heads=2,
                                        edge_dim=D, node_id='orf', seed=1),
        'HybridGPS-hot': lambda: HybridGPS(8, 2, 2, 'hot', heads=2,
                                           task='node', **enc),
        'HybridGPS-tokengt': lambda: HybridGPS(8, 2, 2, 'tokengt', heads=2,
                                               **enc),
    }
    return models[name]().double().eval()


NAMES = ['HOTNodeConv', 'HOTGraphModel', 'HOTNodeModel-kernel',
         'InvariantMLP', 'TokenGT-graph', 'TokenGT-edge', 'HybridGPS-hot',
         'HybridGPS-tokengt']


def transposed(data: Data, sort_by_row: bool = True):
    r"""The edges as adj_t's nonzeros (target, source), sorted as a CSR
    (by row) or CSC (by column) tensor stores them, and the edge features
    in that order."""
    return sort_edge_index(data.edge_index.flip(0), data.edge_attr,
                           num_nodes=data.num_nodes, sort_by_row=sort_by_row)


def edge_rows(data: Data, sort_by_row: bool = True) -> torch.Tensor:
    r"""The plain edge list's column of every nonzero of the adjacency."""
    key = data.edge_index[1] * data.num_nodes + data.edge_index[0]
    if not sort_by_row:
        key = data.edge_index[0] * data.num_nodes + data.edge_index[1]
    return key.argsort()


def adjacencies(data: Data):
    r"""(name, adjacency, edge_attr to pass, columns of the plain edge list
    in the adjacency's edge order)."""
    n = data.num_nodes
    rows, cols = edge_rows(data), edge_rows(data, False)
    coo = ToSparseTensor(attr='edge_attr', layout=torch.sparse_coo)(
        data.clone()).adj_t  # edge features as its [nnz, D] values
    (index_r, attr_r), (index_c, attr_c) = transposed(data), transposed(
        data, False)
    out = [
        ('EdgeIndex', EdgeIndex(data.edge_index, sparse_size=(n, n)),
         data.edge_attr, torch.arange(data.num_edges)),
        ('coo-values', coo, None, rows),
        ('coo-edge_attr', to_torch_coo_tensor(index_r, size=n), attr_r,
         rows),
        ('csr', to_torch_csr_tensor(index_r, size=n), attr_r, rows),
        ('csc', to_torch_csc_tensor(index_c, size=n), attr_c, cols),
    ]
    if WITH_TORCH_SPARSE:
        out.append(('SparseTensor', SparseTensor(
            row=index_r[0], col=index_r[1], value=attr_r,
            sparse_sizes=(n, n)), None, rows))
    return out


@pytest.mark.parametrize('name', NAMES)
def test_every_adjacency_type_gives_the_edge_list_output(name):
    data = graph()
    model = build(name)
    expected = model(data.x, data.edge_index, data.edge_attr)
    for kind, adj, edge_attr, order in adjacencies(data):
        out = model(data.x, adj, edge_attr)
        if name == 'TokenGT-edge':  # one row per edge, in adj_t's order
            expected_rows = expected if kind == 'EdgeIndex' else \
                expected[order]
            torch.testing.assert_close(out, expected_rows, msg=kind)
        else:
            torch.testing.assert_close(out, expected, msg=kind)


def test_set_to_graph_takes_a_sparse_adjacency_of_its_pairs():
    data = graph()
    torch.manual_seed(0)
    model = HOTSetToGraph(F, 2, num_layers=1, heads=2).double().eval()
    expected = model(data.x, data.edge_index)
    for kind, adj, _, _ in adjacencies(data):
        torch.testing.assert_close(model(data.x, adj), expected, msg=kind)


def test_follows_pyg_message_passing_orientation():
    # the edge list read from adj_t sends messages as PyG's convs do
    data = graph()
    torch.manual_seed(0)
    conv = GINEConv(torch.nn.Linear(F, F), edge_dim=D).double()
    expected = conv(data.x, data.edge_index, data.edge_attr)
    for kind, adj, edge_attr, _ in adjacencies(data):
        if kind != 'csc':  # PyG's propagate takes COO and CSR only
            torch.testing.assert_close(conv(data.x, adj, edge_attr),
                                       expected, msg=kind)
        index, attr = resolve_adjacency(adj, edge_attr, data.num_nodes)
        assert type(index) is torch.Tensor
        torch.testing.assert_close(conv(data.x, index, attr), expected,
                                   msg=kind)


def test_binary_adjacency_values_are_edge_weights_not_features():
    data = graph()
    adj = to_torch_csr_tensor(data.edge_index.flip(0), size=data.num_nodes)
    index, attr = resolve_adjacency(adj, None, data.num_nodes)
    assert attr is None and index.size(1) == data.num_edges
    conv = build('HOTNodeConv')
    torch.testing.assert_close(conv(data.x, adj),
                               conv(data.x, data.edge_index))


def test_clear_errors():
    data = graph()
    n = data.num_nodes
    model = build('HOTGraphModel')
    wide = to_torch_csr_tensor(data.edge_index.flip(0), size=(n, n + 1))
    with pytest.raises(ValueError, match=r"'edge_index' must be a square"):
        model(data.x, wide, data.edge_attr)
    adj = to_torch_csr_tensor(data.edge_index.flip(0), size=n)
    with pytest.raises(ValueError, match="'edge_attr' must have one row per "
                       "nonzero"):
        model(data.x, adj, data.edge_attr[:-1])
    sized = EdgeIndex(data.edge_index, sparse_size=(n + 2, n + 2))
    with pytest.raises(ValueError, match="EdgeIndex of sparse size"):
        model(data.x, sized, data.edge_attr)
    with pytest.raises(ValueError, match="'edge_index' must be a square"):
        HOTNodeConv(F, 8, edge_dim=D).double()(data.x, wide)

import copy

import pytest
import torch
from torch_geometric.data import Batch, Data
from torch_geometric.loader import DataLoader
from torch_geometric.transforms import Compose

pytest.importorskip('rdkit')
pytest.importorskip('ogb')

from torch_geometric_hot.datasets import (  # noqa: E402
    load_molecule_benchmark, nci_tpsa_table, ogb_safe_globals,
    write_offline)
from torch_geometric_hot.datasets.collated_molecules import (  # noqa: E402
    CollatedMolecules)
from torch_geometric_hot.transforms import (  # noqa: E402
    AddLaplacianNodeId, AddRandomNodeId, AddSecondOrderView)
from torch_geometric_hot.transforms.apply_to_many import (  # noqa: E402
    apply_to_many)

N = 80


@pytest.fixture(scope='module')
def root(tmp_path_factory):
    path = str(tmp_path_factory.mktemp('collated'))
    write_offline('pcqm4mv2', path, nci_tpsa_table(limit=N))
    return path


@pytest.fixture(scope='module')
def ogb(root):
    from ogb.lsc import PygPCQM4Mv2Dataset
    with ogb_safe_globals():
        return PygPCQM4Mv2Dataset(root)


def _below_cut(batch: Batch, g: int, ids: torch.Tensor) -> torch.Tensor:
    # the columns of graph g's identifiers whose eigenvalue (of the
    # normalised Laplacian, I - D^-1/2 A D^-1/2) is below the largest kept
    from torch_geometric.utils import get_laplacian, to_dense_adj
    data = batch.get_example(g)
    index, weight = get_laplacian(data.edge_index, normalization='sym',
                                  num_nodes=data.num_nodes)
    lap = to_dense_adj(index, edge_attr=weight,
                       max_num_nodes=data.num_nodes)[0]
    values = (ids * (lap @ ids)).sum(0)
    return values < values.max() - 1e-4


def _same(a: Data, b: Data) -> None:
    assert sorted(a.keys()) == sorted(b.keys())
    for key in a.keys():
        assert torch.equal(a[key], b[key]) or (
            key == 'y' and bool(torch.isnan(a[key]).all())
            and bool(torch.isnan(b[key]).all())), key


def test_reads_the_molecules_without_keeping_them(ogb):
    molecules = CollatedMolecules(ogb)
    assert len(molecules) == N
    for i in range(N):
        _same(molecules[i], ogb[i])
    assert getattr(molecules, '_data_list', None) is None
    assert molecules[5].x.untyped_storage().data_ptr() == \
        ogb._data.x.untyped_storage().data_ptr()  # a view, not a copy
    subset = molecules[torch.tensor([7, 2, 9])]
    assert isinstance(subset, CollatedMolecules)
    _same(subset[1], ogb[2])
    _same(subset.__getitems__([2, 0])[0], ogb[9])
    with pytest.raises(ValueError, match='collated'):
        CollatedMolecules(torch.nn.Linear(1, 1))


def test_many_molecules_at_once_are_those_read_one_by_one(ogb):
    molecules = CollatedMolecules(ogb)
    idx = [7, 2, 9, 2, 0, N - 1]
    many = molecules.get_many(idx)
    assert len(many) == len(idx)
    for a, i in zip(many, idx):
        b = molecules.get(i)
        assert list(a._store._mapping) == list(b._store._mapping)
        _same(a, b)
        for key in b.keys():
            assert a[key].dtype == b[key].dtype
    assert molecules.get_many([]) == []


def _graphs():
    # molecules-like graphs plus an isolated node, a graph without edges,
    # a self-loop and a duplicate edge
    graphs = [Data(x=torch.zeros(3, 1), edge_index=torch.tensor(
        [[0, 1, 1, 2], [1, 0, 2, 1]])),
        Data(x=torch.zeros(1, 1), edge_index=torch.empty(2, 0,
                                                         dtype=torch.long)),
        Data(x=torch.zeros(5, 1), edge_index=torch.tensor(
            [[0, 1, 2, 3, 3, 0], [1, 0, 3, 2, 3, 1]])),
        Data(x=torch.zeros(4, 1), edge_index=torch.tensor(
            [[0, 1, 2, 3, 1, 2], [1, 2, 3, 0, 0, 1]]))]
    return graphs


@pytest.mark.parametrize('transform', [
    AddLaplacianNodeId(3), AddLaplacianNodeId(4, dense_threshold=3),
    AddSecondOrderView(), Compose([AddSecondOrderView(),
                                   AddLaplacianNodeId(2)])])
def test_many_at_once_equals_one_by_one(transform, ogb):
    graphs = _graphs() + [ogb[i] for i in range(20)]
    alone = [transform(copy.copy(g)) for g in graphs]
    many = apply_to_many(transform, [copy.copy(g) for g in graphs])
    for a, b in zip(many, alone):
        _same(a, b)


def test_other_transforms_run_graph_by_graph():
    graphs = _graphs()
    out = apply_to_many(AddRandomNodeId(4, seed=0), graphs)
    assert [g.random_node_id.shape for g in out] == [(3, 4), (1, 4),
                                                     (5, 4), (4, 4)]
    assert apply_to_many(None, graphs) is graphs


@pytest.mark.parametrize('workers', [0, 1])
def test_loader_batches_equal_those_of_stored_views(root, workers):
    stored = load_molecule_benchmark('pcqm4mv2', root,
                                     pre_transform=AddLaplacianNodeId(16),
                                     views='stored')
    computed = load_molecule_benchmark('pcqm4mv2', root,
                                       pre_transform=AddLaplacianNodeId(16),
                                       views='computed')
    assert (stored.views, computed.views) == ('stored', 'computed')
    assert 'lap_node_id' in stored.dataset._data
    assert 'lap_node_id' not in computed.dataset._data
    index = stored.split['train'][:40]
    batches = [list(DataLoader(b.dataset[index], batch_size=16,
                               num_workers=workers)) for b in (stored,
                                                               computed)]
    assert len(batches[0]) == len(batches[1]) == 3
    for a, b in zip(*batches):
        assert isinstance(b, Batch)
        for key in ('x', 'edge_index', 'edge_attr', 'batch'):
            assert torch.equal(a[key], b[key]), key
        # eigenvectors of the graphs batched and one by one: the same
        # eigenspaces (a repeated eigenvalue's basis is the solver's choice,
        # and where the cut at k splits one, which of its vectors are kept)
        for g in range(a.num_graphs):
            u, v = (d.lap_node_id[d.batch == g] for d in (a, b))
            keep = _below_cut(a, g, u)
            assert torch.allclose(u[:, keep] @ u[:, keep].t(),
                                  v[:, keep] @ v[:, keep].t(),
                                  atol=1e-4), g
    with pytest.raises(ValueError, match="'views'"):
        load_molecule_benchmark('pcqm4mv2', root, views='lazy')

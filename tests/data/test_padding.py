import pytest
import torch
from torch_geometric.data import Batch, Data

from torch_geometric_hot.data import PadToBuckets, bucket, real_graphs
from torch_geometric_hot.data.padding import padding_edges
from torch_geometric_hot.transforms import AddSecondOrderView


def graphs(sizes, seed=0):
    gen = torch.Generator().manual_seed(seed)
    out = []
    for n, m in sizes:
        pairs = [(i, j) for i in range(n) for j in range(n) if i != j]
        pick = torch.randperm(len(pairs), generator=gen)[:m].tolist()
        edge_index = torch.tensor([pairs[k] for k in pick],
                                  dtype=torch.long).view(-1, 2).t()
        out.append(Data(x=torch.randint(5, (n, 3), generator=gen),
                        edge_index=edge_index,
                        edge_attr=torch.randint(3, (m, 2), generator=gen),
                        y=torch.rand(1, 1, generator=gen)))
    return out


def test_bucket_series():
    assert [bucket(v, 1.25, 8) for v in (0, 1, 8, 9, 10, 11, 13, 14)] == \
        [0, 8, 8, 10, 10, 13, 13, 17]
    assert [bucket(v, 2.0, 1) for v in (1, 2, 3, 5, 9)] == [1, 2, 4, 8, 16]
    with pytest.raises(ValueError, match="'ratio'"):
        PadToBuckets(ratio=1.0)
    with pytest.raises(ValueError, match="'smallest'"):
        PadToBuckets(smallest=0)


def test_padding_edges_are_distinct_without_self_loops():
    for n in (2, 3, 7):
        e = padding_edges(n, n * (n - 1))
        assert bool((e[0] != e[1]).all())
        assert len({tuple(c) for c in e.t().tolist()}) == n * (n - 1)
    with pytest.raises(ValueError, match='at most 2 edges'):
        padding_edges(2, 3)


@pytest.mark.parametrize('seed', range(4))
def test_padded_sizes_are_the_buckets(seed):
    gen = torch.Generator().manual_seed(seed)
    sizes = []
    for _ in range(int(torch.randint(1, 30, (1, ), generator=gen))):
        n = int(torch.randint(1, 25, (1, ), generator=gen))
        sizes.append((n, int(torch.randint(0, n * (n - 1) + 1, (1, ),
                                           generator=gen))))
    real = graphs(sizes, seed)
    pad = PadToBuckets(ratio=1.25, smallest=4)
    padded = pad(real)
    buckets, _ = pad.buckets(real)
    assert padded[:len(real)] == real  # real graphs first, untouched
    batch = Batch.from_data_list(padded)
    assert (batch.num_nodes, batch.num_edges, batch.num_graphs) == (
        buckets.nodes, buckets.edges, buckets.graphs)
    extra = padded[len(real):]
    assert (extra[0].num_nodes, extra[0].num_edges) == (buckets.width,
                                                        buckets.edge_width)
    assert all(0 < g.num_nodes <= buckets.width and
               0 < g.num_edges <= buckets.edge_width for g in extra)
    assert max(g.num_nodes for g in padded) == buckets.width
    assert max(g.num_edges for g in padded) == buckets.edge_width
    for size in buckets:  # every size a term of the series
        assert bucket(size, 1.25, 4) == size
    assert pad.seen == {buckets}


def test_padding_graphs_get_the_datasets_pre_transform():
    real = graphs([(3, 4), (5, 6)])
    transform = AddSecondOrderView()
    with pytest.raises(ValueError, match='pre_transform'):
        PadToBuckets()([transform(g) for g in real])
    padded = PadToBuckets(transform)([transform(g) for g in real])
    for g in padded[2:]:
        assert set(g.keys()) == set(padded[0].keys())
        assert g.pair_index.size(1) == g.num_nodes + g.num_edges


def test_real_graphs_cuts_the_padding():
    out = torch.arange(6.).view(6, 1)
    batch = Batch.from_data_list(graphs([(2, 1)] * 6))
    assert torch.equal(real_graphs(out, batch), out)
    batch.num_real_graphs = 4
    assert torch.equal(real_graphs(out, batch), out[:4])

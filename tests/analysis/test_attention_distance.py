import torch

from torch_geometric_hot.analysis import hop_distances, token_endpoints
from torch_geometric_hot.analysis.attention_distance import \
    batch_attention_distance
from torch_geometric_hot.nn import AttentionWeights
from torch_geometric_hot.nn.token_self_attention import same_graph_pairs

INF = float('inf')


def _two_graphs():
    # graph 0: the path 0 - 1 - 2 (both directions); graph 1: an edge 3 - 4
    # and an isolated node 5
    edge_index = torch.tensor([[0, 1, 1, 2, 3, 4], [1, 0, 2, 1, 4, 3]])
    batch = torch.tensor([0, 0, 0, 1, 1, 1])
    return edge_index, batch


def test_hop_distances_per_graph():
    edge_index, batch = _two_graphs()
    hops, local = hop_distances(edge_index, batch, 2)
    assert torch.equal(local, torch.tensor([0, 1, 2, 0, 1, 2]))
    assert torch.equal(hops[0], torch.tensor([[0., 1, 2], [1, 0, 1],
                                              [2, 1, 0]], dtype=torch.float64))
    assert torch.equal(hops[1], torch.tensor([[0., 1, INF], [1, 0, INF],
                                              [INF, INF, 0]],
                                             dtype=torch.float64))


def _uniform(token_batch, num_graphs, heads=2):
    index = same_graph_pairs(token_batch, num_graphs)
    counts = torch.bincount(token_batch)[token_batch[index[0]]]
    weight = (1.0 / counts.double()).unsqueeze(-1).repeat(1, heads)
    return AttentionWeights(index, weight)


def test_uniform_attention_gives_the_mean_token_distance():
    edge_index, batch = _two_graphs()
    ends = token_endpoints(edge_index, 6, 2, graph_tokens=True)
    assert ends[:2].tolist() == [[-1, -1], [-1, -1]]
    assert ends[2:8].tolist() == [[i, i] for i in range(6)]
    assert ends[8:].tolist() == edge_index.t().tolist()
    token_batch = torch.cat([torch.arange(2), batch, batch[edge_index[0]]])
    hops, local = hop_distances(edge_index, batch, 2)
    out = batch_attention_distance(_uniform(token_batch, 2), ends,
                                   token_batch, hops, local)
    # graph 0's tokens: nodes 0, 1, 2 and edges a=(0,1), b=(1,0), c=(1,2),
    # d=(2,1); the distance of two tokens is that of their nearest ends
    tokens0 = [(0, 0), (1, 1), (2, 2), (0, 1), (1, 0), (1, 2), (2, 1)]
    path = [[0, 1, 2], [1, 0, 1], [2, 1, 0]]

    def d(t, s):
        return min(path[a][b] for a in t for b in s)

    expected0 = sum(d(t, s) for t in tokens0 for s in tokens0) / 49
    # graph 1: nodes 3, 4, 5, edges (3,4), (4,3); node 5 is unreachable from
    # the rest and reaches only itself: left out of every other token's
    # weights, its own distance is 0
    reach = [(3, 3), (4, 4), (3, 4), (4, 3)]
    hop1 = {(3, 3): 0, (3, 4): 1, (4, 3): 1, (4, 4): 0}
    near = [min(hop1[(a, b)] for a in t for b in s) for t in reach
            for s in reach]
    expected1 = (sum(near) / 4 + 0.0) / 5  # 4 tokens with 4 keys, node 5
    assert torch.allclose(out, torch.tensor([[expected0] * 2,
                                             [expected1] * 2],
                                            dtype=torch.float64))


def test_attention_on_itself_is_at_distance_zero():
    edge_index, batch = _two_graphs()
    ends = token_endpoints(edge_index, 6, 2, graph_tokens=False)
    token_batch = torch.cat([batch, batch[edge_index[0]]])
    index = same_graph_pairs(token_batch, 2)
    weight = (index[0] == index[1]).double().unsqueeze(-1)
    hops, local = hop_distances(edge_index, batch, 2)
    out = batch_attention_distance(AttentionWeights(index, weight), ends,
                                   token_batch, hops, local)
    assert torch.equal(out, torch.zeros(2, 1, dtype=torch.float64))

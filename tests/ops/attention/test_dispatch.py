"""The rule of the dispatch table: which path runs each problem by
default, on the CPU and (by the device type it decides for) on a GPU."""
import torch
from torch_geometric.data import Batch

from torch_geometric_hot.data import PairView
from torch_geometric_hot.ops import native
from torch_geometric_hot.ops.attention import dispatch
from torch_geometric_hot.testing import random_graph


def molecule_like_batch(num_graphs: int, num_nodes: int) -> PairView:
    graphs = [random_graph(num_nodes, num_nodes, seed=s)
              for s in range(num_graphs)]
    return PairView.from_data(Batch.from_data_list(graphs))


def hot(view, in_order=2, out_order=2, attention='kernel', device_type='cpu',
        dtype=torch.float64, compiling=False, weights=False):
    x = torch.zeros(1, 1, dtype=dtype)
    return dispatch.choose(dispatch.Problem(
        'hot', attention, (x, x), device_type, compiling, weights, in_order,
        out_order, view))


def test_packed_on_small_graphs_and_not_on_one_large():
    # off the native kernels (a GPU): kernel attention by the graphs' size
    small = molecule_like_batch(16, 16)
    for orders in ((2, 2), (2, 0), (1, 1)):
        assert hot(small, *orders, device_type='cuda') == 'packed'
    large = molecule_like_batch(1, 200)
    for orders in ((2, 2), (1, 2)):
        assert hot(large, *orders, device_type='cuda') == 'pooled'
    # hyperedge outputs and empty batches are never packed
    assert hot(small, 1, 3, device_type='cuda') == 'pooled'
    empty = PairView.build(torch.zeros(2, 0, dtype=torch.long), 0)
    assert hot(empty, device_type='cuda') == 'pooled'


def test_threshold_is_the_rows_of_a_graph():
    # graphs of one size: packed exactly when n + m <= PACKED_BLOCK, and
    # n <= PACKED_BLOCK for order 1
    for nodes in (8, 40, 120, 200, 400):
        view = molecule_like_batch(2, nodes)
        rows = view.num_entries // 2
        assert (hot(view, device_type='cuda') == 'packed') == \
            (rows <= dispatch.PACKED_BLOCK)
        assert (hot(view, 1, 1, device_type='cuda') == 'packed') == \
            (nodes <= dispatch.PACKED_BLOCK)


def test_native_inputs_softmax_weights_and_compiled_graphs():
    small, medium = molecule_like_batch(16, 16), molecule_like_batch(4, 64)
    with native.use_native('off'):  # the CPU without native kernels
        assert hot(small) == 'packed' and hot(medium) == 'packed'
        assert hot(small, attention='softmax') == 'packed'
        assert hot(medium, attention='softmax') == 'padded'
    if native.available():
        assert hot(small) == 'pooled'  # kernel attention on the kernels
        assert hot(small, attention='softmax') == 'grouped'
        # half precision: not the native kernels
        assert hot(medium, attention='softmax',
                   dtype=torch.float16) == 'padded'
    assert hot(small, attention='softmax', device_type='cuda') == 'packed'
    assert hot(medium, attention='softmax', device_type='cuda') == 'padded'
    for device_type in ('cpu', 'cuda'):
        assert hot(small, attention='softmax', device_type=device_type,
                   weights=True) == 'pairs'
        assert hot(small, attention='softmax', device_type=device_type,
                   compiling=True) == 'compiled'
        assert hot(small, device_type=device_type,
                   compiling=True) == 'pooled'


def test_token_attention_rule():
    def tokens(device_type, compiling=False):
        return dispatch.choose(dispatch.Problem(
            'tokens', 'softmax', (), device_type, compiling))

    assert tokens('cpu') == ('grouped' if native.available() else 'padded')
    assert tokens('cuda') == 'padded'
    assert tokens('cpu', True) == tokens('cuda', True) == 'compiled'
    with native.use_native('off'):
        assert tokens('cpu') == 'padded'


def test_device_rules():
    assert dispatch.bucket_ratio('cpu') < dispatch.bucket_ratio('cuda')
    assert dispatch.local_softmax_on_pairs('cpu')
    assert not dispatch.local_softmax_on_pairs('cuda')
    with dispatch.use_path(device_type='cuda'):
        problem = dispatch.problem('hot', 'softmax', (),
                                   torch.device('cpu'))
        assert problem.device_type == 'cuda'

import pytest
import torch
from torch_geometric.data import Batch

import torch_geometric_hot.ops.packed_class_attention as packed
import torch_geometric_hot.ops.size_buckets as size_buckets
from torch_geometric_hot.data import PairView
from torch_geometric_hot.nn import HOTConv
from torch_geometric_hot.ops.packed_layout import packed_layout
from torch_geometric_hot.ops.size_buckets import pack, unpack
from torch_geometric_hot import testing
from torch_geometric_hot.testing import random_graph

ORDERS = [(2, 2), (2, 1), (2, 0), (1, 1), (1, 0), (1, 2)]
SERVED = [('softmax', 'favor+', True), ('kernel', 'favor+', True),
          ('kernel', 'relu', True), ('kernel', 'favor+', False)]


def skewed_batch(out_order: int) -> Batch:
    return testing.skewed_batch(out_order, channels=6)


def run(conv: HOTConv, data: Batch, path: str, monkeypatch):
    for limit in ('PACKED_BLOCK', 'PACKED_BLOCK_SOFTMAX'):
        monkeypatch.setattr(packed, limit,
                            float('inf') if path == 'packed' else -1)
    monkeypatch.setattr(packed, 'native_applies', lambda *tensors: False)
    monkeypatch.setattr('torch_geometric_hot.nn.hot_conv.'
                        'grouped_softmax_applies', lambda *a, **k: False)
    calls = []
    original = packed.packed_class_attention

    def spy(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr('torch_geometric_hot.nn.hot_conv.'
                        'packed_class_attention', spy)
    x = (data.pair_x if conv.in_order == 2 else data.x).clone()
    x.requires_grad_(True)
    out = conv(x, PairView.from_data(data))
    assert bool(calls) == (path == 'packed')
    weight = torch.randn(out.shape, dtype=out.dtype,
                         generator=torch.Generator().manual_seed(1)).to(
                             out.device)
    params = [p for p in conv.parameters()]
    grads = torch.autograd.grad((out * weight).sum(), [x] + params,
                                allow_unused=True)
    return [out] + [g for g in grads if g is not None]


@pytest.mark.parametrize('orders', ORDERS)
@pytest.mark.parametrize('attention,kernel,exact', SERVED)
@pytest.mark.parametrize('gpu_rules', [False, True])
def test_packed_equals_sparse(orders, attention, kernel, exact, gpu_rules,
                              monkeypatch, device):
    if gpu_rules:  # on any device, the rules of devices other than the CPU:
        # coarse buckets, softmax attention's local classes on the blocks
        monkeypatch.setattr(size_buckets, 'BUCKET_RATIO',
                            size_buckets.LAUNCH_BOUND_BUCKET_RATIO)
        monkeypatch.setattr(packed, 'SPARSE_LOCAL_SOFTMAX', ())
    in_order, out_order = orders
    data = skewed_batch(out_order).to(device)
    torch.manual_seed(0)
    conv = HOTConv(6, 5, in_order, out_order, heads=2, head_channels=3,
                   attention=attention, kernel=kernel, exact_exclusion=exact,
                   seed=0).double().to(device)
    with torch.no_grad():  # no zero bias: every output row is compared
        conv.bias.normal_()
    sparse = run(conv, data, 'sparse', monkeypatch)
    dense = run(conv, data, 'packed', monkeypatch)
    assert len(sparse) == len(dense)
    for a, b in zip(sparse, dense):
        torch.testing.assert_close(b, a, rtol=1e-10, atol=1e-10)
    assert sparse[0].abs().sum() > 0


def test_layers_sharing_a_view_equal_fresh_views(monkeypatch):
    # a 1->1 layer (graphs bucketed by nodes) and a 1->2 layer (by nodes
    # plus entries) on one view, as in a model, each keep their own slots
    monkeypatch.setattr(packed, 'PACKED_BLOCK', float('inf'))
    monkeypatch.setattr(packed, 'native_applies', lambda *tensors: False)
    data = skewed_batch(2)
    torch.manual_seed(0)
    convs = [HOTConv(6, 6, 1, 1, heads=2, attention='kernel').double(),
             HOTConv(6, 5, 1, 2, heads=2, attention='kernel').double()]
    shared = PairView.from_data(data)
    for conv in convs:
        torch.testing.assert_close(
            conv(data.x, shared), conv(data.x, PairView.from_data(data)),
            rtol=1e-12, atol=1e-12)


def test_layout_packs_and_unpacks_every_row():
    data = skewed_batch(2)
    view = PairView.from_data(data)
    layout = packed_layout(view, pairs=True)
    # every graph but the empty one takes a bucket; the large one its own
    assert sum(layout.counts) == data.num_graphs - 1
    assert layout.counts[0] == 1 and layout.slots['node'].widths[0] == 30
    for kind, rows in (('node', view.num_nodes),
                       ('off', view.off_pos.numel()),
                       ('graph', view.num_graphs)):
        slots = layout.slots[kind]
        x = torch.arange(1, rows + 1, dtype=torch.float64).view(-1, 1)
        packed_x = pack(x, slots.slot_row)
        blocks = layout.blocks(packed_x, kind)
        assert [b.shape[:2] for b in blocks] == [
            (c, w) for c, w in zip(layout.counts, slots.widths)]
        back = unpack(packed_x, slots.row_slot)
        if kind == 'graph':  # the empty graph has no slot: zero
            empty = view.nodes_per_graph == 0
            assert back[empty].eq(0).all()
            assert torch.equal(back[~empty], x[~empty])
        else:
            assert torch.equal(back, x)


def molecule_like_batch(num_graphs: int, num_nodes: int) -> PairView:
    graphs = [random_graph(num_nodes, num_nodes, seed=s)
              for s in range(num_graphs)]
    return PairView.from_data(Batch.from_data_list(graphs))


def pays(view, in_order, out_order, x=torch.zeros(1, 1)):
    return packed.packed_pays(view, in_order, out_order, x)


@pytest.fixture
def no_native(monkeypatch):
    # the inputs the native kernels do not take (e.g. on a GPU)
    monkeypatch.setattr(packed, 'native_applies', lambda *tensors: False)


def test_rule_picks_packed_on_small_graphs_and_sparse_on_one_large(
        no_native):
    small = molecule_like_batch(16, 16)
    assert pays(small, 2, 2) and pays(small, 2, 0) and pays(small, 1, 1)
    large = molecule_like_batch(1, 200)
    assert not pays(large, 2, 2) and not pays(large, 1, 2)
    # hyperedge outputs and empty batches are never packed
    assert not pays(small, 1, 3)
    empty = PairView.build(torch.zeros(2, 0, dtype=torch.long), 0)
    assert not pays(empty, 2, 2)


def test_rule_on_native_inputs_softmax_and_compiled_graphs(monkeypatch):
    small, medium = molecule_like_batch(16, 16), molecule_like_batch(4, 64)
    monkeypatch.setattr(packed, 'native_applies', lambda *tensors: True)
    assert not pays(small, 2, 2)  # kernel attention on the native kernels
    x = torch.zeros(1, 1)
    assert packed.packed_pays(small, 2, 2, x, 'softmax')
    assert not packed.packed_pays(medium, 2, 2, x, 'softmax')
    monkeypatch.setattr(packed, 'native_applies', lambda *tensors: False)
    assert pays(small, 2, 2) and pays(medium, 2, 2)
    monkeypatch.setattr(torch.compiler, 'is_compiling', lambda: True)
    assert not pays(small, 2, 2)


def test_rule_threshold_is_the_rows_of_a_graph(no_native):
    # graphs of one size: packed exactly when n + m <= PACKED_BLOCK, and
    # n <= PACKED_BLOCK for order 1
    for nodes in (8, 40, 120, 200, 400):
        view = molecule_like_batch(2, nodes)
        rows = view.num_entries // 2
        assert pays(view, 2, 2) == (rows <= packed.PACKED_BLOCK)
        assert pays(view, 1, 1) == (nodes <= packed.PACKED_BLOCK)


def test_attention_weights_use_the_sparse_path(monkeypatch):
    data = skewed_batch(2)
    conv = HOTConv(6, 5, 2, 2, heads=2, attention='softmax').double()
    monkeypatch.setattr(packed, 'PACKED_BLOCK_SOFTMAX', float('inf'))
    out, weights = conv(data.pair_x, PairView.from_data(data),
                        return_attention_weights=True)
    assert len(weights) == len(conv.classes)

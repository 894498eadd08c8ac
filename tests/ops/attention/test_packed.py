import pytest
import torch
from torch_geometric.data import Batch

from torch_geometric_hot.data import PairView
from torch_geometric_hot.nn import HOTConv
from torch_geometric_hot.ops import use_path
from torch_geometric_hot.ops.attention import dispatch
from torch_geometric_hot.ops.attention.packed import GRAPHS_PER_BIN, \
    packed_layout
from torch_geometric_hot.ops.size_buckets import pack, unpack
from torch_geometric_hot import testing

ORDERS = [(2, 2), (2, 1), (2, 0), (1, 1), (1, 0), (1, 2)]
VARIANTS = [('relu', True), ('favor+', False)]


def skewed_batch(out_order: int) -> Batch:
    return testing.skewed_batch(out_order, channels=6)


def run(conv: HOTConv, data: Batch, path: str, device_type=None):
    x = (data.pair_x if conv.in_order == 2 else data.x).clone()
    x.requires_grad_(True)
    with use_path(path, device_type=device_type):
        out = conv(x, PairView.from_data(data))
    weight = torch.randn(out.shape, dtype=out.dtype,
                         generator=torch.Generator().manual_seed(1)).to(
                             out.device)
    params = [p for p in conv.parameters()]
    grads = torch.autograd.grad((out * weight).sum(), [x] + params,
                                allow_unused=True)
    return [out] + [g for g in grads if g is not None]


@pytest.mark.parametrize('orders', ORDERS)
@pytest.mark.parametrize('kernel,exact', VARIANTS)
@pytest.mark.parametrize('device_type', [None, 'cuda'])
def test_packed_kernel_variants_equal_the_summaries(orders, kernel, exact,
                                                    device_type, device):
    # (every path against its reference: test_paths.py)
    in_order, out_order = orders
    data = skewed_batch(out_order).to(device)
    torch.manual_seed(0)
    conv = HOTConv(6, 5, in_order, out_order, heads=2, head_channels=3,
                   attention='kernel', kernel=kernel, exact_exclusion=exact,
                   seed=0).double().to(device)
    with torch.no_grad():  # no zero bias: every output row is compared
        conv.bias.normal_()
    summaries = run(conv, data, 'pooled')
    dense = run(conv, data, 'packed', device_type)
    assert len(summaries) == len(dense)
    for a, b in zip(summaries, dense):
        torch.testing.assert_close(b, a, rtol=1e-10, atol=1e-10)
    assert summaries[0].abs().sum() > 0


def gpu_layout(data: Batch, orders):
    # the view and the packed layout a GPU plans for the batch
    view = PairView.from_data(data)
    return view, packed_layout(view, pairs=2 in orders,
                               ratio=dispatch.bucket_ratio('cuda'))


def packed_equals_the_sparse_path(data: Batch, orders, attention: str,
                                  device, **kwargs
                                  ) -> testing.OperatorCounter:
    # outputs and gradients of a layer on the GPU's packed layout against
    # its reference path; the operators of the packed path
    torch.manual_seed(0)
    conv = HOTConv(6, 5, *orders, heads=2, head_channels=3,
                   attention=attention, seed=0,
                   **kwargs).double().to(device)
    with torch.no_grad():
        conv.bias.normal_()
    reference = run(conv, data, 'pooled' if attention == 'kernel'
                    else 'pairs')
    with testing.OperatorCounter() as counter:
        packed = run(conv, data, 'packed', 'cuda')
    assert len(reference) == len(packed)
    for a, b in zip(reference, packed):
        torch.testing.assert_close(b, a, rtol=1e-10, atol=1e-10)
    return counter


@pytest.mark.parametrize('orders', [(2, 2), (2, 0), (1, 1)])
@pytest.mark.parametrize('attention', ['kernel', 'softmax'])
def test_one_bucket_equals_the_sparse_path(orders, attention, device):
    # graphs of close sizes: the launch-bound layout packs them as one block
    data = testing.skewed_batch(orders[1], channels=6,
                                large=(6, 8)).to(device)
    view, layout = gpu_layout(data, orders)
    assert len(layout.counts) == 1
    # graphs share blocks: their masks keep them apart
    assert layout.counts[0] < int((view.nodes_per_graph > 0).sum())
    counter = packed_equals_the_sparse_path(data, orders, attention, device)
    # one block of scores and one of outputs forward, each with its two
    # products backward: the parts of an order-2 output (diagonal, off
    # the diagonal) attend together
    assert counter.counts['aten.bmm'] == 6, counter.counts


@pytest.mark.parametrize('orders', [(2, 2), (1, 2)])
@pytest.mark.parametrize('attention', ['kernel', 'softmax'])
def test_size_scales_keep_one_projection(orders, attention, device):
    # the parts of a pair output attend together and their outputs, scaled
    # by their key groups' sizes, are projected in one product (with one
    # product per part, each would add an addmm forward and two products
    # backward)
    data = testing.skewed_batch(orders[1], channels=6,
                                large=(6, 8)).to(device)
    plain, scaled = (packed_equals_the_sparse_path(
        data, orders, attention, device, size_scaler=scaler).counts
        for scaler in ('none', 'log'))
    assert plain['aten.addmm'] == scaled['aten.addmm'], scaled
    assert plain['aten.mm'] == scaled['aten.mm'], scaled


@pytest.mark.parametrize('attention', ['kernel', 'softmax'])
def test_one_block_reads_the_projections_as_views(attention, monkeypatch,
                                                  device):
    # the classes that attend in one product (kernel attention: all of
    # them; softmax: the global ones of both parts) hold consecutive value
    # slots once ordered by slot: their value and output projections are
    # views of the layer's, not gathers (the result: test above)
    from torch_geometric_hot.ops.attention import packed
    reads = []

    def recorded(t, rows, dim=0):
        out = packed_select_rows(t, rows, dim)
        reads.append(out is t or out._base is t)
        return out

    packed_select_rows = packed.select_rows
    monkeypatch.setattr(packed, 'select_rows', recorded)
    data = testing.skewed_batch(2, channels=6, large=(6, 8)).to(device)
    packed_equals_the_sparse_path(data, (2, 2), attention, device,
                                  size_scaler='log')
    assert reads and all(reads), reads


@pytest.mark.parametrize('orders', ORDERS)
@pytest.mark.parametrize('attention', ['kernel', 'softmax'])
def test_one_graph_equals_the_sparse_path(orders, attention, device):
    # one graph: one bin, whose outputs come out of one block without a
    # concatenation of blocks
    data = Batch.from_data_list([testing.attach_order_inputs(
        testing.complete_graph(4), orders[1], channels=6)]).to(device)
    _, layout = gpu_layout(data, orders)
    assert layout.counts == [1]
    packed_equals_the_sparse_path(data, orders, attention, device)


@pytest.mark.parametrize('orders', [(2, 2), (2, 0), (1, 0)])
@pytest.mark.parametrize('attention', ['kernel', 'softmax'])
def test_full_bins_equal_the_sparse_path(orders, attention, device,
                                         monkeypatch):
    # 20 graphs of one or two nodes beside one of 12, in one bucket (no
    # ratio splits them): a block of the largest graph's size would hold
    # all of them, a bin holds GRAPHS_PER_BIN
    monkeypatch.setattr(dispatch, 'LAUNCH_BOUND_BUCKET_RATIO', 1e9)
    graphs = [testing.random_graph(12, 14, seed=0)] + [
        testing.random_graph(1 + s % 2, s % 2, seed=s) for s in range(20)]
    data = Batch.from_data_list([
        testing.attach_order_inputs(g, orders[1], channels=6, seed=i)
        for i, g in enumerate(graphs)]).to(device)
    _, layout = gpu_layout(data, orders)
    assert len(layout.counts) == 1
    graph_slots = layout.slots['graph']
    per_block = torch.bincount(graph_slots.row_slot //
                               graph_slots.widths[0])
    assert per_block.max() == GRAPHS_PER_BIN == graph_slots.widths[0]
    packed_equals_the_sparse_path(data, orders, attention, device)


@pytest.mark.parametrize('orders', ORDERS)
@pytest.mark.parametrize('attention', ['kernel', 'softmax'])
@pytest.mark.parametrize('device_type', [None, 'cuda'])
def test_batch_of_empty_graphs(orders, attention, device_type):
    # no graph has a slot: the keys of several kinds (pair input) side by
    # side in no block at all, the output the bias of every graph
    view = PairView.build(torch.empty(2, 0, dtype=torch.long), 0,
                          torch.empty(0, dtype=torch.long), 2)
    conv = HOTConv(6, 5, *orders, attention=attention,
                   size_scaler='log').double()
    with torch.no_grad():
        conv.bias.normal_()
    x = torch.randn(0, 6, dtype=torch.float64)
    expected = conv(x, view)
    with use_path('packed', device_type=device_type):
        out = conv(x, PairView.build(torch.empty(2, 0, dtype=torch.long), 0,
                                     torch.empty(0, dtype=torch.long), 2))
    assert out.shape == (2 if orders[1] == 0 else 0, 5)
    torch.testing.assert_close(out, expected, rtol=0, atol=0)


@use_path('packed')
def test_layers_sharing_a_view_equal_fresh_views():
    # a 1->1 layer (graphs bucketed by nodes) and a 1->2 layer (by nodes
    # plus entries) on one view, as in a model, each keep their own slots
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


def test_attention_weights_use_the_sparse_path():
    data = skewed_batch(2)
    conv = HOTConv(6, 5, 2, 2, heads=2, attention='softmax').double()
    with use_path('packed', 'pairs'):  # packed where it runs
        out, weights = conv(data.pair_x, PairView.from_data(data),
                            return_attention_weights=True)
    assert len(weights) == len(conv.classes)

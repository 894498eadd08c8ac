import re

import pytest
import torch

from torch_geometric_hot.data import PairView
from torch_geometric_hot.nn import (HOTConv, HOTConv1to0, HOTConv1to1,
                                    HOTConv1to2, HOTConv1toK, HOTConv2to0,
                                    HOTConv2to1, HOTConv2to2)
from torch_geometric_hot.ops import native
from torch_geometric_hot.ops import use_path
from torch_geometric_hot.ops.attention.dispatch import DIRECT_READINGS, \
    DirectReadings
from torch_geometric_hot.testing import (
    assert_batch_independent, assert_gradcheck, assert_permutation_equivariant,
    attach_order_inputs, complete_graph, dense_basis, dense_class_attention,
    edge_case_graphs, output_patterns, pair_to_dense, random_graph,
    rows_per_graph, run_layer)

ORDERS = [(2, 2), (2, 1), (2, 0), (1, 1), (1, 0), (1, 2), (1, 3)]
BIAS_LABELS = {0: [''], 1: ['o1'], 2: ['o1o2', 'o1|o2']}


def dense_rows(rows, data, order, n):
    r"""Sparse rows [R, C] -> dense flat [n^order, C]."""
    if order == 2:
        return pair_to_dense(rows, data.pair_index, n).view(n * n, -1)
    if order <= 1:
        return rows
    out = rows.new_zeros(n**order, rows.size(-1))
    flat = sum(idx * n**(order - 1 - a)
               for a, idx in enumerate(data.hyperedge_index))
    out[flat] = rows
    return out


def dense_size_scale(scaler, size):
    r"""The factor of a class's attention output from its dense group
    size (the number of ones in its row of the basis indicator)."""
    size = size.double()
    return {'none': torch.ones_like(size), 'log': torch.log1p(size),
            'sqrt': size.sqrt(), 'count': size}[scaler]


def blocks(label):
    return [set(re.findall(r'[oi]\d+', block)) for block in label.split('|')]


def decoupled_mask(basis, partition):
    r"""The key group of a class without its distinct-index exclusions
    (HOT Eq. 21): the union of the indicators of the coarser partitions
    with the class's output pattern and input pattern (an input index may
    equal another output index; a diagonal key stays apart from the
    off-diagonal ones)."""
    own = blocks(partition)

    def side(label_blocks, kind):
        return sorted(sorted(p for p in b if p[0] == kind)
                      for b in label_blocks if any(p[0] == kind for p in b))

    mask = 0
    for label, indicator in basis.items():
        other = blocks(label)
        if all(side(other, kind) == side(own, kind) for kind in 'oi') and \
                all(any(b <= c for c in other) for b in own):
            mask = mask + indicator
    return mask


def dense_reference(layer, data):
    r"""The layer recomputed densely: attention of every class over its
    full dense key group (the brute-force basis indicator; without the
    exclusions, :func:`decoupled_mask`, where the layer drops them)."""
    n = data.num_nodes
    k_ord, l_ord = layer.in_order, layer.out_order
    view = PairView.from_data(data)
    he = getattr(data, 'hyperedge_index', None)
    x = data.pair_x if k_ord == 2 else data.x
    H, D = layer.heads, layer.head_channels
    keys = dense_rows(layer.lin_key(x, view), data, k_ord, n).view(-1, H, D)
    values = dense_rows(layer.lin_value(x), data, k_ord,
                        n).view(-1, len(layer.classes), H, D)
    if l_ord == 0:
        queries = layer.query.unsqueeze(0)
    else:
        queries = dense_rows(layer.lin_query(x, view, he), data, l_ord,
                             n).view(-1, H, D)
    fm = layer.feature_map
    if fm is None:
        queries = queries * D**-0.5
    basis = dense_basis(n, k_ord, l_ord, x.device)
    out = 0
    for c, cls in enumerate(layer.classes):
        mask = basis[cls.partition] if layer.exact_exclusion or \
            fm is None else decoupled_mask(basis, cls.partition)
        attn = dense_class_attention(queries, keys, values[:, c], mask, fm)
        attn = attn * dense_size_scale(layer.size_scaler,
                                       mask.sum(-1)).view(-1, 1, 1)
        out = out + attn.reshape(attn.size(0), H * D) @ layer.lin_out[c]
    if l_ord <= 2:
        patterns = output_patterns(n, l_ord, x.device)
        for label, bias in zip(BIAS_LABELS[l_ord], layer.bias):
            out = out + patterns[label].unsqueeze(-1) * bias
    else:
        out = out + layer.bias[0]
    if layer.lin_light is not None:
        out = out + dense_rows(layer.lin_light(x, view, he), data, l_ord, n)
    return out


def sparse_dense(layer, data):
    n = data.num_nodes
    out = dense_rows(run_layer(layer, data), data, layer.out_order, n)
    expected = dense_reference(layer, data)
    if layer.out_order >= 3:
        mask = dense_rows(torch.ones(data.hyperedge_index.size(1), 1,
                                     dtype=torch.bool, device=out.device),
                          data,
                          layer.out_order, n).view(-1)
        out, expected = out[mask], expected[mask]
    return out, expected


def make(orders, device=None, **kwargs):
    torch.manual_seed(0)
    return HOTConv(3, 4, *orders, heads=2, head_channels=3,
                   **kwargs).double().to(device)


@pytest.mark.parametrize('orders', ORDERS)
def test_softmax_equals_dense_reference(orders, device):
    data = attach_order_inputs(complete_graph(4, device=device), orders[1],
                               max_hyperedges=10**6)
    out, expected = sparse_dense(make(orders, device), data)
    torch.testing.assert_close(out, expected, atol=1e-10, rtol=1e-10)


@pytest.mark.parametrize('orders', ORDERS)
@pytest.mark.parametrize('kernel', ['elu', 'favor+', 'relu'])
def test_exact_kernel_equals_dense_kernel_reference(orders, kernel, device):
    data = attach_order_inputs(complete_graph(4, device=device), orders[1],
                               max_hyperedges=10**6)
    layer = make(orders, device, attention='kernel', kernel=kernel, seed=0)
    out, expected = sparse_dense(layer, data)
    torch.testing.assert_close(out, expected, atol=1e-10, rtol=1e-10)


@pytest.mark.parametrize('orders', ORDERS)
@pytest.mark.parametrize('attention', ['softmax', 'kernel'])
@pytest.mark.parametrize('scaler', ['log', 'sqrt', 'count'])
def test_size_scaler_equals_dense_reference(orders, attention, scaler,
                                            device):
    data = attach_order_inputs(complete_graph(4, device=device), orders[1],
                               max_hyperedges=10**6)
    layer = make(orders, device, attention=attention, kernel='elu',
                 size_scaler=scaler)
    out, expected = sparse_dense(layer, data)
    torch.testing.assert_close(out, expected, atol=1e-10, rtol=1e-10)
    plain = make(orders, device, attention=attention, kernel='elu')
    if orders[1] <= 2:  # every part has a group of more than one key
        assert not torch.allclose(run_layer(plain, data), out)


def _equivariant_and_batch_independent(layer, orders, device, level):
    # permutation equivariance on a random graph, batch independence over
    # the edge cases; returns the edge cases
    data = attach_order_inputs(random_graph(7, 9, device=device), orders[1],
                               seed=3)
    assert_permutation_equivariant(lambda d: run_layer(layer, d), data,
                                   level)
    graphs = [attach_order_inputs(g, orders[1], seed=k)
              for k, g in enumerate(edge_case_graphs(3, device=device))
              if g.num_nodes >= orders[1]]
    assert_batch_independent(lambda d: run_layer(layer, d), graphs,
                             rows_per_graph(orders[1]))
    return graphs


@pytest.mark.parametrize('orders', [(2, 2), (2, 0), (1, 1), (1, 2)])
@pytest.mark.parametrize('attention', ['softmax', 'kernel'])
def test_size_scaler_equivariant_and_batch_independent(orders, attention,
                                                       device):
    layer = make(orders, device, attention=attention, seed=0,
                 size_scaler='log')
    _equivariant_and_batch_independent(
        layer, orders, device, {0: 'graph', 1: 'node'}.get(orders[1],
                                                           'other'))


@pytest.mark.parametrize('orders', ORDERS)
def test_decoupled_kernel_equals_dense_reference(orders, device):
    data = attach_order_inputs(complete_graph(4, device=device), orders[1],
                               max_hyperedges=10**6)
    layer = make(orders, device, attention='kernel', kernel='elu',
                 exact_exclusion=False)
    out, expected = sparse_dense(layer, data)
    torch.testing.assert_close(out, expected, atol=1e-10, rtol=1e-10)


@pytest.mark.parametrize('orders', ORDERS)
def test_decoupled_kernel_equivariant_and_batch_independent(orders, device):
    layer = make(orders, device, attention='kernel', kernel='favor+', seed=0,
                 exact_exclusion=False)
    _equivariant_and_batch_independent(
        layer, orders, device, 'node' if orders[1] == 1 else 'other')


def test_decoupled_kernel_differs_from_exact(device):
    data = attach_order_inputs(complete_graph(4, device=device), 2)
    exact = make((2, 2), device, attention='kernel', kernel='elu')
    approx = make((2, 2), device, attention='kernel', kernel='elu',
                  exact_exclusion=False)
    approx.load_state_dict(exact.state_dict())
    assert not torch.allclose(run_layer(exact, data), run_layer(approx, data))


def test_favor_approaches_softmax(device):
    data = attach_order_inputs(random_graph(6, 10, device=device), 2)
    soft = make((2, 2), device)
    errors = []
    for features in (16, 4096):
        kern = make((2, 2), device, attention='kernel', num_features=features,
                    seed=1)
        kern.load_state_dict(soft.state_dict(), strict=False)
        diff = run_layer(kern, data) - run_layer(soft, data)
        errors.append(float(diff.detach().abs().mean()))
    # Monte-Carlo error shrinks ~ 1/sqrt(r): 256x features, >= 4x smaller.
    assert errors[1] < 0.25 * errors[0]
    assert errors[1] < 0.02


@pytest.mark.parametrize('orders', ORDERS)
@pytest.mark.parametrize('attention', ['softmax', 'kernel'])
def test_permutation_equivariant_and_batch_independent(orders, attention,
                                                       device):
    layer = make(orders, device, attention=attention, kernel='favor+', seed=0)
    graphs = _equivariant_and_batch_independent(
        layer, orders, device, 'node' if orders[1] == 1 else 'other')
    for g in graphs:
        assert torch.isfinite(run_layer(layer, g)).all()


@pytest.mark.parametrize('orders', ORDERS)
@pytest.mark.parametrize('attention,exact', [('softmax', True),
                                             ('kernel', True),
                                             ('kernel', False)])
def test_gradcheck(orders, attention, exact, device):
    # 5 nodes for triples: a key group of 2 nodes (1 key: no gradient
    # reaches the query); an order-0 output's query is a parameter
    data = attach_order_inputs(random_graph(4 if orders[1] < 3 else 5, 4,
                                            device=device), orders[1])
    view = PairView.from_data(data)
    layer = make(orders, device, attention=attention, kernel='elu',
                 exact_exclusion=exact)
    x = (data.pair_x if orders[0] == 2 else data.x).clone().requires_grad_()
    he = getattr(data, 'hyperedge_index', None)
    if orders[1] == 0:
        query = layer.query.detach().clone().requires_grad_()
        assert_gradcheck(lambda x, query: torch.func.functional_call(
            layer, {'query': query}, (x, view)), (x, query))
    else:
        assert_gradcheck(lambda x: layer(x, view, he), (x, ))


@pytest.mark.parametrize('orders', [(2, 2), (2, 0), (1, 1), (1, 2)])
@pytest.mark.parametrize('attention', ['softmax', 'kernel'])
@pytest.mark.parametrize('mode', ['auto', 'off'])
def test_trains_under_bfloat16_autocast(orders, attention, mode, device):
    # the products after the library's operators run in bfloat16 and send
    # them bfloat16 gradients: every gradient comes back finite and in its
    # tensor's dtype
    data = attach_order_inputs(random_graph(6, 9, seed=1, device=device),
                               orders[1])
    layer = make(orders, device, attention=attention).float()
    x = (data.pair_x if orders[0] == 2 else data.x).float().requires_grad_()
    with native.use_native(mode):
        with torch.autocast(device.type, dtype=torch.bfloat16):
            out = layer(x, PairView.from_data(data))
        out.float().square().sum().backward()
    tensors = [x] + [p for p in layer.parameters() if p.grad is not None]
    assert len(tensors) > 3
    for t in tensors:
        assert t.grad.dtype == t.dtype and torch.isfinite(t.grad).all()


@use_path('pooled')  # on the summaries
def test_kernel_layers_sharing_a_view_share_its_plans(monkeypatch):
    # layers on one view (as in a model) equal each layer on a fresh view,
    # outputs and gradients; an identical layer reuses the first one's
    # plans (no new sort), another shape or direct limit gets its own
    data = attach_order_inputs(random_graph(9, 20), 2, seed=4)
    layers = [make((2, 2), attention='kernel', kernel='elu'),
              make((2, 2), attention='kernel', kernel='elu'),
              HOTConv2to2(3, 4, heads=1, head_channels=3,
                          attention='kernel', kernel='relu').double(),
              make((2, 2), attention='kernel', kernel='elu')]
    sorts = []
    runs = native.runs
    monkeypatch.setattr(native, 'runs', lambda *args: (
        sorts.append(1), runs(*args))[1])
    rules = [DIRECT_READINGS] * 3 + [DirectReadings(max_keys=2)]
    shared = PairView.from_data(data)
    results, counts = [], []
    for view in [shared] * 4 + [None] * 4:
        i = len(results) % 4
        sorts.clear()
        x = data.pair_x.clone().requires_grad_()
        with use_path('pooled', direct=rules[i]):
            out = layers[i](x, view or PairView.from_data(data))
            results.append([out, *torch.autograd.grad(out.sum(), x)])
        counts.append(len(sorts))
    for a, b in zip(results[:4], results[4:]):
        for u, v in zip(a, b):
            torch.testing.assert_close(u, v, rtol=1e-12, atol=1e-12)
    if native.applies(data.pair_x):  # (the torch path sorts nothing)
        assert counts[0] > 0 and counts[1] == 0
        assert counts[2] > 0 and counts[3] > 0  # other shapes, other limit


@use_path('pooled')  # on the summaries
def test_kernel_attention_under_inference_mode(monkeypatch):
    # a view built under inference_mode holds inference tensors, which
    # have no version counter: the plans are matched by identity alone
    data = attach_order_inputs(random_graph(9, 20), 2, seed=4)
    layer = make((2, 2), attention='kernel', kernel='elu').eval()
    with torch.no_grad():
        expected = layer(data.pair_x, PairView.from_data(data))
    with torch.inference_mode():
        view = PairView.from_data(data)
        first, again = (layer(data.pair_x, view) for _ in range(2))
    torch.testing.assert_close(first, expected, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(again, expected, rtol=1e-12, atol=1e-12)


def test_attention_weights_sum_to_one_per_query(device):
    data = attach_order_inputs(random_graph(6, 8, device=device), 2)
    layer = make((2, 2), device)
    _, weights = run_layer(layer, data, return_attention_weights=True)
    assert set(weights) == {f'{c.part}/{c.name}' for c in layer.classes}
    index, alpha = weights['off/8']
    sums = torch.zeros(int(index[0].max()) + 1, 2, dtype=alpha.dtype,
                       device=device).index_add_(0, index[0], alpha)
    torch.testing.assert_close(sums[index[0].unique()],
                               torch.ones_like(sums[index[0].unique()]))


def test_wrappers_classes_repr_and_errors():
    assert HOTConv2to2(4, 4).in_order == 2
    assert (HOTConv2to1(4, 4).out_order, HOTConv2to0(4, 4).out_order) == (1,
                                                                          0)
    assert HOTConv1to2(4, 4).out_order == 2
    assert (HOTConv1to1(4, 4).in_order, HOTConv1to0(4, 4).out_order) == (1,
                                                                         0)
    assert HOTConv1toK(4, 4, k=3).out_order == 3
    local = HOTConv2to2(8, 8, heads=2, classes='local', attention='kernel')
    assert len(local.classes) == 6
    assert repr(local) == ("HOTConv2to2(8, 8, order=2->2, heads=2, "
                           "attention='kernel', kernel='favor+', classes=6)")
    with pytest.raises(ValueError, match="'attention'"):
        HOTConv2to2(4, 4, attention='dense')
    with pytest.raises(ValueError, match='size_scaler'):
        HOTConv2to2(4, 4, size_scaler='max')
    with pytest.raises(ValueError, match="'kernel'"):
        HOTConv2to2(4, 4, attention='kernel', kernel='exp')
    with pytest.raises(ValueError, match="'k'"):
        HOTConv1toK(4, 4, k=2)
    layer = HOTConv2to2(3, 4, attention='kernel')
    with pytest.raises(ValueError, match='return_attention_weights'):
        run_layer(layer.double(), attach_order_inputs(random_graph(4, 4), 2),
                  return_attention_weights=True)
    before = layer.feature_map.projection.clone()
    layer.redraw_projection()
    assert not torch.equal(before, layer.feature_map.projection)


def test_redraw_once_per_forward_and_never_in_backward(device):
    # Queries of both output parts and the keys of one forward pass share a
    # projection; a checkpoint recomputation does not redraw it.
    data = attach_order_inputs(random_graph(5, 6, seed=1, device=device), 2)
    layer = make((2, 2), device, attention='kernel',
                 redraw_interval=1).train()
    run_layer(layer, data)
    drawn = layer.feature_map.projection.clone()
    out = run_layer(layer, data)  # redraws before mapping anything
    assert not torch.equal(drawn, layer.feature_map.projection)
    torch.testing.assert_close(out, run_layer(layer.eval(), data))

    view = PairView.from_data(data)
    x = data.pair_x.clone().requires_grad_()
    layer.train()
    out = torch.utils.checkpoint.checkpoint(layer, x, view,
                                            use_reentrant=False)
    (grad, ) = torch.autograd.grad(out.square().sum(), x)
    x_eval = data.pair_x.clone().requires_grad_()
    (expected, ) = torch.autograd.grad(
        layer.eval()(x_eval, view).square().sum(), x_eval)
    torch.testing.assert_close(grad, expected)

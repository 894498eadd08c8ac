r"""The package's :func:`torch.library.custom_op` operators: schema, fake
(meta) implementation, autograd registration and compiled dispatch
(:func:`torch.library.opcheck`) in float32 and float64, with the native CPU
kernels on and off; a compiled kernel-attention layer runs the native
kernels inside its graph."""
import pytest
import torch

from torch_geometric_hot.data import PairView
from torch_geometric_hot.ops import native
from torch_geometric_hot.ops.attention.dispatch import DIRECT_READINGS
from torch_geometric_hot.ops.kernel_attention import SummaryKeys, Reading
from torch_geometric_hot.ops.class_combination import READING, SINGLE_KEY
from torch_geometric_hot.ops.class_combination import \
    CombinationTerm as Term
from torch_geometric_hot.ops.basis import basis, group_by_part
from torch_geometric_hot.ops.equivariant import Target
from torch_geometric_hot.ops.attention.pooled import kernel_class_attention
from torch_geometric_hot.ops.pooled_combination import CombinationPart, \
    ValueProjection, _encode
from torch_geometric_hot.testing import attach_order_inputs, random_graph

OPS = torch.ops.torch_geometric_hot
MODES = ['off', pytest.param('on', marks=pytest.mark.skipif(
    native._compiler() is None, reason='no C compiler'))]
DTYPES = [torch.float32, torch.float64]


def _rand(*shape, dtype, gen, grad=False):
    return torch.rand(*shape, dtype=dtype, generator=gen).requires_grad_(
        grad)


def _check(op, args, mode, test_utils=None):
    # every opcheck test unless test_utils names some
    kwargs = {} if test_utils is None else {'test_utils': test_utils}
    with native.use_native(mode):
        torch.library.opcheck(op, args, **kwargs)


@pytest.mark.parametrize('mode', MODES)
@pytest.mark.parametrize('dtype', DTYPES)
def test_primitives(mode, dtype):
    gen = torch.Generator().manual_seed(0)
    k = _rand(13, 2, 3, dtype=dtype, gen=gen, grad=True)
    v = _rand(13, 2, 4, dtype=dtype, gen=gen, grad=True)
    q = _rand(9, 2, 3, dtype=dtype, gen=gen, grad=True)
    index = torch.randint(5, (13, ), generator=gen)
    q_index = torch.randint(5, (9, ), generator=gen)
    summary = _rand(5, 2, 3, 4, dtype=dtype, gen=gen, grad=True)
    _check(OPS.segment_outer_sum, (k, v, index, 5), mode)
    _check(OPS.gather_contract, (q, summary, q_index), mode)
    grad_s = _rand(5, 2, 3, 4, dtype=dtype, gen=gen)
    grad_o = _rand(9, 2, 4, dtype=dtype, gen=gen)
    for need in [(True, True), (True, False), (False, True)]:
        _check(OPS.segment_outer_sum_backward,
               (grad_s, k.detach(), v.detach(), index, *need), mode)
        _check(OPS.gather_contract_backward,
               (grad_o, q.detach(), summary.detach(), q_index, *need), mode)


@pytest.mark.parametrize('mode', MODES)
@pytest.mark.parametrize('dtype', DTYPES)
def test_favor_plus(mode, dtype):
    gen = torch.Generator().manual_seed(1)
    x = _rand(7, 2, 4, dtype=dtype, gen=gen, grad=True)
    projection = torch.randn(6, 4, dtype=dtype, generator=gen)
    group = torch.tensor([0, 0, 1, 1, 1, 2, 2])
    for is_query, g, n in [(True, None, None), (False, group, 3),
                           (False, None, None)]:
        _check(OPS.favor_plus, (x, projection, is_query, g, n), mode)
    out = _rand(7, 2, 6, dtype=dtype, gen=gen)
    _check(OPS.favor_plus_backward, (x.detach(), projection, out,
                                     torch.randn_like(out)), mode)


@pytest.mark.parametrize('mode', MODES)
@pytest.mark.parametrize('dtype', DTYPES)
@pytest.mark.parametrize('bias', [True, False])
def test_pair_light_linear(mode, dtype, bias):
    view = PairView.from_data(random_graph(6, 8, undirected=False, seed=0))
    gen = torch.Generator().manual_seed(2)
    P, C, C_out = view.num_entries, 3, 2
    indices = (view.row, view.col, view.transpose, view.diag_pos)
    x = _rand(P, C, dtype=dtype, gen=gen, grad=True)
    weight = _rand(5, C, C_out, dtype=dtype, gen=gen, grad=True)
    b = _rand(2, C_out, dtype=dtype, gen=gen, grad=True) if bias else None
    _check(OPS.pair_light_linear, (x, weight, b, *indices), mode)
    grad = _rand(P, C_out, dtype=dtype, gen=gen)
    for needs in [(True, True, bias), (True, False, False),
                  (False, True, False), (False, False, bias)]:
        _check(OPS.pair_light_linear_backward,
               (grad, x.detach(), weight.detach(), *indices, *needs), mode)


def test_class_pairs():
    # every (query, key) of a group but the excluded ones, as enumerated
    # by brute force; an opcheck of the data-dependent output size
    gen = torch.Generator().manual_seed(3)
    query_group = torch.randint(4, (9, ), generator=gen)
    key_group = torch.randint(4, (11, ), generator=gen)
    position = torch.randperm(20, generator=gen)[:11]
    q_ids = [torch.randint(-1, 3, (9, ), generator=gen)]
    k_ids = [torch.randint(3, (11, ), generator=gen)]
    query, key = OPS.class_pairs(query_group, key_group, position, 4, q_ids,
                                 k_ids)
    expected = sorted(
        (i, int(position[e])) for i in range(9) for e in range(11)
        if query_group[i] == key_group[e] and q_ids[0][i] != k_ids[0][e])
    assert sorted(zip(query.tolist(), key.tolist())) == expected
    torch.library.opcheck(OPS.class_pairs,
                          (query_group, key_group, position, 4, q_ids, k_ids))


def _pooled_problem(dtype, gen, D=3, H=2, R=4, rows=11, inputs=14):
    # one part of three classes: pools per node (groups of 1-5 keys, some
    # read directly by the native kernels) and per graph, a reading of each
    # and two single-key sources
    phi_k = _rand(inputs, H, R, dtype=dtype, gen=gen, grad=True)
    phi_q = _rand(rows, H, R, dtype=dtype, gen=gen, grad=True)
    values = torch.randn(inputs, 3, H, D, dtype=dtype,
                         generator=gen).requires_grad_()
    position = torch.randperm(inputs, generator=gen)[:12]
    pools = [SummaryKeys(position, torch.randint(4, (12, ), generator=gen),
                         4, (0, 2)),
             SummaryKeys(position[:7], torch.zeros(7, dtype=torch.long), 1,
                         (1, ))]
    reads = [Reading(0, torch.randint(4, (rows, ), generator=gen)),
             Reading(1, torch.zeros(rows, dtype=torch.long))]
    positions = [torch.randint(-1, inputs, (rows, ), generator=gen)]
    terms = [[Term(1, READING, 0, 0), Term(-1, SINGLE_KEY, 0)],
             [Term(1, READING, 1, 0)],
             [Term(1, READING, 0, D), Term(-1, SINGLE_KEY, 0)]]
    nonempty = torch.rand(rows, 3, generator=gen) > 0.2
    part = CombinationPart(terms, positions, (0, 1, 2), nonempty)
    index, structure = _encode(pools, reads, [part])
    return phi_k, phi_q, values, index, structure, H, D


@pytest.mark.parametrize('mode', MODES)
@pytest.mark.parametrize('dtype', DTYPES)
@pytest.mark.parametrize('projected', [False, True])
def test_pooled_combination(mode, dtype, projected):
    gen = torch.Generator().manual_seed(3)
    phi_k, phi_q, values, index, structure, H, D = _pooled_problem(dtype,
                                                                   gen)
    weight = None
    if projected:
        values = _rand(values.size(0), 5, dtype=dtype, gen=gen, grad=True)
        weight = torch.randn(3 * H * D, 5, dtype=dtype,
                             generator=gen).requires_grad_()
    args = (phi_k, phi_q, values, weight, index, structure, H, D, 0.05,
            [float(x) for x in DIRECT_READINGS])
    # the rows of the summary outputs past the summarised groups are not
    # written (unspecified): eager and compiled outputs are compared on the
    # classes by the compile test below instead
    _check(OPS.pooled_combination, args, mode, (
        'test_schema', 'test_autograd_registration', 'test_faketensor'))
    with native.use_native(mode), torch.no_grad():
        out = OPS.pooled_combination(*args)
    grads = [torch.randn_like(out[0])]
    needs = [True, True, True] + ([True] if projected else [])
    _check(OPS.pooled_combination_backward,
           (grads, out[:1], out[1:2], out[2:4], out[4],
            *[a.detach() if isinstance(a, torch.Tensor) else a
              for a in args], needs), mode)


def _kernel_attention_problem():
    # the aggregating classes of 2->2 kernel attention on a batch of two
    # graphs, with mapped queries and keys and projected values
    data = attach_order_inputs(random_graph(9, 16, seed=1), 2)
    view = PairView.from_data(data)
    by_part = group_by_part([c for c in basis(2, 2) if c.aggregating])
    parts = list(by_part)
    classes = [by_part[p] for p in parts]
    targets = [Target(p, view) for p in parts]
    slots, start = [], 0
    for part in classes:
        slots.append(list(range(start, start + len(part))))
        start += len(part)
    gen = torch.Generator().manual_seed(4)
    rows = sum(t.num_rows for t in targets)
    H, R, D, C = 2, 5, 3, 4
    phi_q = torch.rand(rows, H, R, dtype=torch.float64, generator=gen)
    phi_k = torch.rand(view.num_entries, H, R, dtype=torch.float64,
                       generator=gen)
    x = torch.randn(view.num_entries, C, dtype=torch.float64, generator=gen)
    weight = torch.randn(start * H * D, C, dtype=torch.float64,
                         generator=gen)
    return classes, targets, view, slots, (phi_q, phi_k, x, weight), (H, D)


@pytest.mark.skipif(native._compiler() is None, reason='no C compiler')
def test_compiled_kernel_attention_runs_the_native_kernels(monkeypatch):
    # no graph break; inside the compiled graph the native kernels run
    # (forward and backward) and give eager's outputs and gradients
    classes, targets, view, slots, leaves, (H, D) = \
        _kernel_attention_problem()

    def attend(phi_q, phi_k, x, weight):
        outs = kernel_class_attention(classes, targets, view, 2, phi_q,
                                      phi_k, ValueProjection(x, weight, H, D),
                                      slots)
        return torch.cat([out.flatten() for out in outs])

    calls = []
    for name in ('combine', 'combine_backward'):
        kernel = getattr(native, name)
        monkeypatch.setattr(native, name, lambda *a, kernel=kernel, name=name,
                            **k: (calls.append(name), kernel(*a, **k))[1])
    grad = torch.randn(attend(*leaves).numel(), dtype=torch.float64,
                       generator=torch.Generator().manual_seed(5))
    results = []
    for fn in (attend, torch.compile(attend, backend='aot_eager',
                                     fullgraph=True)):
        torch._dynamo.reset()
        inputs = [t.clone().requires_grad_() for t in leaves]
        calls.clear()
        with native.use_native('on'):
            out = fn(*inputs)
            results.append([out, *torch.autograd.grad(out, inputs, grad)])
        assert 'combine' in calls and 'combine_backward' in calls
    torch._dynamo.reset()
    for a, b in zip(*results):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
    explain = torch._dynamo.explain(attend)(*leaves)
    assert explain.graph_break_count == 0
    torch._dynamo.reset()

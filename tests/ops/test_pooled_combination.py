import pytest
import torch

from torch_geometric_hot.ops import kernel_attention as ka
from torch_geometric_hot.ops import native
from torch_geometric_hot.ops.class_combination import READING, SINGLE_KEY, \
    torch_combine_classes
from torch_geometric_hot.ops.class_combination import \
    CombinationTerm as Term
from torch_geometric_hot.ops.pooled_combination import CombinationPart, \
    ValueProjection, pooled_combination
from torch_geometric_hot.testing import OperatorCounter, \
    pool_readings_reference

pytestmark = pytest.mark.skipif(native._compiler() is None,
                                reason='no C compiler')

ROWS, INPUTS, H, R = 29, 40, 3, 6
SLOTS = (3, 0, 1)  # per class; slot 2 is read by no class


def _problem(dtype, D, seed=0, ROWS=ROWS):
    gen = torch.Generator().manual_seed(seed)
    phi_k = torch.rand(INPUTS, H, R, dtype=dtype, generator=gen)
    values = torch.randn(INPUTS, 4, H, D, dtype=dtype, generator=gen)
    phi_q = torch.rand(ROWS, H, R, dtype=dtype, generator=gen)
    sub = torch.randperm(INPUTS, generator=gen)[:INPUTS - 5]
    pools = [  # a per-node pool (groups 0 and 7 empty) and a global one
        ka.SummaryKeys(sub, torch.randint(1, 7, (sub.numel(), ),
                                          generator=gen), 8, (3, 0)),
        ka.SummaryKeys(sub[:11], torch.zeros(11, dtype=torch.long), 1, (0, 1)),
    ]
    reads = [  # the first reads one slot of its pool only
        ka.Reading(0, torch.randint(8, (ROWS, ), generator=gen), (0, )),
        ka.Reading(0, torch.randint(8, (ROWS, ), generator=gen)),
        ka.Reading(1, torch.zeros(ROWS, dtype=torch.long)),
    ]
    positions = [torch.randint(INPUTS, (ROWS, ), generator=gen),
                 torch.randperm(INPUTS, generator=gen)[:10].repeat(3)[:ROWS]]
    positions[0][::3] = -1  # keys that do not exist
    # class 0 reads slot 3 at reading 1 (offset 0), class 1 slot 0 at
    # readings 0 and 2, class 2 slot 1 at reading 2 (offset D)
    terms = [
        [Term(1, READING, 1, 0), Term(-1, SINGLE_KEY, 0)],
        [Term(1, READING, 2, 0), Term(-1, READING, 0, 0),
         Term(1, SINGLE_KEY, 1)],
        [Term(1, READING, 2, D), Term(-1, SINGLE_KEY, 1),
         Term(-1, SINGLE_KEY, 0)],
    ]
    nonempty = torch.rand(ROWS, 3, generator=gen) > 0.2
    return terms, pools, reads, phi_q, phi_k, positions, values, nonempty


def _one_part(terms, pools, reads, phi_q, phi_k, positions, values, slots,
              nonempty, eps=1e-6):
    # pooled_combination of one part
    return pooled_combination([CombinationPart(terms, positions, slots,
                                               nonempty)], pools, reads,
                              phi_q, phi_k, values, eps)[0]


def _reference(terms, pools, reads, phi_q, phi_k, positions, values, slots,
               nonempty, eps):
    # the two operations' torch paths, one after the other
    with native.use_native('off'):
        readings = pool_readings_reference(phi_k, values, phi_q, pools,
                                           reads)
    return torch_combine_classes(terms, readings, phi_q, phi_k, positions,
                                 values, slots, nonempty, eps)


@pytest.mark.parametrize('dtype', [torch.float64, torch.float32])
@pytest.mark.parametrize('D', [5, 8])
@pytest.mark.parametrize('frozen', [(), ('phi_k', 'values'), ('phi_q', )])
def test_fused_equals_the_two_torch_operations(dtype, D, frozen):
    terms, pools, reads, phi_q, phi_k, positions, values, nonempty = \
        _problem(dtype, D)
    names = ('phi_q', 'phi_k', 'values')
    grad = torch.randn(ROWS, 3, H, D, dtype=dtype,
                       generator=torch.Generator().manual_seed(1))
    results = []
    for fn in (_one_part, _reference):
        leaves = {n: t.clone().requires_grad_(n not in frozen)
                  for n, t in zip(names, (phi_q, phi_k, values))}
        with native.use_native('on'):
            out = fn(terms, pools, reads, leaves['phi_q'], leaves['phi_k'],
                     positions, leaves['values'], SLOTS, nonempty, eps=0.05)
        wanted = [leaves[n] for n in names if n not in frozen]
        results.append([out, *torch.autograd.grad(out, wanted, grad)])
    tol = dict(rtol=1e-12, atol=1e-12) if dtype == torch.float64 else \
        dict(rtol=1e-4, atol=1e-5)
    for a, b in zip(*results):
        torch.testing.assert_close(a, b, **tol)
    fused = results[0]
    assert (fused[0][~nonempty] == 0).all()
    if 'values' not in frozen:
        assert (fused[-1][:, 2] == 0).all()  # the unread slot


def test_fused_gradcheck_and_the_torch_path_without_kernels():
    terms, pools, reads, phi_q, phi_k, positions, values, nonempty = \
        _problem(torch.float64, 3)
    with native.use_native('on'):
        assert torch.autograd.gradcheck(
            lambda q, k, v: _one_part(terms, pools, reads, q, k, positions,
                                      v, SLOTS, nonempty, eps=0.05),
            [t.clone().requires_grad_() for t in (phi_q, phi_k, values)])
    with native.use_native('off'):
        out = _one_part(terms, pools, reads, phi_q, phi_k, positions,
                        values, SLOTS, nonempty, 0.05)
    torch.testing.assert_close(out, _reference(
        terms, pools, reads, phi_q, phi_k, positions, values, SLOTS, nonempty,
        0.05), rtol=1e-12, atol=1e-12)


def test_torch_path_plans_once_per_index():
    # the torch implementation's index work (the groups read directly, their
    # pairs, the summarised rows) is made once for the operator's index
    # tensors: the forward and backward passes of a second step on them
    # select no rows (no data-dependent operator, a synchronisation on a
    # GPU)
    terms, pools, reads, phi_q, phi_k, positions, values, nonempty = \
        _problem(torch.float64, 3)
    leaves = [t.clone().requires_grad_() for t in (phi_q, phi_k, values)]
    part = [CombinationPart(terms, positions, SLOTS, nonempty)]
    counts = []
    with native.use_native('off'):
        for _ in range(2):
            with OperatorCounter() as counter:
                out = pooled_combination(part, pools, reads, *leaves[:2],
                                         leaves[2], 0.05)[0]
                grads = torch.autograd.grad(out.sum(), leaves)
            counts.append(counter.counts)
    assert counts[0]['aten.nonzero'] > 0 and counts[0]['aten.bincount'] > 0
    assert counts[1]['aten.nonzero'] == counts[1]['aten.bincount'] == 0
    expected = _reference(terms, pools, reads, phi_q, phi_k, positions,
                          values, SLOTS, nonempty, 0.05)
    torch.testing.assert_close(out, expected, rtol=1e-12, atol=1e-12)
    assert all(bool(g.abs().sum() > 0) for g in grads)


def test_torch_path_plans_follow_the_readings_slots():
    # the same index tensors read with other slots: a plan of its own
    terms, pools, reads, phi_q, phi_k, positions, values, nonempty = \
        _problem(torch.float64, 3)
    other = [reads[0]._replace(slots=(3, )), *reads[1:]]
    with native.use_native('off'):
        for r in (reads, other, reads):
            out = _one_part(terms, pools, r, phi_q, phi_k, positions,
                            values, SLOTS, nonempty, 0.05)
            torch.testing.assert_close(out, _reference(
                terms, pools, r, phi_q, phi_k, positions, values, SLOTS,
                nonempty, 0.05), rtol=1e-12, atol=1e-12)


def test_fused_checks_its_arguments():
    terms, pools, reads, phi_q, phi_k, positions, values, nonempty = \
        _problem(torch.float64, 4)
    args = dict(terms=terms, pools=pools, reads=reads, phi_q=phi_q,
                phi_k=phi_k, positions=positions, values=values,
                slots=SLOTS, nonempty=nonempty)
    with native.use_native('on'):
        with pytest.raises(IndexError, match='pool position'):
            _one_part(**{**args, 'pools': [pools[0]._replace(
                position=pools[0].position + INPUTS), pools[1]]})
        with pytest.raises(ValueError, match='agree'):
            # class 2 reads past the width of reading 2 (two slots)
            _one_part(**{**args, 'terms': terms[:2] + [
                [Term(1, READING, 2, 2 * 4)]]})
        with pytest.raises(IndexError, match='beyond the 3 readings'):
            _one_part(**{**args, 'terms': terms[:2] + [
                [Term(1, READING, 3, 0)]]})
        with pytest.raises(IndexError, match='single-key position'):
            _one_part(**{**args, 'positions': [
                positions[0], positions[1] + INPUTS]})


def _projection(dtype, D, C=7):
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(INPUTS, C, dtype=dtype, generator=gen)
    weight = torch.randn(4 * H * D, C, dtype=dtype, generator=gen)
    return x, weight


@pytest.mark.parametrize('native_mode', ['on', 'off'])
@pytest.mark.parametrize('frozen', [(), ('x', ), ('weight', ),
                                    ('x', 'weight')])
def test_value_projection_equals_its_values(native_mode, frozen):
    # natively the values are computed in the workspace, computed again
    # for the backward pass, and their gradient reduced to x's and the
    # weight's inside the operation
    D = 5
    terms, pools, reads, phi_q, phi_k, positions, _, nonempty = \
        _problem(torch.float64, D)
    x, weight = _projection(torch.float64, D)
    grad = torch.randn(ROWS, 3, H, D, dtype=torch.float64,
                       generator=torch.Generator().manual_seed(1))
    results = []
    for projected in (True, False):
        leaves = [t.clone().requires_grad_(n not in frozen) for n, t in
                  (('phi_q', phi_q), ('x', x), ('weight', weight))]
        projection = ValueProjection(leaves[1], leaves[2], H, D)
        with native.use_native(native_mode):
            out = _one_part(
                terms, pools, reads, leaves[0], phi_k, positions,
                projection if projected else projection.values(), SLOTS,
                nonempty, eps=0.05)
        results.append([out, *torch.autograd.grad(
            out, [t for t in leaves if t.requires_grad], grad)])
    for a, b in zip(*results):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


def test_value_projection_gradcheck_and_checks():
    terms, pools, reads, phi_q, phi_k, positions, _, nonempty = \
        _problem(torch.float64, 3)
    x, weight = _projection(torch.float64, 3, C=2)
    with native.use_native('on'):
        assert torch.autograd.gradcheck(
            lambda k, x, w: _one_part(
                terms, pools, reads, phi_q, k, positions,
                ValueProjection(x, w, H, 3), SLOTS, nonempty, eps=0.05),
            [t.clone().requires_grad_() for t in (phi_k, x, weight)])
        for bad in (ValueProjection(x, weight[:-1], H, 3),
                    ValueProjection(x[:, :1], weight, H, 3),
                    ValueProjection(x, weight.float(), H, 3)):
            with pytest.raises(ValueError, match="value projection"):
                _one_part(terms, pools, reads, phi_q, phi_k, positions, bad,
                          SLOTS, nonempty)


def _two_parts(dtype, D):
    # part 0: _problem's 29 rows; part 1: another problem's 17 rows reading
    # the same pools, keys and values (its readings start at row 29 and
    # its reading terms index the readings after part 0's)
    first = _problem(dtype, D)
    terms, pools, reads, phi_q, phi_k, positions, values, nonempty = first
    second = _problem(dtype, D, seed=1, ROWS=17)
    terms2 = [[t._replace(src=t.src + len(reads)) if t.kind == READING
               else t for t in cls] for cls in second[0]]
    reads2 = [r._replace(start=ROWS) for r in second[2]]
    parts = [CombinationPart(terms, positions, SLOTS, nonempty),
             CombinationPart(terms2, second[5], SLOTS[::-1], second[7])]
    return (first, second, parts, pools, reads + reads2,
            torch.cat([phi_q, second[3]]), phi_k, values)


@pytest.mark.parametrize('dtype', [torch.float64, torch.float32])
@pytest.mark.parametrize('native_mode', ['on', 'off'])
def test_two_parts_equal_each_part_on_its_own(dtype, native_mode,
                                              monkeypatch):
    # one operation for two parts against one for each: outputs and the
    # gradients of the queries, keys and values (a value projection)
    D = 5
    first, second, parts, pools, reads, phi_q, phi_k, _ = _two_parts(dtype,
                                                                     D)
    x, weight = _projection(dtype, D)
    gen = torch.Generator().manual_seed(2)
    grads = [torch.randn(ROWS, 3, H, D, dtype=dtype, generator=gen),
             torch.randn(17, 3, H, D, dtype=dtype, generator=gen)]
    calls = []  # the readings of every direct call
    direct_read = native.direct_read
    monkeypatch.setattr(native, 'direct_read', lambda *args: (
        calls.append([r.start for r in args[-1]]), direct_read(*args)))
    results = []
    for together in (True, False):
        leaves = [t.clone().requires_grad_() for t in (phi_q, phi_k, x,
                                                       weight)]
        values = ValueProjection(leaves[2], leaves[3], H, D)
        with native.use_native(native_mode):
            if together:
                outs = pooled_combination(parts, pools, reads, leaves[0],
                                          leaves[1], values, 0.05)
            else:
                q = leaves[0].split([ROWS, 17])
                outs = [_one_part(p[0], pools, p[2], q[i], leaves[1], p[5],
                                  values, slots, p[7], 0.05)
                        for i, (p, slots) in enumerate(
                            [(first, SLOTS), (second, SLOTS[::-1])])]
        results.append([*outs, *torch.autograd.grad(outs, leaves, grads)])
    tol = dict(rtol=1e-12, atol=1e-12) if dtype == torch.float64 else \
        dict(rtol=1e-4, atol=1e-5)
    for a, b in zip(*results):
        torch.testing.assert_close(a, b, **tol)
    if native_mode == 'on':  # the parts' readings shared direct calls
        assert any(0 in starts and ROWS in starts for starts in calls)


def test_parts_check_their_rows():
    _, _, parts, pools, reads, phi_q, phi_k, values = _two_parts(
        torch.float64, 4)
    with native.use_native('on'):
        with pytest.raises(ValueError, match="parts' rows"):
            pooled_combination(parts[:1], pools, reads, phi_q, phi_k, values)
        with pytest.raises(ValueError, match='reading 3 reads rows 29..46'):
            # part 0 reads the second part's first reading
            pooled_combination([parts[0]._replace(terms=[
                [Term(1, READING, 3, 0)], *parts[0].terms[1:]]), parts[1]],
                pools, reads, phi_q, phi_k, values)
        late = reads[:3] + [r._replace(start=ROWS + 1) for r in reads[3:]]
        with pytest.raises(ValueError, match='reading 3 reads rows 30..47'):
            pooled_combination(parts, pools, late, phi_q, phi_k, values)
        with pytest.raises(ValueError, match=r'from its start \(30\)'):
            pool_readings_reference(phi_k, values, phi_q, pools, late)


def test_two_parts_split_across_threads(monkeypatch):
    # the parts' combinations split their rows across threads, adding to
    # key and value gradient blocks they share: equal to one thread
    monkeypatch.setattr(native, 'MIN_ROWS_PER_THREAD', 4)
    monkeypatch.setattr(native, 'MIN_COST_PER_THREAD', 8)
    _, _, parts, pools, reads, phi_q, phi_k, values = _two_parts(
        torch.float64, 5)
    grads = [torch.randn(ROWS, 3, H, 5, dtype=torch.float64),
             torch.randn(17, 3, H, 5, dtype=torch.float64)]
    blocks = []
    take = native.Partials.take
    monkeypatch.setattr(native.Partials, 'take', lambda self, start: (
        blocks.append(id(self)) if len(self.targets) == 2 else None,
        take(self, start))[1])  # (key and value gradients)
    results, threads = [], torch.get_num_threads()
    try:
        for n in (1, 3, 3, 3, 3, 3):  # races show only sometimes
            torch.set_num_threads(n)
            blocks.clear()
            leaves = [t.clone().requires_grad_() for t in (phi_q, phi_k,
                                                           values)]
            with native.use_native('on'):
                outs = pooled_combination(parts, pools, reads, *leaves,
                                          eps=0.05)
            results.append([*outs, *torch.autograd.grad(outs, leaves,
                                                        grads)])
    finally:
        torch.set_num_threads(threads)
    for other in results[1:]:
        for a, b in zip(results[0], other):
            torch.testing.assert_close(a, b, rtol=1e-13, atol=1e-13)
    # on three threads: one set of blocks, shared by both parts
    assert len(blocks) > 2 and len(set(blocks)) == 1

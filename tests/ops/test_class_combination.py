import pytest
import torch

from torch_geometric_hot.ops import native
from torch_geometric_hot.ops.class_combination import READING, SINGLE_KEY, \
    check_combination, combination_table, torch_combine_classes, \
    torch_combine_classes_backward
from torch_geometric_hot.ops.class_combination import \
    CombinationTerm as Term
from torch_geometric_hot.testing import combine_classes_reference


def _problem(dtype, seed=0, D=5):
    gen = torch.Generator().manual_seed(seed)
    rows, H, inputs = 23, 3, 17
    readings = [torch.rand(rows, H, 2 * D + 1, dtype=dtype, generator=gen),
                torch.rand(rows, H, D + 1, dtype=dtype, generator=gen)]
    phi_q = torch.rand(rows, H, 7, dtype=dtype, generator=gen)
    phi_k = torch.rand(inputs, H, 7, dtype=dtype, generator=gen)
    positions = [torch.randperm(inputs, generator=gen)[:12]
                 .repeat(2)[:rows],  # repeated rows: scatter-adds collide
                 torch.randint(inputs, (rows, ), generator=gen)]
    positions[1][::4] = -1  # keys that do not exist
    # four value slots, read by the three classes out of order (one unused)
    values = torch.randn(inputs, 4, H, D, dtype=dtype, generator=gen)
    terms = [
        [Term(1, READING, 0, 0), Term(-1, SINGLE_KEY, 0)],
        [Term(1, READING, 0, D), Term(-1, READING, 1, 0),
         Term(1, SINGLE_KEY, 1), Term(-1, SINGLE_KEY, 0)],
        [Term(-1, SINGLE_KEY, 1), Term(1, READING, 1, 0)],  # may go < eps
    ]
    nonempty = torch.rand(rows, 3, generator=gen) > 0.2
    return terms, readings, [phi_q, phi_k], positions, values, nonempty


SLOTS = (2, 0, 3)


def _run(mode, terms, readings, q, k, positions, values, nonempty, grad,
         frozen=(), eps=0.05):
    # the classes and the gradients of the inputs not frozen (readings, q,
    # k, values by position): the native kernels that the pooled_combination
    # operator runs, or autograd through the torch implementation
    leaves = [*readings, q, k, values]
    if mode == 'off':
        inputs = [t.clone().requires_grad_(i not in frozen)
                  for i, t in enumerate(leaves)]
        out = torch_combine_classes(terms, inputs[:2], *inputs[2:4],
                                    positions, inputs[4], SLOTS, nonempty,
                                    eps)
        return [out, *torch.autograd.grad(
            out, [t for t in inputs if t.requires_grad], grad)]
    table = combination_table(terms, q.device)
    mask = nonempty.to(torch.uint8)
    needs = [i not in frozen for i in range(len(leaves))]
    into = [init(t) if need else None for init, t, need in zip(
        (torch.empty_like, torch.zeros_like, torch.zeros_like),
        leaves[2:], needs[2:])]
    with native.use_native('on'), native.workspace() as scratch:
        out, den = native.combine(table, readings, q, k, positions, values,
                                  SLOTS, mask, eps)
        partials = native.Partials(
            [g for g in into[1:] if g is not None],
            lambda t: scratch.zeros(t.shape, t.dtype), per_thread=True)
        grads = native.combine_backward(
            table, [r.shape for r in readings], q, k, positions, values,
            SLOTS, mask, eps, out, den, grad, needs[:2], into, scratch,
            partials)
        partials.add()
        grads = [g.clone() for g in grads if g is not None]
    return [out, *grads, *[g for g in into if g is not None]]


@pytest.mark.skipif(native._compiler() is None, reason='no C compiler')
@pytest.mark.parametrize('dtype', [torch.float64, torch.float32])
@pytest.mark.parametrize('D', [5, 8, 16])  # 8, 16: fixed-size loops
def test_native_combination_equals_reference(dtype, D):
    terms, readings, keys, positions, values, nonempty = _problem(dtype, D=D)
    grad = torch.randn(23, 3, 3, D, dtype=dtype,
                       generator=torch.Generator().manual_seed(1))
    results = [_run(mode, terms, readings, *keys, positions, values,
                    nonempty, grad) for mode in ('on', 'off')]
    # float32: the two paths round in different orders, and a denominator
    # near eps amplifies that
    tol = dict(rtol=1e-12, atol=1e-12) if dtype == torch.float64 else \
        dict(rtol=1e-4, atol=1e-5)
    for a, b in zip(*results):
        torch.testing.assert_close(a, b, **tol)
    out, grad_values = results[0][0], results[0][-1]
    assert (out[~nonempty] == 0).all() and torch.isfinite(out).all()
    assert (grad_values[:, 1] == 0).all()  # the unused slot


def test_combination_gradcheck_and_bad_positions():
    terms, readings, keys, positions, values, nonempty = _problem(
        torch.float64, seed=1)
    leaves = [t.requires_grad_() for t in [*readings, *keys, values]]
    assert torch.autograd.gradcheck(
        lambda *t: torch_combine_classes(terms, t[:2], *t[2:4], positions,
                                         t[4], SLOTS, nonempty, eps=1e-3),
        leaves)
    widths = [r.size(-1) for r in readings]

    def check(positions, slots):
        check_combination(terms, widths, *keys, positions, values, slots,
                          nonempty)

    check(positions, SLOTS)
    with pytest.raises(IndexError, match='position'):
        check([positions[0], positions[1] + 100], SLOTS)
    with pytest.raises(ValueError, match='positions'):
        check([positions[0][:5], positions[1]], SLOTS)
    with pytest.raises(IndexError, match='slot'):
        check(positions, (2, 0, 4))
    with pytest.raises(ValueError, match='slot per class'):
        check(positions, (2, 0))


@pytest.mark.skipif(native._compiler() is None, reason='no C compiler')
@pytest.mark.parametrize('frozen', [(), (3, ), (4, ), (3, 4)])
def test_split_across_threads(frozen, monkeypatch):
    # rows are independent: three threads on row ranges give the same
    # output and gradients as one; backward, each thread past the first
    # adds to key and value gradients of its own (rows share keys)
    monkeypatch.setattr(native, 'MIN_ROWS_PER_THREAD', 4)
    terms, readings, keys, positions, values, nonempty = _problem(
        torch.float64, D=8)
    grad = torch.randn(23, 3, 3, 8, dtype=torch.float64,
                       generator=torch.Generator().manual_seed(1))
    results = []
    threads = torch.get_num_threads()
    try:
        for count in (1, 3):
            torch.set_num_threads(count)
            results.append(_run('on', terms, readings, *keys, positions,
                                values, nonempty, grad, frozen, eps=1e-6))
    finally:
        torch.set_num_threads(threads)
    for a, b in zip(*results):
        torch.testing.assert_close(a, b, rtol=1e-13, atol=1e-13)
    torch.testing.assert_close(results[0][0], torch_combine_classes(
        terms, readings, *keys, positions, values, SLOTS, nonempty, 1e-6),
        rtol=1e-12, atol=1e-12)


def _backward_by_hand(terms, readings, q, k, positions, values, slots,
                      nonempty, grad, eps):
    # torch_combine_classes_backward: the gradients of the readings, q, k
    # and values
    out, den = torch_combine_classes(terms, readings, q, k, positions,
                                     values, slots, nonempty, eps,
                                     with_denominators=True)
    grads = [torch.zeros_like(t) for t in (q, k, values)]
    mine = torch_combine_classes_backward(
        terms, [r.size(-1) for r in readings], q, k, positions, values,
        slots, nonempty, eps, out, den, grad, *grads)
    return [mine.get(i, torch.zeros_like(r)) for i, r in
            enumerate(readings)] + grads


@pytest.mark.parametrize('case', ['full', 'no single key', 'no rows'])
def test_torch_combination_equals_term_by_term(case):
    # the gathered columns give the classes, denominators and gradients
    # (forward: by autograd, backward: by hand) of adding up term by term
    terms, readings, (q, k), positions, values, nonempty = _problem(
        torch.float64, seed=2)
    terms, slots = terms + [[]], SLOTS + (1, )  # a class without terms: 0
    nonempty = torch.cat([nonempty, nonempty[:, :1]], 1)
    if case == 'no single key':
        terms = [[t for t in cls if t.kind == READING] for cls in terms]
        positions = []
    if case == 'no rows':
        readings, q, nonempty = [r[:0] for r in readings], q[:0], \
            nonempty[:0]
        positions = [p[:0] for p in positions]
    leaves = [t.clone().requires_grad_() for t in [*readings, q, k, values]]
    grad = torch.randn(q.size(0), len(terms), 3, 5, dtype=torch.float64,
                       generator=torch.Generator().manual_seed(3))
    results = []
    for combine in (combine_classes_reference, torch_combine_classes):
        out, den = combine(terms, leaves[:2], *leaves[2:4], positions,
                           leaves[4], slots, nonempty, 0.05,
                           with_denominators=True)
        grads = torch.autograd.grad(out, leaves, grad, allow_unused=True)
        results.append([out, den, *(torch.zeros_like(t) if g is None else g
                                    for g, t in zip(grads, leaves))])
    for a, b in zip(*results):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)
    assert (results[1][0][:, -1] == 0).all()
    by_hand = _backward_by_hand(terms, readings, q, k, positions, values,
                                slots, nonempty, grad, 0.05)
    for a, b in zip(results[0][2:], by_hand):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


def test_operations_do_not_grow_with_the_classes():
    # the classes of a part add up as one gather per term position: as
    # many operators for three classes of two terms as for nine
    from torch_geometric_hot.testing import OperatorCounter
    terms, readings, (q, k), positions, values, nonempty = _problem(
        torch.float64)
    counts = []
    for repeat in (1, 3):
        many = terms[1:2] * 3 * repeat  # four terms each
        slots, mask = (0, ) * len(many), nonempty[:, :1].repeat(
            1, len(many))
        for _ in range(2):  # the first call makes the part's layout
            with OperatorCounter() as counter:
                torch_combine_classes(many, readings, q, k, positions,
                                      values, slots, mask, 1e-3)
        counts.append(counter.total)
    assert counts[0] == counts[1], counts

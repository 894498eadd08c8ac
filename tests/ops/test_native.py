import pytest
import torch

from torch_geometric_hot.ops import kernel_attention as ka
from torch_geometric_hot.ops import native
from torch_geometric_hot.ops.attention.dispatch import DIRECT_READINGS, \
    SUMMARIES_ONLY, DirectReadings, direct_readings, use_path
from torch_geometric_hot.testing import pool_readings_reference

#: Every group the direct kernels take read directly, at any cost.
ALL_DIRECT = DirectReadings(cost_ratio=float('inf'))

pytestmark = pytest.mark.skipif(native._compiler() is None,
                                reason='no C compiler')


def _inputs(rows, groups, heads, features, channels, dtype, seed=0):
    gen = torch.Generator().manual_seed(seed)
    k = torch.rand(rows, heads, features, dtype=dtype, generator=gen)
    v = torch.randn(rows, heads, channels, dtype=dtype, generator=gen)
    # groups 0 and groups - 1 stay empty
    index = torch.randint(1, max(groups - 1, 2), (rows, ), generator=gen)
    q = torch.rand(rows + 3, heads, features, dtype=dtype, generator=gen)
    q_index = torch.randint(groups, (rows + 3, ), generator=gen)
    return k, v, index, q, q_index


def _both_modes(fn):
    outs = []
    for mode in ('on', 'off'):
        with native.use_native(mode) as used:
            assert used == (mode == 'on')
            outs.append(fn())
    return outs


# channel counts hit every register tile (1-3 vectors wide) and the scalar
# tails, in float32 (8 lanes) and float64 (4 lanes); feature counts hit
# one tile (5, 7) and several of unequal heights (17 = 9 + 8, 6 + 6 + 5,
# 4 + 4 + 3 + 3 + 3; 30) in the summaries, and the readings' rows one to
# twelve at a time, with one to four accumulator sets
@pytest.mark.parametrize('channels', [1, 5, 8, 17, 33, 41, 70])
@pytest.mark.parametrize('features', [5, 7, 17, 30])
@pytest.mark.parametrize('dtype', [torch.float64, torch.float32])
def test_native_equals_torch_in_values_and_gradients(channels, features,
                                                     dtype):
    k, v, index, q, q_index = _inputs(150, 7, 3, features, channels, dtype)
    grad_out = torch.randn(q.shape[:2] + (channels, ), dtype=dtype,
                           generator=torch.Generator().manual_seed(1))

    def run():
        leaves = [t.clone().requires_grad_() for t in (k, v, q)]
        summary = ka.segment_outer_sum(leaves[0], leaves[1], index, 7)
        out = ka.gather_contract(leaves[2], summary, q_index)
        grads = torch.autograd.grad(out, leaves, grad_out)
        return (summary, out) + grads

    tol = dict(rtol=1e-12, atol=1e-12) if dtype == torch.float64 else \
        dict(rtol=1e-4, atol=1e-4)
    for a, b in zip(*_both_modes(run)):
        torch.testing.assert_close(a, b, **tol)


@pytest.mark.parametrize('dtype', [torch.float64, torch.float32])
def test_one_group_equals_the_batched_matmul_path(dtype):
    # a single group (one graph's global summary) runs natively as one run;
    # the torch path is a bmm
    k, v, _, q, _ = _inputs(200, 1, 4, 17, 25, dtype)
    index, q_index = torch.zeros(200, dtype=torch.long), torch.zeros(
        203, dtype=torch.long)
    grad_out = torch.randn(203, 4, 25, dtype=dtype,
                           generator=torch.Generator().manual_seed(1))

    def run():
        leaves = [t.clone().requires_grad_() for t in (k, v, q)]
        summary = ka.segment_outer_sum(leaves[0], leaves[1], index, 1)
        out = ka.gather_contract(leaves[2], summary, q_index)
        return (summary, out) + torch.autograd.grad(out, leaves, grad_out)

    tol = dict(rtol=1e-12, atol=1e-12) if dtype == torch.float64 else \
        dict(rtol=1e-4, atol=1e-3)
    for a, b in zip(*_both_modes(run)):
        torch.testing.assert_close(a, b, **tol)


def test_long_runs_and_empty_inputs():
    # one group of 300 rows (longer than the kernels' register chunk)
    k, v, _, q, _ = _inputs(300, 2, 2, 4, 9, torch.float64)
    index = torch.ones(300, dtype=torch.long)
    on, off = _both_modes(lambda: ka.segment_outer_sum(k, v, index, 2))
    torch.testing.assert_close(on, off, rtol=1e-12, atol=1e-12)
    assert on[0].abs().sum() == 0
    empty = torch.empty(0, 2, 4, dtype=torch.float64)
    on, off = _both_modes(lambda: ka.segment_outer_sum(
        empty, torch.empty(0, 2, 9, dtype=torch.float64),
        torch.empty(0, dtype=torch.long), 3))
    assert on.shape == (3, 2, 4, 9) and on.abs().sum() == 0
    on, off = _both_modes(lambda: ka.gather_contract(
        empty, torch.rand(3, 2, 4, 9, dtype=torch.float64),
        torch.empty(0, dtype=torch.long)))
    assert on.shape == (0, 2, 9)


def test_gradcheck_native():
    k, v, index, q, q_index = _inputs(20, 4, 2, 3, 5, torch.float64)
    with native.use_native('on'):
        assert torch.autograd.gradcheck(
            lambda k, v, q: ka.gather_contract(
                q, ka.segment_outer_sum(k, v, index, 4), q_index),
            (k.requires_grad_(), v.requires_grad_(), q.requires_grad_()))


def test_out_of_range_group_is_an_error():
    k, v, index, _, _ = _inputs(10, 3, 1, 2, 3, torch.float64)
    with native.use_native('on'), pytest.raises(IndexError, match='group'):
        ka.segment_outer_sum(k, v, index + 5, 3)


def test_unavailable_compiler_falls_back_or_fails(monkeypatch, tmp_path):
    monkeypatch.setenv('CC', 'no-such-compiler')
    monkeypatch.setattr(native.shutil, 'which', lambda name: None)
    monkeypatch.setenv('TORCH_GEOMETRIC_HOT_CACHE', str(tmp_path))
    monkeypatch.setattr(native, '_state',
                        {'mode': 'auto', 'library': None, 'error': None})
    with pytest.warns(UserWarning, match='no C compiler'):
        assert not native.available()
    k, v, index, _, _ = _inputs(10, 3, 1, 2, 3, torch.float64)
    with native.use_native('off'):
        expected = ka.segment_outer_sum(k, v, index, 3)
    torch.testing.assert_close(ka.segment_outer_sum(k, v, index, 3),
                               expected)  # the torch path
    with pytest.raises(RuntimeError, match='unavailable'):
        with native.use_native('on'):
            pass
    with pytest.raises(ValueError, match='TORCH_GEOMETRIC_HOT_NATIVE'):
        with native.use_native('fast'):
            pass


def test_failed_build_names_the_compiler_error_and_leaves_no_files(
        monkeypatch, tmp_path):
    script = tmp_path / 'broken-cc'
    script.write_text('#!/bin/sh\necho "broken-cc: no such flag" >&2\n'
                      'exit 1\n')
    script.chmod(0o755)
    monkeypatch.setenv('CC', str(script))
    cache = tmp_path / 'cache'
    monkeypatch.setenv('TORCH_GEOMETRIC_HOT_CACHE', str(cache))
    with pytest.raises(RuntimeError, match='(?s)failed.*no such flag'):
        native._build()
    assert list(cache.rglob('*')) == [cache / 'native']  # no objects left


def test_kernels_built_for_another_processor_are_not_reused(
        monkeypatch, tmp_path):
    # -march=native code from one CPU may not run on another: the cached
    # library's name depends on the processor
    assert native._cpu_signature()  # this machine's
    monkeypatch.setenv('TORCH_GEOMETRIC_HOT_CACHE', str(tmp_path))
    built = []
    for cpu in ('cpu A', 'cpu B', 'cpu A'):
        monkeypatch.setattr(native, '_cpu_signature', lambda: cpu)
        native._build()
        built.append(sorted(p.name for p in tmp_path.rglob('*.so')))
    assert len(built[0]) == 1 and len(built[1]) == 2 and built[2] == built[1]


def test_other_dtypes_take_the_torch_path():
    k, v, index, _, _ = _inputs(10, 3, 1, 2, 3, torch.float64)
    with native.use_native('on'):
        assert native.applies(k, v)
        assert not native.applies(k.half(), v.half())
        assert not native.applies(k, v.float())
    with native.use_native('off'):
        assert not native.applies(k, v)


@pytest.mark.parametrize('groups', [1, 3, 40])
def test_threads_split_at_group_boundaries(groups, monkeypatch):
    # few groups: the splits of the kernels that write summaries collapse
    # onto group starts (the others split anywhere); one group: split too,
    # into partial summaries added after; many: one each, with every odd
    # group empty (the kernels write summaries without a zero-fill: each
    # thread zeroes the empty groups it owns)
    monkeypatch.setattr(native, 'MIN_ROWS_PER_THREAD', 8)
    k, v, index, q, q_index = _inputs(300, groups, 2, 5, 11, torch.float64)
    if groups > 3:
        index = index // 2 * 2
    if groups == 1:  # (one pool of every row)
        index, q_index = index.zero_(), q_index.zero_()
    grad = torch.randn(q.shape[:2] + (11, ), dtype=torch.float64)

    def run(mode='on'):
        leaves = [t.clone().requires_grad_() for t in (k, v, q)]
        with native.use_native(mode):
            summary = ka.segment_outer_sum(leaves[0], leaves[1], index,
                                           groups)
            out = ka.gather_contract(leaves[2], summary, q_index)
            grads = torch.autograd.grad(out, leaves, grad)
        return (summary, out) + grads

    single = run()
    threads = torch.get_num_threads()
    torch.set_num_threads(3)
    try:
        split = run()
    finally:
        torch.set_num_threads(threads)
    for i, (a, b, c) in enumerate(zip(single, split, run('off'))):
        if i == 0 and groups > 1:  # each summary summed by one thread
            assert torch.equal(a, b)
        # the readings and the row gradients: the same sums per row (a row
        # may land in another register tile: rounding)
        torch.testing.assert_close(a, b, rtol=1e-13, atol=1e-13)
        torch.testing.assert_close(a, c, rtol=1e-12, atol=1e-12)


def test_int32_and_strided_group_indices():
    k, v, index, q, q_index = _inputs(40, 5, 2, 3, 4, torch.float64)
    expected = ka.gather_contract(q, ka.segment_outer_sum(k, v, index, 5),
                                  q_index)
    with native.use_native('on'):
        strided = torch.stack([index, index], 1)[:, 0]  # not contiguous
        assert not strided.is_contiguous()
        out = ka.gather_contract(
            q, ka.segment_outer_sum(k, v, strided, 5), q_index.int())
    torch.testing.assert_close(out, expected)


def _split_sum_in_child(queue, k, v, index, expected):
    torch.set_num_threads(2)  # (torch resets the count in a forked child)
    queue.put(torch.equal(ka.segment_outer_sum(k, v, index, 20), expected))


@pytest.mark.skipif(not hasattr(__import__('os'), 'fork'),
                    reason='needs fork')
def test_forked_child_gets_its_own_thread_pool(monkeypatch):
    import multiprocessing
    monkeypatch.setattr(native, 'MIN_ROWS_PER_THREAD', 8)
    k, v, index, _, _ = _inputs(500, 20, 2, 3, 4, torch.float64)
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        with native.use_native('on'):
            expected = ka.segment_outer_sum(k, v, index, 20)  # parent pool
            context = multiprocessing.get_context('fork')
            queue = context.Queue()
            child = context.Process(target=_split_sum_in_child,
                                    args=(queue, k, v, index, expected),
                                    daemon=True)
            child.start()
            try:  # with the parent's pool the child waits forever
                assert queue.get(timeout=60)
            finally:
                child.kill()
    finally:
        torch.set_num_threads(threads)


def _pools(rows, gen):
    # three pools over a subset of the rows (some rows in none), sharing
    # slots out of order, one of them a single group
    sub = torch.randperm(rows, generator=gen)[:rows - 7]
    return [ka.SummaryKeys(sub, torch.randint(9, (sub.numel(), ),
                                              generator=gen), 9, (3, 0)),
            ka.SummaryKeys(sub.flip(0), torch.randint(4, (sub.numel(), ),
                                                      generator=gen), 4,
                           (0, 1, 3)),
            ka.SummaryKeys(sub[:20], torch.zeros(20, dtype=torch.long), 1,
                           (2, ))]


def _reads(pools, queries, gen):
    # readings of the first pool (the first of them of one slot only: the
    # summary gradient is then added up from zeros), one of the last, and
    # one of the second reading two of its slots, out of order
    return [ka.Reading(p, torch.randint(pools[p].num_groups, (queries, ),
                                        generator=gen), slots)
            for p, slots in ((0, (0, )), (2, None), (0, None), (1, (3, 0)))]


def _width(pools, read, channels):
    return len(read.slots or pools[read.pool].slots) * channels + 1


def _pool_problem(rows, queries, heads, features, channels, dtype):
    # keys, four value slots, queries, their pools and readings, and the
    # generator for anything else the test draws
    gen = torch.Generator().manual_seed(0)
    k = torch.rand(rows, heads, features, dtype=dtype, generator=gen)
    values = torch.randn(rows, 4, heads, channels, dtype=dtype,
                         generator=gen)
    q = torch.rand(queries, heads, features, dtype=dtype, generator=gen)
    pools = _pools(rows, gen)
    return k, values, q, pools, _reads(pools, queries, gen), gen


@pytest.fixture(params=['summaries', 'chosen', 'direct'])
def grouping(request, monkeypatch):
    r"""How the native kernels read the groups: all through summaries, by
    the cost rule, or every group the direct kernels take directly."""
    direct = {'summaries': SUMMARIES_ONLY, 'chosen': DIRECT_READINGS,
              'direct': ALL_DIRECT}[request.param]
    calls, direct_read = [], native.direct_read

    def counted(*args):
        calls.append(1)
        direct_read(*args)

    monkeypatch.setattr(native, 'direct_read', counted)
    with use_path(direct=direct):
        yield request.param
    # the setting took: summaries alone never read directly, direct always
    assert (len(calls) > 0) == (request.param != 'summaries')


def _pool_run(k, values, q, pools, reads, grads, needs=(True, True, True)):
    # the readings and the needed gradients of k, values, q: natively (the
    # kernels of the pooled_combination operator, forward then backward)
    # when the native mode is on, else by autograd through the reference
    if native._current_mode() == 'off':
        leaves = [t.clone().requires_grad_(need)
                  for t, need in zip((k, values, q), needs)]
        outs = pool_readings_reference(*leaves, pools, reads)
        graded = [(o, g) for o, g in zip(outs, grads) if g is not None]
        return outs + list(torch.autograd.grad(
            [o for o, _ in graded], [t for t in leaves if t.requires_grad],
            [g for _, g in graded]))
    ka.check_pool_readings(k, values, q, pools, reads, True)
    k, values, q = k.contiguous(), values.contiguous(), q.contiguous()
    plan = ka.plan_pool_readings(pools, reads, k.dtype, k.size(1), k.size(2),
                                 values.size(-1), direct_readings())
    buffers = [k.new_empty(p.num_groups, k.size(1), k.size(2),
                           len(p.slots) * values.size(-1) + 1) for p in pools]
    with native.workspace() as scratch:
        outs, summaries = ka.native_pool_readings(plan, k, values, q, reads,
                                                  scratch, buffers)
        outs = [o.clone() for o in outs]
    inputs = [torch.zeros_like(t) if need else None
              for t, need in zip((k, values, q), needs)]
    with native.workspace() as scratch:
        ka.native_pool_readings_backward(plan, summaries, k, values, q,
                                         reads, grads, *inputs, scratch)
    return outs + [g for g in inputs if g is not None]


def _pool_readings_agree(k, values, q, pools, reads, grads):
    # the readings and the gradients of k, values, q: native against torch
    on, off = _both_modes(lambda: _pool_run(k, values, q, pools, reads,
                                            grads))
    tol = dict(rtol=1e-12, atol=1e-12) if k.dtype == torch.float64 else \
        dict(rtol=1e-4, atol=1e-4)
    for a, b in zip(on, off):
        torch.testing.assert_close(a, b, **tol)
    return on, tol


def test_pool_readings_of_row_ranges(grouping):
    # readings of some rows of the queries each (one of the first 20, two
    # of the last 25, one of all), one of them with no gradient: native
    # against torch, and a range reads as the same reading of those rows
    k, values, q, pools, reads, gen = _pool_problem(60, 45, 3, 7, 5,
                                                    torch.float64)
    reads = [reads[0]._replace(group=reads[0].group[:20]),
             reads[1]._replace(group=reads[1].group[20:], start=20),
             reads[2]._replace(group=reads[2].group[20:], start=20),
             reads[3]]
    grads = [torch.randn(r.group.numel(), 3, _width(pools, r, 5),
                         dtype=torch.float64, generator=gen) for r in reads]
    grads[2] = None
    on, tol = _pool_readings_agree(k, values, q, pools, reads, grads)
    with native.use_native('on'):
        alone = pool_readings_reference(k, values, q[20:], pools,
                                        [reads[1]._replace(start=0)])[0]
    torch.testing.assert_close(on[1], alone, **tol)


# 7 or 45 features: the direct kernels' key gradients in one or several
# column blocks
@pytest.mark.parametrize('channels,features', [(5, 7), (8, 7), (12, 7),
                                               (12, 45)])
@pytest.mark.parametrize('dtype', [torch.float64, torch.float32])
def test_pool_readings_equal_gathered_copies(channels, features, dtype,
                                             grouping):
    k, values, q, pools, reads, gen = _pool_problem(60, 45, 3, features,
                                                    channels, dtype)
    reads.append(reads[2]._replace(slots=(0, )))  # as the full reading's
    grads = [torch.randn(45, 3, _width(pools, r, channels), dtype=dtype,
                         generator=gen) for r in reads]
    on, tol = _pool_readings_agree(k, values, q, pools, reads, grads)
    # the denominator column reads the sum of the group's keys
    summary = k[pools[2].position].sum(0)  # the single group of pool 2
    torch.testing.assert_close(on[1][..., -1],
                               (q * summary).sum(-1), **tol)
    # a reading of some slots is those columns of the full reading
    full, part = on[2], on[4]
    torch.testing.assert_close(part[..., :-1],
                               full[..., channels:2 * channels], **tol)
    torch.testing.assert_close(part[..., -1], full[..., -1], **tol)


def test_pool_readings_with_frozen_keys_and_values(grouping):
    # only the queries need a gradient: no summary gradient is formed
    k, values, q, pools, reads, _ = _pool_problem(60, 45, 3, 7, 5,
                                                  torch.float64)

    def run():
        grads = [torch.ones(r.group.numel(), 3, _width(pools, r, 5),
                            dtype=torch.float64) for r in reads]
        return _pool_run(k, values, q, pools, reads, grads,
                         (False, False, True))[-1]

    on, off = _both_modes(run)
    torch.testing.assert_close(on, off, rtol=1e-12, atol=1e-12)


def test_pool_readings_gradcheck_and_bad_input(grouping):
    k, values, q, pools, reads, _ = _pool_problem(30, 11, 2, 3, 3,
                                                  torch.float64)
    grads = [torch.randn(r.group.numel(), 2, _width(pools, r, 3),
                         dtype=torch.float64) for r in reads]
    _pool_readings_agree(k, values, q, pools, reads, grads)

    def check(*args):  # the checks of the operator's native kernels
        ka.check_pool_readings(*args, True)

    with native.use_native('on'):
        bad = pools[0]
        with pytest.raises(IndexError, match='position'):
            check(k, values, q, [bad._replace(
                position=bad.position + 30)], reads[:1])
        with pytest.raises(IndexError, match='slot'):
            check(k, values, q, [bad._replace(slots=(4, ))],
                  reads[:1])
        with pytest.raises(ValueError, match='one group per position'):
            check(k, values, q, [bad._replace(
                group=bad.group[1:])], reads[:1])
        with pytest.raises(ValueError, match="'values'"):
            check(k, values[:, :, :1], q, pools, reads)
        with pytest.raises(ValueError, match="'q'"):
            check(k, values, q[..., :2], pools, reads)
        with pytest.raises(IndexError, match='pool 3'):
            check(k, values, q, pools,
                  [reads[0]._replace(pool=3)])
        with pytest.raises(ValueError, match='one group per query row'):
            check(k, values, q, pools, [reads[0]._replace(
                group=torch.cat([reads[0].group, reads[0].group[:1]]))])
        with pytest.raises(ValueError, match=r'from its start \(1\)'):
            check(k, values, q, pools,
                  [reads[0]._replace(start=1)])
        with pytest.raises(IndexError, match='group'):
            check(k, values, q, pools,
                  [reads[0]._replace(group=reads[0].group + 9)])
        with pytest.raises(ValueError, match="pool's slots"):
            check(k, values, q, pools,
                  [reads[0]._replace(slots=(1, ))])


@pytest.mark.parametrize('groups', [40, 400])
def test_pool_readings_with_repeated_and_no_positions(groups, grouping,
                                                      monkeypatch):
    # a pool may add up one input row in several groups (its gradient rows
    # are then accumulated on one thread), give its positions as int32 or
    # hold no rows at all; 40 groups of ~75 keys are summarised, 400 of ~8
    # may be read directly
    monkeypatch.setattr(native, 'MIN_ROWS_PER_THREAD', 8)
    monkeypatch.setattr(native, 'MIN_COST_PER_THREAD', 8)
    gen = torch.Generator().manual_seed(0)
    k = torch.rand(50, 2, 5, dtype=torch.float64, generator=gen)
    values = torch.randn(50, 3, 2, 4, dtype=torch.float64, generator=gen)
    q = torch.rand(100, 2, 5, dtype=torch.float64, generator=gen)
    pools = [ka.SummaryKeys(torch.randint(50, (3000, ), generator=gen).int(),
                            torch.randint(groups, (3000, ), generator=gen),
                            groups, (2, 0)),
             ka.SummaryKeys(torch.empty(0, dtype=torch.long),
                            torch.empty(0, dtype=torch.long), 6, (1, ))]
    reads = [ka.Reading(0, torch.randint(groups, (100, ), generator=gen)),
             ka.Reading(1, torch.randint(6, (100, ), generator=gen))]
    grads = [torch.randn(100, 2, 9, dtype=torch.float64, generator=gen),
             torch.randn(100, 2, 5, dtype=torch.float64, generator=gen)]
    threads = torch.get_num_threads()
    torch.set_num_threads(3)
    try:  # several times: two threads adding to one row race only sometimes
        for _ in range(5):
            on, _ = _pool_readings_agree(k, values, q, pools, reads, grads)
            assert on[1].abs().sum() == 0  # reads the empty pool
    finally:
        torch.set_num_threads(threads)


@use_path(direct=ALL_DIRECT)
@pytest.mark.parametrize('dtype', [torch.float64, torch.float32])
def test_direct_readings_of_groups_with_many_queries(dtype):
    # the direct backward pass takes a group's queries in chunks: groups of
    # a few keys read by hundreds of queries, and one of no key
    gen = torch.Generator().manual_seed(0)
    k = torch.rand(30, 2, 6, dtype=dtype, generator=gen)
    values = torch.randn(30, 2, 2, 8, dtype=dtype, generator=gen)
    q = torch.rand(700, 2, 6, dtype=dtype, generator=gen)
    keys = torch.randint(3, (30, ), generator=gen)  # group 3: no key
    pools = [ka.SummaryKeys(torch.arange(30), keys, 4, (1, 0))]
    reads = [ka.Reading(0, torch.randint(4, (700, ), generator=gen)),
             ka.Reading(0, torch.randint(4, (700, ), generator=gen), (0, ))]
    grads = [torch.randn(700, 2, _width(pools, r, 8), dtype=dtype,
                         generator=gen) for r in reads]
    on, _ = _pool_readings_agree(k, values, q, pools, reads, grads)
    assert on[0][reads[0].group == 3].abs().sum() == 0


@use_path(direct=ALL_DIRECT)
@pytest.mark.parametrize('dtype', [torch.float64, torch.float32])
@pytest.mark.parametrize('needs', [(True, True, True), (False, True, True),
                                   (True, False, False)])
def test_direct_readings_of_small_and_larger_groups(dtype, needs):
    # groups of one to four keys take the direct kernels' row layout, larger
    # ones their transposed panels: both, with readings of the pool's slots
    # out of order (selections in several runs), of one slot and of all,
    # and with frozen keys or values
    gen = torch.Generator().manual_seed(0)
    k = torch.rand(60, 3, 7, dtype=dtype, generator=gen)
    values = torch.randn(60, 3, 3, 5, dtype=dtype, generator=gen)
    q = torch.rand(200, 3, 7, dtype=dtype, generator=gen)
    sizes = [1, 2, 3, 4, 6, 11] * 4
    groups = torch.repeat_interleave(torch.arange(len(sizes)),
                                     torch.tensor(sizes))
    pools = [ka.SummaryKeys(torch.randint(60, (groups.numel(), ),
                                          generator=gen), groups, len(sizes),
                            (1, 0, 2))]
    reads = [ka.Reading(0, torch.randint(len(sizes), (200, ), generator=gen),
                        slots) for slots in (None, (2, 1), (0, ))]
    grads = [torch.randn(200, 3, _width(pools, r, 5), dtype=dtype,
                         generator=gen) for r in reads]
    on, off = _both_modes(lambda: _pool_run(k, values, q, pools, reads,
                                            grads, needs))
    tol = dict(rtol=1e-12, atol=1e-12) if dtype == torch.float64 else \
        dict(rtol=1e-4, atol=1e-4)
    assert len(on) == len(reads) + sum(needs)
    for a, b in zip(on, off):
        torch.testing.assert_close(a, b, **tol)


@pytest.mark.parametrize('costs,threads,bounds', [
    ([10, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1], 2, [0, 1, 11]),
    ([1] * 9, 3, [0, 3, 6, 9]),
    ([100, 1, 1], 3, [0, 1, 3]),  # a part would be empty: fewer parts
    ([0] * 5, 2, [0, 4, 5]),
])
def test_balanced_bounds(costs, threads, bounds):
    assert native._balanced_bounds(torch.tensor(costs), threads) == bounds


@use_path(direct=ALL_DIRECT)
def test_direct_readings_split_across_threads(monkeypatch):
    # distinct key rows: the direct backward pass too splits its groups,
    # at equal costs: the first groups have the most keys and queries
    monkeypatch.setattr(native, 'MIN_COST_PER_THREAD', 8)
    splits = []
    balanced_bounds = native._balanced_bounds

    def recorded(costs: torch.Tensor, threads: int) -> list:
        splits.append((costs, balanced_bounds(costs, threads)))
        return splits[-1][1]

    monkeypatch.setattr(native, '_balanced_bounds', recorded)
    gen = torch.Generator().manual_seed(0)
    k = torch.rand(600, 2, 5, dtype=torch.float64, generator=gen)
    values = torch.randn(600, 3, 2, 4, dtype=torch.float64, generator=gen)
    q = torch.rand(500, 2, 5, dtype=torch.float64, generator=gen)

    def skewed(size: int) -> torch.Tensor:
        return (torch.rand(size, generator=gen)**3 * 200).long()

    pools = [ka.SummaryKeys(torch.randperm(600, generator=gen), skewed(600),
                            200, (2, 0))]
    reads = [ka.Reading(0, skewed(500))]
    grads = [torch.randn(500, 2, 9, dtype=torch.float64, generator=gen)]
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        _pool_readings_agree(k, values, q, pools, reads, grads)
        assert len(splits) == 2  # forward and backward
        for costs, bounds in splits:  # segments the two threads take
            assert len(bounds) == 2 * native.SEGMENTS_PER_THREAD + 1
            assert bounds[0] == 0 and bounds[-1] == costs.numel()
            middle = bounds[native.SEGMENTS_PER_THREAD]
            assert middle < costs.numel() // 3  # not at half
            sums = [costs[a:b].sum() for a, b in zip(bounds, bounds[1:])]
            assert max(sums) - min(sums) <= 2 * costs.max()
        # the total cost decides, not the number of groups (200)
        total = int(splits[0][0].sum())
        assert total > 2 * native.MIN_ROWS_PER_THREAD
        splits.clear()
        monkeypatch.setattr(native, 'MIN_COST_PER_THREAD', total // 2 + 1)
        _pool_readings_agree(k, values, q, pools, reads, grads)
        assert not splits
    finally:
        torch.set_num_threads(threads)


@use_path(direct=ALL_DIRECT)
def test_split_direct_backward_adds_no_row_from_two_groups(monkeypatch):
    # two readings of one pool list a query row in different groups (as
    # an entry's row and column groups do). Split across threads, any two
    # groups may run at once, so no query-gradient row may take additions
    # from two groups: checked on the addresses the kernel is given, not
    # left to a race that shows only sometimes
    monkeypatch.setattr(native, 'MIN_COST_PER_THREAD', 8)
    calls, targets = [], native._query_gradient_targets
    direct_call = native._direct_call

    def recorded_targets(readings, grad_q, split):
        calls.append([readings, split, targets(readings, grad_q, split)])
        return calls[-1][2]

    def recorded_call(name, dtype, keys, groups, *args):
        if name == 'direct_read_backward':
            calls[-1].append(groups)
        direct_call(name, dtype, keys, groups, *args)

    monkeypatch.setattr(native, '_query_gradient_targets', recorded_targets)
    monkeypatch.setattr(native, '_direct_call', recorded_call)
    k, values, q, pools, reads, gen = _pool_problem(60, 40, 2, 5, 3,
                                                    torch.float64)
    grads = [torch.randn(40, 2, _width(pools, r, 3), dtype=torch.float64,
                         generator=gen) for r in reads]
    threads = torch.get_num_threads()
    try:
        for n, split in ((2, True), (1, False)):
            torch.set_num_threads(n)
            calls.clear()
            _pool_readings_agree(k, values, q, pools, reads, grads)
            shared = 0  # query rows two readings list in different groups
            for readings, was_split, (rows, own), groups in calls:
                assert was_split == split
                assert len(own) == 0 or split  # one thread: no extra rows
                written = {}  # address -> the group adding to it
                for r, t in zip(readings, rows):
                    if t is None:
                        continue
                    for g in groups.tolist():
                        a, b = r.queries.ptr[g:g + 2].tolist()
                        for row in r.queries.rows[a:b].tolist():
                            address = t[row].data_ptr()
                            shared += written.setdefault(address, g) != g
            assert (shared == 0) == split  # the problem has such rows
    finally:
        torch.set_num_threads(threads)

import json
import math
import os
import statistics
import subprocess
import sys

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
sys.path.insert(0, os.path.join(ROOT, 'benchmarks'))

import harness  # noqa: E402


@pytest.mark.parametrize('num_edges', [50, 2_000, 100_000])
def test_ba_edge_index_is_a_simple_undirected_graph(num_edges):
    edge_index = harness.ba_edge_index(num_edges, m=5, seed=3)
    row, col = edge_index
    num_nodes = int(edge_index.max()) + 1
    assert edge_index.dtype == torch.long
    assert abs(edge_index.size(1) - num_edges) <= 0.1 * num_edges + 30
    assert not (row == col).any()
    keys = row * num_nodes + col
    assert bool((keys.diff() > 0).all())  # sorted, no duplicates
    reverse = torch.sort(col * num_nodes + row).values
    assert torch.equal(reverse, keys)  # both directions stored
    deg = torch.bincount(row, minlength=num_nodes)
    assert int(deg.min()) >= 1


def test_ba_edge_index_is_preferential_and_seeded():
    edge_index = harness.ba_edge_index(200_000, m=5, seed=0)
    deg = torch.bincount(edge_index[0])
    # A uniform attachment would give a max degree of a few dozen; a
    # scale-free graph on 20k nodes has hubs of several hundred.
    assert int(deg.max()) > 200
    assert int(deg[:6].min()) > int(deg[-100:].max())
    assert torch.equal(edge_index, harness.ba_edge_index(200_000, seed=0))
    assert not torch.equal(edge_index, harness.ba_edge_index(200_000, seed=1))


def test_loglog_slope():
    xs = [1e3, 1e4, 1e5, 1e6]
    assert harness.loglog_slope(xs, [3 * x**1.5 for x in xs]) == (
        pytest.approx(1.5))
    assert harness.loglog_slope(xs, [7.0] * 4) == pytest.approx(0.0,
                                                                abs=1e-12)
    assert math.isnan(harness.loglog_slope([10], [1.0]))
    assert math.isnan(harness.loglog_slope([10, 20], [0.0, 0.0]))


def test_alternation_times():
    times = {'old': [4.0, 2.0, 3.0], 'new': [1.0, 3.0, 2.0]}
    r = harness.alternation_times(times, 'old', 'new')
    assert (r['old_min_s'], r['old_median_s']) == (2.0, 3.0)
    assert (r['new_min_s'], r['new_median_s']) == (1.0, 2.0)
    assert r['new_s'] == times['new']
    assert r['ratio_min'] == 0.5 and r['ratio_median'] == pytest.approx(2 / 3)
    named = harness.alternation_times(times, 'old', 'new', ('a', 'b'))
    assert named['a_min_s'] == 2.0 and named['b_median_s'] == 2.0
    assert 'old_min_s' not in named
    assert harness.format_alternation(named, ('a', 'b'), ('A', 'B')) == (
        'A 2.000 / 3.000 s  B 1.000 / 2.000 s  ratio 0.500 / 0.667')


def test_alternate_with_references_takes_the_median_of_round_ratios(
        monkeypatch):
    # one pass of the step, then each reference's median, round by round:
    # the rounds' ratios 2, 8, 3 (against a) have the median 3, while the
    # ratio of the medians would be 4 / 1.5
    calls, passes = [], iter([
        1.0, 1.0,  # warm-up of a and b; then per round: step, a, b
        2.0, 1.0, 4.0,
        8.0, 1.0, 4.0,
        6.0, 2.0, 2.0])

    def timed(step, repeats=3, warmup=1, min_time=0.0, device=None):
        calls.append((step, repeats, warmup, min_time))
        t = next(passes)
        return t / 2, t

    monkeypatch.setattr(harness, 'time_fwd_bwd', timed)
    r = harness.alternate_with_references('s', {'a': 'A', 'b': 'B'}, 3)
    assert r['alt_self_s'] == [2.0, 8.0, 6.0]
    assert r['alt_a_s'] == [1.0, 1.0, 2.0] and r['alt_b_s'] == [4.0] * 2 + [
        2.0]
    assert r['alt_to_a'] == 3.0 and r['alt_to_b'] == 2.0
    assert [c[0] for c in calls] == ['A', 'B'] + ['s', 'A', 'B'] * 3
    assert calls[2][1:] == (1, 0, 0.0)  # the step: one pass per round
    assert calls[3][1:] == (harness.REFERENCE_REPEATS, 0,
                            harness.REFERENCE_MIN_TIME)


def test_summarize_ratios_and_slopes():
    records = []
    for size in (100, 1_000, 10_000, 100_000):
        records.append(dict(variant='floor', size=size, n_edges=size,
                            fwd_bwd_s=1e-6 * size, peak_mem_mb=1e-3 * size))
        records.append(dict(variant='layer', size=size, n_edges=size,
                            fwd_bwd_s=(4 if size == 100 else 2) * 1e-6 *
                            size, peak_mem_mb=1e-5 * size**1.2))
    records.append(dict(variant='layer', size=10**6, n_edges=10**6,
                        status='timeout'))
    summary = {s['variant']: s for s in harness.summarize(records)}
    assert summary['floor']['ratio_spread'] == pytest.approx(1.0)
    assert summary['floor']['mem_slope'] == pytest.approx(1.0)
    layer = summary['layer']
    assert layer['points'] == 4
    assert layer['mem_slope'] == pytest.approx(1.2)
    assert layer['mem_slope_top'] == pytest.approx(1.2)
    assert (layer['ratio_min'], layer['ratio_max']) == (pytest.approx(2),
                                                        pytest.approx(4))
    assert layer['ratio_spread'] == pytest.approx(2.0)
    assert 'alt_ratio_spread' not in layer  # no alternating rounds
    # The top two decades (sizes >= 1,000) leave the slow small size out.
    assert layer['ratio_spread_top'] == pytest.approx(1.0)
    text = harness.format_summary(list(summary.values()))
    assert 'layer' in text and 'ratio_spread' in text


def test_time_fwd_bwd_runs_warmup_and_repeats():
    x = torch.randn(10, requires_grad=True)
    calls = []

    def step():
        calls.append(1)
        return (x * 2).sum()

    fwd, fwd_bwd = harness.time_fwd_bwd(step, repeats=3, warmup=2)
    assert len(calls) == 5
    assert 0 < fwd <= fwd_bwd
    assert torch.equal(x.grad, torch.full((10, ), 10.0))
    with pytest.raises(ValueError, match='repeats'):
        harness.time_fwd_bwd(step, repeats=0)


def test_bandwidth_floor_is_gather_then_index_add(device):
    step = harness.bandwidth_floor(1_000, channels=4, num_groups=50, seed=1,
                                   device=device)
    out = step()
    assert out.shape == (50, 4) and out.device.type == device.type
    out.sum().backward()
    (x, ) = [c.cell_contents for c in step.__closure__
             if isinstance(c.cell_contents, torch.Tensor)
             and c.cell_contents.requires_grad]
    # d(sum)/dx[g] = how often row g is gathered.
    gathered = x.grad[:, 0]
    assert float(gathered.sum()) == 1_000
    assert torch.allclose(out.sum(0), x.detach()[
        torch.repeat_interleave(torch.arange(50, device=device),
                                gathered.long())].sum(0), atol=1e-3)


SCRIPT = '''
import sys
sys.path.insert(0, {bench!r})
import torch
import harness

def build(size, device):
    x = torch.randn(size, 8, device=device, requires_grad=True)
    return (lambda: (x * 2).relu()), dict(n_nodes=size, n_edges=size)

harness.run_benchmark('toy', [1000, 4000], {{'double': build}},
                      quick_sizes=[1000])
'''


def test_run_benchmark_end_to_end(tmp_path):
    script = tmp_path / 'toy.py'
    script.write_text(SCRIPT.format(bench=os.path.join(ROOT, 'benchmarks')))
    out = tmp_path / 'toy.json'
    proc = subprocess.run([sys.executable, str(script), '--quick', '--out',
                           str(out), '--repeats', '1', '--min-time', '0'],
                          capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    records = json.loads(out.read_text())
    assert [r['variant'] for r in records] == ['floor', 'double']
    for r in records:
        for key in ('benchmark', 'variant', 'n_edges', 'fwd_s', 'fwd_bwd_s',
                    'peak_mem_mb', 'device', 'versions', 'threads'):
            assert key in r
        assert r['status'] == 'ok' and r['n_edges'] == 1000
        assert r['peak_mem_mb'] >= 0
    assert records[1]['time_to_floor'] == pytest.approx(
        records[1]['fwd_bwd_s'] / records[0]['fwd_bwd_s'])
    assert 'ratio_spread' in proc.stdout
    assert (tmp_path / 'toy.png').exists()
    assert (tmp_path / 'toy_summary.json').exists()


STOPPED = '''
import os, signal, sys
sys.path.insert(0, {bench!r})
import harness

def stop(size, device):  # the point's process stops the sweep's
    os.kill(os.getppid(), signal.SIGKILL)
    raise SystemExit(1)

harness.run_benchmark('toy', [1000], {{'stop': stop}})
'''


def test_a_sweep_stopped_from_outside_keeps_its_points(tmp_path):
    # the JSON is written after every point: the floor's point survives
    # the sweep's end by SIGKILL during the next one
    script = tmp_path / 'stopped.py'
    script.write_text(STOPPED.format(bench=os.path.join(ROOT, 'benchmarks')))
    out = tmp_path / 'toy.json'
    proc = subprocess.run([sys.executable, str(script), '--out', str(out),
                           '--repeats', '1', '--min-time', '0'],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == -9
    records = json.loads(out.read_text())
    assert [(r['variant'], r['status']) for r in records] == [('floor',
                                                               'ok')]


def test_measure_point_on_the_device(device):
    def build(size, device):
        x = torch.randn(size, 8, device=device, requires_grad=True)
        return (lambda: (x * 2).relu()), dict(n_nodes=size, n_edges=size)

    floor = (lambda size, device: (harness.bandwidth_floor(size,
                                                           device=device),
                                   dict(n_edges=size)))
    record = harness.measure_point(build, 1000, repeats=2, warmup=1,
                                   references={'floor': floor}, rounds=2,
                                   device=device)
    assert record['n_edges'] == 1000
    assert 0 < record['fwd_s'] <= record['fwd_bwd_s']
    assert record['peak_mem_mb'] >= 0
    assert len(record['alt_self_s']) == len(record['alt_floor_s']) == 2
    assert record['alt_to_floor'] > 0


def test_measure_point_compiled_records_its_compilation(device):
    # every step, the references' too, under torch.compile: the first
    # pass (with the compilation) apart, and the graphs it compiled
    def build(size, device):
        x = torch.randn(size, 8, device=device, requires_grad=True)
        return (lambda: (x * 2).relu()), dict(n_edges=size)

    floor = (lambda size, device: (harness.bandwidth_floor(size,
                                                           device=device),
                                   dict(n_edges=size)))
    torch._dynamo.reset()
    record = harness.measure_point(build, 500, repeats=2, warmup=0,
                                   references={'floor': floor}, rounds=1,
                                   device=device, compile='aot_eager')
    assert record['compile_s'] > 0 and 0 < record['fwd_s']
    # the step and its reference: one graph each, none compiled again
    assert record['graphs'] == 2
    torch._dynamo.reset()


def test_compiled_step_equals_the_eager_step(device):
    x = torch.randn(50, 4, device=device, dtype=torch.float64,
                    requires_grad=True)

    def step():
        return (x.sin() * x).cumsum(0)

    expected = step()
    (grad, ) = torch.autograd.grad(expected.sum(), x)
    torch._dynamo.reset()
    compiled = harness.compiled_step(step, device, 'aot_eager')
    for _ in range(2):
        x.grad = None
        out = compiled()
        out.sum().backward()
        torch.testing.assert_close(out, expected, rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(x.grad, grad, rtol=1e-12, atol=1e-12)
    torch._dynamo.reset()


def test_count_ops_does_not_take_compile(tmp_path):
    script = tmp_path / 'toy.py'
    script.write_text(SCRIPT.format(bench=os.path.join(ROOT, 'benchmarks')))
    proc = subprocess.run([sys.executable, str(script), '--count-ops',
                           '--compile'], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode != 0
    assert "'--count-ops' counts eager passes" in proc.stderr


@pytest.mark.skipif(torch.cuda.is_available(), reason='a GPU is present')
def test_run_benchmark_on_cuda_without_a_gpu_is_a_clear_error(tmp_path):
    script = tmp_path / 'toy.py'
    script.write_text(SCRIPT.format(bench=os.path.join(ROOT, 'benchmarks')))
    proc = subprocess.run([sys.executable, str(script), '--quick',
                           '--device', 'cuda'], capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode != 0
    assert "'--device cuda'" in proc.stderr and 'no CUDA' in proc.stderr


def test_run_benchmark_alternates_with_the_floor(tmp_path):
    # each point's process times it against the floor round by round
    script = tmp_path / 'toy.py'
    script.write_text(SCRIPT.format(bench=os.path.join(ROOT, 'benchmarks')))
    out = tmp_path / 'toy.json'
    proc = subprocess.run([sys.executable, str(script), '--sizes',
                           '1000,4000', '--out', str(out), '--repeats', '1',
                           '--min-time', '0', '--alternate', '3'],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    records = json.loads(out.read_text())
    for r in records:
        if r['variant'] == 'floor':
            assert 'alt_self_s' not in r  # the reference: no rounds
            continue
        assert len(r['alt_self_s']) == len(r['alt_floor_s']) == 3
        assert r['alt_to_floor'] == pytest.approx(statistics.median(
            a / b for a, b in zip(r['alt_self_s'], r['alt_floor_s'])))
    summary = json.loads((tmp_path / 'toy_summary.json').read_text())
    double = next(s for s in summary if s['variant'] == 'double')
    ratios = [r['alt_to_floor'] for r in records if r['variant'] == 'double']
    assert double['alt_ratio_spread'] == pytest.approx(
        max(ratios) / min(ratios))
    bad = subprocess.run([sys.executable, str(script), '--quick',
                          '--alternate', '1', '--alternate-with', 'gat'],
                         capture_output=True, text=True, timeout=300)
    assert bad.returncode != 0 and "['gat']" in bad.stderr


def test_schedule_runs_size_by_size():
    # the variants of one size run one after another (the floor first),
    # so that their ratio is not read across a whole sweep
    assert harness.schedule([3e3, 1e3], ['floor', 'a', 'b'],
                            [False, True]) == [
        (1000, False, 'floor'), (1000, False, 'a'), (1000, False, 'b'),
        (1000, True, 'floor'), (1000, True, 'a'), (1000, True, 'b'),
        (3000, False, 'floor'), (3000, False, 'a'), (3000, False, 'b'),
        (3000, True, 'floor'), (3000, True, 'a'), (3000, True, 'b')]


def test_schedule_repeats_each_size_in_rounds():
    assert harness.schedule([3e3, 1e3], ['floor', 'a'], [False], 2) == [
        (1000, False, 'floor'), (1000, False, 'a'),
        (1000, False, 'floor'), (1000, False, 'a'),
        (3000, False, 'floor'), (3000, False, 'a'),
        (3000, False, 'floor'), (3000, False, 'a')]


def test_round_medians_and_the_summary_of_rounds():
    # three rounds at size 10 (time-to-floor 2, 10, 3 against each round's
    # own floor: median 3), one at size 100
    def rec(variant, size, t, **extra):
        return dict(variant=variant, size=size, n_edges=size, fwd_bwd_s=t,
                    fwd_s=t / 2, peak_mem_mb=size / 10, **extra)

    records = [rec('floor', 10, 1.0, round=0), rec('a', 10, 2.0, round=0,
                                                   time_to_floor=2.0),
               rec('floor', 10, 0.5, round=1), rec('a', 10, 5.0, round=1,
                                                   time_to_floor=10.0),
               rec('floor', 10, 2.0, round=2), rec('a', 10, 6.0, round=2,
                                                   time_to_floor=3.0,
                                                   alt_to_floor=4.0),
               rec('floor', 100, 10.0), rec('a', 100, 60.0,
                                            time_to_floor=6.0)]
    merged = {(r['variant'], r['size']): r
              for r in harness.round_medians(records)}
    a10 = merged[('a', 10)]
    assert a10['rounds'] == 3 and a10['fwd_bwd_s'] == 5.0
    assert a10['time_to_floor'] == 3.0 and a10['peak_mem_mb'] == 1.0
    assert 'alt_to_floor' not in a10  # only the first round's keys
    assert merged[('a', 100)] is records[-1]  # one round: as it is
    assert merged[('floor', 10)]['fwd_bwd_s'] == 1.0
    a = next(s for s in harness.summarize(records) if s['variant'] == 'a')
    assert a['points'] == 2
    assert (a['ratio_min'], a['ratio_max']) == (3.0, 6.0)
    assert a['time_slope'] == pytest.approx(math.log10(12))


def test_run_benchmark_rounds_divide_by_their_own_floor(tmp_path):
    script = tmp_path / 'toy.py'
    script.write_text(SCRIPT.format(bench=os.path.join(ROOT, 'benchmarks')))
    out = tmp_path / 'toy.json'
    proc = subprocess.run([sys.executable, str(script), '--quick', '--out',
                           str(out), '--repeats', '1', '--min-time', '0',
                           '--rounds', '2'],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    records = json.loads(out.read_text())
    assert [(r['variant'], r['round']) for r in records] == [
        ('floor', 0), ('double', 0), ('floor', 1), ('double', 1)]
    for floor, double in (records[:2], records[2:]):
        assert 'time_to_floor' not in floor  # not over the last round's
        assert double['time_to_floor'] == pytest.approx(
            double['fwd_bwd_s'] / floor['fwd_bwd_s'])
    bad = subprocess.run([sys.executable, str(script), '--quick',
                          '--rounds', '0'],
                         capture_output=True, text=True, timeout=300)
    assert bad.returncode != 0 and "'--rounds' must be >= 1" in bad.stderr


def test_child_env_sets_exactly_the_asked_allocator(monkeypatch):
    monkeypatch.setenv('MALLOC_MMAP_MAX_', '7')  # inherited: dropped
    env = harness.child_env(thp=False, keep_freed_memory=False)
    assert 'MALLOC_MMAP_MAX_' not in env and 'THP_MEM_ALLOC_ENABLE' not in env
    env = harness.child_env(thp=True, keep_freed_memory=True)
    assert env['THP_MEM_ALLOC_ENABLE'] == '1'
    assert all(env[k] == v for k, v in harness.KEEP_FREED_MEMORY.items())


def test_time_fwd_bwd_without_grad_skips_backward():
    fwd, fwd_bwd = harness.time_fwd_bwd(lambda: torch.arange(5), repeats=2)
    assert 0 < fwd <= fwd_bwd


def test_time_fwd_bwd_repeats_until_min_time(monkeypatch):
    clock = iter(0.125 * k for k in range(10_000))
    monkeypatch.setattr(harness.time, 'perf_counter', lambda: next(clock))
    calls = []

    def step():
        calls.append(1)
        return torch.ones(1)

    # Every repetition takes 0.25 s on the fake clock: 4 timed repetitions
    # reach min_time=1 s, after one warm-up.
    assert harness.time_fwd_bwd(step, repeats=2, warmup=1,
                                min_time=1.0) == (0.125, 0.25)
    assert len(calls) == 5

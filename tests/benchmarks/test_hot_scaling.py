import json
import os
import subprocess
import sys

import pytest
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', '..',
                                'benchmarks'))
import hot_scaling  # noqa: E402

SIZE = 300  # directed edges


@pytest.mark.parametrize('variant', sorted(hot_scaling.VARIANTS))
def test_every_variant_runs_forward_and_backward(variant, device):
    torch.manual_seed(0)
    step, fields = hot_scaling.VARIANTS[variant](SIZE, device)
    assert fields['n_entries'] == fields['n_nodes'] + fields['n_edges']
    assert 0.5 * SIZE <= fields['n_edges'] <= 1.5 * SIZE
    out = step()
    assert out.device.type == device.type
    assert out.requires_grad and torch.isfinite(out).all()
    out.sum().backward()


def test_floor_has_one_row_per_entry(device):
    step, fields = hot_scaling.floor(SIZE, device)
    out = step()
    assert out.size(0) == fields['n_entries']
    assert out.device.type == device.type


def _record(variant, size, fwd_bwd_s, mem):
    return dict(variant=variant, size=size, n_edges=size, fwd_bwd_s=fwd_bwd_s,
                peak_mem_mb=mem, base_rss_mb=400.0, status='ok')


def test_check_promises_reads_slope_ratio_and_gat():
    sizes = [10**4, 10**5, 10**6]
    records = [_record('floor', s, s * 1e-6, 1.0) for s in sizes]
    # Kernel: linear memory, 10x the floor everywhere; GAT 2x the floor.
    records += [_record('hot_kernel', s, s * 1e-5, s * 1e-3) for s in sizes]
    records += [_record('gat', s, s * 2e-6, 1.0) for s in sizes]
    lines = hot_scaling.check_promises(records)
    assert 'mem slope 1.000' in lines[0] and 'spread 1.000' in lines[0]
    assert 'time slope 1.000' in lines[0]
    assert any('at 1000000 edges' in line for line in lines)
    assert lines[-1].endswith('5x (<= 25x)')


def test_check_promises_reads_the_alternating_rounds():
    # with --alternate: the spread of the in-process ratios to the floor
    # (10 and 15: 1.5) and the ratio to GAT at 1e5, next to the others
    sizes = [10**4, 10**5]
    records = [_record('floor', s, s * 1e-6, 1.0) for s in sizes]
    records += [dict(_record('hot_kernel', s, s * 1e-5, s * 1e-3),
                     alt_to_floor=a, alt_self_s=[1.0] * 5, alt_to_gat=g)
                for s, a, g in zip(sizes, (15.0, 10.0), (30.0, 20.5))]
    records += [_record('gat', s, s * 2e-6, 1.0) for s in sizes]
    lines = hot_scaling.check_promises(records)
    assert lines[1] == ('hot_kernel 1e+04..1e+06 edges, alternating with '
                        'the floor in one process: time-to-floor ratio '
                        '10..15, spread 1.500 (< 2)')
    assert lines[-1] == ('hot_kernel / gat at 1e5, alternating in one '
                         'process (median of 5 rounds): 20.5x (<= 25x)')


def test_check_promises_reads_rounds_of_processes():
    # --rounds 3: HOT / GAT per round 20, 40, 22 (median 22); the other
    # lines read the medians of the rounds (HOT 2 s, GAT 0.1 s: 20x)
    records = []
    for k, (hot_s, gat_s) in enumerate(((2.0, 0.1), (4.0, 0.1),
                                        (1.1, 0.05))):
        records += [dict(_record('floor', 10**5, 0.02, 1.0), round=k),
                    dict(_record('hot_kernel', 10**5, hot_s, 100.0),
                         round=k, time_to_floor=hot_s / 0.02),
                    dict(_record('gat', 10**5, gat_s, 1.0), round=k)]
    lines = hot_scaling.check_promises(records)
    assert 'hot_kernel / gat fwd+bwd time per edge at 1e5: 20x (<= 25x)' \
        in lines
    assert lines[-1] == ('hot_kernel / gat at 1e5, median of 3 rounds of '
                         'processes: 22x (rounds 20..40x; <= 25x)')


def test_check_promises_judges_each_huge_page_setting_apart():
    sizes = [10**4, 10**5]
    records = []
    for thp, gat_s in ((False, 2e-6), (True, 4e-6)):
        records += [dict(_record('floor', s, s * 1e-6, 1.0), thp=thp)
                    for s in sizes]
        records += [dict(_record('hot_kernel', s, s * 1e-5, s * 1e-3),
                         thp=thp) for s in sizes]
        records += [dict(_record('gat', s, s * gat_s, 1.0), thp=thp)
                    for s in sizes]
    lines = hot_scaling.check_promises(records)
    ratios = [line for line in lines if '/ gat' in line]
    # each setting's kernel model against its own GAT: 5x and 2.5x
    assert ratios == [
        'hot_kernel / gat fwd+bwd time per edge at 1e5: 5x (<= 25x)',
        'hot_kernel / gat fwd+bwd time per edge at 1e5: 2.5x (<= 25x) [THP]']
    assert sum(line.endswith('[THP]') for line in lines) == len(lines) / 2


def test_child_memory_watchdog_stops_an_over_budget_point(monkeypatch):
    import subprocess
    # set through monkeypatch first, so that the limit the parent sets
    # below is undone after the test (it would reach later tests' children)
    monkeypatch.setenv('HOT_SCALING_MAX_MEM_GB', '12')
    hot_scaling._cap_child_memory(['--sizes', '1e3', '--max-mem-gb', '-1.2'])
    env = dict(os.environ)  # the parent hands its limit to the children
    assert env['HOT_SCALING_MAX_MEM_GB'] == '-1.2'  # 0.3 GB resident
    code = (
        'import sys, time, torch; sys.path.insert(0, sys.argv[1]); '
        'import hot_scaling; '
        "hot_scaling._cap_child_memory(['--point', '{}']); "
        'x = torch.ones(2**28); time.sleep(5); print("survived")')
    bench = os.path.join(os.path.dirname(__file__), '..', '..', 'benchmarks')
    proc = subprocess.run([sys.executable, '-c', code, bench], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 3, proc.stderr
    assert 'resident memory over' in proc.stderr
    assert 'survived' not in proc.stdout


def test_count_ops_counts_each_variant_in_its_process(tmp_path):
    # --count-ops: operators of a second forward and backward pass with
    # CUDA's layout, per point; the plans of the first pass are kept, so
    # the count does not grow with a graph that takes the same path (one
    # graph of 10^3 edges and more: kernel attention's summaries)
    out = tmp_path / 'ops.json'
    proc = subprocess.run([sys.executable, hot_scaling.__file__,
                           '--count-ops', '--sizes', '1000,2000',
                           '--variants', 'hot_kernel,gat', '--out',
                           str(out)], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr
    records = json.loads(out.read_text())
    assert [(r['variant'], r['size']) for r in records] == [
        ('hot_kernel', 1000), ('gat', 1000), ('hot_kernel', 2000),
        ('gat', 2000)]
    assert all(r['status'] == 'counted' and r['layout'] == 'cuda'
               for r in records), [(r['status'], r.get('error'))
                                   for r in records]
    kernel = [r['ops'] for r in records if r['variant'] == 'hot_kernel']
    gat = [r['ops'] for r in records if r['variant'] == 'gat']
    assert kernel[0] == kernel[1] > gat[0] == gat[1] > 0
    assert 'operators' in proc.stdout


@pytest.mark.parametrize('attention', ['kernel', 'softmax'])
def test_compiled_hot_step_is_one_graph_with_the_eager_values(attention):
    # --compile: one graph of 300 edges traced whole (no graph break), the
    # same output and parameter gradients as the eager pass on the layout
    # it is planned for (a GPU's)
    from harness import compiled_step

    from torch_geometric_hot.testing import cuda_layout
    from torch_geometric_hot.train.compiled import compiled_graphs
    model = hot_scaling.hot_model(attention)
    step, _ = hot_scaling._pair_model(model, SIZE, torch.device('cpu'))
    with cuda_layout():
        expected = step()
        expected.sum().backward()
    grads = [p.grad.clone() for p in model.parameters()]
    torch._dynamo.reset()
    before = compiled_graphs()
    compiled = compiled_step(step, torch.device('cpu'), 'aot_eager')
    for _ in range(2):
        model.zero_grad()
        out = compiled()
        out.sum().backward()
        torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)
        for p, grad in zip(model.parameters(), grads):
            torch.testing.assert_close(p.grad, grad, rtol=1e-4, atol=1e-5)
    assert compiled_graphs() - before == 1
    torch._dynamo.reset()

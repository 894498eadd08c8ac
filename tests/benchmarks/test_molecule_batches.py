import json
import os
import sys

import pytest
import torch

pytest.importorskip('rdkit')
pytest.importorskip('ogb')

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', '..',
                                'benchmarks'))
import molecule_batches  # noqa: E402


@pytest.fixture(scope='module')
def root(tmp_path_factory):
    return str(tmp_path_factory.mktemp('nci_tpsa'))


def test_quick_run_times_every_model_and_writes_json(root, tmp_path):
    out = tmp_path / 'molecules.json'
    result = molecule_batches.main(['--quick', '--no-memory', '--root', root,
                                    '--out', str(out)])
    assert out.exists()
    rows = result['models']
    assert list(rows) == list(molecule_batches.MODELS)
    assert rows['gin']['to_gin'] == pytest.approx(1.0)
    assert rows['gps_multihead']['to_gps_multihead'] == pytest.approx(1.0)
    assert rows['gps_multihead']['to_gps_multihead_rounds'] == \
        pytest.approx(1.0)
    for name, row in rows.items():
        assert row['train_ms'] > 0 and row['infer_ms'] > 0, name
        assert len(result['rounds'][name]['train_s']) == 2
    assert result['settings']['batch_size'] == 8


def test_floor_and_forced_packed_path(root):
    import torch
    from torch_geometric_hot.ops.attention import dispatch
    result = molecule_batches.main([
        '--quick', '--no-memory', '--root', root, '--floor', '--packed', 'on',
        '--native', 'off', '--device-type', 'cuda', '--models',
        'gin,gps_multihead,hot_kernel'])
    assert dispatch._forced.get()[0] == ()  # the rule is restored
    with molecule_batches.forced_paths(molecule_batches.parse_args(
            ['--packed', 'on'])):
        problem = dispatch.problem('hot', 'kernel', (), torch.device('cpu'),
                                   view=None, in_order=2, out_order=2)
        assert dispatch.choose(problem) == 'packed'
    settings = result['settings']
    assert (settings['packed'], settings['native']) == ('on', 'off')
    assert settings['device_type'] == 'cuda'
    assert len(settings['peak_gflops']) == 2
    for name, row in result['models'].items():
        assert row['matmul_gflop'] > 0 and row['floor_ms'] > 0, name
        assert row['to_floor_rounds'] > 0, name


def test_busy_profiles_each_model_after_the_rounds(root, capsys):
    result = molecule_batches.main([
        '--quick', '--no-memory', '--root', root, '--busy', '2',
        '--models', 'gin,gps_multihead,hot_softmax'])
    assert result['settings']['busy_steps'] == 2
    for name, row in result['models'].items():
        assert 0 < row['busy'] <= 1 and row['kernel_ms'] > 0, name
        assert row['busy_step_ms'] > 0 and row['kernels_per_step'] >= 1, name
        top = row['top_kernels']
        assert 0 < len(top) <= 8 and top[0][0].startswith('aten::'), name
        assert [ms for _, _, ms in top] == sorted(
            (ms for _, _, ms in top), reverse=True)
        assert sum(ms for _, _, ms in top) <= row['kernel_ms'] + 1e-9
    assert 'busy %' in capsys.readouterr().out
    quiet = molecule_batches.main(['--quick', '--no-memory', '--root', root,
                                   '--models', 'gin,gps_multihead'])
    assert all('busy' not in row for row in quiet['models'].values())


def test_device_events_leave_out_operators_and_annotated_ranges():
    from types import SimpleNamespace as Event
    from torch.autograd import DeviceType
    cpu, cuda = DeviceType.CPU, DeviceType.CUDA
    events = [Event(key='aten::mm', device_type=cpu),
              Event(key='Optimizer.step#Adam.step', device_type=cpu),
              # the annotated range on the device's timeline, with and
              # without the profiler's flag for it
              Event(key='Optimizer.step#Adam.step', device_type=cuda),
              Event(key='ProfilerStep#1', device_type=cuda,
                    is_user_annotation=True),
              Event(key='sm80_xmma_gemm_f32f32', device_type=cuda,
                    is_user_annotation=False),
              Event(key='Memcpy DtoD (Device -> Device)', device_type=cuda)]
    assert [e.key for e in molecule_batches.device_events(events)] == [
        'sm80_xmma_gemm_f32f32', 'Memcpy DtoD (Device -> Device)']


def test_host_time_splits_each_step(root, capsys):
    result = molecule_batches.main([
        '--quick', '--no-memory', '--root', root, '--host', '3',
        '--models', 'gin,gps_multihead,hot_kernel'])
    assert result['settings']['host_steps'] == 3
    for name, row in result['models'].items():
        # on the CPU the host runs every kernel itself: queued is done
        assert 0 < row['host_ms'] <= row['done_ms'], name
        assert row['aten_ms'] > 0 and row['profiled_host_ms'] > 0, name
        assert row['aten_ms'] + row['outside_aten_ms'] == pytest.approx(
            row['profiled_host_ms']), name
        top = row['top_host']
        assert 0 < len(top) <= 12 and all(calls > 0 for _, calls, _ in top)
        assert [ms for _, _, ms in top] == sorted(
            (ms for _, _, ms in top), reverse=True)
    assert 'host ms' in capsys.readouterr().out


def test_a_run_stopped_while_profiling_keeps_the_table(
        root, tmp_path, monkeypatch):
    # the JSON is written after the rounds and after every busy fraction:
    # a run stopped (here: failing) while profiling the second model keeps
    # the table and the first model's fraction
    profile = molecule_batches.busy_fraction
    calls = []

    def stopped(*args):
        calls.append(1)
        if len(calls) > 1:
            raise KeyboardInterrupt
        return profile(*args)

    monkeypatch.setattr(molecule_batches, 'busy_fraction', stopped)
    out = tmp_path / 'molecules.json'
    with pytest.raises(KeyboardInterrupt):
        molecule_batches.main(['--quick', '--no-memory', '--root', root,
                               '--busy', '2', '--models', 'gin,gps_multihead',
                               '--out', str(out)])
    written = json.loads(out.read_text())
    assert written['settings']['versions']['torch'] == torch.__version__
    rows = written['models']
    assert rows['gin']['busy'] > 0 and rows['gps_multihead']['train_ms'] > 0
    assert 'busy' not in rows['gps_multihead']


def test_every_model_maps_a_batch_to_one_value_per_graph(root):
    batch = molecule_batches.load_batches(root, 8, 1)[0]
    assert batch.num_graphs == 8 and batch.lap_node_id.size(1) == 16
    for name in molecule_batches.MODELS + molecule_batches.OPTIONAL_MODELS:
        model = molecule_batches.build_model(name, 16, 2, 4)
        assert model(batch).shape == (8, 1), name
        if name.startswith('hot_'):  # the default scales, *_mean averages
            scaler = model.model.layers[0].attn.size_scaler
            assert scaler == ('none' if name.endswith('_mean') else 'log')


def test_dropout_reaches_every_model_that_has_it(root):
    # in training, two passes draw different masks; in evaluation equal
    import torch
    batch = molecule_batches.load_batches(root, 8, 1)[0]
    for name in molecule_batches.MODELS:
        model = molecule_batches.build_model(name, 16, 2, 4, dropout=0.5)
        model.train()
        differs = not torch.equal(model(batch), model(batch))
        assert differs == (name != 'gin'), name
        model.eval()
        assert torch.equal(model(batch), model(batch)), name


def test_round_robin_rotates_the_first_model():
    calls = []

    class Fake:
        def __init__(self, name):
            self.name = name

        def train_step(self, batch):
            calls.append(self.name)

        def infer_step(self, batch):
            pass

        def sync(self):
            pass

    runners = {n: Fake(n) for n in 'abc'}
    times = molecule_batches.round_robin(runners, [None], 3,
                                         log=lambda line: None)
    assert calls[3:] == list('abc') + list('bca') + list('cab')
    assert all(len(t['train_s']) == 3 for t in times.values())


def test_peak_memory_of_one_model_in_a_fresh_process(root):
    args = molecule_batches.parse_args(['--quick', '--root', root])
    assert molecule_batches.cpu_peak_bytes(args, 'gin') > 0


def test_unknown_model_is_refused():
    with pytest.raises(SystemExit):
        molecule_batches.parse_args(['--models', 'gin,gps_multihead,nope'])
    with pytest.raises(ValueError, match='unknown model'):
        molecule_batches.build_model('nope', 16, 2, 4)


def test_device_events_are_the_device_events_alone():
    # an operator's event carries the device time of the kernel it
    # launched; the kernel's own event holds the same time
    from types import SimpleNamespace
    from torch.autograd import DeviceType
    events = [SimpleNamespace(key='aten::mm', device_type=DeviceType.CPU),
              SimpleNamespace(key='gemm', device_type=DeviceType.CUDA),
              SimpleNamespace(key='Memcpy DtoD', device_type=DeviceType.CUDA)]
    assert [e.key for e in molecule_batches.device_events(events)] == \
        ['gemm', 'Memcpy DtoD']


def test_breakdown_attributes_every_flop_once(tmp_path):
    out = tmp_path / 'breakdown.json'
    result = molecule_batches.main([
        '--breakdown', '--synthetic', '--models',
        'gin,gps_multihead,hot_kernel', '--batch-size', '8', '--batches',
        '2', '--width', '16', '--layers', '2', '--out', str(out)])
    assert out.exists()
    for name, row in result['models'].items():
        ops = {op['op']: op for op in row['ops']}
        assert abs(sum(op['gflop'] for op in row['ops']) - row['gflop']) \
            < 1e-12
        assert ops['aten::mm']['gflop'] > 0 and ops['aten::mm']['ms'] > 0
        # the products inside a custom operator are its own, not counted
        # again as aten::mm: the operators' times fit in the step
        assert sum(op['ms'] for op in row['ops']) <= row['step_ms']
    hot = {op['op'] for op in result['models']['hot_kernel']['ops']}
    assert 'torch_geometric_hot::pair_light_linear' in hot


def test_breakdown_is_for_the_cpu_step():
    with pytest.raises(SystemExit):
        molecule_batches.parse_args(['--breakdown', '--count-ops'])

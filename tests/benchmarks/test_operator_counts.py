import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', '..',
                                'benchmarks'))
import molecule_batches  # noqa: E402

#: The most operators one training step of each model may dispatch, as a
#: multiple of PyG's GPSConv (multihead), with the layout CUDA uses.
TARGETS = {'hot_kernel': 1.5, 'hot_softmax': 1.5, 'tokengt_softmax': 1.0,
           'tokengt_performer': 1.0}


def test_training_step_operators_within_targets(tmp_path):
    # a 128-molecule batch, width 64, 4 layers, as the benchmark's table:
    # NCITPSA where RDKit and OGB are installed, else synthetic molecules
    out = tmp_path / 'ops.json'
    result = molecule_batches.main([
        '--count-ops', '--models', ','.join(['gin', 'gps_multihead'] +
                                            list(TARGETS)),
        '--root', str(tmp_path / 'nci_tpsa'), '--out', str(out)])
    assert out.exists()
    models = result['models']
    for name, target in TARGETS.items():
        assert models[name]['to_gps_multihead'] <= target, (
            name, models[name]['ops'], models['gps_multihead']['ops'])
        assert models[name]['sync_ops'] == {}, (name,
                                                models[name]['sync_ops'])
    assert result['settings']['layout'] == 'cuda'


def test_counts_are_deterministic(tmp_path):
    args = ['--count-ops', '--synthetic', '--models',
            'gin,gps_multihead,hot_softmax', '--batch-size', '8',
            '--width', '16', '--layers', '2']
    first = molecule_batches.main(args)['models']
    second = molecule_batches.main(args)['models']
    assert {n: r['ops'] for n, r in first.items()} == \
        {n: r['ops'] for n, r in second.items()}

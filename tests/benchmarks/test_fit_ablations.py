import json
import math
import os
import sys

import pytest
import torch

pytest.importorskip('rdkit')
pytest.importorskip('ogb')

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', '..',
                                'benchmarks'))
import fit_ablations  # noqa: E402

from torch_geometric_hot.train import zoo  # noqa: E402


def test_variants_build_the_commands_model_with_their_options():
    s = zoo.Settings(16, 1, 1, 0.0, 0)
    variants = fit_ablations.variants()
    paper = variants['tokengt-lap+paper'].build(s).encoder
    assert paper.embedding.sign_flip and paper.embedding.node_id_scale == 1.0
    default = zoo.MODELS['tokengt-lap'].build(s).encoder
    assert not default.embedding.sign_flip
    assert default.embedding.node_id_scale == 1.0
    for name in ('tokengt-lap', 'tokengt-lap-performer', 'tokengt-orf',
                 'tokengt-orf-performer'):
        scaled = variants[name + '+scaled'].build(s).encoder
        assert scaled.embedding.node_id_scale == 4.0  # sqrt(node_id_dim)
        assert not scaled.embedding.sign_flip
        assert variants[name + '+scaled'].extras is zoo.MODELS[name].extras
    assert variants['tokengt-lap+seb'].build(s).encoder.seb
    elu = variants['hot-kernel+elu'].build(s)
    assert elu.layers[0].attn.kernel == 'elu'
    assert elu.layers[0].norm == 'batch'  # the command's HOT default
    paper = variants['hot-softmax+paper-norm'].build(s)
    assert paper.layers[0].norm == paper.readout_norm == 'layer'
    assert paper.layers[0].attn.attention == 'softmax'
    log = variants['hot-kernel+bn-head+log'].build(s)
    assert log.layers[0].attn.size_scaler == 'log'
    assert log.layers[0].norm == log.readout_norm == 'batch'
    mean = variants['hot-softmax+mean'].build(s)
    assert mean.layers[0].attn.size_scaler == 'none'
    assert (mean.layers[0].norm, mean.readout_norm) == ('batch', 'layer')
    assert mean.layers[0].attn.attention == 'softmax'
    # the variants measured with plain averages keep them
    assert all(variants[name].build(s).layers[-1].attn.size_scaler == 'none'
               for name in ('hot-kernel+elu', 'hot-kernel+paper-norm',
                            'hot-kernel+bn-head', 'hot-softmax+bn-readout'))
    default = zoo.MODELS['hot-kernel'].build(s)
    assert all(layer.attn.size_scaler == 'log' for layer in default.layers)
    assert (default.layers[0].norm, default.readout_norm) == ('batch',
                                                              'layer')
    # the same inputs as the command's model
    assert variants['tokengt-lap+flip'].extras is \
        zoo.MODELS['tokengt-lap'].extras


def test_smoke_run_tabulates_every_variant(tmp_path):
    result = fit_ablations.main([
        '--targets', 'qed', '--variants', 'gin,tokengt-lap+flip',
        '--molecules', '60', '--hidden', '8', '--layers', '1',
        '--batch-size', '8', '--lr', '0.002', '--smoke', '--root',
        str(tmp_path / 'root'), '--out', str(tmp_path / 'out')])
    rows = result['rows']
    assert [r['variant'] for r in rows] == ['gin', 'tokengt-lap+flip']
    assert all(math.isfinite(r['final_train_loss']) and
               0 <= r['fitted_train_loss'] < math.inf for r in rows)
    written = json.loads((tmp_path / 'out' / 'fit_ablations.json')
                         .read_text())
    assert written['rows'] == rows
    assert written['versions']['torch'] == torch.__version__
    assert [(r['variant'], r['seed']) for r in written['runs']] == [
        ('gin', 0), ('tokengt-lap+flip', 0)]
    assert [r['test_rmse'] for r in written['runs']] == [
        r['test'] for r in rows]
    assert '| qed | tokengt-lap+flip |' in result['table']
    assert 'tokengt-lap+flip' not in zoo.MODELS  # registered for the run
    run = json.loads((tmp_path / 'out' / 'qed' / 'gin_seed0' /
                      'summary.json').read_text())
    assert run['config']['lr'] == 0.002
    assert run['config']['offline_molecules'] == 60

import json
import math
import os
import sys

import pytest

pytest.importorskip('ogb')
pytest.importorskip('rdkit')

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', '..',
                                'benchmarks'))
import batch_norm_noise  # noqa: E402
import fit_ablations  # noqa: E402

from torch_geometric_hot.train import zoo  # noqa: E402
from torch_geometric_hot.train.cli import main as train  # noqa: E402

NAME = 'hot-kernel+bn-head'  # batch norm before the head


def test_noise_of_a_finished_run(tmp_path):
    root, out = str(tmp_path / 'data'), tmp_path / 'runs'
    with fit_ablations._registered({NAME: fit_ablations.variants()[NAME]}):
        [summary] = train([
            '--dataset', 'ogbg-molesol', '--offline', '--offline-molecules',
            '60', '--offline-target', 'qed', '--root', root, '--model', NAME,
            '--hidden', '8', '--layers', '1', '--batch-size', '8',
            '--epochs', '2', '--smoke', '--no-progress', '--out', str(out)])
    run = str(out / f'{NAME}_seed0')
    written = tmp_path / 'noise.json'
    result = batch_norm_noise.main([run, '--root', root, '--offline',
                                    '--out', str(written)])
    # the rebuilt run's fit is the command's, to the bit
    assert result['fitted'] == summary['fitted_loss']
    assert result['logged'] == summary['final_loss']
    assert result['in_eval'] == ['norm'] and result['order_of_epoch'] == 3
    assert all(math.isfinite(result[k]) and result[k] > 0
               for k in ('train_mode', 'train_mode_except'))
    # the modules left in evaluation mode change the training-mode pass
    assert result['train_mode'] != result['train_mode_except']
    assert json.loads(written.read_text()) == result
    assert NAME not in zoo.MODELS  # registered for the measurement only
    with pytest.raises(SystemExit, match="'--eval'.*no module"):
        batch_norm_noise.main([run, '--root', root, '--offline', '--eval',
                               'readout'])

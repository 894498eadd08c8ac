import json
import math
import os
import os.path as osp
import re
import signal
import socket
import subprocess
import sys

import pytest
import torch
from torch_geometric.data import Batch

pytest.importorskip('rdkit')
pytest.importorskip('ogb')

from torch_geometric_hot.train import MODELS, main  # noqa: E402

MOLECULES = 200
BASE = ['--offline', '--offline-molecules', str(MOLECULES), '--smoke',
        '--no-progress', '--threads', '1', '--batch-size', '16',
        '--hidden', '16', '--layers', '2']


@pytest.fixture(scope='module')
def root(tmp_path_factory):
    return str(tmp_path_factory.mktemp('ogb'))


def run_cli(root, out, *extra):
    return main(['--root', root, '--out', str(out), *BASE, *extra])


@pytest.mark.parametrize('model', list(MODELS))
def test_every_model_trains_through_the_pcqm4mv2_layout(root, tmp_path,
                                                        model, device):
    [summary] = run_cli(root, tmp_path, '--dataset', 'pcqm4mv2', '--model',
                        model, '--device', str(device))
    assert summary['metric'] == 'mae' and summary['epochs'] == 2
    assert torch.isfinite(torch.tensor([summary['test'], summary['valid']
                                        ])).all()
    run = tmp_path / f'{model}_seed0'
    for name in ('last.pt', 'best.pt', 'summary.json', 'curve.png'):
        assert (run / name).is_file(), name
    lines = (run / 'metrics.jsonl').read_text().splitlines()
    assert [json.loads(line)['epoch'] for line in lines] == [1, 2]
    assert (tmp_path / 'results.md').read_text().startswith('| model |')
    written = json.loads((run / 'summary.json').read_text())
    assert written['versions']['torch'] == torch.__version__


def test_classification_layout_and_several_seeds(root, tmp_path):
    summaries = run_cli(root, tmp_path, '--dataset', 'ogbg-molhiv',
                        '--model', 'hot-kernel,gin', '--seed', '0,1')
    assert [(s['model'], s['seed']) for s in summaries] == [
        ('hot-kernel', 0), ('hot-kernel', 1), ('gin', 0), ('gin', 1)]
    assert all(s['metric'] == 'rocauc' and 0 <= s['test'] <= 1
               for s in summaries)
    table = (tmp_path / 'results.md').read_text()
    assert re.search(r'\| hot-kernel \| [0-9.]+ ± [0-9.]+ \|', table)
    assert (tmp_path / 'curves.png').is_file()


def test_own_csv_through_the_ogbg_layout(tmp_path):
    csv = tmp_path / 'mine.csv'
    from torch_geometric_hot.datasets import nci_tpsa_table
    table = nci_tpsa_table(limit=40)
    rows = [f'{smi},{k % 7}' for k, smi in enumerate(table.smiles)]
    rows[::5] = ['not-a-molecule,1.0'] * 8
    csv.write_text('smiles,logs\n' + '\n'.join(rows) + '\n')
    [summary] = main(['--root', str(tmp_path / 'data'), '--dataset',
                      'ogbg-molesol', '--model', 'gin', '--csv', str(csv),
                      '--target-columns', 'logs', *BASE])
    assert summary['metric'] == 'rmse'
    with open(tmp_path / 'data' / 'ogbg_molesol' / 'SOURCE.json') as f:
        source = json.load(f)
    assert source['molecules'] == 32 and len(source['skipped']) == 8


def _cli(*args, **kw):
    env = dict(os.environ, OUTDATED_IGNORE='1', OMP_NUM_THREADS='1')
    return subprocess.Popen([sys.executable, '-m', 'torch_geometric_hot.train',
                             *args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env=env,
                            **kw)


def _final_weights(run_dir):
    from torch_geometric_hot.train.trainer import weights_digest
    state = torch.load(osp.join(run_dir, 'last.pt'), weights_only=True)
    model = torch.nn.Module()
    for k, v in state['model'].items():
        model.register_buffer(k.replace('.', '__'), v)
    return state['epoch'], weights_digest(model), state['model']


def test_killed_run_resumes_to_the_same_weights(root, tmp_path):
    args = ['--root', root, '--dataset', 'pcqm4mv2', '--model',
            'tokengt-lap', '--dropout', '0.1', '--epochs', '3', *BASE]
    whole = _cli(*args, '--out', str(tmp_path / 'whole'))
    assert whole.wait() == 0, whole.stdout.read()
    killed = _cli(*args, '--out', str(tmp_path / 'killed'))
    for line in killed.stdout:
        if re.search(r'epoch +1 ', line):
            killed.send_signal(signal.SIGKILL)
            break
    killed.wait()
    run = tmp_path / 'killed' / 'tokengt-lap_seed0'
    assert _final_weights(run)[0] == 1
    resumed = _cli(*args, '--resume', str(run))
    out = resumed.stdout.read()
    assert resumed.wait() == 0, out
    assert 'epoch   2' in out and 'epoch   1' not in out
    epoch, digest, weights = _final_weights(run)
    epoch_whole, digest_whole, weights_whole = _final_weights(
        tmp_path / 'whole' / 'tokengt-lap_seed0')
    assert epoch == epoch_whole == 3
    for k in weights:
        assert torch.equal(weights[k], weights_whole[k]), k
    lines = (run / 'metrics.jsonl').read_text().splitlines()
    assert [json.loads(x)['epoch'] for x in lines] == [1, 2, 3]


def test_two_processes_under_torchrun(root, tmp_path):
    main(['--root', root, '--dataset', 'pcqm4mv2', '--model', 'gin',
          *BASE])  # writes the offline folder before the ranks read it
    env = dict(os.environ, OUTDATED_IGNORE='1', OMP_NUM_THREADS='1')
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        port = s.getsockname()[1]
    logs = tmp_path / 'logs'  # each rank's stdout in its own file
    proc = subprocess.run(
        [sys.executable, '-m', 'torch.distributed.run', '--nproc_per_node=2',
         f'--master_port={port}', '--log-dir', str(logs), '--redirects', '1',
         '-m', 'torch_geometric_hot.train', '--root', root, '--dataset',
         'pcqm4mv2', '--model', 'hot-kernel', '--out', str(tmp_path),
         '--device', 'cpu', *BASE], capture_output=True, text=True, env=env,
        timeout=600)
    out = ''.join(f.read_text() for f in sorted(logs.rglob('stdout.log')))
    assert proc.returncode == 0, out + proc.stdout + proc.stderr
    digests = dict(re.findall(r'rank (\d) weights (\w+)', out))
    assert set(digests) == {'0', '1'} and digests['0'] == digests['1'], \
        out + proc.stdout + proc.stderr
    run = tmp_path / 'hot-kernel_seed0'
    records = [json.loads(x) for x in
               (run / 'metrics.jsonl').read_text().splitlines()]
    assert [r['epoch'] for r in records] == [1, 2]  # rank 0 alone wrote
    from torch_geometric_hot.datasets import load_molecule_benchmark
    bench = load_molecule_benchmark('pcqm4mv2', root)
    smoke = 2 * 16  # evaluation batches of a smoke run
    for part in ('valid', 'test'):
        expected = min(smoke, bench.split[part].numel())
        assert all(r[f'{part}_count'] == expected for r in records)
    summary = json.loads((run / 'summary.json').read_text())
    assert summary['world_size'] == 2


def _usage_error(capsys, argv):
    # the command's one-line usage error: status 2, no traceback
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert err.count('\n') == 1, err
    return err


def test_clear_errors(root, tmp_path, capsys):
    err = _usage_error(capsys, ['--dataset', 'ogbg-molnothing', '--root',
                                root, *BASE])
    assert err.startswith('python -m torch_geometric_hot.train: error: '
                          "--dataset: unknown OGB molecule dataset")
    broken = tmp_path / 'broken'
    (broken / 'pcqm4m-v2').mkdir(parents=True)
    # the library raises; the command says it in its own words
    from torch_geometric_hot.datasets import load_molecule_benchmark
    with pytest.raises(FileNotFoundError, match="'root'.*lacks"):
        load_molecule_benchmark('pcqm4mv2', str(broken))
    err = _usage_error(capsys, ['--dataset', 'pcqm4mv2', '--root',
                                str(broken), '--model', 'gin', '--smoke',
                                '--no-progress'])
    assert re.search(r"error: --root: .*pcqm4m-v2 exists but lacks "
                     r"\['raw/data.csv.gz', 'split_dict.pt'\].*pass as "
                     r"--root the folder", err), err
    with pytest.raises(SystemExit, match="'--resume'.*no checkpoint"):
        main(['--root', root, '--resume', str(tmp_path), *BASE])
    run_cli(root, tmp_path / 'a', '--dataset', 'pcqm4mv2', '--model', 'gin')
    with pytest.raises(SystemExit, match="'--resume'.*--hidden 16"):
        main(['--root', root, '--dataset', 'pcqm4mv2', '--model', 'gin',
              '--resume', str(tmp_path / 'a' / 'gin_seed0'), *BASE,
              '--hidden', '32'])
    with pytest.raises(SystemExit):
        main(['--model', 'hot-fast', *BASE])
    assert 'unknown model' in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(['--lr', '0', *BASE])
    assert "argument --lr: must be > 0, got 0.0" in capsys.readouterr().err
    if not torch.cuda.is_available():
        with pytest.raises(SystemExit, match="'--device cuda'.*no CUDA"):
            main(['--root', root, '--device', 'cuda', *BASE])


def test_without_out_nothing_is_written(root, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    main(['--root', root, '--dataset', 'pcqm4mv2', '--model', 'gin', *BASE])
    assert list(tmp_path.iterdir()) == []


def test_commands_sharing_out_report_every_run_of_their_settings(root,
                                                                 tmp_path):
    # a model list split over several commands, one --out: the table holds
    # every run of the same settings, this command's models first
    run_cli(root, tmp_path, '--dataset', 'pcqm4mv2', '--model', 'gin')
    run_cli(root, tmp_path, '--dataset', 'pcqm4mv2', '--model', 'mlp',
            '--seed', '1,0')
    runs = json.loads((tmp_path / 'results.json').read_text())
    assert [(r['model'], r['seed']) for r in runs] == [
        ('mlp', 0), ('mlp', 1), ('gin', 0)]
    table = (tmp_path / 'results.md').read_text()
    assert '| mlp |' in table and '| gin |' in table
    # other settings: the runs left from the earlier ones are not theirs
    run_cli(root, tmp_path, '--dataset', 'pcqm4mv2', '--model', 'gin',
            '--lr', '0.01')
    runs = json.loads((tmp_path / 'results.json').read_text())
    assert [(r['model'], r['config']['lr']) for r in runs] == [('gin', 0.01)]


@pytest.mark.parametrize('model', ['tokengt-lap', 'hot-kernel'])
def test_compiled_run_pads_and_compiles_once_per_bucket_and_mode(
        root, tmp_path, model):
    import torch._dynamo
    torch._dynamo.reset()
    args = ['--dataset', 'ogbg-molesol', '--model', model, '--epochs', '1']
    [eager] = run_cli(root, tmp_path / 'eager', *args)
    [summary] = run_cli(root, tmp_path / 'compiled', *args, '--compile',
                        '--compile-backend', 'aot_eager')
    torch._dynamo.reset()
    buckets = summary['size_buckets']
    # training and evaluation each compile once per size bucket at most
    assert buckets >= 1 and 1 <= summary['compiled_graphs'] <= 2 * buckets
    # the padding graphs reach neither the loss nor the metrics (HOT's
    # batch norm sees the padding in training: finite values only)
    for key in ('final_loss', 'valid', 'test'):
        assert math.isfinite(summary[key]), key
        if model == 'tokengt-lap':
            assert summary[key] == pytest.approx(eager[key], rel=1e-4), key

    def counts(folder):
        path = next((tmp_path / folder).glob('*/metrics.jsonl'))
        return [[json.loads(line)[f'{part}_count']
                 for part in ('valid', 'test')] for line in open(path)]

    assert counts('compiled') == counts('eager')


def test_fit_is_the_last_weights_error_on_training_molecules(root, tmp_path):
    # the oracle: the last checkpoint rebuilt, in evaluation mode, on the
    # first molecules of the training split, one molecule at a time
    from torch_geometric_hot.train.plots import rebuild_run
    from torch_geometric_hot.train.zoo import predict
    [summary] = run_cli(root, tmp_path, '--dataset', 'ogbg-molesol',
                        '--model', 'hot-kernel', '--fit-molecules', '24')
    run, _ = rebuild_run(str(tmp_path / 'hot-kernel_seed0'), 'last',
                         root=root, offline=True)
    run.model.eval()
    errors, targets, preds = [], [], []
    with torch.no_grad():
        for i in run.bench.split['train'][:24].tolist():
            data = run.bench.dataset[i]
            batch = Batch.from_data_list([data])
            out = predict(run.model, run.spec, batch).view(1, -1)
            y = data.y.view(1, -1).float()
            errors.append(out - run.scale.scale(y))
            preds.append(run.scale.unscale(out))
            targets.append(y)
    mse = float(torch.cat(errors).square().mean())
    rmse = float((torch.cat(preds) - torch.cat(targets)).square().mean()
                 .sqrt())
    assert summary['fitted_loss'] == pytest.approx(mse, rel=1e-4)
    assert summary['fitted_train'] == pytest.approx(rmse, rel=1e-4)
    # the logged loss is another quantity: training mode, weights moving
    assert summary['fitted_loss'] != summary['final_loss']


def test_fit_can_be_skipped(root, tmp_path, capsys):
    [summary] = run_cli(root, tmp_path, '--dataset', 'ogbg-molesol',
                        '--model', 'gin', '--fit-molecules', '0')
    assert summary['fitted_loss'] is None and summary['fitted_train'] is None
    assert 'fit of the last weights' not in capsys.readouterr().out
    with pytest.raises(SystemExit):
        run_cli(root, tmp_path, '--model', 'gin', '--fit-molecules', '-1')
    assert "argument --fit-molecules: must be >= 0, got -1" in \
        capsys.readouterr().err


def test_results_table_shows_the_fit_beside_the_logged_loss(root, tmp_path):
    summaries = run_cli(root, tmp_path, '--dataset', 'ogbg-molesol',
                        '--model', 'gin', '--seed', '0,1')
    table = (tmp_path / 'results.md').read_text().splitlines()
    assert table[0].split(' | ')[3:5] == ['final train loss', 'fitted loss']
    [row] = [line for line in table if line.startswith('| gin |')]
    fitted = [s['fitted_loss'] for s in summaries]
    mean = sum(fitted) / 2
    assert row.split(' | ')[4].startswith(f'{mean:.4f} ± ')


def test_the_command_reports_an_incomplete_root_in_one_line(tmp_path):
    (tmp_path / 'ogbg_molesol' / 'raw').mkdir(parents=True)
    proc = _cli('--dataset', 'ogbg-molesol', '--root', str(tmp_path),
                '--model', 'gin', '--smoke', '--no-progress')
    out = proc.stdout.read()
    assert proc.wait() == 2, out
    assert 'Traceback' not in out
    assert out.splitlines()[-1].startswith(
        'python -m torch_geometric_hot.train: error: --root: ')
    assert 'lacks' in out


def test_an_offline_root_refuses_other_data_by_the_flag(tmp_path, capsys):
    from torch_geometric_hot.datasets import load_molecule_benchmark
    root = str(tmp_path / 'root')
    load_molecule_benchmark('ogbg-molesol', root, offline=True,
                            offline_molecules=60)
    capsys.readouterr()  # OGB's processing
    base = ['--dataset', 'ogbg-molesol', '--root', root, '--model', 'gin',
            '--offline', '--smoke', '--no-progress']
    way_out = (r": give another --root, or delete .*ogbg_molesol to write "
               r"it anew$")
    err = _usage_error(capsys, [*base, '--offline-molecules', '50'])
    assert re.search(r"error: --offline-molecules: .*ogbg_molesol holds 60 "
                     r"molecules .*not the first 50 NCI molecules" + way_out,
                     err), err
    err = _usage_error(capsys, [*base, '--offline-target', 'qed'])
    assert re.search(r"error: --offline-target: .*labelled with TPSA "
                     r"\(offline target 'tpsa'\), not QED \('qed'\)" +
                     way_out, err), err
    csv = tmp_path / 'mine.csv'
    csv.write_text('smiles,logs\nCCO,1\nCCN,2\n')
    err = _usage_error(capsys, [*base, '--csv', str(csv),
                                '--target-columns', 'logs'])
    assert re.search(r"error: --csv: .*holds 60 molecules .*not .*mine.csv "
                     r"\(2 molecules, targets \['logs'\]\)" + way_out,
                     err), err
    os.remove(osp.join(root, 'ogbg_molesol', 'SOURCE.json'))
    err = _usage_error(capsys, base)
    assert re.search(r"error: --root: .*did not write .*drop --offline to "
                     r"read it as it is, or give another --root", err), err


def test_a_failed_download_suggests_offline(tmp_path, capsys, monkeypatch):
    import urllib.error
    import urllib.request

    def urlopen(*args, **kw):
        raise urllib.error.URLError('no network here')

    monkeypatch.setattr(urllib.request, 'urlopen', urlopen)
    root = tmp_path / 'data'
    err = _usage_error(capsys, ['--dataset', 'ogbg-molesol', '--root',
                                str(root), '--model', 'gin', '--smoke',
                                '--no-progress'])
    assert re.search(r"error: --dataset: downloading ogbg-molesol into "
                     r".*no network here.*pass --offline .*or as --root the "
                     r"folder that holds a copy fetched elsewhere", err), err
    assert not root.exists()  # nothing half-made to trip the next run


def test_counts_of_one_in_the_singular(tmp_path, capsys):
    from torch_geometric_hot.datasets import nci_tpsa_table
    from torch_geometric_hot.train.trainer import counted
    assert [counted(1, 'step'), counted(0, 'row'), counted(1234, 'row')] \
        == ['1 step', '0 rows', '1,234 rows']
    csv = tmp_path / 'mine.csv'
    rows = [f'{smi},{k % 7}' for k, smi in
            enumerate(nci_tpsa_table(limit=40).smiles)]
    csv.write_text('smiles,logs\nnot-a-molecule,1\n' + '\n'.join(rows))
    main(['--root', str(tmp_path / 'data'), '--dataset', 'ogbg-molesol',
          '--model', 'gin', '--csv', str(csv), '--target-columns', 'logs',
          *BASE, '--max-steps', '1', '--fit-molecules', '1'])
    out = capsys.readouterr().out
    assert 'skipped 1 row whose' in out
    assert '; 1 step of 16 molecules' in out
    assert 'on 1 training molecule:' in out


def test_molecule_csv_errors_name_the_option(tmp_path, capsys):
    base = ['--root', str(tmp_path / 'data'), '--dataset', 'ogbg-molesol',
            '--model', 'gin', *BASE]
    missing = str(tmp_path / 'missing.csv')
    with pytest.raises(SystemExit) as info:  # argparse's usage and error
        main([*base, '--csv', missing, '--target-columns', 'logs'])
    assert info.value.code == 2
    assert re.search(r"error: '--csv': no file '.*missing.csv'\n$",
                     capsys.readouterr().err)
    csv = tmp_path / 'mine.csv'
    csv.write_text('smiles,logs\nCCO,1\nCCN,high\n')
    err = _usage_error(capsys, [*base, '--csv', str(csv),
                                '--target-columns', 'logs,gap'])
    assert re.search(r"error: --target-columns: .*mine.csv has no "
                     r"column\(s\) \['gap'\]; its header has "
                     r"\['smiles', 'logs'\]$", err), err
    err = _usage_error(capsys, [*base, '--csv', str(csv), '--smiles-column',
                                'SMILES', '--target-columns', 'logs'])
    assert re.search(r"error: --smiles-column: .*has no column\(s\) "
                     r"\['SMILES'\]", err), err
    err = _usage_error(capsys, [*base, '--csv', str(csv),
                                '--target-columns', 'logs'])
    assert re.search(r"error: --csv: .*mine.csv, row 3: column 'logs' holds "
                     r"'high', not a number$", err), err
    assert not (tmp_path / 'data').exists()  # refused before writing

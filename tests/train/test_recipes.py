import json
import math

import pytest
import torch

from torch_geometric_hot.train.presets import PRESETS
from torch_geometric_hot.train.recipes import (StepSchedule, build_optimizer,
                                               lr_factor)

pytest.importorskip('rdkit')
pytest.importorskip('ogb')

from torch_geometric_hot.train import MODELS, main, parse_args  # noqa: E402

MOLECULES = 120
BASE = ['--offline', '--offline-molecules', str(MOLECULES), '--smoke',
        '--no-progress', '--threads', '1', '--dataset', 'pcqm4mv2']
TINY = ['--batch-size', '8', '--hidden', '8', '--layers', '1']


@pytest.fixture(scope='module')
def root(tmp_path_factory):
    return str(tmp_path_factory.mktemp('ogb'))


def test_schedules_by_steps():
    # linear warm-up to the peak, then each shape over the remaining steps
    for shape in ('cosine', 'linear', 'constant', 'step'):
        f = lr_factor(shape, 4, 24)
        assert [f(s) for s in range(4)] == [0.25, 0.5, 0.75, 1.0]
    linear, cosine = lr_factor('linear', 4, 24), lr_factor('cosine', 4, 24)
    assert linear(14) == pytest.approx(0.5) and linear(24) == 0.0
    assert cosine(14) == pytest.approx(0.5) and cosine(24) == pytest.approx(0)
    assert cosine(9) == pytest.approx(0.5 * (1 + math.cos(math.pi / 4)))
    assert lr_factor('constant', 0, 10)(9) == 1.0
    step = lr_factor('step', 0, 100)  # x0.25 after 30 %, 60 %, 90 %
    assert [step(s) for s in (29, 30, 60, 90)] == [1, 0.25, 0.25**2,
                                                   0.25**3]
    with pytest.raises(ValueError, match="'schedule'"):
        lr_factor('exponential', 0, 10)


def test_step_schedule_restores_and_extends():
    p = torch.nn.Parameter(torch.zeros(2))
    opt = build_optimizer('adamw', [p], 1.0, (0.99, 0.999), 0.1)
    assert isinstance(opt, torch.optim.AdamW)
    assert opt.defaults['betas'] == (0.99, 0.999)
    schedule = StepSchedule(opt, 'linear', 2, 10)
    for _ in range(6):
        schedule.step()
    assert opt.param_groups[0]['lr'] == pytest.approx(0.5)
    # a longer schedule continues from the same step
    longer = StepSchedule(opt, 'linear', 2, 18)
    longer.load_state_dict(schedule.state_dict())
    assert opt.param_groups[0]['lr'] == pytest.approx(0.75)


def test_presets_set_every_value_and_options_given_override_them():
    args = parse_args(['--preset', 'tokengt-lap'])
    assert (args.model, args.hidden, args.layers, args.heads) == (
        ['tokengt-lap'], 768, 12, 32)
    assert (args.optimizer, args.betas, args.weight_decay) == (
        'adamw', (0.99, 0.999), 0.1)
    assert (args.warmup_steps, args.schedule, args.max_steps) == (
        60_000, 'linear', 1_000_000)
    assert (args.batch_size, args.loss, args.grad_clip, args.lr) == (
        1024, 'l1', 5.0, 2e-4)
    assert args.model_options['eigvec_dropout'] == 0.2
    args = parse_args(['--preset', 'tokengt-lap', '--lr', '1e-3',
                       '--betas', '0.9,0.98', '--smoke', '--layers', '3'])
    assert (args.lr, args.betas, args.layers) == (1e-3, (0.9, 0.98), 3)
    assert (args.hidden, args.batch_size, args.accumulate) == (64, 8, 2)
    assert args.heads == 32 and args.warmup_steps == 1
    # without a preset, the defaults are those of before
    args = parse_args([])
    assert (args.optimizer, args.schedule, args.warmup_steps,
            args.accumulate, args.precision, args.max_steps) == (
                'adam', 'cosine', 0, 1, '32', None)


def test_model_options_of_the_command_reach_the_models(capsys):
    from torch_geometric_hot.train.trainer import settings
    args = parse_args(['--model', 'hot-kernel,tokengt-lap,gin',
                       '--size-scaler', 'none', '--sign-flip',
                       '--hidden', '16', '--layers', '1'])
    assert args.model_options == {'size_scaler': 'none', 'sign_flip': True}
    s = settings(args, 0, 1)
    hot = MODELS['hot-kernel'].build(s)
    assert all(layer.attn.size_scaler == 'none' for layer in hot.layers)
    assert MODELS['tokengt-lap'].build(s).encoder.embedding.sign_flip
    MODELS['gin'].build(s)  # the others ignore them
    plain = settings(parse_args(['--hidden', '16', '--layers', '1']), 0, 1)
    default = MODELS['hot-kernel'].build(plain)
    assert all(layer.attn.size_scaler == 'log' for layer in default.layers)
    assert not MODELS['tokengt-lap'].build(plain).encoder.embedding.sign_flip
    # given with a preset, they override it
    args = parse_args(['--preset', 'hot-pcqm4m', '--size-scaler', 'log'])
    assert args.model_options['size_scaler'] == 'log'
    assert parse_args(['--preset', 'hot-pcqm4m']).model_options[
        'size_scaler'] == 'none'
    # without a model they apply to: a usage error naming the option
    for argv, name in ((['--model', 'gin', '--size-scaler', 'log'],
                        '--size-scaler'),
                       (['--model', 'tokengt-orf', '--sign-flip'],
                        '--sign-flip')):
        with pytest.raises(SystemExit):
            parse_args(argv)
        assert name in capsys.readouterr().err


def test_size_limit_option_is_applied_and_presets_raise_it(
        root, monkeypatch):
    from torch_geometric_hot.validation import (DEFAULT_SIZE_LIMIT,
                                                SizeLimitError,
                                                current_size_limit,
                                                set_size_limit)
    assert parse_args([]).size_limit is None
    for name in ('tokengt-lap', 'hot-pcqm4m'):  # a batch of 1,024 at 768
        assert parse_args(['--preset', name]).size_limit >= 4 * 10**8
    assert parse_args(['--preset', 'tokengt-lap', '--size-limit',
                       '5']).size_limit == 5
    monkeypatch.setenv('TORCH_GEOMETRIC_HOT_SIZE_LIMIT', '123456789')
    try:
        with pytest.raises(SizeLimitError, match='size limit of 64'):
            main(['--root', root, *BASE, *TINY, '--model', 'tokengt-lap',
                  '--size-limit', '64'])
        assert current_size_limit() == 64
        import os  # the loader's workers read it
        assert os.environ['TORCH_GEOMETRIC_HOT_SIZE_LIMIT'] == '64'
    finally:
        set_size_limit(DEFAULT_SIZE_LIMIT)


@pytest.mark.parametrize('name', list(PRESETS))
def test_preset_parameter_counts_match_the_papers(name):
    from torch_geometric_hot.train.trainer import settings
    preset = PRESETS[name]
    args = parse_args(['--preset', name])
    build = MODELS[args.model[0]].build
    try:  # no memory, no initialisation
        with torch.device('meta'):
            model = build(settings(args, 0, 1))
    except RuntimeError:  # random features drawn at construction
        model = build(settings(args, 0, 1))
    count = sum(p.numel() for p in model.parameters()) / 1e6
    assert abs(count / preset.reference_parameters - 1) < 0.02, count
    if name.startswith('hot'):  # HOT's blocks: layer norm, plain averages
        assert all(layer.norm == 'layer' and layer.attn.size_scaler == 'none'
                   for layer in model.layers)


def _weights(run_dir):
    state = torch.load(run_dir / 'last.pt', weights_only=True)
    return state['model']


@pytest.mark.parametrize('name', list(PRESETS))
def test_every_preset_smoke_run_resumes_to_the_same_weights(
        root, tmp_path, name, monkeypatch):
    # each preset with accumulation, warm-up, its optimizer and schedule
    # (bf16 for half of them); a run stopped after its first epoch and
    # resumed ends with the weights of the run that was not stopped
    precision = ['--precision', 'bf16'] if list(PRESETS).index(name) % 2 \
        else []
    args = ['--root', root, *BASE, '--preset', name, *precision]
    [whole] = main([*args, '--out', str(tmp_path / 'whole')])
    recipe = whole['recipe']
    assert whole['preset'] == name and recipe['accumulate'] == 2
    assert recipe['total_steps'] == whole['steps'] == 4
    assert recipe['optimizer'] == PRESETS[name].values['optimizer']
    from torch_geometric_hot.train.trainer import Run
    write = Run._write_epoch

    def stop_after_first(self, record, improved):
        write(self, record, improved)
        raise KeyboardInterrupt
    monkeypatch.setattr(Run, '_write_epoch', stop_after_first)
    with pytest.raises(KeyboardInterrupt):
        main([*args, '--out', str(tmp_path / 'stopped')])
    monkeypatch.setattr(Run, '_write_epoch', write)
    run = tmp_path / 'stopped' / f"{whole['model']}_seed0"
    [resumed] = main([*args, '--resume', str(run)])
    assert resumed['steps'] == 4 and resumed['epochs'] == 2
    expected = _weights(tmp_path / 'whole' / f"{whole['model']}_seed0")
    for key, value in _weights(run).items():
        assert torch.equal(value, expected[key]), key


@pytest.mark.parametrize('model', list(MODELS))
def test_every_model_trains_in_bfloat16(root, model):
    [summary] = main(['--root', root, *BASE, *TINY, '--model', model,
                      '--precision', 'bf16', '--accumulate', '2',
                      '--epochs', '1'])
    assert summary['recipe']['precision'] == 'bf16'
    assert math.isfinite(summary['valid'])


def test_float16_with_a_gradient_scaler_and_recipe_options(root, tmp_path):
    [summary] = main(['--root', root, *BASE, *TINY, '--model', 'gin',
                      '--precision', '16', '--optimizer', 'adamw',
                      '--weight-decay', '0.05', '--schedule', 'linear',
                      '--warmup-steps', '2', '--max-steps', '5',
                      '--grad-clip', '1.0', '--loss', 'l2', '--out',
                      str(tmp_path)])
    assert summary['steps'] == 5 and summary['epochs'] == 2
    saved = json.loads((tmp_path / 'gin_seed0' / 'summary.json'
                        ).read_text())
    assert saved['recipe']['loss'] == 'l2'
    assert saved['recipe']['weight_decay'] == 0.05
    assert 'max_steps' in saved['recipe']['explicit']
    state = torch.load(tmp_path / 'gin_seed0' / 'last.pt',
                       weights_only=True)
    assert state['scaler']['scale'] > 0


def test_resume_errors_are_one_line(root, tmp_path, capsys):
    args = ['--root', root, *BASE, *TINY, '--model', 'gin', '--epochs', '1']
    main([*args, '--out', str(tmp_path)])
    run = tmp_path / 'gin_seed0'
    last = run / 'last.pt'
    whole = last.read_bytes()
    for broken in (whole[:len(whole) // 2], b'\x00garbage' * 50):
        last.write_bytes(broken)
        with pytest.raises(SystemExit) as error:
            main([*args, '--resume', str(run)])
        message = str(error.value)
        assert str(last) in message and 'cannot be read' in message
        assert '\n' not in message
    last.write_bytes(whole)
    with pytest.raises(SystemExit) as error:
        main([*args, '--resume', str(run), '--lr', '0.01', '--accumulate',
              '2'])
    message = str(error.value)
    assert '--lr 0.001 (now 0.01)' in message and '--accumulate 1 (now 2)' \
        in message and '\n' not in message
    with pytest.raises(SystemExit, match='--epochs 1 .now 3.*--extend'):
        main([*args[:-1], '3', '--resume', str(run)])
    with pytest.raises(SystemExit):
        main([*args, '--extend'])
    assert "'--extend' continues a run" in capsys.readouterr().err


def test_extend_trains_a_finished_run_on(root, tmp_path):
    args = ['--root', root, *BASE, *TINY, '--model', 'gin',
            '--schedule', 'linear']
    [first] = main([*args, '--epochs', '2', '--out', str(tmp_path)])
    run = tmp_path / 'gin_seed0'
    with pytest.raises(SystemExit, match="'--extend'.*more --epochs"):
        main([*args, '--epochs', '2', '--extend', '--resume', str(run)])
    [longer] = main([*args, '--epochs', '4', '--extend', '--resume',
                     str(run)])
    assert longer['epochs'] == 4 and longer['steps'] == 2 * first['steps']
    [extension] = longer['extensions']
    assert extension['at_epoch'] == 2 and extension['from']['epochs'] == 2
    assert extension['to']['epochs'] == 4
    summary = json.loads((run / 'summary.json').read_text())
    assert summary['extensions'] == longer['extensions']
    records = [json.loads(x) for x in
               (run / 'metrics.jsonl').read_text().splitlines()]
    assert [r['epoch'] for r in records] == [1, 2, 3, 4]
    # the first run decayed to 0 over its 2 epochs; the rebuilt linear
    # schedule over 4 epochs has 1/4 of the rate left after the third
    assert records[1]['lr'] == 0.0
    assert records[2]['lr'] == pytest.approx(0.25e-3)
    assert records[3]['lr'] == 0.0


def test_resuming_with_other_software_says_so(root, tmp_path, capsys):
    args = ['--root', root, *BASE, *TINY, '--model', 'gin']
    main([*args, '--epochs', '1', '--out', str(tmp_path)])
    last = tmp_path / 'gin_seed0' / 'last.pt'
    state = torch.load(last, weights_only=True)
    assert state['versions']['torch'] == torch.__version__
    capsys.readouterr()
    main([*args, '--epochs', '2', '--extend', '--resume', str(last.parent)])
    assert 'other software' not in capsys.readouterr().out
    state = torch.load(last, weights_only=True)
    state['versions']['torch'] = '0.0'
    torch.save(state, last)
    main([*args, '--epochs', '3', '--extend', '--resume', str(last.parent)])
    out = capsys.readouterr().out
    assert f'other software (torch 0.0 (now {torch.__version__}))' in out


@pytest.mark.parametrize('candidates', ['dense', 'neighbours', 'walks',
                                        'indexer'])
@pytest.mark.parametrize('form', ['multilinear', 'determinant'])
def test_simplicial_attention_under_bfloat16_autocast(candidates, form):
    # forward and backward under autocast: no dtype error, finite
    # gradients in the parameters' dtype, the output near float32's
    from torch_geometric.utils import to_undirected

    from torch_geometric_hot.nn import SimplicialAttention
    torch.manual_seed(0)
    x = torch.randn(12, 8)
    edge_index = to_undirected(torch.tensor([[0, 1, 2, 3, 4, 6, 7, 8, 9],
                                             [1, 2, 3, 4, 5, 7, 8, 9, 10]]))
    batch = torch.tensor([0] * 6 + [1] * 6)
    pos = torch.arange(12) % 6 if form == 'determinant' else None
    kwargs = dict(k=3, indexer_loss='kl') if candidates == 'indexer' else {}
    layer = SimplicialAttention(8, heads=2, head_channels=6 if form ==
                                'determinant' else 4, form=form,
                                candidates=candidates, capacity=0.5,
                                **kwargs)
    reference = layer(x, edge_index, batch, pos=pos)
    x = x.clone().requires_grad_()
    with torch.autocast('cpu', dtype=torch.bfloat16):
        out = layer(x, edge_index, batch, pos=pos)
        loss = out.float().sum()
        if layer.aux_loss is not None:
            loss = loss + layer.aux_loss.float()
    loss.backward()
    assert torch.allclose(out.float(), reference, atol=0.05)
    assert x.grad.dtype == torch.float32 and torch.isfinite(x.grad).all()
    for p in layer.parameters():
        if p.grad is not None:
            assert p.grad.dtype == p.dtype and torch.isfinite(p.grad).all()

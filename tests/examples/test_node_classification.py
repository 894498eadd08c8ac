import pytest
import torch

from example_scripts import load_example

pytest.importorskip('matplotlib')


def load():
    return load_example('node_classification')


def test_smoke_runs_every_model_on_both_offline_graphs(tmp_path, device):
    out = load().main(['--smoke', '--device', device.type, '--out',
                       str(tmp_path)])
    assert set(out['summary']) == {'KarateClub', 'SBM'}
    for row in out['summary'].values():
        assert set(row) == {'GCN', 'GAT', 'TokenGT', 'HOT'}
        assert all(0.0 <= v <= 1.0 for v in row.values())
    assert out['config']['device'] == device.type
    assert (tmp_path / 'nodes.png').stat().st_size > 0


def test_few_label_split_is_seeded_and_balanced():
    module = load()
    y = torch.tensor([0, 0, 0, 1, 1, 1, 2, 2, 2])
    train, test = module.few_label_split(y, 2, seed=3)
    again, _ = module.few_label_split(y, 2, seed=3)
    assert torch.equal(train, again) and torch.equal(test, ~train)
    assert torch.bincount(y[train]).tolist() == [2, 2, 2]


def test_propagate_is_gcn_propagation_without_weights():
    module = load()
    edge_index = torch.tensor([[0, 1, 1, 2, 2, 3], [1, 0, 2, 1, 3, 2]])
    x = torch.randn(5, 3, generator=torch.Generator().manual_seed(0))
    adj = torch.eye(5)  # node 4 is isolated: it keeps its features
    adj[edge_index[0], edge_index[1]] = 1.0
    norm = adj.sum(1).pow(-0.5)
    adj = norm.view(-1, 1) * adj * norm.view(1, -1)
    out = module.propagate(x, edge_index, 2)
    assert torch.allclose(out, adj @ adj @ x, atol=1e-6)
    assert torch.allclose(out[4], x[4])


@pytest.mark.parametrize('hot_input', ['features', 'features+ids'])
def test_smoke_runs_hot_on_its_other_inputs(tmp_path, hot_input, device):
    out = load().main(['--smoke', '--models', 'HOT', '--graphs',
                       'KarateClub', '--hot-input', hot_input, '--device',
                       device.type, '--out', str(tmp_path)])
    assert 0.0 <= out['summary']['KarateClub']['HOT'] <= 1.0
    assert out['config']['hot_input'] == hot_input


@pytest.mark.parametrize('flags,attention,seb', [
    ([], 'performer', True),
    (['--tokengt-attention', 'softmax', '--no-seb'], 'softmax', False),
])
def test_tokengt_variants_from_the_command_line(flags, attention, seb):
    module = load()
    args = module.parse_args(flags)
    text = repr(module.Transformer('TokenGT', 34, args.hidden, 4, args).model)
    assert f"attention='{attention}'" in text and f'seb={seb}' in text

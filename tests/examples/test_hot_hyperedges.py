import pytest
import torch

from example_scripts import load_example

pytest.importorskip('matplotlib')


def load():
    return load_example('hot_hyperedges')


def test_smoke_trains_both_models(tmp_path, device):
    out = load().main(['--smoke', '--device', device.type, '--out',
                       str(tmp_path)])
    assert set(out['summary']) == {'HOT', 'S2G+'}
    for s in out['summary'].values():
        assert 0.0 <= s['auc'] <= 1.0 and 0.0 <= s['aupr'] <= 1.0
    assert out['config']['device'] == device.type
    assert (tmp_path / 'hyperedges.png').stat().st_size > 0


def test_auc_aupr_against_hand_values():
    module = load()
    score = torch.tensor([0.9, 0.8, 0.7, 0.1])
    label = torch.tensor([1., 0., 1., 0.])
    auc, aupr = module.auc_aupr(score, label)
    assert auc == pytest.approx(0.75)  # 3 of 4 positive-negative pairs
    assert aupr == pytest.approx((1 + 2 / 3) / 2)
    auc, _ = module.auc_aupr(torch.ones(4), label)  # all tied
    assert auc == pytest.approx(0.5)


def test_negatives_keep_types_and_avoid_known_hyperedges():
    module = load()
    from torch_geometric_hot.datasets import planted_hypergraph
    data = planted_hypergraph((8, 6, 4), 60, seed=1)
    known = {tuple(c) for c in data.train_hyperedges.t().tolist()}
    neg = module.negatives(data.train_hyperedges, data.nums_type, known, 5,
                           torch.Generator().manual_seed(0))
    assert neg.size(1) >= 4.5 * data.train_hyperedges.size(1)
    for t in range(3):
        assert (data.node_type[neg[t]] == t).all()
    assert not any(tuple(c) in known for c in neg.t().tolist())

"""The one dropout of attention (ops/attention/dropout.py): its factors
keep 1 - p of the weights at 1 / (1 - p), independently across seeds,
heads and the classes of a call; a call's seed comes from torch's default
generator. That every path draws these factors alike: test_paths.py."""
import pytest
import torch

from torch_geometric_hot.ops.attention.dropout import class_seed, \
    draw_seed, drop_outputs, dropout_threshold, keep_factors


def test_dropout_keeps_one_minus_p_in_expectation():
    query = torch.arange(100_000).unsqueeze(1)
    key, head = (query * 7919) % 1000, torch.arange(4)
    for p in (0.1, 0.5, 0.9):
        factors = keep_factors(query, key, head, 99, dropout_threshold(p),
                               torch.float64)
        assert abs((factors > 0).double().mean() - (1 - p)) < 0.005
        assert abs(factors.mean() - 1) < 0.01
        values = factors.unique()
        assert values.numel() == 2 and values[0] == 0
        assert abs(values[1] - 1 / (1 - p)) < 1e-8
    other = keep_factors(query, key, head, 100, dropout_threshold(0.5),
                         torch.float64)
    same = keep_factors(query, key, head, torch.tensor(99),
                        dropout_threshold(0.5), torch.float64)
    agreement = ((other > 0) == (same > 0)).double().mean()
    assert abs(agreement - 0.5) < 0.01  # another seed: independent draws
    heads = same > 0  # and another head
    assert abs((heads[:, 0] == heads[:, 1]).double().mean() - 0.5) < 0.01


def test_seeds_come_from_the_default_generator_and_classes_differ():
    assert draw_seed(0.0) is None
    torch.manual_seed(4)
    seed = draw_seed(0.2)
    torch.manual_seed(4)
    assert seed.device.type == 'cpu' and torch.equal(seed, draw_seed(0.2))
    with pytest.raises(ValueError, match="'dropout' must be in"):
        draw_seed(1.0)
    seeds = [class_seed(seed, slot) for slot in range(200)]
    assert len({int(s) for s in seeds}) == 200
    assert all(0 <= int(s) < 2**32 for s in seeds)
    # the classes of a part share their rows: independent draws
    out = drop_outputs(torch.ones(500, 2, 3, 8, dtype=torch.float64),
                       seeds[:2], 0.5)
    assert abs(((out[:, 0] > 0) == (out[:, 1] > 0)).double().mean()
               - 0.5) < 0.03
    assert abs((out > 0).double().mean() - 0.5) < 0.02
    assert torch.equal(out, drop_outputs(torch.ones_like(out), seeds[:2],
                                         0.5))

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from torch_geometric_hot.ops import gather_contract, segment_outer_sum
from torch_geometric_hot.ops.class_combination import READING, \
    CombinationTerm
from torch_geometric_hot.ops.kernel_attention import SummaryKeys, Reading
from torch_geometric_hot.ops.pooled_combination import CombinationPart, \
    ValueProjection, pooled_combination

E, H, R, C = 13, 3, 5, 4


def _counted(fn, *args):
    # (total, per operator) of what FlopCounterMode counts in fn(*args)
    with FlopCounterMode(display=False) as counter:
        out = fn(*args)
    return counter.get_total_flops(), {
        str(op): n for op, n in counter.get_flop_counts()['Global'].items()
    }, out


def _inputs(*shapes, grad=False):
    gen = torch.Generator().manual_seed(0)
    return [torch.rand(*s, generator=gen).requires_grad_(grad)
            for s in shapes]


def test_segment_outer_sum_counts_as_its_dense_product():
    k, v = _inputs((E, H, R), (E, H, C))
    index = torch.zeros(E, dtype=torch.long)
    total, ops, _ = _counted(segment_outer_sum, k, v, index, 1)
    dense, _, _ = _counted(torch.bmm, k.permute(1, 2, 0), v.transpose(0, 1))
    assert ops == {'torch_geometric_hot.segment_outer_sum': dense}
    assert total == dense == 2 * E * H * R * C


def test_gather_contract_counts_as_its_dense_product():
    q, summary = _inputs((E, H, R), (2, H, R, C))
    index = torch.arange(E) % 2
    total, ops, _ = _counted(gather_contract, q, summary, index)
    dense, _, _ = _counted(torch.bmm, q.transpose(0, 1), summary[0])
    assert ops == {'torch_geometric_hot.gather_contract': dense}
    assert total == dense


@pytest.mark.parametrize('op', ['segment_outer_sum', 'gather_contract'])
def test_backward_counts_one_product_per_gradient(op):
    if op == 'segment_outer_sum':
        a, b = _inputs((E, H, R), (E, H, C), grad=True)
        index = torch.zeros(E, dtype=torch.long)
        out = segment_outer_sum(a, b, index, 1)
    else:
        a, b = _inputs((E, H, R), (1, H, R, C), grad=True)
        out = gather_contract(a, b, torch.zeros(E, dtype=torch.long))
    forward = 2 * E * H * R * C
    total, ops, _ = _counted(out.sum().backward)
    assert ops[f'torch_geometric_hot.{op}_backward'] == 2 * forward


def _global_attention(phi_q, phi_k, values):
    # one summary over all keys, one reading of it by every query, one
    # class reading it
    N, K = phi_q.size(0), phi_k.size(0)
    pool = SummaryKeys(torch.arange(K), torch.zeros(K, dtype=torch.long), 1,
                       (0, ))
    read = Reading(0, torch.zeros(N, dtype=torch.long), (0, ))
    part = CombinationPart([[CombinationTerm(1, READING, 0, 0)]], [], [0],
                           torch.ones(N, 1, dtype=torch.bool))
    return pooled_combination([part], [pool], [read], phi_q, phi_k,
                              values)[0]


def test_pooled_combination_counts_summaries_readings_and_projection():
    N, K, F = 7, E, 6
    phi_q, phi_k, x, weight = _inputs((N, H, R), (K, H, R), (K, F),
                                      (H * C, F), grad=True)
    values = ValueProjection(x, weight, H, C)
    total, ops, out = _counted(_global_attention, phi_q, phi_k, values)
    # the same products written densely: the projection, the summary
    # [H, R, C + 1] of the keys and the readings of it
    dense_values = torch.nn.functional.linear(x, weight).view(K, H, C)
    ones = torch.ones(K, H, 1)
    expected = sum(_counted(fn, *args)[0] for fn, args in [
        (torch.nn.functional.linear, (x, weight)),
        (torch.bmm, (phi_k.permute(1, 2, 0),
                     torch.cat([dense_values, ones], -1).transpose(0, 1))),
        (torch.bmm, (phi_q.transpose(0, 1), torch.rand(H, R, C + 1))),
    ])
    assert ops == {'torch_geometric_hot.pooled_combination': expected}
    # backward: each product's two operands, the projection recomputed
    # and the gradients of its input and weight
    _, ops, _ = _counted(out.sum().backward)
    projection = 2 * K * F * H * C
    assert ops['torch_geometric_hot.pooled_combination_backward'] == \
        2 * (expected - projection) + 3 * projection


def test_pair_light_linear_counts_its_two_products():
    from torch_geometric_hot.data import PairView
    from torch_geometric_hot.ops import native, pair_light_linear
    from torch_geometric_hot.testing import random_graph
    view = PairView.from_data(random_graph(6, 8, seed=0))
    P, n, C_in, C_out = view.num_entries, view.num_nodes, 4, 3
    x, weight = _inputs((P, C_in), (5, C_in, C_out), grad=True)
    if not native.applies(x, weight):  # the gathered terms' one product
        total, ops, out = _counted(pair_light_linear, x, view, weight)
        assert ops == {'aten.mm': 2 * P * 5 * C_in * C_out}
        _, ops, _ = _counted(out.sum().backward)
        assert ops == {'aten.mm': 2 * 2 * P * 5 * C_in * C_out}
        return
    total, ops, out = _counted(pair_light_linear, x, view, weight)
    forward = 2 * C_in * C_out * (2 * P + 3 * n)
    assert ops == {'torch_geometric_hot.pair_light_linear': forward}
    # the products of [x W_2 | x W_3] and x_diag [W_1 | W_4 | W_5]
    dense, _, _ = _counted(lambda: (x @ weight[1:3].permute(1, 0, 2)
                                    .reshape(C_in, -1),
                                    x[:n] @ weight[[0, 3, 4]]
                                    .permute(1, 0, 2).reshape(C_in, -1)))
    assert total == dense
    _, ops, _ = _counted(out.sum().backward)
    assert ops == {'torch_geometric_hot.pair_light_linear_backward':
                   2 * forward}


def test_grouped_softmax_counts_its_pairs():
    from torch_geometric_hot.ops.grouped_softmax_attention import (
        grouped_softmax_attention, softmax_groups)

    # groups of 2 and 3 queries with 4 and 1 keys: 11 pairs
    groups = softmax_groups(torch.tensor([0, 1, 0, 1, 1]),
                            torch.tensor([0, 0, 1, 0, 0]),
                            torch.arange(5), 2, [], [])
    q, k, v = _inputs((5, 2, 3), (5, 2, 3), (5, 2, 4), grad=True)
    total, ops, out = _counted(grouped_softmax_attention, q, k, v, groups)
    assert ops == {'torch_geometric_hot.grouped_softmax_attention':
                   2 * 11 * 2 * (3 + 4)}
    _, ops, _ = _counted(out.sum().backward)
    assert ops == {'torch_geometric_hot.grouped_softmax_attention_backward':
                   2 * 11 * 2 * (3 * 3 + 2 * 4)}

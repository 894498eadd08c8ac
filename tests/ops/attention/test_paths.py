"""Every path of the dispatch table against the reference beside it,
forced through use_path: HOT class attention (every order the paths run,
both attentions) and TokenGT's softmax attention, outputs and gradients in
float64, on a batch of graphs of very different sizes, without dropout and
with it (one scheme on every path: the same factors for a seed fixed by
torch.manual_seed)."""
import pytest
import torch

from torch_geometric_hot.data import PairView
from torch_geometric_hot.nn import HOTConv
from torch_geometric_hot.ops import native, use_path
from torch_geometric_hot.ops.attention import dispatch
from torch_geometric_hot.ops.attention.tokens import \
    per_graph_softmax_attention
from torch_geometric_hot import testing

ORDERS = [(2, 2), (2, 1), (2, 0), (1, 1), (1, 0), (1, 2), (1, 3)]
REFERENCE = {'softmax': 'pairs', 'kernel': 'pooled'}
# the device type the rule decides for: the tensors' (the CPU), or a GPU's
DEVICE_TYPES = [None, 'cuda']


def fast_paths(operation: str, attention: str):
    return [path.name for path in dispatch.PATHS
            if operation in path.operations and
            attention in path.attentions and
            path.name != REFERENCE[attention]]


def hot_cases():
    for attention in ('softmax', 'kernel'):
        for path in fast_paths('hot', attention):
            yield attention, path


def run_hot(conv: HOTConv, data, path: str, device_type=None):
    x = (data.pair_x if conv.in_order == 2 else data.x).clone()
    x.requires_grad_(True)
    torch.manual_seed(2)  # dropout's seed
    with use_path(path, device_type=device_type):
        out = conv(x, PairView.from_data(data),
                   getattr(data, 'hyperedge_index', None))
    weight = torch.randn(out.shape, dtype=out.dtype,
                         generator=torch.Generator().manual_seed(1))
    grads = torch.autograd.grad((out * weight).sum(),
                                [x] + list(conv.parameters()),
                                allow_unused=True)
    return [out] + [g for g in grads if g is not None]


def skip_unsupported(path: str, device_type: str, out_order: int) -> None:
    if path == 'grouped' and (device_type == 'cuda'
                              or not native.available()):
        pytest.skip('the native CPU kernels do not run this')
    if path == 'packed' and out_order > 2:
        pytest.skip('the packed path runs orders 0, 1 and 2')


@pytest.mark.parametrize('orders', ORDERS)
@pytest.mark.parametrize('attention,path', list(hot_cases()))
@pytest.mark.parametrize('device_type', DEVICE_TYPES)
@pytest.mark.parametrize('dropout', [0.0, 0.3])
@pytest.mark.parametrize('size_scaler', ['none', 'log'])
def test_hot_path_equals_its_reference(orders, attention, path,
                                       device_type, dropout, size_scaler):
    in_order, out_order = orders
    skip_unsupported(path, device_type, out_order)
    data = testing.skewed_batch(out_order, channels=6)
    torch.manual_seed(0)
    conv = HOTConv(6, 5, in_order, out_order, heads=2, head_channels=3,
                   attention=attention, seed=0, dropout=dropout,
                   size_scaler=size_scaler).double()
    with torch.no_grad():  # no zero bias: every output row is compared
        conv.bias.normal_()
    expected = run_hot(conv, data, REFERENCE[attention])
    actual = run_hot(conv, data, path, device_type)
    assert len(actual) == len(expected)
    for a, b in zip(actual, expected):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)
    assert expected[0].abs().sum() > 0
    if dropout:  # dropout drew: not the output without it, nor another seed
        conv.dropout = 0.0
        plain = run_hot(conv, data, REFERENCE[attention])[0]
        assert not torch.allclose(expected[0], plain)
        conv.eval()
        assert torch.allclose(run_hot(conv, data, path, device_type)[0],
                              plain)


@pytest.mark.parametrize('path', fast_paths('tokens', 'softmax'))
@pytest.mark.parametrize('dropout', [0.0, 0.3])
def test_token_path_equals_its_reference(path, dropout):
    if path == 'grouped' and not native.available():
        pytest.skip('no native kernels')
    gen = torch.Generator().manual_seed(0)
    sizes = [3, 1, 4, 0, 2, 40, 3, 5, 1, 2, 6, 4]
    token_batch = torch.cat([torch.full((s, ), g) for g, s in
                             enumerate(sizes)])
    token_batch = token_batch[torch.randperm(token_batch.numel(),
                                             generator=gen)]
    qkv = [torch.randn(token_batch.numel(), 2, 3, generator=gen,
                       dtype=torch.float64, requires_grad=True)
           for _ in range(3)]

    def run(path, dropout=dropout):
        torch.manual_seed(3)  # dropout's seed
        out = per_graph_softmax_attention(*qkv, token_batch, len(sizes),
                                          dropout, path=path)
        return [out, *torch.autograd.grad(out.square().sum(), qkv)]

    expected = run('pairs')
    for a, b in zip(run(path), expected):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)
    if dropout:  # dropout drew
        assert not torch.allclose(expected[0], run('pairs', 0.0)[0])


def every_path(operation: str):
    for attention in ('softmax', 'kernel'):
        for path in dispatch.PATHS:
            if operation in path.operations and attention in path.attentions:
                yield attention, path.name


@pytest.mark.parametrize('orders', ORDERS)
@pytest.mark.parametrize('attention,path', list(every_path('hot')))
@pytest.mark.parametrize('device_type', DEVICE_TYPES)
def test_hot_path_equivariant_and_batch_independent(orders, attention, path,
                                                    device_type):
    # each path on its own (its layouts group graphs by size): equivariant
    # on a random graph, and every graph's rows alone as in a batch of
    # graphs of different sizes
    in_order, out_order = orders
    skip_unsupported(path, device_type, out_order)
    torch.manual_seed(0)
    conv = HOTConv(3, 4, in_order, out_order, heads=2, head_channels=3,
                   attention=attention, seed=0,
                   size_scaler='log').double().eval()
    with torch.no_grad():
        conv.bias.normal_()

    def run(data):
        with use_path(path, device_type=device_type):
            return testing.run_layer(conv, data)

    data = testing.attach_order_inputs(testing.random_graph(7, 9), out_order,
                                       seed=3)
    testing.assert_permutation_equivariant(
        run, data, 'node' if out_order == 1 else 'other')
    graphs = [testing.attach_order_inputs(g, out_order, seed=k)
              for k, g in enumerate(testing.edge_case_graphs(3) +
                                    [testing.random_graph(16, 30, 3)])
              if g.num_nodes >= out_order]
    testing.assert_batch_independent(run, graphs,
                                     testing.rows_per_graph(out_order))


@pytest.mark.parametrize('path', [name for _, name in every_path('tokens')
                                  if name != 'pooled'])
@pytest.mark.parametrize('device_type', DEVICE_TYPES)
def test_token_path_equivariant_and_batch_independent(path, device_type):
    if path == 'grouped' and (device_type == 'cuda'
                              or not native.available()):
        pytest.skip('the native CPU kernels do not run this')
    gen = torch.Generator().manual_seed(0)
    sizes = [3, 1, 4, 0, 2, 20, 5]
    token_batch = torch.cat([torch.full((s, ), g) for g, s in
                             enumerate(sizes)])
    qkv = [torch.randn(token_batch.numel(), 2, 3, generator=gen,
                       dtype=torch.float64) for _ in range(3)]

    def run(qkv, token_batch, num_graphs):
        with use_path(path, device_type=device_type):
            return per_graph_softmax_attention(*qkv, token_batch,
                                               num_graphs)

    out = run(qkv, token_batch, len(sizes))
    perm = torch.randperm(token_batch.numel(), generator=gen)
    torch.testing.assert_close(
        run([t[perm] for t in qkv], token_batch[perm], len(sizes)),
        out[perm], rtol=1e-10, atol=1e-10)
    for g in range(len(sizes)):
        mine = token_batch == g
        alone = run([t[mine] for t in qkv], token_batch[mine] * 0, 1)
        torch.testing.assert_close(alone, out[mine], rtol=1e-10,
                                   atol=1e-10)


def test_forced_path_that_does_not_apply_lists_every_reason():
    data = testing.skewed_batch(2, channels=6)
    conv = HOTConv(6, 5, 2, 2, heads=2, attention='softmax').double()
    with pytest.raises(ValueError, match='packed') as error:
        with use_path('packed'):
            conv(data.pair_x, PairView.from_data(data),
                 return_attention_weights=True)
    for path in dispatch.PATHS:
        assert f'  {path.name}: ' in str(error.value)
    with pytest.raises(ValueError, match="'paths' must be names"):
        with use_path('no-such-path'):
            pass
    with pytest.raises(ValueError, match="'path' must be one of"):
        per_graph_softmax_attention(*[torch.randn(2, 1, 2)] * 3,
                                    torch.zeros(2, dtype=torch.long), 1,
                                    path='no-such-path')


def test_forced_paths_apply_to_the_calls_they_run():
    # 'packed' (HOT only) leaves TokenGT's attention to the rule, and the
    # operations argument confines the paths to one operation
    problem = dispatch.problem('tokens', 'softmax', (), torch.device('cpu'))
    default = dispatch.choose(problem)
    with use_path('packed'):
        assert dispatch.choose(problem) == default
    with use_path('pairs', operations=['hot']):
        assert dispatch.choose(problem) != 'pairs'
    with use_path('pairs'):
        assert dispatch.choose(problem) == 'pairs'


def test_direct_readings_are_forced_per_block_and_kept_when_nested():
    assert dispatch.direct_readings() == dispatch.DIRECT_READINGS
    # the rule off the CPU: every group through its summary
    assert dispatch.direct_readings('cuda') == dispatch.SUMMARIES_ONLY
    with use_path(direct=dispatch.DIRECT_READINGS):
        assert dispatch.direct_readings('cuda') == dispatch.DIRECT_READINGS
    with use_path(direct=dispatch.SUMMARIES_ONLY):
        assert dispatch.direct_readings() == dispatch.SUMMARIES_ONLY
        with use_path('pairs'):  # the paths forced, the rule kept
            assert dispatch.direct_readings() == dispatch.SUMMARIES_ONLY
    assert dispatch.direct_readings() == dispatch.DIRECT_READINGS
    with pytest.raises(ValueError, match="'direct' must be a Direct"):
        with use_path(direct=0):
            pass

r"""Hostile input to every public entry point: a clear error naming the
argument, raised before any work, or the correct (possibly empty) output.
The table in ``docs/robustness.md`` lists these cases."""
import threading

import pytest
import torch
from torch_geometric.data import Batch, Data

from torch_geometric_hot.data.targets import resolve_targets
import torch_geometric_hot.ops.attention.padded as global_softmax
from torch_geometric_hot.data import NodeView, PairView
from torch_geometric_hot.models import HOTGraphModel, HybridGPS, \
    InvariantMLP, TokenGT
from torch_geometric_hot.nn import (HOTConv, HOTLayer, HOTNodeConv,
                                    SimplexIndexer, SimplicialAttention,
                                    TokenGTEncoder,
                                    TokenGTEmbedding, TokenGTLayer,
                                    TokenSelfAttention)
from torch_geometric_hot.ops import native, use_backend
from torch_geometric_hot.validation import (SizeLimitError,
                                            current_size_limit, size_limit,
                                            validating, validation)
from torch_geometric_hot.ops import key_groups, size_buckets
from torch_geometric_hot.ops.attention.pairs import softmax_class_attention
from torch_geometric_hot.ops.attention.padded import \
    global_block_attention
from torch_geometric_hot.ops.basis import basis
from torch_geometric_hot.ops.scatter import current_backend
from torch_geometric_hot.validation import check_features, \
    on_checked_features
from torch_geometric_hot.testing import (attach_order_inputs,
                                         global_class_cases, random_graph)
from torch_geometric_hot.transforms import AddHyperedgeView, AddSimplexView

from robust_cases import CASES, make, prepare
from robust_graphs import CHANNELS

ORDERS = [(1, 0), (1, 1), (1, 2), (2, 0), (2, 1), (2, 2)]
EDGES = torch.tensor([[0, 1, 1, 2, 3], [1, 0, 2, 1, 4]])
TWO_GRAPHS = torch.tensor([0, 0, 0, 1, 1])


def _input(layer, view):
    rows = view.num_entries if layer.in_order == 2 else view.num_nodes
    return torch.randn(rows, layer.in_channels, dtype=torch.float64)


@pytest.mark.parametrize('mode', ['auto', 'off'])
@pytest.mark.parametrize('attention', ['softmax', 'kernel'])
@pytest.mark.parametrize('orders', ORDERS)
def test_empty_graph_gives_empty_output(orders, attention, mode):
    view = PairView.build(torch.empty(2, 0, dtype=torch.long), 0)
    for layer in (HOTConv(CHANNELS, 3, *orders, attention=attention),
                  HOTLayer(CHANNELS, *orders, attention=attention)):
        layer = layer.double()
        with native.use_native(mode):
            out = layer(_input(getattr(layer, 'attn', layer), view), view)
        assert out.shape == (1 if orders[1] == 0 else 0, out.size(1))
        assert torch.isfinite(out).all()


def test_empty_graph_kernel_equals_softmax():
    # no key anywhere: both attentions are 0, the output is the bias
    view = PairView.build(torch.empty(2, 0, dtype=torch.long), 0)
    for k, l in ORDERS:
        torch.manual_seed(0)
        soft = HOTConv(CHANNELS, 3, k, l).double()
        torch.manual_seed(0)
        kern = HOTConv(CHANNELS, 3, k, l, attention='kernel').double()
        x = _input(soft, view)
        torch.testing.assert_close(kern(x, view), soft(x, view))


@pytest.mark.parametrize('orders', ORDERS)
def test_kernel_attention_under_bfloat16_autocast(orders):
    view = PairView.build(EDGES, 5, TWO_GRAPHS)
    conv = HOTConv(CHANNELS, 3, *orders, heads=2, attention='kernel', seed=0)
    x = _input(conv, view).float()
    with torch.no_grad():
        expected = conv(x, view)
        with torch.autocast('cpu', dtype=torch.bfloat16):
            out = conv(x, view)
    torch.testing.assert_close(out.float(), expected, atol=0.1, rtol=0.1)


def _batch_calls(batch, inferred: bool):
    # every entry point that takes graph ids, called with 'batch' (and 2
    # graphs; with inferred, also those that count the graphs themselves)
    x = torch.randn(5, CHANNELS)
    pair = PairView.build(EDGES, 5)
    yield lambda: HOTConv(CHANNELS, 3, 1, 1)(x, NodeView(5, batch, 2))
    yield lambda: HOTLayer(CHANNELS, 2, 2)(
        torch.randn(pair.num_entries, CHANNELS),
        PairView.build(EDGES, 5, batch, 2))
    yield lambda: TokenGTEncoder(CHANNELS, 8, 1)(x, EDGES, batch=batch,
                                                 num_graphs=2)
    if inferred:
        yield lambda: HOTConv(CHANNELS, 3, 1, 1)(x, batch)
        yield lambda: SimplicialAttention(CHANNELS)(x, batch=batch)
        yield lambda: SimplexIndexer(CHANNELS)(x, 2, batch)


@pytest.mark.parametrize('batch', [torch.tensor([0, 0, 0, 1, 2]),
                                   torch.tensor([0, 0, -1, 1, 1])],
                         ids=['too-large', 'negative'])
def test_graph_id_out_of_range_is_an_error(batch):
    for call in _batch_calls(batch, inferred=bool((batch < 0).any())):
        with pytest.raises(ValueError, match="'batch' holds graph ids"):
            call()
    layer = TokenSelfAttention(CHANNELS)
    with pytest.raises(ValueError, match="'token_batch' holds graph ids"):
        layer(torch.randn(5, CHANNELS), batch, 2)


@pytest.mark.parametrize('layer', [
    SimplexIndexer(CHANNELS, k=2),
    SimplicialAttention(CHANNELS, candidates='indexer', k=2)
], ids=['SimplexIndexer', 'SimplicialAttention-indexer'])
def test_indexer_batch_errors(layer):
    x = torch.randn(4, CHANNELS)

    def call(batch):
        return layer(x, 2, batch) if isinstance(layer, SimplexIndexer) \
            else layer(x, batch=batch)

    with pytest.raises(ValueError, match="'batch' must be sorted"):
        call(torch.tensor([1, 0, 1, 0]))
    with pytest.raises(ValueError, match="'batch' holds graph ids"):
        call(torch.tensor([-1, 0, 0, 0]))
    with pytest.raises(ValueError, match="'batch' must be a vector with one "
                       "graph id per row \\(4\\)"):
        call(torch.tensor([0, 0, 0]))


@pytest.mark.parametrize('capacity', [None, 0.5], ids=['all', 'routed'])
@pytest.mark.parametrize('candidates', ['dense', 'neighbours', 'walks',
                                        'indexer'])
def test_simplicial_edge_index_out_of_range(candidates, capacity):
    # the router restricts the edges to its nodes before any candidate
    # generator reads them: checked on entry, whatever reads them
    layer = SimplicialAttention(CHANNELS, candidates=candidates, k=2,
                                capacity=capacity)
    with pytest.raises(ValueError, match="'edge_index' has node indices in "
                       "\\[0, 7\\] but the graph has 5 nodes"):
        layer(torch.randn(5, CHANNELS), torch.tensor([[0, 1, 7], [1, 0, 2]]))


def _cross_graph_calls():
    # two graphs of 3 nodes; the edge (2, 3) joins them
    x = torch.randn(6, CHANNELS)
    edge_index = torch.tensor([[0, 1, 2, 3, 4], [1, 0, 3, 4, 5]])
    batch = torch.tensor([0, 0, 0, 1, 1, 1])
    pair_index = torch.cat([torch.arange(6).repeat(2, 1), edge_index], 1)
    hot = HOTConv(CHANNELS, CHANNELS, 2, 2)
    simplicial = SimplicialAttention(CHANNELS, candidates='neighbours', k=2)
    embedding = TokenGTEmbedding(CHANNELS, CHANNELS, node_id='random',
                                 node_id_dim=4, seed=0)
    return {
        'PairView.build': ('edge_index', lambda: PairView.build(
            edge_index, 6, batch)),
        'PairView': ('pair_index', lambda: PairView(pair_index, 6, batch)),
        'HOTConv': ('edge_index', lambda: hot(
            torch.randn(11, CHANNELS), PairView.build(edge_index, 6, batch))),
        'SimplicialAttention': ('edge_index', lambda: simplicial(
            x, edge_index, batch)),
        'TokenGTEmbedding': ('edge_index', lambda: embedding(
            x, edge_index, batch=batch)),
    }


@pytest.mark.parametrize('entry', list(_cross_graph_calls()))
def test_edges_between_graphs_are_an_error(entry):
    name, call = _cross_graph_calls()[entry]
    with pytest.raises(ValueError, match=f"'{name}' connects nodes of "
                       "different graphs"):
        call()
    with validation(False):  # the check is a value check
        try:
            call()
        except ValueError as error:
            assert 'different graphs' not in str(error)


@pytest.mark.parametrize('capacity', [None, 0.5], ids=['all', 'routed'])
def test_simplicial_positions_of_the_wrong_length(capacity):
    layer = SimplicialAttention(CHANNELS, head_channels=3,
                                form='determinant', capacity=capacity)
    with pytest.raises(ValueError, match="'pos' must have one row per node "
                       "\\(5\\), got \\[3\\]"):
        layer(torch.randn(5, CHANNELS), pos=torch.arange(3))


@pytest.mark.parametrize('layer', [TokenSelfAttention(CHANNELS, 2),
                                   TokenSelfAttention(CHANNELS, 2,
                                                      'performer'),
                                   TokenGTLayer(CHANNELS, 2)],
                         ids=['softmax', 'performer', 'TokenGTLayer'])
def test_tokens(layer):
    empty = layer(torch.randn(0, CHANNELS), torch.zeros(0, dtype=torch.long),
                  1)
    assert empty.shape == (0, CHANNELS)
    x = torch.randn(3, CHANNELS)
    with pytest.raises(ValueError, match="'token_batch' must be a vector "
                       "with one graph id per row \\(3\\)"):
        layer(x, torch.zeros(2, dtype=torch.long), 1)
    with pytest.raises(TypeError, match="'token_batch' must be an integer"):
        layer(x, torch.zeros(3), 1)


def test_switches_are_per_thread():
    # a mode set in one thread is not seen by another, and overlapping
    # blocks in two threads each restore their own
    entered, leave = threading.Event(), threading.Event()
    seen = {}

    def hold():
        try:
            with native.use_native('off'), use_backend('torch'), \
                    validation(False), size_limit(7):
                seen['inside'] = (native._current_mode(), current_backend(),
                                  validating(), current_size_limit())
                entered.set()
                leave.wait(60)
        finally:
            entered.set()

    before = (native._current_mode(), current_backend(), validating(),
              current_size_limit())
    thread = threading.Thread(target=hold)
    thread.start()
    entered.wait(60)
    try:
        assert seen.get('inside') == ('off', 'torch', False, 7)
        assert (native._current_mode(), current_backend(), validating(),
                current_size_limit()) == before
        with native.use_native('on' if native.available() else 'auto'):
            leave.set()
            thread.join()
        assert native._current_mode() == before[0]
    finally:
        leave.set()
        thread.join()


def test_star_candidates_hit_the_size_limit():
    leaves = 10**4
    hub = torch.stack([torch.zeros(leaves, dtype=torch.long),
                       torch.arange(1, leaves + 1)])
    star = Data(edge_index=torch.cat([hub, hub.flip(0)], 1),
                num_nodes=leaves + 1)
    for candidates in ('neighbours', 'walks', 'dense'):
        with pytest.raises(SizeLimitError, match="size limit of "
                           "100,000,000; raise it with"):
            AddSimplexView(2, candidates)(star.clone())
    small = Data(edge_index=star.edge_index[:, star.edge_index.max(0).values
                                            <= 20], num_nodes=21)
    with size_limit(100):
        with pytest.raises(SizeLimitError):
            AddSimplexView(2, 'neighbours')(small.clone())
    with size_limit(3 * 420):  # 20^2 + 20 tuples of 3 nodes
        out = AddSimplexView(2, 'neighbours')(small.clone())
    assert out.simplex_index.size(1) == 20**2 + 20


def test_hyperedge_candidates_hit_the_size_limit():
    complete = torch.combinations(torch.arange(30), 2).t()
    data = Data(edge_index=complete, num_nodes=30)
    with size_limit(1000), pytest.raises(SizeLimitError, match='4-cliques'):
        AddHyperedgeView(4)(data.clone())


def test_size_limit_guards_dense_blocks():
    x = torch.randn(40, CHANNELS)
    with size_limit(1000), pytest.raises(SizeLimitError, match='indexer'):
        SimplexIndexer(CHANNELS, k=2)(x, 2)
    two = torch.tensor([0] * 39 + [1])
    attention = TokenSelfAttention(CHANNELS)
    with native.use_native('off'), size_limit(500), \
            pytest.raises(SizeLimitError, match='padded'):
        attention(x, two, 2)  # padded blocks (the native kernel pads none)


def test_size_limit_guards_enumerated_softmax_pairs(monkeypatch):
    # the local classes of 2->2 softmax attention enumerate the (query,
    # key) pairs of a row or column: a hub of degree L gives about L^2
    leaves = 40
    hub = torch.stack([torch.zeros(leaves, dtype=torch.long),
                       torch.arange(1, leaves + 1)])
    edge_index = torch.cat([hub, hub.flip(0)], 1)

    def fresh():  # a view without kept pairs
        view = PairView.build(edge_index, leaves + 1)
        x = torch.randn(view.num_entries, CHANNELS)
        return resolve_targets(x, view, 2, 2)

    view, targets = fresh()
    q, k, v = (torch.randn(view.num_entries, 2, 3) for _ in range(3))
    built = []
    pairs = key_groups.group_pairs
    monkeypatch.setattr(key_groups, 'group_pairs',
                        lambda *args: built.append(1) or pairs(*args))
    for cls in (c for c in basis(2, 2) if c.kind == 'local'):
        target = targets[cls.part]
        args = (cls, target, view, 2, q[:target.num_rows], k, v)
        out, (index, _) = softmax_class_attention(*args)
        elements = index.size(1) * 2 * 9  # the pairs it kept, H x 3 d
        match = (f"softmax attention of class {cls.name} over its .* "
                 f"\\(query, key\\) pairs")
        for on_view in (fresh()[0], view):  # enumerating, or kept pairs
            built.clear()
            with size_limit(elements - 1), pytest.raises(SizeLimitError,
                                                         match=match):
                softmax_class_attention(cls, target, on_view, *args[3:])
            assert built == []  # raised before enumerating
        with size_limit(100 * elements):
            assert torch.equal(softmax_class_attention(*args)[0], out)


@pytest.mark.parametrize('layout', ['size buckets', 'one block'])
def test_size_limit_guards_global_softmax_blocks(layout, monkeypatch):
    # HOT's global softmax classes on many 3-node graphs and one 30-node
    # graph: size buckets, or one block padded to the largest graph. The
    # limit counts exactly the padded query, key and value elements either
    # layout allocates, and is checked before any slot or block is built.
    if layout == 'one block':
        monkeypatch.setattr(size_buckets, 'BUCKET_GAIN', float('inf'))
    built = []

    def spy(module, name):
        original = getattr(module, name)

        def record(x, *args):
            out = original(x, *args)
            if x.is_floating_point():
                built.extend(out if isinstance(out, list) else [out])
            return out

        monkeypatch.setattr(module, name, record)

    spy(global_softmax, 'padded_blocks')
    slots = size_buckets.bucket_slots
    monkeypatch.setattr(size_buckets, 'bucket_slots',
                        lambda *args: built.append('slots') or slots(*args))
    graphs = [random_graph(3, 2, seed=s) for s in range(8)]
    data = Batch.from_data_list([
        attach_order_inputs(g, 2, seed=i)
        for i, g in enumerate(graphs + [random_graph(30, 70, seed=9)])
    ])
    cls, target, view, q, k, v = next(global_class_cases(data, 2, 2, 2, 3))

    def attend():
        return global_block_attention(
            q, k, v, *key_groups.attention_index(
                cls, target, view, 2))

    expected = attend()
    assert 'slots' in built
    padded = sum(b.numel() for b in built if isinstance(b, torch.Tensor))
    assert padded > q.numel()
    built.clear()
    with size_limit(padded):
        assert torch.equal(attend(), expected)
    built.clear()
    with size_limit(padded - 1), pytest.raises(
            SizeLimitError, match=f"global softmax attention's padded "
            f"blocks \\(9 graphs in {1 if layout == 'one block' else 2} "
            f"size buckets.*above the size limit of {padded - 1:,}; "
            f"raise it with"):
        attend()
    assert built == []


@pytest.mark.parametrize('case', CASES, ids=[c.name for c in CASES])
def test_non_float_or_mismatched_x_names_x(case):
    layer = make(case, torch.float32)
    data = prepare(Data(x=torch.randn(3, CHANNELS), edge_index=EDGES[:, :4]
                        .clamp(max=2), edge_attr=torch.randn(4, CHANNELS),
                        num_nodes=3), case)
    if getattr(layer, 'in_order', 1) == 2:  # x is a pair tensor
        view = PairView.build(data.edge_index, 3)

        def run(x):
            return layer(x, view)

        x = torch.randn(view.num_entries, CHANNELS)
    else:
        def run(x):
            return case.run(layer, data.clone().update({'x': x}))

        x = data.x
    for bad in (x.long(), x.half()):
        with pytest.raises(TypeError, match="'x'"):
            run(bad)
    with pytest.raises(ValueError, match="'x' must have"):
        run(x[:, :3])


def test_tokengt_in_bfloat16_and_fixed_identifiers_in_eval():
    x = torch.randn(5, CHANNELS)
    encoder = TokenGTEncoder(CHANNELS, 8, 1).to(torch.bfloat16)
    assert torch.isfinite(encoder(x.bfloat16(), EDGES).node.float()).all()
    for node_id in ('orf', 'random'):
        encoder = TokenGTEncoder(CHANNELS, 8, 1, node_id=node_id).eval()
        first = encoder(x, EDGES, batch=TWO_GRAPHS).node
        assert torch.equal(first, encoder(x, EDGES, batch=TWO_GRAPHS).node)


@pytest.mark.parametrize('attention', ['softmax', 'kernel'])
def test_nan_is_an_error_and_stays_in_its_graph_without_checks(attention):
    view = PairView.build(EDGES, 5, TWO_GRAPHS)
    conv = HOTConv(CHANNELS, 3, 2, 1, attention=attention, seed=0).double()
    x = _input(conv, view)
    x[view.diag_pos[0], 1] = float('nan')
    with pytest.raises(ValueError, match="'x' holds NaN"):
        conv(x, view)
    with validation(False):
        out = conv(x, view)
    assert torch.isnan(out[:3]).all()  # documented: its whole graph
    alone = PairView.build(EDGES[:, -1:] - 3, 2)
    torch.testing.assert_close(out[3:], conv(x[view.entry_batch == 1],
                                             alone))


def test_models_scan_their_input_once_and_still_refuse_nan(monkeypatch):
    # the scan is torch.isfinite of the features' sum
    scans = []
    isfinite = torch.isfinite
    monkeypatch.setattr(torch, 'isfinite',
                        lambda t: scans.append(1) or isfinite(t))
    batch = Batch.from_data_list([
        Data(x=torch.randn(3, CHANNELS), edge_index=EDGES[:, :2]),
        Data(x=torch.randn(2, CHANNELS), edge_index=EDGES[:, -1:] - 3)])
    encoder = torch.nn.Linear(CHANNELS, 8)
    models = [
        HOTGraphModel(8, 2, num_layers=3, node_encoder=encoder),
        InvariantMLP(8, 2, num_layers=3, node_encoder=encoder),
        TokenGT(CHANNELS, 8, 2, num_layers=3),
    ]
    for model in models:
        scans.clear()
        model(batch.x, batch.edge_index, batch=batch.batch)
        assert len(scans) <= 2, (model, len(scans))  # input, encoded input
        x = batch.x.clone()
        x[4, 0] = float('nan')
        with pytest.raises(ValueError, match='holds NaN'):
            model(x, batch.edge_index, batch=batch.batch)
    with validation(True):
        on_checked_features(check_features, torch.full((2, 2), float('nan')))
        with pytest.raises(ValueError, match='holds NaN'):
            check_features(torch.full((2, 2), float('nan')))


def test_large_finite_features_pass_the_finite_check():
    check_features(torch.full((4, 3), 3e38))  # the sum overflows, no entry


@pytest.mark.parametrize('case', CASES, ids=[c.name for c in CASES])
def test_state_dict_reload_is_bit_identical(case):
    layer = make(case)
    torch.manual_seed(1)
    reloaded = case.make().double().eval()
    reloaded.load_state_dict(layer.state_dict())
    data = prepare(Data(x=torch.randn(5, CHANNELS, dtype=torch.float64),
                        edge_index=EDGES,
                        edge_attr=torch.randn(5, CHANNELS,
                                              dtype=torch.float64),
                        num_nodes=5), case)
    with torch.no_grad():
        for a, b in zip(case.run(layer, data), case.run(reloaded, data)):
            assert torch.equal(a, b)


def _view_calls(x, edge_index, edge_attr, batch, view):
    # every entry point that takes a view beside the tensors it was built
    # from
    torch.manual_seed(0)
    hot = HOTGraphModel(CHANNELS, 2, num_layers=1, heads=2)
    mlp = InvariantMLP(CHANNELS, 2, num_layers=1)
    node = HOTNodeConv(CHANNELS, 3, edge_dim=CHANNELS)
    gps = HybridGPS(CHANNELS, 2, num_layers=1, edge_dim=CHANNELS)
    for model in (hot, mlp, node, gps):
        yield lambda m=model: m.eval()(x, edge_index, edge_attr, batch,
                                       view=view)


@pytest.mark.parametrize('other', ['edges', 'graph ids', 'edge count'])
def test_view_of_another_batch_is_an_error(other):
    # a view built for another batch of as many nodes: its structure, not
    # the tensors', would be used
    x, own_attr = torch.randn(5, CHANNELS), torch.randn(5, CHANNELS)
    view = PairView.build(EDGES, 5, TWO_GRAPHS)
    edge_index, edge_attr, batch = EDGES, own_attr, TWO_GRAPHS
    if other == 'edges':
        edge_index = torch.tensor([[0, 1, 2, 3, 3], [1, 2, 0, 4, 4]])
        match = "'edge_index' is not the edges 'view' was built from"
    elif other == 'graph ids':
        view = PairView.build(EDGES, 5)
        match = "'batch' is not the graph ids 'view' was built with"
    else:
        edge_index, edge_attr = EDGES[:, :4], edge_attr[:4]
        match = "'edge_index' has shape \\[2, 4\\] but 'view' was built " \
            "from 5 edges"
    for call in _view_calls(x, edge_index, edge_attr, batch, view):
        with pytest.raises(ValueError, match=match):
            call()
    for call in _view_calls(x, EDGES, own_attr, None, view):
        call()  # the view's own edges, no graph ids: its batch


def test_tokengt_edge_attr_of_another_dtype_or_with_nan_names_it():
    x, edge_attr = torch.randn(5, CHANNELS), torch.randn(5, CHANNELS)
    model = TokenGT(CHANNELS, 8, 2, num_layers=1, edge_dim=CHANNELS)
    encoder = TokenGTEncoder(CHANNELS, 8, 1, edge_dim=CHANNELS)
    for call in (model, lambda *a: encoder(*a).graph):
        for bad in (edge_attr.half(), edge_attr.double()):
            with pytest.raises(TypeError, match="'edge_attr' has dtype .* "
                               "cast one to the other \\(edge_attr.to"):
                call(x, EDGES, bad, TWO_GRAPHS)
        bad = edge_attr.clone()
        bad[3, 1] = float('inf')
        with pytest.raises(ValueError, match="'edge_attr' holds NaN or "
                           "infinite values \\(first in row 3\\)"):
            call(x, EDGES, bad, TWO_GRAPHS)


def _graph_models():
    def lin():
        return torch.nn.Linear(CHANNELS, CHANNELS)
    return [
        HOTGraphModel(CHANNELS, 2, num_layers=1, node_encoder=lin(),
                      edge_encoder=lin()),
        TokenGT(CHANNELS, CHANNELS, 2, num_layers=1, edge_dim=CHANNELS),
        HybridGPS(CHANNELS, 2, num_layers=1, in_channels=CHANNELS,
                  edge_dim=CHANNELS),
        HybridGPS(CHANNELS, 2, num_layers=1, global_block='tokengt',
                  in_channels=CHANNELS, edge_dim=CHANNELS),
        InvariantMLP(CHANNELS, 2, node_encoder=lin(), edge_encoder=lin()),
    ]


@pytest.mark.parametrize('model', _graph_models(),
                         ids=['hot', 'tokengt', 'gps-hot', 'gps-tokengt',
                              'invariant-mlp'])
def test_no_batch_means_graph_zero_of_num_graphs(model):
    # batch=None puts every node in graph 0; num_graphs=2 adds an empty
    # graph 1, exactly as an explicit batch of zeros does
    torch.manual_seed(0)
    model.eval()
    x, edge_attr = torch.randn(5, CHANNELS), torch.randn(5, CHANNELS)
    zeros = torch.zeros(5, dtype=torch.long)
    for num_graphs in (None, 1, 2):
        out = model(x, EDGES, edge_attr, None, num_graphs=num_graphs)
        assert out.shape == (num_graphs or 1, 2)
        assert torch.equal(out, model(x, EDGES, edge_attr, zeros,
                                      num_graphs=num_graphs or 1))
    with pytest.raises(ValueError, match="'num_graphs' is 0 but there are 5 "
                       "rows and no 'batch'"):
        model(x, EDGES, edge_attr, None, num_graphs=0)

r"""No tensor of a forward pass, a backward pass or a transform is created on
the default device: with the default device set to ``meta``, every model
and transform still runs on inputs of the test device, and every output and
gradient stays there. A tensor created inside the library without
``device=`` (say ``torch.arange(n)`` in a ``forward``) would land on
``meta`` and fail here, on a machine without a GPU as well."""
from typing import Callable, Dict

import pytest
import torch
from torch import Tensor
from torch_geometric.data import Batch, Data

from torch_geometric_hot.models import (HOTGraphModel, HOTHyperedgeModel,
                                        HOTNodeModel, HOTSetToGraph,
                                        HybridGPS, InvariantMLP, TokenGT)
from torch_geometric_hot.nn import HOTNodeConv, SimplicialAttention
from torch_geometric_hot.testing import edge_case_graphs, random_graph
from torch_geometric_hot.transforms import (AddHyperedgeView,
                                            AddLaplacianNodeId,
                                            AddOrthogonalNodeId,
                                            AddRandomNodeId,
                                            AddSecondOrderView,
                                            AddSimplexView)


BATCHES = {
    # a batch of the small edge-case graphs and one larger graph: the
    # layers take different paths on each (size buckets or one padded
    # block of tokens, packed or sparse HOT attention)
    'small':
    lambda: edge_case_graphs(edge_dim=4, dtype=torch.float),
    'large':
    lambda: [random_graph(60, 200, 4, edge_dim=4, dtype=torch.float, seed=1)],
}


def batch_on(kind: str, device) -> Batch:
    graphs = [
        AddHyperedgeView(3, max_candidates=200)(AddSecondOrderView()(g))
        for g in BATCHES[kind]()
    ]
    return Batch.from_data_list(graphs).to(device)


def _hot(cls, attention, **kwargs):
    return cls(4, 2, num_layers=1, heads=2, attention=attention, seed=0,
               **kwargs)


def _hot_call(model, b):
    return model(b.x, b.edge_index, b.edge_attr, b.batch)


def _tokengt(node_id, attention):
    return TokenGT(4, 8, 3, num_layers=1, heads=2, edge_dim=4,
                   node_id=node_id, node_id_dim=4, attention=attention,
                   eigvec_dropout=0.2, seed=0)


def _simplicial(candidates, form):
    return SimplicialAttention(
        4, heads=1, head_channels=6, order=2, candidates=candidates,
        capacity=0.5, form=form,
        indexer_loss='kl' if candidates == 'indexer' else None)


def _simplicial_call(model, b):
    pos = torch.arange(b.num_nodes, device=b.x.device) if (
        model.form == 'determinant') else None
    return model(b.x, b.edge_index, b.batch, pos=pos)


MODELS: Dict[str, tuple] = {}
for _attention in ('kernel', 'softmax'):
    for _cls in (HOTGraphModel, HOTNodeModel):
        MODELS[f'{_cls.__name__}-{_attention}'] = (
            lambda c=_cls, a=_attention: _hot(
                c, a, edge_encoder=torch.nn.Identity()), _hot_call)
    MODELS[f'HOTSetToGraph-{_attention}'] = (
        lambda a=_attention: _hot(HOTSetToGraph, a),
        lambda m, b: m(b.x, b.edge_index, b.batch))
    MODELS[f'HOTHyperedgeModel-{_attention}'] = (
        lambda a=_attention: _hot(HOTHyperedgeModel, a, k=3),
        lambda m, b: m(b.x, b.hyperedge_index, b.batch))
for _node_id in ('orf', 'laplacian', 'random', None):
    for _attention in ('softmax', 'performer'):
        MODELS[f'TokenGT-{_node_id}-{_attention}'] = (
            lambda n=_node_id, a=_attention: _tokengt(n, a), _hot_call)
for _candidates in ('dense', 'neighbours', 'walks', 'indexer'):
    for _form in ('multilinear', 'determinant'):
        MODELS[f'SimplicialAttention-{_candidates}-{_form}'] = (
            lambda c=_candidates, f=_form: _simplicial(c, f),
            _simplicial_call)
MODELS['InvariantMLP'] = (lambda: InvariantMLP(
    8, 3, num_layers=2, node_encoder=torch.nn.Linear(4, 8),
    edge_encoder=torch.nn.Linear(4, 8)), _hot_call)
MODELS['HOTNodeConv'] = (lambda: HOTNodeConv(4, 8, heads=2, edge_dim=4,
                                             seed=0), _hot_call)
for _block, _attn in (('hot', {'attention': 'softmax'}),
                      ('hot', {'attention': 'kernel'}),
                      ('tokengt', {'node_id': 'laplacian'}),
                      ('tokengt', {'node_id': 'orf'})):
    MODELS[f'HybridGPS-{_block}-{list(_attn.values())[0]}'] = (
        lambda b=_block, a=_attn: HybridGPS(
            8, 2, num_layers=1, global_block=b, heads=2, in_channels=4,
            edge_dim=4, attn_kwargs=dict(a, node_id_dim=4) if b ==
            'tokengt' else a, seed=0), _hot_call)


def tensors(out) -> list:
    if isinstance(out, Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in tensors(o)]
    if isinstance(out, Data):
        return [v for v in out.values() if isinstance(v, Tensor)]
    return [t for t in vars(out).values() if isinstance(t, Tensor)] if (
        hasattr(out, '__dict__')) else []


@pytest.mark.parametrize('name', sorted(MODELS))
@pytest.mark.parametrize('training', [True, False])
@pytest.mark.parametrize('kind', sorted(BATCHES))
def test_model_creates_nothing_on_the_default_device(name, training, kind,
                                                     device):
    build, call = MODELS[name]
    torch.manual_seed(0)
    model = build().to(device).train(training)
    batch = batch_on(kind, device)
    with torch.device('meta'):
        out = tensors(call(model, batch))
        assert out and all(t.device == batch.x.device for t in out)
        loss = sum(t.float().sum() for t in out if t.is_floating_point())
        if training and loss.requires_grad:
            loss.backward()
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    assert all(g.device == batch.x.device for g in grads)


TRANSFORMS: Dict[str, Callable] = {
    repr(t): t
    for t in (AddSecondOrderView(pair_x=True), AddHyperedgeView(3),
              AddHyperedgeView(3, max_candidates=5),
              AddLaplacianNodeId(4), AddLaplacianNodeId(4,
                                                        dense_threshold=2),
              AddOrthogonalNodeId(4, seed=0), AddOrthogonalNodeId(4),
              AddRandomNodeId(4, seed=1), AddSimplexView(2, 'dense'),
              AddSimplexView(2, 'walks'), AddSimplexView(2, 'neighbours'))
}


@pytest.mark.parametrize('name', sorted(TRANSFORMS))
def test_transform_creates_nothing_on_the_default_device(name, device):
    data = random_graph(8, 12, edge_dim=2, dtype=torch.float, device=device)
    before = set(data.keys())
    with torch.device('meta'):
        out = TRANSFORMS[name](data.clone())
    added = [out[key] for key in set(out.keys()) - before]
    assert added and all(t.device == data.x.device for t in added)

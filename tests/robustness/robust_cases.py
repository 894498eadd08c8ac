r"""Every public layer as a case of the robustness suite: how to build it
(seeded), how to run it on a (batched) graph, and the level of each output
(``'node'``, ``'edge'``, ``'graph'`` or ``'hyperedge_index'`` rows)."""
from dataclasses import dataclass
from typing import Callable, Optional, Tuple

import torch
from torch import Tensor
from torch_geometric.data import Data

from torch_geometric_hot.data import PairView
from torch_geometric_hot.nn import (EquivariantLinear, ExpertChoiceRouter,
                                    HOTConv, HOTConv1toK, HOTLayer,
                                    SimplicialAttention, TokenGTEncoder,
                                    TokenGTLayer, TokenSelfAttention)
from torch_geometric_hot.testing import distinct_tuples

from robust_graphs import CHANNELS

Outputs = Tuple[Tensor, ...]


@dataclass
class Case:
    name: str
    make: Callable[[], torch.nn.Module]
    run: Callable[[torch.nn.Module, Data], Outputs]
    levels: Tuple[str, ...]
    #: the layer needs each graph's nodes contiguous in the batch
    sorted_batch: bool = False
    #: for the permutation property, when the layer breaks ties by
    #: position (the indexer's top-k): the layer without the tie-break
    tie_free: Optional[Callable[[], torch.nn.Module]] = None
    #: the layer selects nodes or pairs by score (top-k, top fraction):
    #: bfloat16 rounding may flip a selection between close scores
    selects: bool = False


def _batch(data: Data) -> Tuple[Tensor, int]:
    batch = getattr(data, 'batch', None)
    if batch is None:
        return torch.zeros(data.num_nodes, dtype=torch.long,
                           device=data.x.device), 1
    return batch, int(data.num_graphs)


def _view(data: Data) -> PairView:
    batch, num_graphs = _batch(data)
    return PairView.build(data.edge_index, data.num_nodes, batch, num_graphs)


def _hyperedges(data: Data) -> Tensor:
    # up to 4 triples of distinct nodes of one graph, per graph
    batch, num_graphs = _batch(data)
    columns = []
    for g in range(num_graphs):
        nodes = (batch == g).nonzero().view(-1)
        if nodes.numel() >= 3:
            columns.append(nodes[distinct_tuples(nodes.numel(), 3)[:, :4]])
    return torch.cat(columns, 1) if columns else torch.empty(
        3, 0, dtype=torch.long)


def _order_outputs(out: Tensor, view: PairView, out_order: int) -> Outputs:
    # entry rows as (diagonal: one per node, one per raw edge): both keep
    # their meaning under node permutations and batching
    if out_order == 2:
        return out[view.diag_pos], out[view.edge_entry]
    return (out, )


def _order_levels(out_order: int) -> Tuple[str, ...]:
    return {2: ('node', 'edge'), 1: ('node', ), 0: ('graph', )}.get(
        out_order, ('hyperedge_index', ))


def _higher_order(layer, data: Data) -> Outputs:
    view = _view(data)
    x = view.lift(data.x, data.edge_attr) if layer.in_order == 2 else \
        data.x.to(view.batch.device)
    hyperedges = data.hyperedge_index if layer.out_order >= 3 else None
    return _order_outputs(layer(x, view, hyperedges), view, layer.out_order)


def _hot_cases():
    cases = []
    for attention in ('softmax', 'kernel'):
        for k, m in ((1, 0), (1, 1), (1, 2), (2, 0), (2, 1), (2, 2)):
            cases.append(Case(
                f'HOTConv{k}to{m}-{attention}',
                lambda k=k, m=m, a=attention: HOTConv(
                    CHANNELS, CHANNELS, k, m, heads=2, attention=a,
                    seed=0),
                _higher_order, _order_levels(m)))
        cases.append(Case(
            f'HOTConv1toK-{attention}',
            lambda a=attention: HOTConv1toK(CHANNELS, CHANNELS, 3,
                                            attention=a, seed=0),
            _higher_order, _order_levels(3)))
    for k, m in ((1, 1), (2, 2), (2, 1)):
        cases.append(Case(f'HOTLayer{k}to{m}',
                          lambda k=k, m=m: HOTLayer(CHANNELS, k, m, heads=2),
                          _higher_order, _order_levels(m)))
    for k, m in ((1, 0), (1, 1), (1, 2), (2, 0), (2, 1), (2, 2)):
        cases.append(Case(f'EquivariantLinear{k}to{m}',
                          lambda k=k, m=m: EquivariantLinear(
                              CHANNELS, CHANNELS, k, m),
                          _higher_order, _order_levels(m)))
    return cases


def _simplicial(layer, data: Data) -> Outputs:
    batch, _ = _batch(data)
    return (layer(data.x, data.edge_index, batch), )


def _router(layer, data: Data) -> Outputs:
    batch, _ = _batch(data)
    index, gate = layer(data.x, batch)
    return (layer.combine(data.x, index, gate, data.x[index]), )


def _tokens(layer, data: Data) -> Outputs:
    batch, num_graphs = _batch(data)
    return (layer(data.x, batch, num_graphs), )


def _encoder(layer, data: Data) -> Outputs:
    batch, num_graphs = _batch(data)
    out = layer(data.x, data.edge_index, data.edge_attr, batch,
                num_graphs=num_graphs)
    return out.graph, out.node, out.edge


def _other_cases():
    def simplicial(candidates: str, k: int = 2):
        return lambda: SimplicialAttention(CHANNELS, heads=2, order=2,
                                           candidates=candidates, k=k,
                                           include_self=True)

    cases = [
        Case(f'SimplicialAttention-{c}', simplicial(c), _simplicial,
             ('node', ), sorted_batch=True)
        for c in ('dense', 'neighbours', 'walks')
    ]
    # ReLU scores tie at 0: top-2 then keeps the first in node order, so
    # the permutation property keeps every pair (k above the graph sizes)
    cases.append(Case('SimplicialAttention-indexer',
                      simplicial('indexer'), _simplicial, ('node', ),
                      sorted_batch=True, selects=True,
                      tie_free=simplicial('indexer', k=16)))
    cases.append(Case('SimplicialAttention-determinant-routed',
                      lambda: SimplicialAttention(
                          CHANNELS, heads=1, head_channels=3,
                          form='determinant', capacity=0.5),
                      _simplicial, ('node', ), sorted_batch=True,
                      selects=True))
    cases.append(Case('ExpertChoiceRouter',
                      lambda: ExpertChoiceRouter(CHANNELS, 0.5), _router,
                      ('node', ), selects=True))
    for attention in ('softmax', 'performer'):
        cases.append(Case(f'TokenSelfAttention-{attention}',
                          lambda a=attention: TokenSelfAttention(
                              CHANNELS, 2, a, seed=0), _tokens, ('node', )))
        cases.append(Case(f'TokenGTLayer-{attention}',
                          lambda a=attention: TokenGTLayer(
                              CHANNELS, 2, attention=a, seed=0), _tokens,
                          ('node', )))
        cases.append(Case(f'TokenGTEncoder-{attention}',
                          lambda a=attention: TokenGTEncoder(
                              CHANNELS, 8, 2, heads=2, edge_dim=CHANNELS,
                              node_id=None, attention=a, seed=0, seb=True),
                          _encoder, ('graph', 'node', 'edge')))
    return cases


CASES = _hot_cases() + _other_cases()


def make(case: Case, dtype: torch.dtype = torch.float64,
         tie_free: bool = False) -> torch.nn.Module:
    r"""The case's layer (its :obj:`tie_free` variant if asked and there
    is one), seeded, in eval mode, in :obj:`dtype`."""
    torch.manual_seed(0)
    build = case.tie_free if tie_free and case.tie_free else case.make
    return build().to(dtype).eval()


def prepare(data: Data, case: Case) -> Data:
    r"""Attaches what the case reads besides the graph."""
    if case.levels == ('hyperedge_index', ):
        data = data.clone()
        data.hyperedge_index = _hyperedges(data)
    return data

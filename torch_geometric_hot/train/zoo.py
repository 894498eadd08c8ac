r"""The models the training command knows, all built at one width and depth
and called one way: ``model(x, edge_index, edge_attr, batch, num_graphs=…,
**extras)``, where the extras (a pair view, node identifiers) come from
what the model's pre-transform attached to every molecule."""
from typing import Callable, Dict, NamedTuple, Optional

import torch
from torch import Tensor
from torch_geometric.data import Data
from torch_geometric.nn import GINEConv, GPSConv, global_mean_pool
from torch_geometric.transforms import VirtualNode

from torch_geometric_hot.data import PairView
from torch_geometric_hot.models import (HOTGraphModel, HybridGPS,
                                        InvariantMLP, TokenGT)
from torch_geometric_hot.nn import CategoricalEncoder
from torch_geometric_hot.transforms import (AddLaplacianNodeId,
                                            AddOrthogonalNodeId,
                                            AddSecondOrderView)

HEADS = 4
NODE_ID_DIM = 16


def atom_encoder(channels: int) -> CategoricalEncoder:
    r"""OGB's categorical atom features (9 columns) → :obj:`channels`."""
    from ogb.utils.features import get_atom_feature_dims
    return CategoricalEncoder(get_atom_feature_dims(), channels)


def bond_encoder(channels: int) -> CategoricalEncoder:
    r"""OGB's categorical bond features (3 columns) → :obj:`channels`."""
    from ogb.utils.features import get_bond_feature_dims
    return CategoricalEncoder(get_bond_feature_dims(), channels)


class Settings(NamedTuple):
    r"""What every model is built with."""
    hidden: int
    layers: int
    out: int
    dropout: float
    seed: int


class ModelSpec(NamedTuple):
    r"""One entry of :data:`MODELS`.

    Attributes:
        build (callable): :class:`Settings` → module.
        pre_transform (callable, optional): Applied once to the dataset.
        extras (callable): batch → keyword arguments of the forward call.
        description (str): One line for ``--help``.
    """
    build: Callable[[Settings], torch.nn.Module]
    pre_transform: Optional[Callable]
    extras: Callable[[Data], Dict]
    description: str


def _no_extras(batch: Data) -> Dict:
    return {}


def _pair_view(batch: Data) -> Dict:
    # the view the loader planned (PlannedLoader), else one built here
    view = getattr(batch, 'pair_view', None)
    return {'view': PairView.from_data(batch) if view is None else view}


def _node_id(name: str) -> Callable[[Data], Dict]:
    return lambda batch: {'node_id': batch[name],
                          'plans': getattr(batch, 'plans', None)}


def plans_batches(spec: 'ModelSpec') -> bool:
    r"""Whether a model's batches carry index work the loader can do
    ahead (a pair view, TokenGT's token layout)."""
    return spec.extras is not _no_extras


class SpecCall:
    r"""Calls a model of :data:`MODELS` on a batch (:func:`predict`), by
    the model's name (picklable, for the loader's workers)."""
    def __init__(self, name: str) -> None:
        self.name = name

    def __call__(self, model: torch.nn.Module, batch: Data) -> Tensor:
        return predict(model, MODELS[self.name], batch)


class GINE(torch.nn.Module):
    r"""The GIN baseline: categorical encoders, :obj:`layers`
    :class:`~torch_geometric.nn.conv.GINEConv` blocks (two-layer MLP, batch
    norm, ReLU, dropout), mean pooling and a linear head; with
    :obj:`gps=True` every block is PyG's
    :class:`~torch_geometric.nn.conv.GPSConv` (the same GINE block plus
    multi-head attention over the molecule)."""
    def __init__(self, s: Settings, gps: bool = False) -> None:
        super().__init__()
        self.node_encoder = atom_encoder(s.hidden)
        self.edge_encoder = bond_encoder(s.hidden)
        self.convs = torch.nn.ModuleList()
        self.norms = torch.nn.ModuleList()
        for _ in range(s.layers):
            mlp = torch.nn.Sequential(
                torch.nn.Linear(s.hidden, s.hidden),
                torch.nn.BatchNorm1d(s.hidden), torch.nn.ReLU(),
                torch.nn.Linear(s.hidden, s.hidden))
            conv = GINEConv(mlp, train_eps=True)
            if gps:
                conv = GPSConv(s.hidden, conv, heads=HEADS,
                               dropout=s.dropout, attn_type='multihead')
            self.convs.append(conv)
            self.norms.append(torch.nn.BatchNorm1d(s.hidden))
        self.gps = gps
        self.dropout = torch.nn.Dropout(s.dropout)
        self.head = torch.nn.Linear(s.hidden, s.out)

    def forward(self, x: Tensor, edge_index: Tensor, edge_attr: Tensor,
                batch: Tensor, num_graphs: Optional[int] = None) -> Tensor:
        h = self.node_encoder(x)
        e = self.edge_encoder(edge_attr)
        for conv, norm in zip(self.convs, self.norms):
            if self.gps:
                h = conv(h, edge_index, batch, edge_attr=e)
            else:
                h = self.dropout(norm(conv(h, edge_index, e)).relu())
        return self.head(global_mean_pool(h, batch, num_graphs))


class VirtualNodeKeepingTargets(VirtualNode):
    r"""PyG's :class:`~torch_geometric.transforms.VirtualNode`, with the
    graph-level target :obj:`y` left as it is (the transform would take a
    one-atom molecule's :obj:`y` for a node attribute and extend it)."""
    def forward(self, data: Data) -> Data:
        y = data.get('y')
        data = super().forward(data)
        if y is not None:
            data.y = y
        return data


def _hot(attention: str):
    def build(s: Settings) -> torch.nn.Module:
        return HOTGraphModel(s.hidden, s.out, num_layers=s.layers,
                             heads=HEADS, node_encoder=atom_encoder(s.hidden),
                             edge_encoder=bond_encoder(s.hidden),
                             attention=attention, dropout=s.dropout,
                             seed=s.seed)
    return build


def _tokengt(node_id: str, attention: str):
    def build(s: Settings) -> torch.nn.Module:
        return TokenGT(0, s.hidden, s.out, s.layers, task='graph',
                       heads=HEADS, node_encoder=atom_encoder(s.hidden),
                       edge_encoder=bond_encoder(s.hidden), node_id=node_id,
                       node_id_dim=NODE_ID_DIM, attention=attention,
                       dropout=s.dropout, seed=s.seed)
    return build


def _mlp(s: Settings) -> torch.nn.Module:
    return InvariantMLP(s.hidden, s.out, num_layers=s.layers,
                        node_encoder=atom_encoder(s.hidden),
                        edge_encoder=bond_encoder(s.hidden),
                        dropout=s.dropout)


def _hybrid_gps(global_block: str):
    def build(s: Settings) -> torch.nn.Module:
        return HybridGPS(s.hidden, s.out, num_layers=s.layers,
                         global_block=global_block, heads=HEADS,
                         node_encoder=atom_encoder(s.hidden),
                         edge_encoder=bond_encoder(s.hidden),
                         dropout=s.dropout, seed=s.seed)
    return build


_LAPLACIAN = (AddLaplacianNodeId(NODE_ID_DIM), _node_id('lap_node_id'))
_ORF = (AddOrthogonalNodeId(NODE_ID_DIM, seed=0), _node_id('orf_node_id'))

#: Every model of the training command, by its ``--model`` name.
MODELS: Dict[str, ModelSpec] = {
    'hot-kernel': ModelSpec(_hot('kernel'), AddSecondOrderView(), _pair_view,
                            'HOTGraphModel, kernel attention (linear cost)'),
    'hot-softmax': ModelSpec(_hot('softmax'), AddSecondOrderView(),
                             _pair_view, 'HOTGraphModel, softmax attention'),
    'tokengt-lap': ModelSpec(_tokengt('laplacian', 'softmax'), *_LAPLACIAN,
                             'TokenGT, Laplacian identifiers, softmax'),
    'tokengt-lap-performer': ModelSpec(
        _tokengt('laplacian', 'performer'), *_LAPLACIAN,
        'TokenGT, Laplacian identifiers, Performer attention'),
    'tokengt-orf': ModelSpec(_tokengt('orf', 'softmax'), *_ORF,
                             'TokenGT, orthogonal random identifiers, '
                             'softmax'),
    'tokengt-orf-performer': ModelSpec(
        _tokengt('orf', 'performer'), *_ORF,
        'TokenGT, orthogonal random identifiers, Performer attention'),
    'mlp': ModelSpec(_mlp, AddSecondOrderView(), _pair_view,
                     'InvariantMLP: equivariant linear layers on the pair '
                     'view'),
    'gin': ModelSpec(lambda s: GINE(s), None, _no_extras,
                     'PyG GINEConv stack (baseline)'),
    'gin-vn': ModelSpec(lambda s: GINE(s), VirtualNodeKeepingTargets(),
                        _no_extras, 'PyG GINEConv stack on graphs with '
                        "PyG's VirtualNode transform (baseline)"),
    'gps': ModelSpec(lambda s: GINE(s, gps=True), None, _no_extras,
                     'PyG GPSConv (GINE + multi-head attention, baseline)'),
    'gps-hot': ModelSpec(_hybrid_gps('hot'), AddSecondOrderView(),
                         _pair_view, 'HybridGPS: GINE + HOT pair attention '
                         '(HOTNodeConv, softmax) per layer'),
    'gps-tokengt': ModelSpec(_hybrid_gps('tokengt'), *_LAPLACIAN,
                             'HybridGPS: GINE + TokenGT attention over node '
                             'and edge tokens (Laplacian identifiers) per '
                             'layer'),
}


def predict(model: torch.nn.Module, spec: ModelSpec, batch: Data) -> Tensor:
    r"""The model's predictions on a batch, :obj:`[num_graphs, out]`."""
    return model(batch.x, batch.edge_index, batch.edge_attr, batch.batch,
                 num_graphs=batch.num_graphs, **spec.extras(batch))

r"""The models the training command knows, all built at one width and depth
and called one way: ``model(x, edge_index, edge_attr, batch, num_graphs=…,
**extras)``, where the extras (a pair view, node identifiers) come from
what the model's pre-transform attached to every molecule."""
from typing import Any, Callable, Dict, NamedTuple, Optional, Tuple

import torch
from torch import Tensor
from torch_geometric.data import Data
from torch_geometric.nn import (GINEConv, GPSConv, global_add_pool,
                                global_mean_pool)
from torch_geometric.transforms import VirtualNode

from torch_geometric_hot.data import PairView
from torch_geometric_hot.models import (HOTGraphModel, HybridGPS,
                                        InvariantMLP, TokenGT)
from torch_geometric_hot.nn import CategoricalEncoder, HOTLayer
from torch_geometric_hot.train.gated_gcn import GatedGCNConv
from torch_geometric_hot.transforms import (AddLaplacianNodeId,
                                            AddOrthogonalNodeId,
                                            AddSecondOrderView)

HEADS = 4
NODE_ID_DIM = 16


def atom_encoder(channels: int,
                 vocabulary: Optional[int] = None) -> CategoricalEncoder:
    r"""OGB's categorical atom features (9 columns) → :obj:`channels`; with
    :obj:`vocabulary`, every column gets that many rows (Graphormer's and
    TokenGT's embedding tables: 512 per column) instead of its own
    number of categories."""
    from ogb.utils.features import get_atom_feature_dims
    dims = get_atom_feature_dims()
    return CategoricalEncoder([vocabulary] * len(dims) if vocabulary
                              else dims, channels)


def bond_encoder(channels: int,
                 vocabulary: Optional[int] = None) -> CategoricalEncoder:
    r"""OGB's categorical bond features (3 columns) → :obj:`channels`
    (:obj:`vocabulary` as in :func:`atom_encoder`)."""
    from ogb.utils.features import get_bond_feature_dims
    dims = get_bond_feature_dims()
    return CategoricalEncoder([vocabulary] * len(dims) if vocabulary
                              else dims, channels)


class Settings(NamedTuple):
    r"""What every model is built with: width, depth, outputs, dropout,
    seed, attention heads, node identifier width and :obj:`options`, the
    ``(name, value)`` pairs of a builder's further hyperparameters (a
    preset's: see :data:`~torch_geometric_hot.train.presets.PRESETS`)."""
    hidden: int
    layers: int
    out: int
    dropout: float
    seed: int
    heads: int = HEADS
    node_id_dim: int = NODE_ID_DIM
    options: Tuple[Tuple[str, Any], ...] = ()


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


def _node_id(name: str, plans: bool = True) -> Callable[[Data], Dict]:
    # TokenGT also reads the token layout the loader planned
    if not plans:
        return lambda batch: {'node_id': batch[name]}
    return lambda batch: {'node_id': batch[name],
                          'plans': getattr(batch, 'plans', None)}


def plans_batches(spec: 'ModelSpec') -> bool:
    r"""Whether a model's batches carry index work the loader can do
    ahead (a pair view, TokenGT's token layout)."""
    return spec.extras is not _no_extras


def planning_settings(s: Settings,
                      spec: Optional['ModelSpec'] = None) -> Settings:
    r"""The settings of the model the loader's workers plan batches with
    (:class:`~torch_geometric_hot.data.ModelPlanner`) for the model
    :obj:`spec` builds: the plans depend on a batch's indices and the
    model's structure, not on its width or depth, so the planning copy has
    8 channels and at most two blocks (the first and the repeated kind);
    its planning pass then costs a fraction of the model's forward pass
    (``docs/ogb.md``). A model on a pair view (:obj:`spec` :obj:`None`
    counts as one) keeps its heads, the 8 channels shared among them (at
    least one each): its packed attention gathers every head's rows by a
    planned index. The others plan with one head. Tested to make the same
    plans as the model for every model of :data:`MODELS`, for a GPU's layout;
    the CPU's kernel-attention plans depend on the channels per head (the
    native kernels' cost rule), so batches for the CPU are planned with
    the model itself."""
    per_head = spec is None or spec.extras is _pair_view
    heads = s.heads if per_head else 1
    channels = max(1, min(8, s.hidden) // heads)  # per head
    options = dict(s.options)
    for name in _HEAD_OPTIONS:
        if name in options:
            options[name] = (options[name] if per_head else 1) \
                if name.endswith('heads') else min(channels, options[name])
    return s._replace(hidden=min(s.hidden, heads * channels), heads=heads,
                      layers=min(s.layers, 2), dropout=0.0,
                      options=tuple(sorted(options.items())))


#: Model options that set heads or channels per head (shrunk by
#: :func:`planning_settings`).
_HEAD_OPTIONS = ('head_channels', 'last_heads', 'last_head_channels')


class SpecCall:
    r"""Calls a model on a batch as its spec says (:func:`predict`), for
    the loader's planning pass."""
    def __init__(self, spec: 'ModelSpec') -> None:
        self.spec = spec

    def __call__(self, model: torch.nn.Module, batch: Data) -> Tensor:
        return predict(model, self.spec, batch)


class GINE(torch.nn.Module):
    r"""The GIN baseline: categorical encoders, :obj:`layers`
    :class:`~torch_geometric.nn.conv.GINEConv` blocks (two-layer MLP, batch
    norm, ReLU, dropout), mean pooling and a linear head; with
    :obj:`gps=True` every block is PyG's
    :class:`~torch_geometric.nn.conv.GPSConv` (the same GINE block plus
    multi-head attention over the molecule).

    :obj:`s.options` may set ``conv='gatedgcn'`` (GPS's local block a
    :class:`~torch_geometric_hot.train.gated_gcn.GatedGCNConv`, as in
    GraphGPS), ``attention_dropout`` (GPS), ``virtual_node=True`` (OGB's
    virtual node: a per-graph vector, zero at first, added to every atom
    before each block and updated between blocks by a two-layer MLP of
    the sum of the atoms and itself), ``pooling='sum'`` and
    ``head_layers`` (hidden layers of the output MLP, each half as wide as
    the one before, as GraphGPS's graph head)."""
    def __init__(self, s: Settings, gps: bool = False) -> None:
        super().__init__()
        options = dict(s.options)
        conv_name = options.get('conv', 'gine')
        if conv_name not in ('gine', 'gatedgcn'):
            raise ValueError(f"option 'conv' must be 'gine' or 'gatedgcn', "
                             f"got {conv_name!r}")
        self.node_encoder = atom_encoder(s.hidden)
        self.edge_encoder = bond_encoder(s.hidden)
        self.convs = torch.nn.ModuleList()
        self.norms = torch.nn.ModuleList()
        for _ in range(s.layers):
            if conv_name == 'gatedgcn':
                conv = GatedGCNConv(s.hidden)
            else:
                mlp = torch.nn.Sequential(
                    torch.nn.Linear(s.hidden, s.hidden),
                    torch.nn.BatchNorm1d(s.hidden), torch.nn.ReLU(),
                    torch.nn.Linear(s.hidden, s.hidden))
                conv = GINEConv(mlp, train_eps=True)
            if gps:
                conv = GPSConv(s.hidden, conv, heads=s.heads,
                               dropout=s.dropout, attn_type='multihead',
                               attn_kwargs={'dropout': options.get(
                                   'attention_dropout', 0.0)})
            self.convs.append(conv)
            self.norms.append(torch.nn.BatchNorm1d(s.hidden))
        self.gps = gps
        self.dropout = torch.nn.Dropout(s.dropout)
        self.virtual_node = None
        if options.get('virtual_node'):
            self.virtual_node = torch.nn.ModuleList([
                torch.nn.Sequential(
                    torch.nn.Linear(s.hidden, s.hidden),
                    torch.nn.BatchNorm1d(s.hidden), torch.nn.ReLU(),
                    torch.nn.Linear(s.hidden, s.hidden),
                    torch.nn.BatchNorm1d(s.hidden), torch.nn.ReLU())
                for _ in range(s.layers - 1)])
        self.pool = global_add_pool if options.get('pooling') == 'sum' \
            else global_mean_pool
        layers, width = [], s.hidden
        for _ in range(options.get('head_layers', 0)):
            layers += [torch.nn.Linear(width, width // 2), torch.nn.ReLU()]
            width //= 2
        self.head = torch.nn.Sequential(*layers,
                                        torch.nn.Linear(width, s.out)) \
            if layers else torch.nn.Linear(width, s.out)

    def forward(self, x: Tensor, edge_index: Tensor, edge_attr: Tensor,
                batch: Tensor, num_graphs: Optional[int] = None) -> Tensor:
        h = self.node_encoder(x)
        e = self.edge_encoder(edge_attr)
        num_graphs = int(batch.max()) + 1 if num_graphs is None and \
            batch.numel() else (num_graphs or 0)
        vn = h.new_zeros(num_graphs, h.size(-1))
        for k, (conv, norm) in enumerate(zip(self.convs, self.norms)):
            if self.virtual_node is not None:
                h = h + vn[batch]
            h_in = h
            if self.gps:
                h = conv(h, edge_index, batch, edge_attr=e)
            else:
                h = self.dropout(norm(conv(h, edge_index, e)).relu())
            if self.virtual_node is not None and k < len(self.virtual_node):
                vn = self.dropout(self.virtual_node[k](
                    global_add_pool(h_in, batch, num_graphs) + vn))
        return self.head(self.pool(h, batch, num_graphs))


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


#: HOT options a variant or preset may set: ``kernel`` (the feature map of
#: kernel attention), ``size_scaler`` (see
#: :class:`~torch_geometric_hot.nn.HOTConv`) and ``norm`` (the blocks'
#: normalisation, see :class:`~torch_geometric_hot.nn.HOTLayer`); besides
#: them ``readout_norm`` (see :class:`~torch_geometric_hot.models.HOTModel`).
HOT_LAYER_OPTIONS = ('kernel', 'size_scaler', 'norm')


def _hot(attention: str):
    # options: head_channels; last_heads and last_head_channels, the heads
    # of the final (order-changing) block (HOT Table 6c)
    def build(s: Settings) -> torch.nn.Module:
        options = dict(s.options)
        kwargs = dict(attention=attention, dropout=s.dropout, seed=s.seed)
        kwargs.update({k: options[k] for k in HOT_LAYER_OPTIONS
                       if k in options})
        if 'readout_norm' in options:
            kwargs['readout_norm'] = options['readout_norm']
        model = HOTGraphModel(s.hidden, s.out, num_layers=s.layers,
                              heads=s.heads,
                              node_encoder=atom_encoder(s.hidden),
                              edge_encoder=bond_encoder(s.hidden),
                              head_channels=options.get('head_channels'),
                              **kwargs)
        if 'last_heads' in options or 'last_head_channels' in options:
            kwargs.pop('readout_norm', None)
            kwargs['norm'] = model.layers[-1].norm
            kwargs['size_scaler'] = model.layers[-1].attn.size_scaler
            model.layers[-1] = HOTLayer(
                s.hidden, 2, 0, options.get('last_heads', s.heads),
                head_channels=options.get('last_head_channels'), **kwargs)
        return model
    return build


#: TokenGT options a preset may set (besides ``ffn_ratio``, the
#: feed-forward width over the token width, and ``feature_vocabulary``).
TOKENGT_OPTIONS = ('attention_dropout', 'drop_path', 'eigvec_dropout',
                   'sign_flip', 'node_id_scale', 'seb')


def _tokengt(node_id: str, attention: str):
    def build(s: Settings) -> torch.nn.Module:
        options = dict(s.options)
        kwargs = {k: options[k] for k in TOKENGT_OPTIONS if k in options}
        if 'ffn_ratio' in options:
            kwargs['ffn_channels'] = max(
                1, round(options['ffn_ratio'] * s.hidden))
        vocabulary = options.get('feature_vocabulary')
        return TokenGT(0, s.hidden, s.out, s.layers, task='graph',
                       heads=s.heads,
                       node_encoder=atom_encoder(s.hidden, vocabulary),
                       edge_encoder=bond_encoder(s.hidden, vocabulary),
                       node_id=node_id, node_id_dim=s.node_id_dim,
                       attention=attention, dropout=s.dropout, seed=s.seed,
                       **kwargs)
    return build


def _mlp(s: Settings) -> torch.nn.Module:
    return InvariantMLP(s.hidden, s.out, num_layers=s.layers,
                        node_encoder=atom_encoder(s.hidden),
                        edge_encoder=bond_encoder(s.hidden),
                        dropout=s.dropout)


def _hybrid_gps(global_block: str):
    def build(s: Settings) -> torch.nn.Module:
        return HybridGPS(s.hidden, s.out, num_layers=s.layers,
                         global_block=global_block, heads=s.heads,
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
    'gps-tokengt': ModelSpec(_hybrid_gps('tokengt'), _LAPLACIAN[0],
                             _node_id('lap_node_id', plans=False),
                             'HybridGPS: GINE + TokenGT attention over node '
                             'and edge tokens (Laplacian identifiers) per '
                             'layer'),
}


def configured(name: str, s: Settings) -> ModelSpec:
    r""":obj:`MODELS[name]`, its pre-transform attaching node identifiers of
    width :obj:`s.node_id_dim` (TokenGT models)."""
    spec = MODELS[name]
    if name.startswith('tokengt-') and s.node_id_dim != NODE_ID_DIM:
        if name.startswith('tokengt-lap'):
            return spec._replace(
                pre_transform=AddLaplacianNodeId(s.node_id_dim),
                extras=_node_id('lap_node_id'))
        return spec._replace(
            pre_transform=AddOrthogonalNodeId(s.node_id_dim, seed=0),
            extras=_node_id('orf_node_id'))
    return spec


def predict(model: torch.nn.Module, spec: ModelSpec, batch: Data) -> Tensor:
    r"""The model's predictions on a batch, :obj:`[num_graphs, out]`."""
    return model(batch.x, batch.edge_index, batch.edge_attr, batch.batch,
                 num_graphs=batch.num_graphs, **spec.extras(batch))

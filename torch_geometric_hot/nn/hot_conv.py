import math
from typing import Dict, Optional, Sequence, Tuple, Union

import torch
from torch import Tensor
from torch.nn import Parameter

from torch_geometric_hot.data.targets import resolve_targets
from torch_geometric_hot.nn.equivariant_linear import EquivariantLinear, \
    run_as_one, stacked_outputs
from torch_geometric_hot.ops.basis import group_by_part, output_parts, \
    select_classes
from torch_geometric_hot.ops.equivariant import in_part_order
from torch_geometric_hot.ops.feature_maps import KERNELS, FeatureMap
from torch_geometric_hot.ops.attention.hot import SIZE_SCALERS, \
    Projection, ValueProjection, hot_class_attention
from torch_geometric_hot.validation import check_features

ATTENTIONS = ('softmax', 'kernel')
Attention = Dict[str, Tuple[Tensor, Tensor]]


class HOTConv(torch.nn.Module):
    r"""Higher-order self-attention :math:`\mathrm{Attn}_{k \to l}` from
    `"Transformers Generalize DeepSets and Can be Extended to Graphs and
    Hypergraphs" <https://arxiv.org/abs/2110.14416>`_ (HOT, Eq. 10--12), on
    sparse input:

    .. math::
        \mathrm{Attn}(\mathbf{A})_{\mathbf{j}} =
        \sum_{\mu \in \text{agg}} \sum_{h=1}^{H}
        \sum_{\mathbf{i} \in \mathcal{G}_\mu(\mathbf{j})}
        \alpha^{h,\mu}_{\mathbf{i},\mathbf{j}}\,
        \mathbf{A}_{\mathbf{i}} \mathbf{W}^{V}_{h,\mu}
        \mathbf{W}^{O}_{h,\mu}
        + L^{\text{light}}(\mathbf{A})_{\mathbf{j}}

    Each aggregating class :math:`\mu` of the equivariant basis attends
    over its own key group :math:`\mathcal{G}_\mu(\mathbf{j})` (the entries
    its linear counterpart sums, distinct-index exclusions included), with
    its own value and output projections per head; the pointwise classes
    stay a light linear term :math:`L^{\text{light}}`. Queries come from a
    light :math:`k \to l` layer on the output elements (an edge query sees
    :math:`A_{ij}, A_{ji}, A_{ii}, A_{jj}`), keys from a light
    :math:`k \to k` layer; an order-0 output uses a learned query per head.

    * ``attention='softmax'``: :math:`\alpha = \mathrm{softmax}(q^\top k /
      \sqrt{d})` over each group, exact; empty groups output 0.
    * ``attention='kernel'``: :math:`\alpha \propto \phi(q)^\top \phi(k)`
      computed from per-node/per-graph summaries in :math:`O(n + m)`; the
      excluded keys are subtracted exactly (``exact_exclusion=True``) or
      ignored (``False``, HOT Eq. 21).

    The classes attend through
    :func:`~torch_geometric_hot.ops.attention.hot.hot_class_attention`, on
    the path the rule of :mod:`~torch_geometric_hot.ops.attention.dispatch`
    picks (all give the same result; ``docs/design.md``, "Paths").

    Args:
        in_channels (int): Input channels.
        out_channels (int): Output channels.
        in_order (int): Input order (1 or 2).
        out_order (int): Output order (0, 1, 2, or k >= 3 from order 1).
        heads (int, optional): Attention heads. (default: :obj:`1`)
        head_channels (int, optional): Channels per head
            (default: :obj:`out_channels // heads`).
        attention (str, optional): ``'softmax'`` or ``'kernel'``.
            (default: ``'softmax'``)
        kernel (str, optional): Feature map of kernel attention,
            ``'favor+'``, ``'relu'`` or ``'elu'``. (default: ``'favor+'``)
        num_features (int, optional): Random features of the kernel
            (default: :math:`\lceil d \ln d \rceil`).
        classes (str or list, optional): Class selection as in
            :class:`EquivariantLinear` (``'local'`` drops the global classes,
            HOT Table 1 "w/o global"). (default: ``'all'``)
        exact_exclusion (bool, optional): Keep the distinct-index exclusions
            in kernel mode. (default: :obj:`True`)
        dropout (float, optional): Dropout on the attention weights
            (softmax) or on each class's attention output (kernel).
            (default: :obj:`0.0`)
        redraw_interval (int, optional): Redraw the random features every
            this many training calls. (default: :obj:`None`)
        seed (int, optional): Seed of the random features.
        bias (bool, optional): Learn output biases. (default: :obj:`True`)
        size_scaler (str, optional): Scales every class's attention output
            at an output element by a function :math:`s` of its key group's
            size :math:`c_\mu(\mathbf{j}) = |\mathcal{G}_\mu(\mathbf{j})|`
            (the count its linear counterpart divides by with
            ``normalize='mean'``): ``'none'`` (:math:`s = 1`, an average,
            as in HOT), ``'log'`` (:math:`\log(1 + c)`, PNA's
            amplification), ``'sqrt'`` (:math:`\sqrt{c}`) or ``'count'``
            (:math:`c`: uniform weights then give the sum, as GIN
            aggregates). An average cannot tell how many keys a group has;
            the scaled outputs can. In float16, ``'count'`` overflows for
            groups of more than 65,504 keys (a graph of over 255 nodes):
            use ``'log'`` or bfloat16 there. (default: ``'none'``)

    Shapes:
        - **input:** :obj:`x` :math:`(P, F_{in})` or :math:`(n, F_{in})`,
          :obj:`view` (a :class:`~torch_geometric_hot.data.PairView` when an
          order is 2, else a :class:`~torch_geometric_hot.data.NodeView`, a
          batch vector or :obj:`None`), :obj:`hyperedge_index`
          :math:`(k, h)` for order k >= 3
        - **output:** :math:`(P, F_{out})`, :math:`(n, F_{out})`,
          :math:`(B, F_{out})` or :math:`(h, F_{out})`; with
          :obj:`return_attention_weights=True` (softmax) also a dict
          ``'{part}/{class}' -> (index [2, pairs], alpha [pairs, H])``
          where :obj:`index` holds (row within the output part, input row).
    """
    def __init__(self, in_channels: int, out_channels: int, in_order: int,
                 out_order: int, heads: int = 1,
                 head_channels: Optional[int] = None,
                 attention: str = 'softmax', kernel: str = 'favor+',
                 num_features: Optional[int] = None,
                 classes: Union[str, Sequence[str]] = 'all',
                 exact_exclusion: bool = True, dropout: float = 0.0,
                 redraw_interval: Optional[int] = None,
                 seed: Optional[int] = None, bias: bool = True,
                 size_scaler: str = 'none') -> None:
        super().__init__()
        if size_scaler not in SIZE_SCALERS:
            raise ValueError(f"'size_scaler' must be one of {SIZE_SCALERS}, "
                             f"got {size_scaler!r}")
        self.size_scaler = size_scaler
        if attention not in ATTENTIONS:
            raise ValueError(f"'attention' must be one of {ATTENTIONS}, got "
                             f"{attention!r}")
        if kernel not in KERNELS:
            raise ValueError(f"'kernel' must be one of {KERNELS}, got "
                             f"{kernel!r}")
        if heads < 1:
            raise ValueError(f"'heads' must be positive, got {heads}")
        head_channels = head_channels or max(out_channels // heads, 1)
        self.in_channels, self.out_channels = in_channels, out_channels
        self.in_order, self.out_order = in_order, out_order
        self.heads, self.head_channels = heads, head_channels
        self.attention, self.kernel = attention, kernel
        self.exact_exclusion = exact_exclusion
        self.dropout = dropout

        selected = select_classes(in_order, out_order, classes)
        self.classes = [c for c in selected if c.aggregating]
        pointwise = [c.name for c in selected if not c.aggregating]
        self._parts = output_parts(out_order)
        self._by_part = group_by_part(self.classes)
        # Positions of each part's classes in self.classes (plain ints:
        # torch.compile cannot trace list.index over frozen dataclasses).
        self._part_index = {
            part: [self.classes.index(c) for c in classes]
            for part, classes in self._by_part.items()
        }
        width = heads * head_channels
        self.lin_light = EquivariantLinear(
            in_channels, out_channels, in_order, out_order, pointwise,
            bias=False) if pointwise else None
        self.lin_key = EquivariantLinear(in_channels, width, in_order,
                                         in_order, 'light')
        if out_order == 0:
            self.lin_query = None
            self.query = Parameter(torch.empty(heads, head_channels))
        else:
            self.lin_query = EquivariantLinear(in_channels, width, in_order,
                                               out_order, 'light')
            self.register_parameter('query', None)
        self.lin_value = torch.nn.Linear(in_channels,
                                         len(self.classes) * width,
                                         bias=False)
        self.lin_out = Parameter(torch.empty(len(self.classes), width,
                                             out_channels))
        self.bias = Parameter(torch.empty(len(self._parts), out_channels)) \
            if bias else None
        self.feature_map = FeatureMap(head_channels, kernel, num_features,
                                      redraw_interval, seed) \
            if attention == 'kernel' else None
        self.reset_parameters()

    def reset_parameters(self) -> None:
        r"""Resets all learnable parameters."""
        for module in (self.lin_light, self.lin_key, self.lin_query,
                       self.lin_value):
            if module is not None:
                module.reset_parameters()
        if self.query is not None:
            torch.nn.init.normal_(self.query, std=self.head_channels**-0.5)
        bound = 1.0 / math.sqrt(self.heads * self.head_channels *
                                max(len(self.classes), 1))
        torch.nn.init.uniform_(self.lin_out, -bound, bound)
        if self.bias is not None:
            torch.nn.init.zeros_(self.bias)

    def redraw_projection(self) -> None:
        r"""Draws new random features (kernel attention)."""
        if self.feature_map is not None:
            self.feature_map.redraw_projection()

    def forward(self, x: Tensor, view=None,
                hyperedge_index: Optional[Tensor] = None,
                return_attention_weights: bool = False
                ) -> Union[Tensor, Tuple[Tensor, Attention]]:
        check_features(x, self.in_channels, self.lin_value.weight.dtype)
        if return_attention_weights and self.attention != 'softmax':
            raise ValueError("'return_attention_weights' needs "
                             "attention='softmax'")
        view, targets = resolve_targets(x, view, self.in_order,
                                        self.out_order, hyperedge_index)
        H, D = self.heads, self.head_channels
        if self.feature_map is not None:
            self.feature_map.step()
        keys, queries, light, bias = self._projections(x, view,
                                                       hyperedge_index)
        keys = keys.view(-1, H, D)
        queries = self._query_rows(queries, view)
        if self.feature_map is None:
            queries = self._in_part_order(queries, view) * D**-0.5
        else:  # keys and queries mapped together where they can be
            key_graph = view.entry_batch if self.in_order == 2 else view.batch
            keys, queries = self.feature_map.keys_and_queries(
                keys, queries, key_graph, view.num_graphs)
            queries = self._in_part_order(queries, view)

        weights: Optional[Attention] = {} if return_attention_weights \
            else None
        values = ValueProjection(x, self.lin_value.weight, H, D)
        parts = list(targets.values())
        slots = [self._part_index.get(name, []) for name in targets]
        out = hot_class_attention(
            self.attention, parts,
            [self._by_part.get(name, []) for name in targets], slots, view,
            self.in_order, self.out_order, queries, keys, values,
            self.exact_exclusion, self.dropout if self.training else 0.0,
            weights, size_scaler=self.size_scaler,
            projection=Projection(self.lin_out, bias, residual=light))
        return (out, weights) if return_attention_weights else out

    def _projections(self, x: Tensor, view,
                     hyperedge_index: Optional[Tensor]
                     ) -> Tuple[Tensor, Optional[Tensor], Optional[Tensor],
                                Optional[Tensor]]:
        r"""The keys, the queries' projection (:obj:`None` at order 0), the
        light layer's output (:obj:`None` without pointwise classes) and the
        bias the output projection still adds. From order 2 to 2 the three
        light layers run as one
        (:func:`~torch_geometric_hot.nn.equivariant_linear.stacked_outputs`),
        the light term with the layer's bias."""
        layers = (self.lin_key, self.lin_query, self.lin_light)
        present = [layer for layer in layers if layer is not None]
        bias = self.bias
        if (self.in_order, self.out_order) == (2, 2):
            biases = None
            if self.lin_light is not None and bias is not None and \
                    run_as_one(present):
                biases, bias = [None] * (len(present) - 1) + [bias], None
            outs = iter(stacked_outputs(present, x, view, biases=biases))
        else:  # the keys keep the input's order
            outs = iter([self.lin_key(x, view)] + [
                layer(x, view, hyperedge_index) for layer in present[1:]])
        return tuple(None if layer is None else next(outs)
                     for layer in layers) + (bias, )

    def _query_rows(self, q: Optional[Tensor], view) -> Tensor:
        r"""The queries :obj:`[rows, H, D]` from their projection :obj:`q`
        (:obj:`None`: the learnt query of order 0, one per graph)."""
        H, D = self.heads, self.head_channels
        if q is None:
            return self.query.unsqueeze(0).expand(view.num_graphs, H, D)
        return q.view(-1, H, D)

    def _in_part_order(self, q: Tensor, view) -> Tensor:
        r"""Query rows of a pair output in the targets' order, one part's
        rows after the other's (diagonal, then off-diagonal entries)."""
        if self.out_order != 2:
            return q
        return in_part_order(q, view)

    def __repr__(self) -> str:
        kernel = f', kernel={self.kernel!r}' if self.feature_map else ''
        return (f'{self.__class__.__name__}({self.in_channels}, '
                f'{self.out_channels}, order={self.in_order}->'
                f'{self.out_order}, heads={self.heads}, '
                f'attention={self.attention!r}{kernel}, '
                f'classes={len(self.classes)})')


def _fixed_orders(name: str, in_order: int, out_order: int):
    def __init__(self, in_channels: int, out_channels: int, **kwargs):
        HOTConv.__init__(self, in_channels, out_channels, in_order,
                         out_order, **kwargs)

    doc = (f"Higher-order attention :math:`\\mathrm{{Attn}}_{{{in_order} "
           f"\\to {out_order}}}`: :class:`HOTConv` with "
           f":obj:`in_order={in_order}, out_order={out_order}`.")
    return type(name, (HOTConv, ), {'__init__': __init__, '__doc__': doc})


HOTConv1to1 = _fixed_orders('HOTConv1to1', 1, 1)
HOTConv1to2 = _fixed_orders('HOTConv1to2', 1, 2)
HOTConv2to2 = _fixed_orders('HOTConv2to2', 2, 2)
HOTConv2to1 = _fixed_orders('HOTConv2to1', 2, 1)
HOTConv2to0 = _fixed_orders('HOTConv2to0', 2, 0)
HOTConv1to0 = _fixed_orders('HOTConv1to0', 1, 0)


class HOTConv1toK(HOTConv):
    r"""Higher-order attention :math:`\mathrm{Attn}_{1 \to k}` onto
    k-uniform hyperedges (:math:`1 + k` classes, HOT App. A.2.2):
    :class:`HOTConv` with :obj:`in_order=1, out_order=k`."""
    def __init__(self, in_channels: int, out_channels: int, k: int,
                 **kwargs) -> None:
        if k < 3:
            raise ValueError(f"'k' must be at least 3 (use HOTConv1to2 or "
                             f"HOTConv1to1 below), got {k}")
        super().__init__(in_channels, out_channels, 1, k, **kwargs)

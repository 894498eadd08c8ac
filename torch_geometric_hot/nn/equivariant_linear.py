import math
from typing import List, Optional, Sequence, Union

import torch
from torch import Tensor
from torch.nn import Parameter

from torch_geometric_hot.data.targets import resolve_targets
from torch_geometric_hot.ops.basis import group_by_part, output_parts, \
    select_classes
from torch_geometric_hot.ops.equivariant import assemble_parts, \
    equivariant_linear
from torch_geometric_hot.ops import mean_linear
from torch_geometric_hot.ops.pair_light_linear import LIGHT_PAIR_CLASSES, \
    pair_light_linear
from torch_geometric_hot.ops.row_selection import select_rows
from torch_geometric_hot.validation import check_features

NORMALIZATIONS = ('sum', 'mean')


class EquivariantLinear(torch.nn.Module):
    r"""The permutation-equivariant linear layer
    :math:`L_{k \to l}` (`Maron et al. 2019
    <https://arxiv.org/abs/1812.09902>`_) on sparse input, as used by
    `Higher-Order Transformers <https://arxiv.org/abs/2111.00862>`_ (HOT,
    Eq. 1):

    .. math::
        L(\mathbf{A})_{\mathbf{j}} = \sum_{\mu} \frac{1}{c_\mu(\mathbf{j})}
        \sum_{\mathbf{i}} \mathbf{B}^{\mu}_{\mathbf{i},\mathbf{j}}
        \mathbf{A}_{\mathbf{i}} \mathbf{W}_{\mu}
        + \sum_{\lambda} \mathbf{C}^{\lambda}_{\mathbf{j}} \mathbf{b}_\lambda

    where :math:`\mu` runs over the equivalence classes (set partitions) of
    the :math:`k + l` index positions, sums range over the **existing**
    entries of the sparse input, and :math:`c_\mu = 1` (``'sum'``) or the
    class's group size (``'mean'``, empty groups give 0). Every class is
    evaluated exactly in :math:`O(n + m)` from node- and graph-level sums
    with the distinct-index exclusions subtracted (``docs/design.md``,
    "The equivariant basis"); no dense
    :math:`[n, n]` tensor is formed. On a complete graph it equals the dense
    layer.

    Orders: 2→2 (15 classes), 2→1 (5), 2→0 (2), 1→1 (2), 1→0 (1), 1→2 (5)
    and 1→k for k-uniform hyperedges (1 + k classes, HOT App. A.2.2).

    Args:
        in_channels (int): Input channels.
        out_channels (int): Output channels.
        in_order (int): Input order, 1 or 2.
        out_order (int): Output order, 0, 1, 2 or k >= 3 (from order 1).
        classes (str or list, optional): ``'all'``, ``'local'`` (no global
            classes), ``'light'`` (pointwise classes only, HOT §4.1),
            ``'aggregating'``, or a list of class names as in
            :mod:`torch_geometric_hot.ops.basis`. (default: ``'all'``)
        normalize (str, optional): ``'sum'`` or ``'mean'``.
            (default: ``'sum'``)
        bias (bool, optional): One bias per output part (bell(l)
            classes: diagonal/off-diagonal for order 2). (default: ``True``)

    Shapes:
        - **input:** :obj:`x` :math:`(P, F_{in})` pair entries (order 2) or
          :math:`(n, F_{in})` nodes (order 1); :obj:`view` a
          :class:`~torch_geometric_hot.data.PairView` (order 2 in or out),
          else a :class:`~torch_geometric_hot.data.NodeView`, a batch vector
          or :obj:`None`; :obj:`hyperedge_index` :math:`(k, h)` for order
          k >= 3.
        - **output:** :math:`(P, F_{out})`, :math:`(n, F_{out})`,
          :math:`(B, F_{out})` or :math:`(h, F_{out})`.
    """
    def __init__(self, in_channels: int, out_channels: int, in_order: int,
                 out_order: int, classes: Union[str, Sequence[str]] = 'all',
                 normalize: str = 'sum', bias: bool = True) -> None:
        super().__init__()
        if normalize not in NORMALIZATIONS:
            raise ValueError(f"'normalize' must be one of {NORMALIZATIONS}, "
                             f"got {normalize!r}")
        if in_channels < 1 or out_channels < 1:
            raise ValueError("'in_channels' and 'out_channels' must be "
                             "positive")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.in_order = in_order
        self.out_order = out_order
        self.normalize = normalize
        self.classes = select_classes(in_order, out_order, classes)
        self._by_part = group_by_part(self.classes)
        self._parts = output_parts(out_order)
        # class positions per output part, fixed here (also keeps
        # torch.compile from tracing list.index over dataclasses)
        self._part_index = {
            part: [self.classes.index(c) for c in classes]
            for part, classes in self._by_part.items()
        }
        # the light 2->2 layer runs as one operation (weights reordered)
        signature = [(c.part, c.terms) for c in self.classes]
        self._light_pair = [signature.index(c) for c in LIGHT_PAIR_CLASSES] \
            if (in_order, out_order) == (2, 2) and normalize == 'sum' and \
            sorted(signature) == sorted(LIGHT_PAIR_CLASSES) else None
        self.weight = Parameter(
            torch.empty(len(self.classes), in_channels, out_channels))
        if bias:
            self.bias = Parameter(torch.empty(len(self._parts),
                                              out_channels))
        else:
            self.register_parameter('bias', None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        r"""Resets all learnable parameters (uniform, scaled by the fan-in
        of each output part)."""
        with torch.no_grad():
            for k, cls in enumerate(self.classes):
                fan_in = self.in_channels * len(self._by_part[cls.part])
                bound = 1.0 / math.sqrt(fan_in)
                self.weight[k].uniform_(-bound, bound)
            if self.bias is not None:
                self.bias.uniform_(-1.0 / math.sqrt(self.in_channels),
                                   1.0 / math.sqrt(self.in_channels))

    def forward(self, x: Tensor, view=None,
                hyperedge_index: Optional[Tensor] = None) -> Tensor:
        check_features(x, self.in_channels, self.weight.dtype)
        view, targets = resolve_targets(x, view, self.in_order,
                                        self.out_order, hyperedge_index)
        if self._light_pair is not None:
            weight = select_rows(self.weight, self._light_pair)
            return pair_light_linear(x, view, weight, self.bias)
        parts = {}
        for p, (name, target) in enumerate(targets.items()):
            classes = self._by_part.get(name, [])
            index = self._part_index.get(name, [])
            out = self._part(x, view, classes,
                             select_rows(self.weight, index), target) \
                if classes else x.new_zeros(target.num_rows,
                                            self.out_channels)
            if self.bias is not None:
                out = out + self.bias[p]
            parts[name] = out
        return assemble_parts(parts, view)

    def _part(self, x: Tensor, view, classes, weight: Tensor,
              target) -> Tensor:
        # one output part; 'mean' on a launch-bound layout: one product of
        # the gathered terms (the class by class loop is the reference)
        if self.normalize == 'mean' and mean_linear.applies(x, classes,
                                                            target):
            return mean_linear.mean_linear(x, view, self.in_order,
                                           classes, weight, target)
        return equivariant_linear(x, view, self.in_order, classes, weight,
                                  target, self.normalize)

    def __repr__(self) -> str:
        return (f'{self.__class__.__name__}({self.in_channels}, '
                f'{self.out_channels}, order={self.in_order}->'
                f'{self.out_order}, classes={len(self.classes)}, '
                f'normalize={self.normalize!r})')


def run_as_one(layers: Sequence[EquivariantLinear]) -> bool:
    r"""Whether :func:`stacked_outputs` runs :obj:`layers` as one layer:
    two or more light 2→2 layers."""
    return len(layers) > 1 and all(layer._light_pair is not None
                                   for layer in layers)


def stacked_outputs(layers: Sequence[EquivariantLinear], x: Tensor,
                    view=None, hyperedge_index: Optional[Tensor] = None,
                    biases: Optional[Sequence[Optional[Tensor]]] = None
                    ) -> List[Tensor]:
    r"""The outputs of several layers on one input, :obj:`[layer(x) for
    layer in layers]`. Light 2→2 layers (those that run as
    :func:`~torch_geometric_hot.ops.pair_light_linear.pair_light_linear`)
    run as one such layer with their weights side by side: the input's
    rows are gathered once for all, and one product gives every output.

    Args:
        layers (list): :class:`EquivariantLinear` layers of one input
            width.
        x (torch.Tensor): Their input.
        view: As for :class:`EquivariantLinear`.
        hyperedge_index (torch.Tensor, optional): As for
            :class:`EquivariantLinear`.
        biases (list, optional): Per layer, a bias :obj:`[2, F_out]`
            (diagonal, then off-diagonal entries) that its output adds,
            or :obj:`None`; only for layers without their own, and only
            where the layers run as one (:func:`run_as_one`).

    :rtype: list of :class:`torch.Tensor`
    """
    if not run_as_one(layers):
        if biases is not None and any(b is not None for b in biases):
            raise ValueError("'biases' needs light 2->2 layers")
        return [layer(x, view, hyperedge_index) for layer in layers]
    first = layers[0]
    check_features(x, first.in_channels, first.weight.dtype)
    view, _ = resolve_targets(x, view, 2, 2, hyperedge_index)
    weight = torch.cat([select_rows(layer.weight, layer._light_pair)
                        for layer in layers], -1)
    own = [layer.bias for layer in layers]
    if biases is not None:
        if len(biases) != len(layers) or any(
                a is not None and b is not None
                for a, b in zip(own, biases)):
            raise ValueError("'biases' must hold one entry per layer, "
                             "None where the layer has its own bias")
        own = [a if b is None else b for a, b in zip(own, biases)]
    bias = None
    if any(b is not None for b in own):
        bias = torch.cat([
            layer.weight.new_zeros(2, layer.out_channels) if b is None
            else b for layer, b in zip(layers, own)], -1)
    out = pair_light_linear(x, view, weight, bias)
    return list(out.split([layer.out_channels for layer in layers], -1))

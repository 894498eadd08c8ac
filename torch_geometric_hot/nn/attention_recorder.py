r"""Reading the attention weights of TokenGT's layers as a model runs."""
from typing import List, Tuple

import torch

from torch_geometric_hot.nn.token_self_attention import (AttentionWeights,
                                                         TokenSelfAttention)


class AttentionRecorder:
    r"""Records the per-head attention weights of every
    :class:`~torch_geometric_hot.nn.TokenSelfAttention` inside
    :obj:`model` (e.g. a :class:`~torch_geometric_hot.models.TokenGT`)
    while the context is open:

    .. code-block:: python

        with AttentionRecorder(model) as recorder:
            model(x, edge_index, edge_attr, batch, node_id=node_id)
        for name, weights in recorder.records:  # one per layer and call
            weights.index, weights.weight       # [2, P], [P, heads]

    Each layer's weights are those its
    :meth:`~torch_geometric_hot.nn.TokenSelfAttention.attention_weights`
    gives on the layer's input, recorded by a forward hook: the forward
    pass itself is unchanged (its fused attention never forms the weights),
    and outside the context the model carries no hook at all. In training
    mode the softmax weights are those before attention dropout.

    Args:
        model (torch.nn.Module): A module holding
            :class:`~torch_geometric_hot.nn.TokenSelfAttention` layers.

    Attributes:
        records (list): ``(layer name, AttentionWeights)`` in the order the
            layers ran.
        layers (list): The names of the recorded layers, in model order.
    """
    def __init__(self, model: torch.nn.Module) -> None:
        self.layers = [name for name, module in model.named_modules()
                       if isinstance(module, TokenSelfAttention)]
        if not self.layers:
            raise ValueError(f"'model' ({type(model).__name__}) has no "
                             f"TokenSelfAttention layer to record")
        self.model = model
        self.records: List[Tuple[str, AttentionWeights]] = []
        self._handles = []

    def _hook(self, name: str):
        def hook(module: TokenSelfAttention, args, kwargs, output) -> None:
            names = ('x', 'token_batch', 'num_graphs')
            inputs = dict(zip(names, args), **{
                k: v for k, v in kwargs.items() if k in names})
            self.records.append((name, module.attention_weights(
                inputs['x'].detach(), inputs['token_batch'],
                inputs['num_graphs'])))
        return hook

    def __enter__(self) -> 'AttentionRecorder':
        modules = dict(self.model.named_modules())
        self._handles = [modules[name].register_forward_hook(
            self._hook(name), with_kwargs=True) for name in self.layers]
        return self

    def __exit__(self, *exc) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []

    def clear(self) -> None:
        r"""Forgets the records so far."""
        self.records = []

    def __repr__(self) -> str:
        return (f'{self.__class__.__name__}({len(self.layers)} layers, '
                f'{len(self.records)} records)')

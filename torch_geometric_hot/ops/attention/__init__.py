r"""Attention: the rule that picks a path
(:mod:`~torch_geometric_hot.ops.attention.dispatch`), the entry points
(:mod:`~torch_geometric_hot.ops.attention.hot`, HOT's class attention;
:mod:`~torch_geometric_hot.ops.attention.tokens`, TokenGT's token
attention) and one module per path of
:data:`~torch_geometric_hot.ops.attention.dispatch.PATHS`, named as the
path: ``grouped``, ``packed``, ``compiled``, ``padded``, ``pairs``,
``pooled``; :mod:`~torch_geometric_hot.ops.attention.dropout` is shared by
all of them.
"""
from torch_geometric_hot.ops.attention.dispatch import PATHS, \
    DirectReadings, choose, use_path

__all__ = ['PATHS', 'DirectReadings', 'choose', 'use_path']

r"""Attention: the rule that picks a path
(:mod:`~torch_geometric_hot.ops.attention.dispatch`) and the entry point
of HOT's class attention (:mod:`~torch_geometric_hot.ops.attention.hot`).
"""
from torch_geometric_hot.ops.attention.dispatch import PATHS, \
    DirectReadings, choose, use_path

__all__ = ['PATHS', 'DirectReadings', 'choose', 'use_path']

r"""The training command for OGB molecule benchmarks
(``python -m torch_geometric_hot.train --help``): every model of
:data:`~torch_geometric_hot.train.zoo.MODELS` through OGB's loaders and
evaluators, on any device, resumable, and under ``torchrun``."""
from torch_geometric_hot.train.cli import build_parser, main, parse_args
from torch_geometric_hot.train.distributed import resolve_device
from torch_geometric_hot.train.zoo import (MODELS, GINE, ModelSpec, Settings,
                                           VirtualNodeKeepingTargets,
                                           predict)

__all__ = [
    'main', 'build_parser', 'parse_args', 'resolve_device', 'MODELS',
    'ModelSpec', 'Settings', 'GINE', 'VirtualNodeKeepingTargets', 'predict'
]

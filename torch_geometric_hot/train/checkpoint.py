r"""Checkpoints that resume a run exactly: model, optimizer, scheduler,
epoch, every random generator's state and the arguments that define the
run. Written atomically (a killed write never leaves a broken file) and
read back with ``torch.load(weights_only=True)``."""
import os
import os.path as osp
import random
from typing import Dict

import numpy as np
import torch

from torch_geometric_hot.ops.seeded_generators import SeededGenerators

LAST, BEST = 'last.pt', 'best.pt'


def _module_generators(model: torch.nn.Module) -> Dict[str,
                                                       SeededGenerators]:
    return {f'{name}.{attr}': value
            for name, module in model.named_modules()
            for attr, value in vars(module).items()
            if isinstance(value, SeededGenerators)}


def rng_state(model: torch.nn.Module) -> Dict:
    r"""The states of torch's (CPU and CUDA), Python's and NumPy's global
    generators and of the seeded generators of :obj:`model`'s modules
    (:class:`~torch_geometric_hot.ops.seeded_generators.SeededGenerators`),
    in types ``weights_only`` loading accepts."""
    kind, keys, pos, has_gauss, gauss = np.random.get_state()
    state = {'torch': torch.get_rng_state(), 'python': random.getstate(),
             'numpy': (kind, torch.from_numpy(keys.astype(np.int64)), pos,
                       has_gauss, gauss),
             'modules': {name: generators.get_state() for name, generators
                         in _module_generators(model).items()}}
    if torch.cuda.is_available():
        state['cuda'] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: Dict, model: torch.nn.Module) -> None:
    torch.set_rng_state(state['torch'])
    random.setstate(state['python'])
    kind, keys, pos, has_gauss, gauss = state['numpy']
    np.random.set_state((kind, keys.numpy().astype(np.uint32), pos,
                         has_gauss, gauss))
    if 'cuda' in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state['cuda'])
    generators = _module_generators(model)
    for name, generator_state in state['modules'].items():
        generators[name].set_state(generator_state)


def save(path: str, payload: Dict) -> None:
    r"""Writes :obj:`payload` to :obj:`path` atomically."""
    tmp = f'{path}.tmp'
    torch.save(payload, tmp)
    os.replace(tmp, path)


def load(run_dir: str) -> Dict:
    r"""The last checkpoint of the run in :obj:`run_dir`; a clear error
    when there is none."""
    path = osp.join(run_dir, LAST)
    if not osp.isfile(path):
        raise FileNotFoundError(f"'--resume': {run_dir} holds no checkpoint "
                                f"({LAST}); pass the folder of one run "
                                f"(<out>/<model>_seed<seed>)")
    return torch.load(path, map_location='cpu', weights_only=True)


#: The arguments that define a run: resuming with any of them changed is
#: refused.
RUN_ARGUMENTS = ('dataset', 'model', 'hidden', 'layers', 'dropout', 'lr',
                 'batch_size', 'epochs', 'seed', 'smoke', 'offline_molecules',
                 'csv', 'target_columns')


def check_same_run(saved: Dict, current: Dict) -> None:
    r"""Raises unless :obj:`current` defines the run :obj:`saved` did."""
    changed = {k: (saved.get(k), current.get(k)) for k in RUN_ARGUMENTS
               if saved.get(k) != current.get(k)}
    if changed:
        lines = ', '.join(f'--{k.replace("_", "-")} {a!r} (now {b!r})'
                          for k, (a, b) in changed.items())
        raise ValueError(f"'--resume': the checkpoint was written by a run "
                         f"with different arguments: {lines}")

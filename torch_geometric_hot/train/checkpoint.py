r"""Checkpoints that resume a run exactly: model, optimizer, scheduler,
epoch, every random generator's state and the arguments that define the
run. Written atomically (a killed write never leaves a broken file) and
read back with ``torch.load(weights_only=True)``."""
import os
import os.path as osp
import random
from typing import Dict, Optional

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


class CheckpointError(ValueError):
    r"""A checkpoint that cannot continue this run: missing, unreadable,
    or written by a run with other arguments (the message is one line
    naming the file or the arguments)."""


#: What a checkpoint must hold.
KEYS = ('model', 'optimizer', 'scheduler', 'epoch', 'step', 'rng', 'args',
        'history')


def load(run_dir: str) -> Dict:
    r"""The last checkpoint of the run in :obj:`run_dir`; a
    :class:`CheckpointError` naming the file when there is none or it
    cannot be read (truncated, corrupted, or not a checkpoint of this
    command)."""
    path = osp.join(run_dir, LAST)
    if not osp.isfile(path):
        raise CheckpointError(f"'--resume': {run_dir} holds no checkpoint "
                              f"({LAST}); pass the folder of one run "
                              f"(<out>/<model>_seed<seed>)")
    try:
        state = torch.load(path, map_location='cpu', weights_only=True)
    except Exception as error:  # torch raises several kinds here
        reason = str(error).strip().splitlines()[0] if str(error) else \
            type(error).__name__
        raise CheckpointError(
            f"'--resume': {path} cannot be read (truncated or corrupted? "
            f"{type(error).__name__}: {reason[:200]}); resume from another "
            f"copy, or start the run again") from None
    missing = [k for k in KEYS if not isinstance(state, dict)
               or k not in state]
    if missing:
        raise CheckpointError(f"'--resume': {path} is not a checkpoint of "
                              f"this command's version (it lacks "
                              f"{', '.join(missing)})")
    return state


#: The arguments that define a run: resuming with any of them changed is
#: refused.
RUN_ARGUMENTS = ('dataset', 'model', 'hidden', 'layers', 'heads',
                 'node_id_dim', 'dropout', 'lr', 'batch_size', 'epochs',
                 'seed', 'smoke', 'offline_molecules', 'offline_target',
                 'csv',
                 'target_columns', 'preset', 'model_options', 'optimizer',
                 'betas', 'weight_decay', 'schedule', 'warmup_steps',
                 'max_steps', 'grad_clip', 'accumulate', 'precision', 'loss')
#: The arguments ``--extend`` may change: the length of the run.
LENGTH_ARGUMENTS = ('epochs', 'max_steps')


def changed_versions(saved: Optional[Dict], current: Dict) -> str:
    r"""The software versions (:func:`~torch_geometric_hot.train.versions.
    software_versions`) that differ between a checkpoint's :obj:`saved`
    and :obj:`current`, as one phrase (empty when none do, or when the
    checkpoint did not record them)."""
    if not saved:
        return ''
    return ', '.join(f'{k} {saved.get(k)} (now {v})'
                     for k, v in current.items() if saved.get(k) != v)


def check_same_run(saved: Dict, current: Dict, extend: bool = False
                   ) -> bool:
    r"""Raises a :class:`CheckpointError` naming the arguments unless
    :obj:`current` defines the run :obj:`saved` did; with :obj:`extend`,
    the run's length (:data:`LENGTH_ARGUMENTS`) may differ. Returns whether
    it does."""
    changed = {k: (saved.get(k), current.get(k)) for k in RUN_ARGUMENTS
               if saved.get(k) != current.get(k)}
    longer = {k: changed.pop(k) for k in LENGTH_ARGUMENTS if k in changed}
    if not extend:
        changed.update(longer)

    def listed(items) -> str:
        return ', '.join(f'--{k.replace("_", "-")} {a!r} (now {b!r})'
                         for k, (a, b) in items.items())
    if changed:
        hint = ''
        if set(changed) & set(LENGTH_ARGUMENTS) and not extend:
            hint = ('; to train the run on to a new length, add --extend')
        raise CheckpointError(f"'--resume': the checkpoint was written by a "
                              f"run with different arguments: "
                              f"{listed(changed)}{hint}")
    return bool(longer)

r"""What a training recipe consists of besides the model: the optimizer,
the learning-rate schedule (by optimizer steps), the loss and the numeric
precision (:func:`torch.autocast` on the run's device, with a gradient
scaler for float16)."""
import contextlib
import math
from typing import Callable, Dict, Iterable, Optional, Sequence

import torch
from torch import Tensor

OPTIMIZERS = ('adam', 'adamw')
SCHEDULES = ('cosine', 'linear', 'constant', 'step')
PRECISIONS = ('32', 'bf16', '16')
LOSSES = ('auto', 'l1', 'l2', 'bce')
#: The ``'step'`` schedule: the rate times :data:`STEP_GAMMA` after every
#: :data:`STEP_FRACTION` of the steps after warm-up (OGB-LSC's baseline:
#: 30 of 100 epochs, factor 0.25).
STEP_FRACTION, STEP_GAMMA = 0.3, 0.25


def build_optimizer(name: str, parameters: Iterable[Tensor], lr: float,
                    betas: Sequence[float] = (0.9, 0.999),
                    weight_decay: float = 0.0) -> torch.optim.Optimizer:
    r"""Adam (weight decay added to the gradient, as
    :class:`torch.optim.Adam` does) or AdamW (decoupled weight decay)."""
    if name not in OPTIMIZERS:
        raise ValueError(f"'optimizer' must be one of {OPTIMIZERS}, got "
                         f"{name!r}")
    cls = torch.optim.AdamW if name == 'adamw' else torch.optim.Adam
    return cls(parameters, lr=lr, betas=tuple(betas),
               weight_decay=weight_decay)


def lr_factor(schedule: str, warmup_steps: int,
              total_steps: int) -> Callable[[int], float]:
    r"""The factor of the base learning rate after :obj:`step` optimizer
    steps: linear warm-up from :math:`1/W` to 1 over the first :math:`W`
    steps, then, with :math:`p` the fraction of the remaining
    :math:`T - W` steps done, :math:`\frac{1}{2}(1 + \cos \pi p)`
    (``'cosine'``), :math:`1 - p` (``'linear'``, down to 0 at step
    :math:`T`), 1 (``'constant'``) or :math:`0.25^{\lfloor p / 0.3
    \rfloor}` (``'step'``)."""
    if schedule not in SCHEDULES:
        raise ValueError(f"'schedule' must be one of {SCHEDULES}, got "
                         f"{schedule!r}")
    if warmup_steps < 0 or total_steps < 1:
        raise ValueError(f"'warmup_steps' must be >= 0 and 'total_steps' "
                         f">= 1, got {warmup_steps} and {total_steps}")

    def factor(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        p = min(max((step - warmup_steps) /
                    max(total_steps - warmup_steps, 1), 0.0), 1.0)
        if schedule == 'cosine':
            return 0.5 * (1.0 + math.cos(math.pi * p))
        if schedule == 'linear':
            return 1.0 - p
        if schedule == 'step':
            return STEP_GAMMA**math.floor(p / STEP_FRACTION + 1e-9)
        return 1.0
    return factor


class StepSchedule:
    r"""Sets the learning rate of every parameter group of
    :obj:`optimizer` to its base rate times :func:`lr_factor` of the number
    of optimizer steps done. Its state is the base rates and the step; a
    schedule of another length (an extended run) continues from a saved
    state at the same step."""
    def __init__(self, optimizer: torch.optim.Optimizer, schedule: str,
                 warmup_steps: int, total_steps: int) -> None:
        self.optimizer = optimizer
        self.factor = lr_factor(schedule, warmup_steps, total_steps)
        self.base_lrs = [g['lr'] for g in optimizer.param_groups]
        self.step_count = 0
        self._apply()

    def _apply(self) -> None:
        for group, base in zip(self.optimizer.param_groups, self.base_lrs):
            group['lr'] = base * self.factor(self.step_count)

    def step(self) -> None:
        r"""Call after every optimizer step."""
        self.step_count += 1
        self._apply()

    def get_last_lr(self):
        return [g['lr'] for g in self.optimizer.param_groups]

    def state_dict(self) -> Dict:
        return {'base_lrs': list(self.base_lrs), 'step': self.step_count}

    def load_state_dict(self, state: Dict) -> None:
        self.base_lrs = list(state['base_lrs'])
        self.step_count = int(state['step'])
        self._apply()


def autocast_dtype(precision: str) -> Optional[torch.dtype]:
    r"""The dtype :func:`torch.autocast` runs in for ``'bf16'`` and
    ``'16'``; :obj:`None` for ``'32'``."""
    if precision not in PRECISIONS:
        raise ValueError(f"'precision' must be one of {PRECISIONS}, got "
                         f"{precision!r}")
    return {'32': None, 'bf16': torch.bfloat16,
            '16': torch.float16}[precision]


def autocast(device: torch.device, precision: str):
    r"""The context a forward pass runs in at :obj:`precision`."""
    dtype = autocast_dtype(precision)
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=dtype)


def grad_scaler(device: torch.device, precision: str):
    r"""A gradient scaler for float16 (``'16'``); disabled (a pass-through)
    otherwise."""
    return torch.amp.GradScaler(device.type, enabled=precision == '16')


def loss_function(name: str, task_type: str, metric: str
                  ) -> Callable[[Tensor, Tensor], Tensor]:
    r"""The training loss: ``'l1'``, ``'l2'``, ``'bce'`` (binary cross
    entropy on logits) or ``'auto'`` (BCE for classification, L1 where the
    metric is the MAE, L2 otherwise)."""
    if name not in LOSSES:
        raise ValueError(f"'loss' must be one of {LOSSES}, got {name!r}")
    if name == 'auto':
        name = 'bce' if task_type == 'classification' else (
            'l1' if metric == 'mae' else 'l2')
    if name == 'bce':
        return torch.nn.functional.binary_cross_entropy_with_logits
    if name == 'l1':
        return lambda out, y: (out - y).abs().mean()
    return lambda out, y: (out - y).square().mean()

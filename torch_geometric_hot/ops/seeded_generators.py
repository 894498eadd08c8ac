r"""Seeded random generators on whichever device the inputs live."""
from typing import Dict, Optional

import torch


class SeededGenerators:
    r"""One :class:`torch.Generator` per device, created at its first use
    and seeded with :obj:`seed`, so that random draws happen on the device
    of the inputs and a seeded module or transform draws a reproducible
    sequence on each device (the sequences of different devices differ).
    With :obj:`seed` :obj:`None` it hands out :obj:`None`: the device's
    default generator, which :func:`torch.manual_seed` seeds. So it does
    while :func:`torch.compile` traces (a generator object cannot be
    traced): compiled code draws from the default generator; and so it
    does for ``meta`` tensors, which hold no values.

    Args:
        seed (int, optional): Seed of every generator.

    Example:
        >>> import torch
        >>> from torch_geometric_hot.ops.seeded_generators import \
        ...     SeededGenerators
        >>> generators = SeededGenerators(0)
        >>> first = torch.rand(2, generator=generators(torch.device('cpu')))
        >>> again = torch.rand(2, generator=torch.Generator().manual_seed(0))
        >>> torch.equal(first, again)
        True
    """
    def __init__(self, seed: Optional[int]) -> None:
        self.seed = seed
        self._by_device: Dict[torch.device, torch.Generator] = {}

    def __call__(self, device: torch.device) -> Optional[torch.Generator]:
        r"""The generator of :obj:`device` (:obj:`None` without a seed)."""
        device = torch.device(device)
        if self.seed is None or torch.compiler.is_compiling() or \
                device.type == 'meta':  # meta tensors draw no values
            return None
        if device.type == 'cuda' and device.index is None:
            device = torch.device('cuda', torch.cuda.current_device())
        generator = self._by_device.get(device)
        if generator is None:
            generator = torch.Generator(device=device).manual_seed(self.seed)
            self._by_device[device] = generator
        return generator

    def get_state(self) -> Dict[str, torch.Tensor]:
        r"""The state of every generator created so far, by device name
        (for a checkpoint: a run resumed from it draws what the
        uninterrupted run would have drawn)."""
        return {str(device): generator.get_state()
                for device, generator in self._by_device.items()}

    def set_state(self, state: Dict[str, torch.Tensor]) -> None:
        r"""Restores the generators of :meth:`get_state`."""
        for device, generator_state in state.items():
            device = torch.device(device)
            generator = self._by_device.get(device)
            if generator is None:
                generator = torch.Generator(device=device)
                self._by_device[device] = generator
            generator.set_state(generator_state)

    def __repr__(self) -> str:
        return f'{self.__class__.__name__}(seed={self.seed})'

import random

import numpy as np
import torch

from torch_geometric_hot.nn import TokenGTEmbedding
from torch_geometric_hot.train.checkpoint import rng_state, set_rng_state


def _draws(model: torch.nn.Module):
    generator = model.generators(torch.device('cpu'))
    return (torch.rand(3), random.random(), float(np.random.rand()),
            torch.rand(3, generator=generator))


def test_restored_state_repeats_every_generator():
    # torch's, Python's and NumPy's global generators and a module's own
    # seeded generators: a resumed run draws what the whole run drew
    model = torch.nn.Sequential(TokenGTEmbedding(4, 8, seed=11))
    _draws(model[0])
    state = rng_state(model)
    expected = _draws(model[0])
    restored = torch.nn.Sequential(TokenGTEmbedding(4, 8, seed=11))
    set_rng_state(state, restored)
    for got, want in zip(_draws(restored[0]), expected):
        assert torch.equal(torch.as_tensor(got), torch.as_tensor(want))

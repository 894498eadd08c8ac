import itertools
from typing import Sequence

import torch
from torch import Tensor

from torch_geometric_hot.validation import validating


class CategoricalEncoder(torch.nn.Module):
    r"""Embeds rows of categorical features as the sum of one embedding per
    column, :math:`h = \sum_c \mathbf{E}_c[x_c]` (the OGB atom/bond encoder
    without the :obj:`ogb` dependency; pass
    :obj:`ogb.utils.features.get_atom_feature_dims()`).

    Args:
        cardinalities (list of int): Number of categories of every column.
        channels (int): Embedding width.

    Shapes:
        - **input:** :math:`(N, \text{len(cardinalities)})` integer tensor
        - **output:** :math:`(N, \text{channels})`
    """
    def __init__(self, cardinalities: Sequence[int], channels: int) -> None:
        super().__init__()
        if not cardinalities or min(cardinalities) < 1:
            raise ValueError("'cardinalities' must list at least one "
                             "positive category count")
        self.cardinalities = list(cardinalities)
        self.channels = channels
        self.embeddings = torch.nn.ModuleList(
            [torch.nn.Embedding(c, channels) for c in cardinalities])
        # every column's first row in the tables stacked end to end
        starts = [0, *itertools.accumulate(self.cardinalities[:-1])]
        self.register_buffer('starts', torch.tensor(starts),
                             persistent=False)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        for embedding in self.embeddings:
            torch.nn.init.xavier_uniform_(embedding.weight)

    def forward(self, x: Tensor) -> Tensor:
        x = x.view(-1, 1) if x.dim() == 1 else x
        if x.dtype.is_floating_point or x.size(-1) != len(self.embeddings):
            raise ValueError(f"'x' must be an integer tensor with "
                             f"{len(self.embeddings)} columns, got dtype "
                             f"{x.dtype} and shape {list(x.shape)}")
        # host synchronisation: a value check, skipped with validation off
        if x.numel() and validating() and (bool((x < 0).any()) or bool(
                (x >= x.new_tensor(self.cardinalities)).any())):
            raise ValueError(f"'x' has categories outside "
                             f"[0, {self.cardinalities})")
        # one lookup in the stacked tables and one sum (a loop over the
        # columns launches two kernels per column forward and a scatter
        # per column backward)
        table = torch.cat([e.weight for e in self.embeddings]) \
            if len(self.embeddings) > 1 else self.embeddings[0].weight
        return torch.nn.functional.embedding(x + self.starts, table).sum(1)

    def __repr__(self) -> str:
        return (f'{self.__class__.__name__}({self.cardinalities}, '
                f'{self.channels})')

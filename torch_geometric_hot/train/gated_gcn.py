r"""The gated graph convolution GraphGPS uses as its local block."""
import torch
from torch import Tensor
from torch.nn import Linear
from torch_geometric.utils import scatter


class GatedGCNConv(torch.nn.Module):
    r"""The residual gated graph convolution with edge gates
    (`Bresson and Laurent 2017 <https://arxiv.org/abs/1711.07553>`_, in
    the form of `Dwivedi et al. 2020 <https://arxiv.org/abs/2003.00982>`_
    that `GraphGPS <https://arxiv.org/abs/2205.12454>`_ builds on):

    .. math::
        \hat e_{ij} &= D h_i + E h_j + C e_{ij}, \qquad
        \sigma_{ij} = \mathrm{sigmoid}(\hat e_{ij})

        h_i' &= A h_i + \frac{\sum_{j \in \mathcal{N}(i)} \sigma_{ij}
        \odot B h_j}{\sum_{j \in \mathcal{N}(i)} \sigma_{ij} + \epsilon}

    for the edges :math:`j \to i` of :obj:`edge_index`. Normalisation,
    residual and activation are left to the caller (e.g.
    :class:`~torch_geometric.nn.conv.GPSConv`).

    Args:
        channels (int): Width of the node and edge features.
        eps (float, optional): :math:`\epsilon`. (default: :obj:`1e-6`)

    Shapes:
        - **input:** node features :math:`(n, C)`, edge indices
          :math:`(2, m)`, edge features :math:`(m, C)`
        - **output:** :math:`(n, C)`
    """
    def __init__(self, channels: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.channels, self.eps = channels, eps
        self.lin_a, self.lin_b, self.lin_c, self.lin_d, self.lin_e = (
            Linear(channels, channels) for _ in range(5))

    def reset_parameters(self) -> None:
        for lin in (self.lin_a, self.lin_b, self.lin_c, self.lin_d,
                    self.lin_e):
            lin.reset_parameters()

    def forward(self, x: Tensor, edge_index: Tensor,
                edge_attr: Tensor) -> Tensor:
        if x.dim() != 2 or x.size(-1) != self.channels:
            raise ValueError(f"'x' must have shape [num_nodes, "
                             f"{self.channels}], got {tuple(x.shape)}")
        if edge_attr is None or edge_attr.shape != (edge_index.size(1),
                                                    self.channels):
            raise ValueError(f"'edge_attr' must have shape [num_edges, "
                             f"{self.channels}]")
        src, dst = edge_index
        gate = torch.sigmoid(self.lin_d(x)[dst] + self.lin_e(x)[src] +
                             self.lin_c(edge_attr))
        n = x.size(0)
        num = scatter(gate * self.lin_b(x)[src], dst, 0, n, reduce='sum')
        den = scatter(gate, dst, 0, n, reduce='sum')
        return self.lin_a(x) + num / (den + self.eps)

    def __repr__(self) -> str:
        return f'{self.__class__.__name__}({self.channels})'

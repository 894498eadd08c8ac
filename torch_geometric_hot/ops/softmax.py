r"""Grouped (segment) softmax, the normaliser of every softmax attention."""
from torch import Tensor
from torch_geometric.utils import softmax


def grouped_softmax(logits: Tensor, group: Tensor, num_groups: int) -> Tensor:
    r"""Softmax of :obj:`logits` over the rows that share a group.

    .. math::
        \alpha_e = \frac{\exp(s_e - m_{g(e)})}
        {\sum_{e' : g(e') = g(e)} \exp(s_{e'} - m_{g(e)})},
        \qquad m_g = \max_{e : g(e) = g} s_e

    The per-group maximum keeps it stable; groups with no rows simply do
    not appear in the output, so they can never produce a NaN. This is
    PyG's :func:`torch_geometric.utils.softmax` (its denominator carries
    an extra :math:`10^{-16}`), with the shapes checked:
    ``benchmarks/scatter_backends.py`` measured it as fast as the same
    softmax written on :func:`~torch_geometric_hot.ops.scatter_max` and
    :func:`~torch_geometric_hot.ops.scatter_sum`, forward and backward
    (1.00x to 1.01x on :obj:`[E, 4]` scores, :math:`10^4` to :math:`10^6`
    rows, one CPU thread).

    Args:
        logits (torch.Tensor): Scores of shape :obj:`[E, *]` (e.g.
            :obj:`[E, heads]`).
        group (torch.Tensor): Group of every row, shape :obj:`[E]`.
        num_groups (int): Number of groups.

    :rtype: :class:`torch.Tensor` of the shape of :obj:`logits`
    """
    if logits.size(0) != group.numel():
        raise ValueError(f"'group' must have one entry per row of 'logits' "
                         f"({logits.size(0)}), got {group.numel()}")
    return softmax(logits, group, num_nodes=num_groups)

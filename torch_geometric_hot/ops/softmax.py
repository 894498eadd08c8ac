r"""Grouped (segment) softmax, the normaliser of every softmax attention
written in torch: the enumerated (query, key) pairs of HOT's classes and
of TokenGT, the torch implementation of the grouped operator
(:mod:`~torch_geometric_hot.ops.grouped_softmax_attention`), simplicial
attention and its indexer's loss."""
from typing import Callable, Optional, Tuple, Union

from torch import Tensor

from torch_geometric_hot.ops.scatter import scatter_max, scatter_sum
from torch_geometric_hot.validation import check_size


def _shifted(logits: Tensor, group: Tensor, num_groups: int
             ) -> Tuple[Tensor, Tensor, Tensor, Tensor]:
    # the logits less their group's maximum (no gradient through it), the
    # maxima, the exponentials and their groups' sums
    if logits.size(0) != group.numel():
        raise ValueError(f"'group' must have one entry per row of 'logits' "
                         f"({logits.size(0)}), got {group.numel()}")
    top = scatter_max(logits, group, num_groups)
    shifted = logits - top.index_select(0, group)
    weights = shifted.exp()
    return shifted, top, weights, scatter_sum(weights, group, num_groups)


def grouped_softmax(logits: Tensor, group: Tensor, num_groups: int,
                    return_lse: bool = False
                    ) -> Union[Tensor, Tuple[Tensor, Tensor]]:
    r"""Softmax of :obj:`logits` over the rows that share a group.

    .. math::
        \alpha_e = \frac{\exp(s_e - m_{g(e)})}
        {\sum_{e' : g(e') = g(e)} \exp(s_{e'} - m_{g(e)})},
        \qquad m_g = \max_{e : g(e) = g} s_e

    The per-group maximum keeps it stable (no gradient flows through it:
    it cancels); groups with no rows simply do not appear in the output,
    so they can never produce a NaN. Written on
    :func:`~torch_geometric_hot.ops.scatter_max` and
    :func:`~torch_geometric_hot.ops.scatter_sum`:
    ``benchmarks/scatter_backends.py`` measured it as fast as PyG's
    :func:`torch_geometric.utils.softmax`, forward and backward (PyG's
    1.00x to 1.01x of its time on :obj:`[E, 4]` scores, :math:`10^4` to
    :math:`10^6` rows, one CPU thread).

    Args:
        logits (torch.Tensor): Scores of shape :obj:`[E, *]` (e.g.
            :obj:`[E, heads]`).
        group (torch.Tensor): Group of every row, shape :obj:`[E]`.
        num_groups (int): Number of groups.
        return_lse (bool, optional): Also return every group's
            log-sum-exp :math:`\log \sum_{e : g(e) = g} \exp(s_e)`,
            :obj:`[num_groups, *]` (:math:`-\infty` for a group with no
            row). (default: :obj:`False`)

    :rtype: :class:`torch.Tensor` of the shape of :obj:`logits` (and the
        log-sum-exp with :obj:`return_lse`)
    """
    _, top, weights, total = _shifted(logits, group, num_groups)
    alpha = weights / total.index_select(0, group)
    return (alpha, top + total.log()) if return_lse else alpha


def grouped_log_softmax(logits: Tensor, group: Tensor,
                        num_groups: int) -> Tensor:
    r"""Log of :func:`grouped_softmax`, computed stably (per-group max
    shift).

    :rtype: :class:`torch.Tensor` of the shape of :obj:`logits`
    """
    shifted, _, _, total = _shifted(logits, group, num_groups)
    return shifted - total.log().index_select(0, group)


def check_pairs(pairs: int, width: int, what: str) -> None:
    r"""The size limit on softmax attention of :obj:`what` over
    :obj:`pairs` enumerated (query, key) pairs of :obj:`width` elements."""
    check_size(pairs * width, f"softmax attention of {what} over its "
               f"{pairs:,} (query, key) pairs")


def pair_softmax_attention(q: Tensor, k: Tensor, v: Tensor, query: Tensor,
                           key: Tensor,
                           drop: Optional[Callable[[Tensor], Tensor]] = None
                           ) -> Tuple[Tensor, Tensor, Tensor]:
    r"""Softmax attention over enumerated (query row, key row) pairs,
    :math:`o_i = \sum_{(i, j)} \alpha_{ij} v_j` with :math:`\alpha` the
    :func:`grouped_softmax` of :math:`q_i^\top k_j` over each query row's
    pairs (0 for a row without pairs); :obj:`drop` (dropout) maps the
    weights :obj:`[pairs, H]` the output sums.

    :rtype: the output :obj:`[rows, H, d_v]`, :math:`\alpha`
        :obj:`[pairs, H]` and every row's log-sum-exp :obj:`[rows, H]`
    """
    logits = (q.index_select(0, query) * k.index_select(0, key)).sum(-1)
    alpha, lse = grouped_softmax(logits, query, q.size(0), return_lse=True)
    weights = alpha if drop is None else drop(alpha)
    out = scatter_sum(weights.unsqueeze(-1) * v.index_select(0, key), query,
                      q.size(0))
    return out, alpha, lse

r"""Dense reference for higher-order attention (``docs/design.md``,
"Oracles"): attention of
one class over the full key group given by the class's dense basis
indicator, for small complete graphs in float64."""
from typing import Callable, Optional

import torch
from torch import Tensor


def dense_class_attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor,
                          feature_map: Optional[Callable[[Tensor, bool],
                                                         Tensor]] = None,
                          eps: float = 1e-6) -> Tensor:
    r"""Attention of every output element over the keys :obj:`mask` allows.

    Args:
        q (torch.Tensor): Queries :obj:`[n^l, H, d]` (pre-scaled for
            softmax).
        k (torch.Tensor): Keys :obj:`[n^k, H, d]`.
        v (torch.Tensor): Values :obj:`[n^k, H, d_v]`.
        mask (torch.Tensor): The class's basis indicator :obj:`[n^l, n^k]`.
        feature_map (callable, optional): :obj:`phi(x, is_query)`; softmax
            attention when omitted.
        eps (float): Denominator floor of kernel attention.

    Returns:
        :obj:`[n^l, H, d_v]`; rows with an empty key group are zero.
    """
    allowed = mask.bool().unsqueeze(1)  # [n^l, 1, n^k]
    has_keys = allowed.any(-1, keepdim=True)
    if feature_map is None:
        logits = torch.einsum('ohd,ihd->ohi', q, k)
        logits = logits.masked_fill(~allowed, float('-inf'))
        alpha = torch.softmax(logits, dim=-1).nan_to_num(0.0)
    else:
        scores = torch.einsum('ohr,ihr->ohi', feature_map(q, True),
                              feature_map(k, False)) * allowed
        alpha = scores / scores.sum(-1, keepdim=True).clamp(min=eps)
    alpha = alpha * has_keys
    return torch.einsum('ohi,ihc->ohc', alpha, v)

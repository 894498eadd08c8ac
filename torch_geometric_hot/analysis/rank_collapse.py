r"""The rank-collapse (over-smoothing) residual of a token matrix
(`Dong et al. 2021 <https://arxiv.org/abs/2103.03404>`_, used for
N-simplicial attention by `Dussolle & Liò 2025
<https://arxiv.org/abs/2511.04624>`_, §3.2)."""
from typing import Callable, Optional, Sequence

import torch
from torch import Tensor

from torch_geometric_hot.validation import check_batch, check_features

NORMS = ('fro', '1,inf')
Forward = Callable[[torch.nn.Module, Tensor], Tensor]


def token_residual(x: Tensor, batch: Optional[Tensor] = None,
                   norm: str = 'fro', relative: bool = False) -> Tensor:
    r"""Distance of each graph's token matrix :math:`X \in \mathbb{R}^{n
    \times d}` from the "all tokens equal" matrices :math:`\mathbf{1}u^\top`:

    .. math::
        \mathrm{res}(X) = X - \mathbf{1} x^\top, \qquad
        x = \operatorname{argmin}_{u \in \mathbb{R}^d}
        \lVert X - \mathbf{1} u^\top \rVert,

    reported as :math:`\lVert \mathrm{res}(X) \rVert` (divided by
    :math:`\lVert X \rVert` when :obj:`relative`; 0 for :math:`X = 0`).
    It is zero exactly when every token of the graph carries the same
    vector, and invariant under permutations of the tokens.

    * ``'fro'``: Frobenius norm; the minimiser is the mean token, so the
      value is exact.
    * ``'1,inf'``: the composite norm of the theorems,
      :math:`\lVert M \rVert_{1,\infty} = \sqrt{\lVert M \rVert_1
      \lVert M \rVert_\infty}` (largest column and row absolute sums). The
      centre :math:`x` is the coordinatewise median, which minimises the
      :math:`\lVert\cdot\rVert_1` factor; the value is therefore an upper
      bound on the exact minimum (zero in the same cases).

    Args:
        x (torch.Tensor): Token features :obj:`[n, d]`.
        batch (torch.Tensor, optional): Graph id per token; every graph is
            measured on its own. (default: one graph)
        norm (str, optional): ``'fro'`` or ``'1,inf'``. (default: ``'fro'``)
        relative (bool, optional): Divide by the norm of :math:`X`.
            (default: :obj:`False`)

    Shapes:
        - **input:** :obj:`x [n, d]`, :obj:`batch [n]` (optional)
        - **output:** :obj:`[num_graphs]` (a graph with no token gets 0)
    """
    if norm not in NORMS:
        raise ValueError(f"'norm' must be one of {NORMS}, got {norm!r}")
    check_features(x)
    batch, num_graphs = check_batch(batch, x.size(0), device=x.device)
    out = x.new_zeros(num_graphs)
    for g in range(num_graphs):
        tokens = x[batch == g]
        if tokens.size(0) == 0:
            continue
        # Differences from the first token are exactly zero for equal rows.
        offsets = tokens - tokens[0]
        if norm == 'fro':
            centre = offsets.mean(0)
        else:
            centre = offsets.median(0).values
        value = _norm(offsets - centre, norm)
        if relative:
            scale = _norm(tokens, norm)
            value = value / scale if scale > 0 else scale
        out[g] = value
    return out


def layerwise_token_residual(layers: Sequence[torch.nn.Module], x: Tensor,
                             batch: Optional[Tensor] = None,
                             norm: str = 'fro', relative: bool = True,
                             forward: Optional[Forward] = None) -> Tensor:
    r"""The residual :func:`token_residual` of the tokens before the first
    layer and after every layer of a stack, :math:`X^{(t+1)} =
    f_t(X^{(t)})`, without gradients.

    Args:
        layers (Sequence[torch.nn.Module]): The stack :math:`f_0, f_1,
            \dots`.
        x (torch.Tensor): Input tokens :obj:`[n, d]`.
        batch (torch.Tensor, optional): Graph id per token (measurement
            only; pass it to the layers through :obj:`forward`).
        norm (str, optional): ``'fro'`` or ``'1,inf'``. (default: ``'fro'``)
        relative (bool, optional): Divide by the norm of the tokens.
            (default: :obj:`True`)
        forward (callable, optional): :obj:`forward(layer, x)` runs one
            layer, e.g. ``lambda layer, h: layer(h, edge_index, batch)``.
            (default: :obj:`layer(x)`)

    Shapes:
        - **input:** :obj:`x [n, d]`, :obj:`batch [n]` (optional)
        - **output:** :obj:`[len(layers) + 1, num_graphs]`
    """
    run = forward if forward is not None else (lambda layer, h: layer(h))
    rows = [token_residual(x, batch, norm, relative)]
    with torch.no_grad():
        for t, layer in enumerate(layers):
            out = run(layer, x)
            if not isinstance(out, Tensor) or out.shape[0] != x.size(0):
                raise ValueError(f"layer {t} must map [n, d] tokens to "
                                 f"[n, d'] tokens, got "
                                 f"{getattr(out, 'shape', type(out))}")
            x = out
            rows.append(token_residual(x, batch, norm, relative))
    return torch.stack(rows)


def _norm(matrix: Tensor, norm: str) -> Tensor:
    if norm == 'fro':
        return torch.linalg.matrix_norm(matrix, 'fro')
    absolute = matrix.abs()
    return (absolute.sum(0).max() * absolute.sum(1).max()).sqrt()

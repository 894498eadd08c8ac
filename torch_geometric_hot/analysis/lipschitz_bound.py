r"""The Lipschitz upper bound of unmasked N-simplicial attention
(`Dussolle & Liò 2025 <https://arxiv.org/abs/2511.04624>`_, Theorem 3.7)."""
import math

import torch

from torch_geometric_hot.nn.simplicial_attention import SimplicialAttention


def simplicial_lipschitz_bound(layer: SimplicialAttention, radius: float,
                               num_tokens: int,
                               residual: bool = True) -> float:
    r"""Upper bound on the Lipschitz constant of an unmasked
    :class:`~torch_geometric_hot.nn.SimplicialAttention` layer on the
    inputs whose :math:`n` token rows lie in the closed ball
    :math:`B_R = \{x : \lVert x \rVert_2 \le R\}` (Frobenius norms on
    :math:`\mathbb{R}^{n \times C}`).

    Theorem 3.7 of the paper: pure N-simplicial attention
    :math:`f_i(X) = \sum_{k_1 \dots k_N} \mathcal{A}_{i k_1 \dots k_N}
    \prod_m x_{k_m} W_V^{(m)}` (one head, no bias, softmax over all
    :math:`n^N` key tuples, multilinear logits scaled by
    :math:`1/\sqrt d`) satisfies

    .. math::
        \mathrm{Lip}(f|_{B_R^n}) \le n \sqrt{2n}\, N V^N R^{N-1}
        \left(1 + d N^2 (KR)^{2(N+1)}\right)^{1/2},
        \quad V = \max_{1 \le m \le N} \lVert W_V^{(m)} \rVert_2,
        \quad K = \max_{0 \le m \le N} \lVert W_K^{(m)} \rVert_2

    (:math:`W_K^{(0)}` the query). Its proof bounds, for every pair of
    tokens :math:`(i, j)`, the value term by :math:`a = N V \nu^{N-1}` and
    the softmax term by :math:`b = c_d K \kappa^N \nu^N`, where
    :math:`\nu = \max_m \lVert x W_V^{(m)} + b_V^{(m)} \rVert_2 \le
    \max_m (\lVert W_V^{(m)} \rVert_2 R + \lVert b_V^{(m)} \rVert_2)` and
    :math:`\kappa` likewise for the keys and query, and concludes
    :math:`\mathrm{Lip} \le n\sqrt{2n}\,(a^2 + N^2 b^2)^{1/2}`. This
    function evaluates that expression per head :math:`h` (its own
    :math:`V_h, K_h, \nu_h, \kappa_h`, :math:`d` the head width), so the
    layer's biases are covered, and combines the heads and the output
    projection :math:`W_O` of the layer:

    .. math::
        \mathrm{Lip}(\text{layer}) \le [\text{residual}] +
        \lVert W_O \rVert_2 \Big(\sum_h L_h^2\Big)^{1/2}.

    With one head, zero biases and :math:`W_O = I` it equals the theorem's
    expression. The constant is :math:`c_d = \max(\sqrt d N, (N+1) /
    \sqrt d)`: the paper's :math:`\sqrt d N` whenever :math:`d \ge 2`; the
    second term covers :math:`d = 1`, where the logit of a tuple depends on
    a token through up to :math:`N+1` slots (query included), each
    contributing at most :math:`K \kappa^N / \sqrt d`.

    Assumptions (outside them the theorem says nothing and this function
    raises): dense candidates (no mask), multilinear logits (the
    determinant form is the one that carries RoPE), no expert-choice
    routing. For a batch of several graphs the Jacobian is block diagonal:
    pass the largest graph's token count.

    Args:
        layer (SimplicialAttention): An unmasked layer.
        radius (float): :math:`R \ge 0`, the bound on every token's norm.
        num_tokens (int): :math:`n \ge 1`, tokens in the graph.
        residual (bool, optional): Add the layer's skip connection (1 to the
            bound); :obj:`False` bounds the pure attention update, as
            :class:`~torch_geometric_hot.analysis.WithoutResidual` computes
            it. (default: :obj:`True`)

    :rtype: :class:`float`
    """
    _check_covered(layer)
    if isinstance(radius, bool) or not isinstance(
            radius, (int, float)) or not math.isfinite(radius) or radius < 0:
        raise ValueError(f"'radius' (R) must be a finite number >= 0, got "
                         f"{radius!r}")
    if isinstance(num_tokens, bool) or not isinstance(
            num_tokens, int) or num_tokens < 1:
        raise ValueError(f"'num_tokens' (n) must be an integer >= 1, got "
                         f"{num_tokens!r}")
    order, d, n = layer.order, layer.head_channels, num_tokens
    with torch.no_grad():
        weight = layer.lin_qkv.weight.double().view(1 + 2 * order,
                                                    layer.heads, d, -1)
        bias = layer.lin_qkv.bias
        bias = (weight.new_zeros(weight.shape[:3]) if bias is None else
                bias.double().view(weight.shape[:3]))
        spectral = torch.linalg.matrix_norm(weight, 2)  # [1 + 2N, H]
        offset = bias.norm(dim=-1)
        reach = spectral * radius + offset  # bound on ||x W + b||
        key_norm = spectral[:order + 1].amax(0)
        key_reach = reach[:order + 1].amax(0)
        value_norm = spectral[order + 1:].amax(0)
        value_reach = reach[order + 1:].amax(0)
        c_d = max(math.sqrt(d) * order, (order + 1) / math.sqrt(d))
        a = order * value_norm * value_reach**(order - 1)
        b = c_d * key_norm * key_reach**order * value_reach**order
        per_head = n * math.sqrt(2 * n) * (a**2 + order**2 * b**2).sqrt()
        out_norm = torch.linalg.matrix_norm(layer.lin_out.weight.double(), 2)
        attention = float(out_norm * per_head.pow(2).sum().sqrt())
    return attention + (1.0 if residual else 0.0)


def _check_covered(layer: SimplicialAttention) -> None:
    if not isinstance(layer, SimplicialAttention):
        raise TypeError(f"'layer' must be a SimplicialAttention layer, got "
                        f"{type(layer).__name__}")
    if layer.candidates != 'dense':
        raise ValueError(f"Theorem 3.7 bounds unmasked N-simplicial "
                         f"attention (candidates='dense'); this layer is "
                         f"masked (candidates={layer.candidates!r}), which "
                         f"the theorem does not cover")
    if layer.form != 'multilinear':
        raise ValueError(f"Theorem 3.7 bounds the multilinear form; this "
                         f"layer uses form={layer.form!r} (the RoPE form), "
                         f"which the theorem does not cover")
    if layer.router is not None:
        raise ValueError("Theorem 3.7 bounds N-simplicial attention over "
                         "all tokens; this layer routes a top-capacity "
                         "subset (expert-choice router), which the theorem "
                         "does not cover")

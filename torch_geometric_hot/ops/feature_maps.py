r"""Positive feature maps :math:`\phi` for kernel (linear) attention.

:math:`\exp(q^\top k / \sqrt{d}) \approx \phi(q)^\top \phi(k)` lets attention
over a key group be computed from the group's sums
:math:`S = \sum_k \phi(k) v_k^\top` and :math:`z = \sum_k \phi(k)`.

* ``'favor+'``: positive orthogonal random features (Performer,
  `Choromanski et al. 2021 <https://arxiv.org/abs/2009.14794>`_),
  :math:`\phi(x) = \exp(Wx - \|x\|^2/2 - c) / \sqrt{r}` on
  :math:`x \leftarrow x d^{-1/4}`; unbiased for the softmax kernel.
* ``'relu'``: ReLU random features, :math:`\phi(x) = (\mathrm{ReLU}(Wx) +
  \epsilon)/\sqrt{r}` (what the HOT experiments used).
* ``'elu'``: the deterministic :math:`\mathrm{elu}(x) + 1`
  (`Katharopoulos et al. 2020 <https://arxiv.org/abs/2006.16236>`_).
"""
import math
from typing import Optional, Tuple

import torch
from torch import Tensor

from torch_geometric_hot.ops import native
from torch_geometric_hot.ops.plan_cache import making_plans_only
from torch_geometric_hot.ops.scatter import scatter_max
from torch_geometric_hot.ops.seeded_generators import SeededGenerators

#: The feature maps of kernel attention: Performer's positive random
#: features (``'favor+'``), ReLU random features and :math:`elu + 1`.
KERNELS = ('favor+', 'relu', 'elu')
_RELU_EPS = 1e-3


def default_num_features(head_dim: int) -> int:
    r"""Performer's default number of random features,
    :math:`\lfloor d \ln d \rfloor` (at least :obj:`d`): the Performer
    reference code's and the original HOT code's default (16 for
    :math:`d = 8`)."""
    return max(head_dim, int(head_dim * math.log(max(head_dim, 2))))


def orthogonal_gaussian(num_features: int, dim: int,
                        generator: Optional[torch.Generator] = None,
                        dtype: torch.dtype = torch.float,
                        device: Optional[torch.device] = None) -> Tensor:
    r"""Random projection :obj:`[num_features, dim]` made of orthogonal
    Gaussian blocks whose rows are rescaled to Gaussian norms, so each row is
    marginally :math:`\mathcal{N}(0, I)` (Performer's ORF construction),
    drawn on :obj:`device` (default: the generator's, else the CPU)."""
    if device is None and generator is not None:
        device = generator.device
    blocks = []
    for start in range(0, num_features, dim):
        gaussian = torch.randn(dim, dim, generator=generator, dtype=dtype,
                               device=device)
        q, r = torch.linalg.qr(gaussian)
        # Fix the signs by diag(R): Householder QR alone leaves every
        # column of Q with a biased sign (not Haar), which biases FAVOR+.
        q = q * torch.sign(torch.diagonal(r)).masked_fill(
            torch.diagonal(r) == 0, 1.0)
        blocks.append(q.t()[:min(dim, num_features - start)])
    norms = torch.randn(num_features, dim, generator=generator, dtype=dtype,
                        device=device).norm(dim=1, keepdim=True)
    return torch.cat(blocks, dim=0) * norms


def _cast(t: Tensor, dtype: torch.dtype) -> Tensor:
    # t in dtype, without an operator when it already is
    return t if t.dtype == dtype else t.to(dtype)


def _favor_logits(x: Tensor, projection: Tensor) -> Tensor:
    # [N, H, r]: W (s x) - |s x|^2 / 2 with s = d^{-1/4}
    x = x * x.size(-1)**-0.25
    proj = x @ _cast(projection, x.dtype).t()
    return proj.sub_((x * x).sum(dim=-1, keepdim=True), alpha=0.5)


def _key_stabiliser(row_max: Tensor, group: Optional[Tensor],
                    num_groups: Optional[int]) -> Tensor:
    # keys share the maximum of their group's logits: [N, H] (or one for
    # all keys)
    if row_max.numel() == 0:
        return row_max.new_zeros(())
    if group is None:
        return row_max.max()
    size = num_groups if num_groups is not None else int(group.max()) + 1
    return scatter_max(row_max, group, size)[group]


def _favor_stabiliser(logits: Tensor, is_query: bool,
                      group: Optional[Tensor],
                      num_groups: Optional[int]) -> Tensor:
    # the constant subtracted before exp (no gradient: it cancels in the
    # attention ratio), broadcastable to the logits
    if is_query:
        return logits.detach().amax(dim=-1, keepdim=True)
    stab = _key_stabiliser(logits.detach().amax(dim=-1), group, num_groups)
    return stab.unsqueeze(-1) if stab.dim() else stab


def _favor_forward(x: Tensor, projection: Tensor, is_query: bool,
                   group: Optional[Tensor],
                   num_groups: Optional[int]) -> Tensor:
    # in place on one buffer: the logits and their shift (natively where
    # the kernels apply), then exp
    log_scale = -0.5 * math.log(projection.size(0))
    if native.applies(x):
        out, row_max = native.favor_logits(x.contiguous(), projection,
                                           is_query, log_scale)
        if not is_query:
            stab = _key_stabiliser(row_max, group, num_groups)
            native.favor_shift(out, (log_scale - stab).expand_as(
                row_max).contiguous())
        return out.exp_()
    if is_query:
        # -|s x|^2 / 2 is the same at every feature of a row, so the row's
        # largest logit cancels it: W (s x) shifted by its row maximum
        logits = (x * x.size(-1)**-0.25) @ _cast(projection, x.dtype).t()
        stab = logits.detach().amax(dim=-1, keepdim=True)
    else:
        logits = _favor_logits(x, projection)
        stab = _favor_stabiliser(logits, False, group, num_groups)
    return logits.sub_(stab - log_scale).exp_()


def _favor_grad(x: Tensor, projection: Tensor, out: Tensor,
                grad: Tensor) -> Tensor:
    if native.applies(x, out, grad):
        return native.favor_backward(x.contiguous(), projection,
                                     out.contiguous(), grad.contiguous())
    # d phi_r / dx = phi_r (w_r - s x) s, s = d^{-1/4}
    # in the features' dtype (under autocast the logits' product ran in a
    # lower precision than x's), the gradient in x's
    # as one addmm: s (phi * grad) W - s^2 x sum_r (phi * grad)_r
    s = x.size(-1)**-0.25
    weighted = _cast(grad, out.dtype) * out
    along_x = _cast(x, out.dtype) * weighted.sum(dim=-1, keepdim=True)
    grad_x = torch.addmm(along_x.reshape(-1, x.size(-1)),
                         weighted.reshape(-1, weighted.size(-1)),
                         _cast(projection, out.dtype), beta=-s * s, alpha=s)
    return _cast(grad_x.view(x.shape), x.dtype)


@torch.library.custom_op('torch_geometric_hot::favor_plus', mutates_args=())
def _favor_plus(x: Tensor, projection: Tensor, is_query: bool,
                group: Optional[Tensor], num_groups: Optional[int]) -> Tensor:
    return _favor_forward(x, projection, is_query, group, num_groups)


@_favor_plus.register_fake
def _(x, projection, is_query, group, num_groups):
    return x.new_empty(x.shape[:-1] + (projection.size(0), ))


@torch.library.custom_op('torch_geometric_hot::favor_plus_backward',
                         mutates_args=())
def _favor_plus_backward(x: Tensor, projection: Tensor, out: Tensor,
                         grad: Tensor) -> Tensor:
    return _favor_grad(x, projection, out, grad)


@_favor_plus_backward.register_fake
def _(x, projection, out, grad):
    return torch.empty_like(x)


def _favor_plus_setup(ctx, inputs, output) -> None:
    x, projection = inputs[:2]
    ctx.save_for_backward(x, output, projection)


def _favor_plus_grad(ctx, grad):
    x, out, projection = ctx.saved_tensors
    return _favor_plus_backward(x, projection, out, grad), None, None, None, \
        None


_favor_plus.register_autograd(_favor_plus_grad,
                              setup_context=_favor_plus_setup)


class _FavorPlus(torch.autograd.Function):
    # the same two passes as the operator, without its dispatch
    @staticmethod
    def forward(ctx, x, projection, is_query, group, num_groups):
        out = _favor_forward(x, projection, is_query, group, num_groups)
        ctx.save_for_backward(x, out, projection)
        return out

    @staticmethod
    def backward(ctx, grad):
        x, out, projection = ctx.saved_tensors
        return _favor_grad(x, projection, out, grad), None, None, None, None


class _FavorPlusKeysQueries(torch.autograd.Function):
    # keys and queries [N, H, d] stacked [2, N, H, d] in one pass: one
    # product, one exp, one backward (the same derivative for both); the
    # two maps come out as contiguous views, their gradients go in apart
    # (no gradient of a selection to assemble)
    @staticmethod
    def forward(ctx, keys, queries, projection, group, num_groups):
        x = torch.stack([keys, queries])
        logits = _favor_logits(x, projection)
        shift = logits.amax(dim=-1)  # [2, N, H]: a query's own row's
        shift[0] = _key_stabiliser(shift[0], group, num_groups)
        log_scale = -0.5 * math.log(projection.size(0))
        out = logits.sub_(shift.unsqueeze(-1) - log_scale).exp_()
        ctx.save_for_backward(x, out, projection)
        return out[0], out[1]

    @staticmethod
    def backward(ctx, grad_keys, grad_queries):
        x, out, projection = ctx.saved_tensors
        grad = _favor_grad(x, projection, out,
                           torch.stack([grad_keys, grad_queries]))
        return grad[0], grad[1], None, None, None


def favor_plus(x: Tensor, projection: Tensor, is_query: bool,
               group: Optional[Tensor] = None,
               num_groups: Optional[int] = None) -> Tensor:
    r"""FAVOR+ positive random features (Performer),

    .. math::
        \phi(x) = \frac{1}{\sqrt{r}} \exp\left(W x - \tfrac{1}{2}
        \|x\|^2 - c\right), \qquad x \leftarrow x d^{-1/4},

    with its own backward pass: the forward pass works in place on one
    :obj:`[N, H, r]` buffer (natively on CPU: the logits, their shift, then
    torch's exp) and the backward pass is
    :math:`\partial \phi_r / \partial x = \phi_r (w_r - x) d^{-1/4}` (a
    chain of autograd operations would keep and revisit an
    :obj:`[N, H, r]` tensor per step). The stabiliser :math:`c` is
    treated as a constant: it cancels in the attention ratio.
    :func:`favor_plus_autograd` is the same map by autograd.

    It is one operator, ``torch_geometric_hot::favor_plus`` (with a fake
    kernel and its backward operator), where the native kernels take the
    tensors and in a graph that :func:`torch.compile` traces; elsewhere in
    eager mode (on a GPU) it is an autograd function with the same two
    passes, which spares every call the operator's dispatch (more host
    time than the map's own kernels take to launch).

    Args:
        x (torch.Tensor): Queries or keys :obj:`[N, H, d]`.
        projection (torch.Tensor): :math:`W` :obj:`[r, d]` (no gradient is
            computed for it; one that requires one takes the reference
            path).
        is_query (bool): Queries take :math:`c` per row and head, keys one
            per :obj:`group` (all keys when :obj:`None`).
        group (torch.Tensor, optional): Group of every key row :obj:`[N]`.
        num_groups (int, optional): Number of groups.

    :rtype: :class:`torch.Tensor` :obj:`[N, H, r]`
    """
    if projection.requires_grad:
        return favor_plus_autograd(x, projection, is_query, group,
                                   num_groups)
    if torch.compiler.is_compiling() or native.applies(x):
        return _favor_plus(x, projection, is_query, group, num_groups)
    return _FavorPlus.apply(x, projection, is_query, group, num_groups)


def favor_plus_keys_queries(keys: Tensor, queries: Tensor,
                            projection: Tensor,
                            group: Optional[Tensor] = None,
                            num_groups: Optional[int] = None
                            ) -> Tuple[Tensor, Tensor]:
    r"""FAVOR+ of keys and of queries with one projection, the same as
    :obj:`favor_plus(keys, projection, False, group, num_groups)` and
    :obj:`favor_plus(queries, projection, True)`. Where both maps are
    autograd functions (eager mode off the native kernels) and the rows
    pair up, it is one: the two stacked, one product, one shift, one
    :obj:`exp` and one backward pass, about half the launches.

    Args:
        keys (torch.Tensor): :obj:`[N, H, d]`.
        queries (torch.Tensor): :obj:`[M, H, d]`.
        projection (torch.Tensor): :math:`W` :obj:`[r, d]`.
        group (torch.Tensor, optional): Group of every key row :obj:`[N]`.
        num_groups (int, optional): Number of groups.

    :rtype: (:class:`torch.Tensor`, :class:`torch.Tensor`), the keys'
        :obj:`[N, H, r]` and the queries' :obj:`[M, H, r]`
    """
    if projection.requires_grad or keys.shape != queries.shape or \
            torch.compiler.is_compiling() or native.applies(keys):
        return (favor_plus(keys, projection, False, group, num_groups),
                favor_plus(queries, projection, True))
    return _FavorPlusKeysQueries.apply(keys, queries, projection, group,
                                       num_groups)


def favor_plus_autograd(x: Tensor, projection: Tensor, is_query: bool,
                        group: Optional[Tensor] = None,
                        num_groups: Optional[int] = None) -> Tensor:
    r""":func:`favor_plus` as a chain of autograd operations."""
    logits = _favor_logits(x, projection)
    stab = _favor_stabiliser(logits, is_query, group, num_groups)
    return (logits - stab).exp() * projection.size(0)**-0.5


class FeatureMap(torch.nn.Module):
    r"""A kernel feature map with its own (seedable, redrawable) random
    projection, applied per head.

    Args:
        head_dim (int): Dimension :math:`d` of queries and keys.
        kernel (str, optional): ``'favor+'``, ``'relu'`` or ``'elu'``.
            (default: ``'favor+'``)
        num_features (int, optional): Number of random features :math:`r`
            (default: :math:`\lfloor d \ln d \rfloor`). Ignored by ``'elu'``.
        redraw_interval (int, optional): Redraw the projection every this
            many training forward passes of the owner (counted by
            :meth:`step`); never in eval mode.
            (default: :obj:`None`)
        seed (int, optional): Seed of the projection's generator, one per
            device: projections are drawn on the device of the
            :obj:`projection` buffer. (default: :obj:`None`, a fixed
            default seed)

    Shapes:
        - **input:** :obj:`[*, H, d]`
        - **output:** :obj:`[*, H, r]`
    """
    def __init__(self, head_dim: int, kernel: str = 'favor+',
                 num_features: Optional[int] = None,
                 redraw_interval: Optional[int] = None,
                 seed: Optional[int] = None) -> None:
        super().__init__()
        if kernel not in KERNELS:
            raise ValueError(f"'kernel' must be one of {KERNELS}, got "
                             f"{kernel!r}")
        if head_dim < 1:
            raise ValueError(f"'head_dim' must be positive, got {head_dim}")
        self.head_dim = head_dim
        self.kernel = kernel
        if kernel == 'elu':
            num_features = head_dim
        self.num_features = num_features or default_num_features(head_dim)
        if self.num_features < 1:
            raise ValueError(f"'num_features' must be positive, got "
                             f"{num_features}")
        self.redraw_interval = redraw_interval
        self.seed = seed
        self.generators = SeededGenerators(
            torch.Generator().initial_seed() if seed is None else seed)
        self.register_buffer('projection',
                             torch.empty(self.num_features, head_dim))
        self.register_buffer('calls_since_redraw',
                             torch.zeros((), dtype=torch.long))
        # Eager passes count in a Python int (no host synchronisation per
        # pass) that mirrors the buffer; compiled passes count in the
        # buffer alone (a Python int would be a guard, one graph per
        # value). The buffer's identity and version counter tell when the
        # mirror is stale (a compiled pass, load_state_dict or a move to
        # another device or dtype wrote or replaced the buffer).
        self._calls_since_redraw = 0
        self._mirrored = (0, -1)
        self.redraw_projection()

    @torch.no_grad()
    def redraw_projection(self) -> None:
        r"""Draws a new random projection (a no-op for ``'elu'``)."""
        if self.kernel != 'elu':
            device = self.projection.device
            w = orthogonal_gaussian(self.num_features, self.head_dim,
                                    self.generators(device), device=device)
            self.projection.copy_(w.to(self.projection.dtype))
        self._set_count(0)

    def _buffer_stamp(self) -> Tuple[int, Optional[int]]:
        # the count buffer's identity and version (a buffer made under
        # torch.inference_mode has no version counter: identity alone)
        buffer = self.calls_since_redraw
        return id(buffer), None if buffer.is_inference() else buffer._version

    def _set_count(self, count: int) -> None:
        self.calls_since_redraw.fill_(count)
        self._calls_since_redraw = count
        self._mirrored = self._buffer_stamp()

    def _count(self) -> int:
        # the eager count, read back from the buffer (one host
        # synchronisation) only after something else wrote it
        if self._buffer_stamp() != self._mirrored:
            self._set_count(int(self.calls_since_redraw))
        return self._calls_since_redraw

    @torch.no_grad()
    def _traced_step(self) -> None:
        # the same counting and redraw as step(), on tensors: a projection
        # is drawn at every pass and kept where the interval is due
        count = self.calls_since_redraw
        due = count >= self.redraw_interval
        if self.kernel != 'elu':
            drawn = orthogonal_gaussian(self.num_features, self.head_dim,
                                        None, self.projection.dtype,
                                        self.projection.device)
            self.projection.copy_(torch.where(due, drawn, self.projection))
        count.copy_(torch.where(due, 1, count + 1))

    def step(self) -> None:
        r"""Counts one training forward pass of the owning layer and
        redraws the projection every :obj:`redraw_interval` passes.

        The owner calls it once per forward pass, before mapping anything,
        so queries and keys of one pass always share a projection. It does
        nothing in eval mode and inside a backward pass (the recomputation
        of activation checkpointing must see the projection its forward
        pass used).

        Under :func:`torch.compile` the count lives in the
        :obj:`calls_since_redraw` buffer and the redraw is a selection
        between the current projection and one drawn at every pass (from
        the default generator), so the compiled graph is the same at every
        pass and compiled and eager passes may alternate."""
        if not self.training or self.redraw_interval is None:
            return
        if torch.compiler.is_compiling():
            self._traced_step()
            return
        if torch._C._current_graph_task_id() != -1:
            return
        if self._count() >= self.redraw_interval:
            self.redraw_projection()
        self._set_count(self._calls_since_redraw + 1)

    def forward(self, x: Tensor, is_query: bool,
                group: Optional[Tensor] = None,
                num_groups: Optional[int] = None) -> Tensor:
        r"""Maps :obj:`x` of shape :obj:`[N, H, d]` to :obj:`[N, H, r]`.

        Args:
            x (torch.Tensor): Queries or keys.
            is_query (bool): FAVOR+ stabilises queries per row and keys by a
                constant shared by every key of a normalisation group.
            group (torch.Tensor, optional): For keys, the group (e.g. graph)
                of every row; keys of one group share a stabiliser, which
                keeps graphs in a batch independent. (default: :obj:`None`,
                one stabiliser for all keys)
            num_groups (int, optional): Number of groups.
        """
        self._check_head_dim(x)
        if making_plans_only():  # no index work here
            return x.new_zeros(x.shape[:-1] + (
                self.head_dim if self.kernel == 'elu' else
                self.num_features, ))
        if self.kernel == 'elu':
            return torch.nn.functional.elu(x) + 1.0
        if self.kernel == 'relu':
            x = x * self.head_dim**-0.25
            proj = x @ self.projection.to(x.dtype).t()  # [N, H, r]
            return (proj.relu() + _RELU_EPS) * self.num_features**-0.5
        return favor_plus(x, self.projection, is_query, group, num_groups)

    def keys_and_queries(self, keys: Tensor, queries: Tensor,
                         group: Optional[Tensor] = None,
                         num_groups: Optional[int] = None
                         ) -> Tuple[Tensor, Tensor]:
        r"""Maps keys and queries as :obj:`self(keys, False, group,
        num_groups)` and :obj:`self(queries, True)` do, FAVOR+ in one pass
        where it can (``favor_plus_keys_queries``)."""
        if self.kernel != 'favor+' or making_plans_only():
            return (self(keys, False, group, num_groups),
                    self(queries, True))
        self._check_head_dim(keys)
        self._check_head_dim(queries)
        return favor_plus_keys_queries(keys, queries, self.projection,
                                       group, num_groups)

    def _check_head_dim(self, x: Tensor) -> None:
        if x.size(-1) != self.head_dim:
            raise ValueError(f"'x' must have head dimension {self.head_dim},"
                             f" got shape {tuple(x.shape)}")

    def extra_repr(self) -> str:
        return (f'head_dim={self.head_dim}, kernel={self.kernel!r}, '
                f'num_features={self.num_features}, '
                f'redraw_interval={self.redraw_interval}, seed={self.seed}')

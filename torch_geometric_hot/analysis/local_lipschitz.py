r"""An empirical local Lipschitz constant: the spectral norm of a
function's Jacobian at a point, by power iteration."""
from typing import Callable, Optional, Tuple

import torch
from torch import Tensor


def local_lipschitz(fn: Callable[[Tensor], Tensor], x: Tensor,
                    iterations: int = 200, tol: float = 1e-9,
                    generator: Optional[torch.Generator] = None) -> float:
    r"""Largest singular value of the Jacobian :math:`J = D_X f` of
    :obj:`fn` at :obj:`x` (Frobenius norms on input and output), the local
    Lipschitz constant of Definition 3.6 of `Dussolle & Liò 2025
    <https://arxiv.org/abs/2511.04624>`_ at one point.

    Power iteration on :math:`J^\top J`, each step a Jacobian–vector and a
    vector–Jacobian product from one recorded autograd graph (the
    Jacobian–vector product by double backward), without forming
    :math:`J`:

    .. math::
        v_{t+1} = \frac{J^\top J v_t}{\lVert J^\top J v_t \rVert},
        \qquad \sigma_t = \lVert J v_t \rVert
        \;\uparrow\; \lVert J \rVert_2.

    :math:`\sigma_t` never exceeds :math:`\lVert J \rVert_2` (it is
    :math:`\lVert J v \rVert` for a unit :math:`v`); it stops when its
    relative change falls below :obj:`tol`. The supremum over a set
    (e.g. the ball :math:`B_R^n`) is estimated by the maximum over points.

    Args:
        fn (callable): A function of one tensor, e.g.
            ``lambda x: layer(x, edge_index)``.
        x (torch.Tensor): The point (float64 recommended).
        iterations (int, optional): Most power steps. (default: :obj:`200`)
        tol (float, optional): Relative change that stops the iteration.
            (default: :obj:`1e-9`)
        generator (torch.Generator, optional): Seeds the start vector.

    :rtype: :class:`float`
    """
    if not isinstance(x, Tensor) or not x.is_floating_point():
        raise TypeError(f"'x' must be a floating-point tensor, got "
                        f"{getattr(x, 'dtype', type(x))}")
    if isinstance(iterations, bool) or not isinstance(
            iterations, int) or iterations < 1:
        raise ValueError(f"'iterations' must be an integer >= 1, got "
                         f"{iterations!r}")
    if x.numel() == 0:
        return 0.0
    jvp, vjp = _linearise(fn, x)
    v = torch.randn(x.shape, generator=generator, dtype=x.dtype,
                    device='cpu').to(x.device)
    v = v / v.norm()
    sigma = 0.0
    for _ in range(iterations):
        jv = jvp(v)
        new_sigma = float(jv.norm())
        w = vjp(jv)
        converged = abs(new_sigma - sigma) <= tol * max(new_sigma, 1e-300)
        sigma = max(sigma, new_sigma)
        if converged or float(w.norm()) == 0.0:
            break
        v = w / w.norm()
    return sigma


def _linearise(fn: Callable[[Tensor], Tensor], x: Tensor
               ) -> Tuple[Callable[[Tensor], Tensor], Callable[[Tensor],
                                                               Tensor]]:
    r"""Jacobian–vector and vector–Jacobian products of :obj:`fn` at
    :obj:`x` from one recorded graph: :math:`g(u) = J^\top u` is linear in
    :math:`u`, so :math:`J v` is the vector–Jacobian product of :math:`g`
    with :math:`v`."""
    point = x.detach().requires_grad_()
    with torch.enable_grad():
        out = fn(point)
        transposed = None
        if out.requires_grad:
            probe = torch.zeros_like(out, requires_grad=True)
            (transposed, ) = torch.autograd.grad(out, point, probe,
                                                 create_graph=True,
                                                 allow_unused=True)
    if transposed is None or not transposed.requires_grad:  # constant fn
        zero_out, zero_in = torch.zeros_like(out), torch.zeros_like(x)
        return (lambda v: zero_out), (lambda u: zero_in)

    def jvp(v: Tensor) -> Tensor:
        (jv, ) = torch.autograd.grad(transposed, probe, v, retain_graph=True)
        return jv.detach()

    def vjp(u: Tensor) -> Tensor:
        (ju, ) = torch.autograd.grad(out, point, u, retain_graph=True)
        return ju.detach()

    return jvp, vjp

r"""What the UK solve knows of a system's sparsity, and whether it uses it:
:func:`structure_report`.

The structured solve (:mod:`ukjax._structure`) is taken silently where it pays; this says
why or why not for a given system, state size and UK solver, with the patterns' sizes and
the multiply-adds of the dense and the structured solves.

Example:
    >>> import jax.numpy as jnp, ukjax
    >>> from ukjax.systems import PlanarChain
    >>> chain = PlanarChain.uniform(8)                       # n = 16, 8 distance rows
    >>> q, _ = chain.state_from_angles(jnp.linspace(0.1, 0.8, 8), jnp.zeros(8))
    >>> report = ukjax.structure_report(chain, q)
    >>> report.used, report.mass_entries, report.jacobian_colors
    (True, 16, 4)
    >>> ukjax.structure_report(chain, q, ukjax.Regularized(kernels=ukjax.LapackKernels())).used
    False
"""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
from jaxtyping import ArrayLike

from ._dynamics import _blocks
from ._structure import dense_multiply_adds, detect, multiply_adds, worthwhile
from ._system import System
from ._uk_solvers import AbstractUKSolver, Regularized, check_uk_solver


class StructureReport(NamedTuple):
    """The sparsity of one system's UK solve (see :func:`structure_report`).

    - `n`, `m`: coordinates and constraint rows (holonomic, nonholonomic, raw);
    - `mass_entries`, `jacobian_entries`: structural non-zeros of M (symmetrised) and of
      the stacked constraint Jacobian, out of `n * n` and `m * n` (None: not analysed);
    - `jacobian_colors`: forward-mode products per Jacobian evaluation (column colouring;
      `n` for the dense Jacobian);
    - `dense_multiply_adds`, `structured_multiply_adds`: the factorisations' work, counted
      from the patterns (fill-in included);
    - `used`: whether the UK solve runs on the structure; `reason`: why, in words."""

    n: int
    m: int
    mass_entries: int | None
    jacobian_entries: int | None
    jacobian_colors: int | None
    dense_multiply_adds: float
    structured_multiply_adds: int | None
    used: bool
    reason: str


def structure_report(
    system: System, q: ArrayLike, uk_solver: AbstractUKSolver | None = None
) -> StructureReport:
    """Whether the UK solve of `system` at states shaped like `q` runs on structural
    non-zeros with `uk_solver` (default :class:`ukjax.Regularized`), and why.

    Only the shape and dtype of `q` matter: the pattern holds at every state (it is found
    from the system's program, :mod:`ukjax._sparsity`). Call it outside `jax.jit`.

    Example (the Bricard mechanism: its loop's Gram matrix fills in, so it stays dense):
        >>> import ukjax
        >>> from ukjax.systems import Bricard
        >>> bricard = Bricard()
        >>> report = ukjax.structure_report(bricard, bricard.initial_state()[0])
        >>> report.used, report.reason
        (False, 'only 8.0x fewer multiply-adds than dense')
    """
    uk_solver = Regularized() if uk_solver is None else check_uk_solver(uk_solver)
    q = jnp.asarray(q)
    if q.ndim != 1 or not jnp.issubdtype(q.dtype, jnp.floating):
        raise ValueError(f"structure_report: q must be a float vector; got {q.dtype}{q.shape}.")
    n = q.shape[0]
    kernels = uk_solver.kernels
    structure = detect(system, n, q.dtype, _blocks)
    if structure is None:
        return StructureReport(n, 0, None, None, None, n**3 / 3, None, False, "not analysed")
    m = structure.m
    dense = dense_multiply_adds(structure)
    colors = [p.n_colors for p in (structure.holonomic, structure.nonholonomic) if p]
    cost = multiply_adds(structure)
    if uk_solver.gram_parameters(q.dtype) is None:
        used, reason = False, f"{type(uk_solver).__name__} has no Gram-matrix form"
    elif not kernels.structured(n):
        used, reason = False, f"{type(kernels).__name__} keeps n = {n} dense"
    elif not worthwhile(structure, kernels):
        ratio = dense / max(cost, 1)
        used, reason = False, f"only {ratio:.1f}x fewer multiply-adds than dense"
    else:
        used, reason = True, f"{dense / max(cost, 1):.0f}x fewer multiply-adds than dense"
    return StructureReport(
        n, m, len(structure.mass), len(structure.constraint_entries()),
        sum(colors) if colors else None, dense, cost, used, reason,
    )  # fmt: skip

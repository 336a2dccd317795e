r"""Which dense operations a UK solve uses: the kernel strategies
(:class:`AutoKernels`, the default, :class:`UnrolledKernels`, :class:`LapackKernels`,
:class:`StructuredKernels`, all :class:`AbstractKernels`).

The operations themselves, LAPACK calls or unrolled scalar code, are in
:mod:`ukjax._kernels` (:class:`ukjax._kernels.DenseOps`). A strategy picks them for a
system of n coordinates (:meth:`AbstractKernels.ops`), says whether the sparsity of M and of
the constraint Jacobians is worth finding (:meth:`AbstractKernels.structured`,
:mod:`ukjax._structure`), which kernels the once-per-event code of a hybrid run takes
(:meth:`AbstractKernels.at_events`), and how the contact multipliers of a frictional solve
are solved (:meth:`AbstractKernels.column_multipliers`).

A third way, for sparse systems, works on structural non-zeros only
(:mod:`ukjax._structure`): :class:`AutoKernels` takes it where the dense solve is LAPACK's
(from :data:`STRUCTURED_MIN_N` coordinates) and it is :data:`WORTHWHILE_RATIO` times less
work, and for systems small enough for the written-out dense solve (from
:data:`SMALL_STRUCTURED_MIN_N` coordinates) where it is :data:`SMALL_RATIO` times less,
:class:`StructuredKernels` whenever it is less work.
"""

from __future__ import annotations

import abc

import equinox as eqx
import jax

from ._kernels import LAPACK, UNROLL_MAX_N, UNROLLED, DenseOps
from ._linalg import pinv_solve, row_multipliers


STRUCTURED_MIN_N = 9
"""Smallest number of coordinates for which :class:`AutoKernels` compares the structured
solve with LAPACK's dense one (:data:`WORTHWHILE_RATIO`): the first size above the
written-out dense solve's `max_unrolled` (8). It finds the sparsity of M and of the
constraint Jacobians from the system's program (:mod:`ukjax._structure`). Below it,
systems take the structured solve from :data:`SMALL_STRUCTURED_MIN_N` coordinates
(:data:`SMALL_RATIO`). `AutoKernels(min_structured=None)` or :class:`LapackKernels` turn
both off. It was 16 until stop 97, when chains of 5 to 7 links in Cartesian coordinates
were measured slower batched on LAPACK than on their structure (`benchmarks/RESULTS.md`,
stop 97)."""


SMALL_STRUCTURED_MIN_N = 4
"""Smallest number of coordinates for which :class:`AutoKernels` compares the structured
solve with the written-out dense one (:data:`SMALL_RATIO`; up to its `max_unrolled`
coordinates): a 2-link chain in Cartesian coordinates has 4."""


WORTHWHILE_RATIO = 10.0
"""How many times fewer multiply-adds than the dense solve the structured one must do for
:class:`AutoKernels` to use it where the dense solve is LAPACK's (more than
:data:`ukjax._kernels.UNROLL_MAX_N` coordinates or rows): a user's chain of 5 links
(n = 10, 14x fewer) and every longer one take it, and so does a swarm of 5 robots (67x);
the Bricard mechanism (24 redundant rows closing a loop, whose Gram matrix fills in: 8x
fewer) does not. Batched, the structured straight-line code beats per-trajectory LAPACK
calls; alone, one trajectory runs slower and compiles longer (timings in
`benchmarks/RESULTS.md`, stop 97)."""


SMALL_RATIO = 2.5
"""The ratio of :data:`WORTHWHILE_RATIO` where the dense solve is written out too (its
operations call no LAPACK: with :class:`AutoKernels`, at most `max_unrolled` coordinates
and rows): both are then straight-line programs, and the one with fewer multiply-adds is
the shorter program and the faster run. User-written chains in Cartesian coordinates of
2 to 4 links (3-9x fewer) take it; the N-four-bar, the double rod and the Appell-Hamel
wheel (1.6-2x fewer), which compiled longer structured, stay dense (timings in
`benchmarks/RESULTS.md`, stop 96)."""


class AbstractKernels(eqx.Module):
    """The kernel backend of a UK solve: which dense operations to use for n coordinates.

    Subclass it and implement :meth:`ops`; every UK solver strategy
    (:class:`ukjax.CholeskyWithFallback`, :class:`ukjax.SVD`, :class:`ukjax.Cholesky`) has
    a `kernels` field that takes one.
    """

    @abc.abstractmethod
    def ops(self, n: int) -> DenseOps:
        """The :class:`DenseOps` for a system of `n` coordinates (decided at trace time)."""

    def structured(self, n: int) -> bool:
        """Whether a system of `n` coordinates should have the sparsity of its mass matrix
        and constraint Jacobians detected and used (:mod:`ukjax._structure`); the dense
        :meth:`ops` remain the fallback when it has none worth using."""
        return False

    def structure_pays(self, dense: float, structured: float, written_out: bool = False) -> bool:
        """Whether the structured solve is used for a system whose dense factorisations
        cost `dense` multiply-adds and whose structured solve `structured` (both counted
        from the patterns, :func:`ukjax._structure.multiply_adds`); `written_out`: whether
        this strategy's dense solve of that size calls no LAPACK
        (:func:`ukjax._structure.worthwhile`)."""
        return False

    def at_events(self) -> AbstractKernels:
        """The kernels of the code of a hybrid run (:mod:`ukjax._hybrid`) that runs once
        per step or once per event, not once per stage of a step: the event values (the
        contact forces of the stick-slip events), the mode switches, impacts and the
        complementarity pivots. It holds many UK solves that run seldom next to the
        stages: the same kernels unless a subclass says otherwise."""
        return self

    def column_multipliers(self, A: jax.Array, F: jax.Array) -> jax.Array:
        r"""The minimum-norm multipliers $\Lambda$ (m, k) of $A^T\Lambda = F$ for rows A
        (m, n) and constraint forces F (n, k) in the range of $A^T$: the contact
        multipliers of the columns of a frictional UK solve
        (:func:`ukjax._friction.frictional_solve`). By default the regularised solve on
        :meth:`ops` (:func:`ukjax._linalg.row_multipliers`: a Cholesky factor of the n x n
        Gram matrix and triangular solves, smooth at every rank)."""
        return row_multipliers(A, F, self.ops(A.shape[1]))


class LapackKernels(AbstractKernels):
    """LAPACK factorisations and triangular solves (`jnp.linalg`, `jax.scipy.linalg`).

    Example:
        >>> import jax.numpy as jnp, ukjax
        >>> solver = ukjax.CholeskyWithFallback(kernels=ukjax.LapackKernels())
        >>> [float(v) for v in ukjax.udwadia_kalaba(jnp.eye(2), jnp.array([0.0, -1.0]),
        ...     jnp.array([[0.0, 1.0]]), jnp.array([0.0]), uk_solver=solver)]
        [0.0, 0.0]
    """

    def ops(self, n: int) -> DenseOps:
        return LAPACK


class UnrolledKernels(AbstractKernels):
    """Straight-line scalar code that XLA fuses across a `vmap` batch (any n; the program
    grows like n^3, so prefer :class:`AutoKernels` unless n is small).

    Example:
        >>> import jax.numpy as jnp, ukjax
        >>> solver = ukjax.CholeskyWithFallback(kernels=ukjax.UnrolledKernels())
        >>> [float(v) for v in ukjax.udwadia_kalaba(jnp.eye(2), jnp.array([0.0, -1.0]),
        ...     jnp.array([[0.0, 1.0]]), jnp.array([0.0]), uk_solver=solver)]
        [0.0, 0.0]
    """

    def ops(self, n: int) -> DenseOps:
        return UNROLLED

    def column_multipliers(self, A: jax.Array, F: jax.Array) -> jax.Array:
        """One SVD of $A^T$ (:func:`ukjax._linalg.pinv_solve`): in the stages of a
        frictional run (n <= 8 under :class:`AutoKernels`) it was measured faster than the
        regularised solve written out (`benchmarks/RESULTS.md`, stop 89). jaxlib 0.10
        splits a batched SVD over XLA's thread pool, and three at once can deadlock it
        (`tests/lapack_concurrency.py`): the event code, which holds several frictional
        solves side by side, takes LAPACK kernels from n = 3 (:meth:`AutoKernels.at_events`)
        and with them the SVD-free solve of :class:`LapackKernels`."""
        return pinv_solve(A.T, F)


class AutoKernels(AbstractKernels):
    """Unrolled kernels for n <= `max_unrolled` (the UK solve passes the larger of the
    number of coordinates and of constraint rows: it factors both M and the m x m Gram
    matrix), LAPACK above (the default);
    from `min_structured` coordinates (default :data:`STRUCTURED_MIN_N`, 9, None: never)
    the UK solve and the projection work on the structural non-zeros of M and of the
    constraint Jacobians, found from the system's program (:mod:`ukjax._structure`), when
    that is at least :data:`WORTHWHILE_RATIO` times fewer multiply-adds than the dense
    solve; from :data:`SMALL_STRUCTURED_MIN_N` to `max_unrolled` coordinates, where the
    dense solve is written out too, at least :data:`SMALL_RATIO` times fewer.

    The threshold 8 was measured by `benchmarks/kernels.py` on a 2-core CPU. The code
    that a hybrid run executes once per step or per event (:meth:`at_events`: event values,
    switches, impacts, pivots) uses unrolled kernels only up to `max_unrolled_at_events`
    coordinates (default 2, LAPACK above): it holds a dozen UK solves whose unrolled
    copies doubled the compile time of contact runs from n = 3 on, while the stages of
    the steps keep the unrolled kernels (`benchmarks/RESULTS.md`, contact compile section).

    Example:
        >>> import ukjax
        >>> ukjax.AutoKernels().ops(4) is ukjax.UnrolledKernels().ops(4)
        True
        >>> ukjax.AutoKernels(max_unrolled=2).ops(4) is ukjax.LapackKernels().ops(4)
        True
        >>> ukjax.AutoKernels().at_events().ops(4) is ukjax.LapackKernels().ops(4)
        True
        >>> off = ukjax.AutoKernels(min_structured=None)
        >>> ukjax.AutoKernels().structured(16), off.structured(64)
        (True, False)
    """

    max_unrolled: int = eqx.field(static=True, default=UNROLL_MAX_N)
    min_structured: int | None = eqx.field(static=True, default=STRUCTURED_MIN_N)
    max_unrolled_at_events: int = eqx.field(static=True, default=2)

    def dense(self, n: int) -> AbstractKernels:
        """The dense strategy for `n` coordinates: unrolled up to `max_unrolled`, LAPACK
        above."""
        return UnrolledKernels() if n <= self.max_unrolled else LapackKernels()

    def ops(self, n: int) -> DenseOps:
        return self.dense(n).ops(n)

    def column_multipliers(self, A: jax.Array, F: jax.Array) -> jax.Array:
        return self.dense(A.shape[1]).column_multipliers(A, F)

    def structured(self, n: int) -> bool:
        if self.min_structured is None:
            return False
        written_out = SMALL_STRUCTURED_MIN_N <= n <= self.max_unrolled
        return n >= self.min_structured or written_out

    def structure_pays(self, dense: float, structured: float, written_out: bool = False) -> bool:
        ratio = SMALL_RATIO if written_out else WORTHWHILE_RATIO
        return dense >= ratio * max(structured, 1.0)

    def at_events(self) -> AutoKernels:
        return AutoKernels(
            max_unrolled=self.max_unrolled_at_events,
            min_structured=self.min_structured,
            max_unrolled_at_events=self.max_unrolled_at_events,
        )


class StructuredKernels(AbstractKernels):
    """Find the sparsity of M and of the constraint Jacobians and work only on their
    structural non-zeros, at any n, whenever that is fewer multiply-adds than the dense
    solve (:mod:`ukjax._structure`); dense kernels as :class:`AutoKernels` otherwise.

    Example:
        >>> import jax.numpy as jnp, ukjax
        >>> from ukjax.systems import PlanarChain
        >>> chain = PlanarChain.uniform(3)
        >>> q, qd = chain.state_from_angles(jnp.array([0.1, 0.2, 0.3]), jnp.zeros(3))
        >>> solver = ukjax.Regularized(kernels=ukjax.StructuredKernels())
        >>> fast = ukjax.acceleration(chain, 0.0, q, qd, uk_solver=solver)
        >>> dense = ukjax.acceleration(chain, 0.0, q, qd,
        ...     uk_solver=ukjax.Regularized(kernels=ukjax.LapackKernels()))
        >>> bool(jnp.allclose(fast, dense, rtol=1e-10, atol=1e-10))
        True
    """

    max_unrolled: int = eqx.field(static=True, default=UNROLL_MAX_N)

    def dense(self, n: int) -> AbstractKernels:
        """The dense strategy for `n` coordinates, as :meth:`AutoKernels.dense`."""
        return AutoKernels(max_unrolled=self.max_unrolled).dense(n)

    def ops(self, n: int) -> DenseOps:
        return self.dense(n).ops(n)

    def column_multipliers(self, A: jax.Array, F: jax.Array) -> jax.Array:
        return self.dense(A.shape[1]).column_multipliers(A, F)

    def structured(self, n: int) -> bool:
        return True

    def structure_pays(self, dense: float, structured: float, written_out: bool = False) -> bool:
        return structured < dense

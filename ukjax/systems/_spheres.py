r"""Solid balls on a rough table in 3-D: the sliding-then-rolling ball and a billiard rack.

Each ball has six coordinates $(x, y, z, \varphi_x, \varphi_y, \varphi_z)$: its centre
and its *integrated angular velocity*, $\dot\varphi = \omega$. These are not orientation
coordinates (a rotation is not $\varphi$), but nothing in a homogeneous ball's dynamics
depends on its orientation: $T = \tfrac12 m|\dot x|^2 + \tfrac12 I|\omega|^2$ with $I =
\tfrac25 mR^2$ the same about every axis, so Euler's equations $I\dot\omega = \tau$ are
linear and the mass matrix is constant (Routh, *Dynamics of a System of Rigid Bodies*,
1905, §§ 239-243, for the same reduction of a sphere on a plane).

Contacts (unilateral, :meth:`ukjax.System.unilateral`): each ball on the table,
$g = z - R$, then each pair, $g = |x_i - x_j| - 2R$. Friction (:mod:`ukjax._friction`,
two tangent rows per contact, isotropic cones): the slip of the contact point, for the
table $v + \omega\times(-R\hat z)$ in the $x$, $y$ directions, for a pair the relative
velocity of the two surface points in the plane normal to the line of centres.

Closed forms (Routh 1905, § 243; tests): a ball launched on the table with slip
$u_0 = v_0 + \omega_0\times(-R\hat z)$ slides with its slip shrinking along a fixed line,
$u(t) = u_0(1 - t/t^*)$, $t^* = 2|u_0|/(7\mu_kg)$, then rolls with $v = v_0 -
\mu_kg\,t^*\hat u_0$: from rest spin, $5v_0/7$.

Example:
    >>> import jax.numpy as jnp
    >>> from ukjax.systems import BallsOnTable
    >>> balls = BallsOnTable(count=2)
    >>> q = jnp.array([0.0, 0.0, 0.028575, 0, 0, 0, 0.1, 0.0, 0.028575, 0, 0, 0])
    >>> [round(float(g), 5) for g in balls.unilateral(0.0, q)]  # two on the table, one pair
    [0.0, 0.0, 0.04285]
    >>> balls.friction(0.0, q)[0].shape  # three contacts, two tangent rows, 12 coordinates
    (3, 2, 12)
"""

from __future__ import annotations

import itertools

import equinox as eqx
import jax.numpy as jnp

from .._system import System


class BallsOnTable(System):
    r"""`count` solid balls (radius `radius`, mass `mass`) on a horizontal table $z = 0$
    under gravity `g`, with Coulomb friction on the table (`mu_static`, `mu_kinetic`) and
    between balls (`mu_ball`); module docstring for the coordinates and closed forms.

    $q = (x_1, y_1, z_1, \varphi_{x1}, \varphi_{y1}, \varphi_{z1}, x_2, \dots)$; contacts
    $[z_i - R]_{i}$ then $[|x_i - x_j| - 2R]_{i<j}$. Defaults: a pool ball (57.15 mm,
    170 g) on cloth ($\mu = 0.2$), balls against each other frictionless (`mu_ball` > 0
    couples the balls' table contacts to their collisions through the friction impulse,
    which the impact's pivoting may fail to resolve: then `RESULTS.contact_unsolved`).
    The tangent rows of a pair are singular if the line of centres is vertical (stacked
    balls).
    """

    count: int = eqx.field(static=True, default=1)
    radius: float = 0.028575
    mass: float = 0.17
    g: float = 9.81
    mu_static: float = 0.2
    mu_kinetic: float | None = None
    mu_ball: float = 0.0

    def num_coordinates(self) -> int:
        return 6 * self.count

    def mass_matrix(self, t, q):
        inertia = 0.4 * self.mass * self.radius**2
        one = jnp.array([self.mass] * 3 + [inertia] * 3, dtype=q.dtype)
        return jnp.diag(jnp.tile(one, self.count))

    def kinetic_energy(self, t, q, qd):
        return 0.5 * qd @ self.mass_matrix(t, q) @ qd

    def potential_energy(self, t, q):
        return self.mass * self.g * jnp.sum(q.reshape(self.count, 6)[:, 2])

    def _pairs(self):
        return list(itertools.combinations(range(self.count), 2))

    def unilateral(self, t, q):
        x = q.reshape(self.count, 6)[:, :3]
        table = x[:, 2] - self.radius
        pairs = [jnp.linalg.norm(x[i] - x[j]) - 2 * self.radius for i, j in self._pairs()]
        return jnp.concatenate([table, jnp.stack(pairs)]) if pairs else table

    def friction(self, t, q):
        n, R = 6 * self.count, self.radius
        x = q.reshape(self.count, 6)[:, :3]
        rows = []
        for i in range(self.count):  # contact point -R z: slip v + w x (-R z)
            T = jnp.zeros((2, n), q.dtype)
            T = T.at[0, 6 * i].set(1.0).at[0, 6 * i + 4].set(-R)
            T = T.at[1, 6 * i + 1].set(1.0).at[1, 6 * i + 3].set(R)
            rows.append(T)
        for i, j in self._pairs():
            normal = (x[j] - x[i]) / jnp.linalg.norm(x[j] - x[i])
            side = jnp.cross(jnp.array([0.0, 0.0, 1.0], q.dtype), normal)
            t1 = side / jnp.linalg.norm(side)  # horizontal, across the line of centres
            t2 = jnp.cross(normal, t1)
            basis = jnp.stack([t1, t2])  # (2, 3)
            # slip: (v_i + w_i x R n) - (v_j + w_j x (-R n)); (w x a).t = w.(a x t)
            T = jnp.zeros((2, n), q.dtype)
            T = T.at[:, 6 * i : 6 * i + 3].set(basis)
            T = T.at[:, 6 * i + 3 : 6 * i + 6].set(jnp.cross(R * normal, basis))
            T = T.at[:, 6 * j : 6 * j + 3].set(-basis)
            T = T.at[:, 6 * j + 3 : 6 * j + 6].set(jnp.cross(R * normal, basis))
            rows.append(T)
        k = len(rows)
        mu_k = self.mu_static if self.mu_kinetic is None else self.mu_kinetic
        table = jnp.full(self.count, 1.0, q.dtype)
        mu_s = jnp.concatenate([table * self.mu_static, jnp.full(k - self.count, self.mu_ball)])
        mu_k = jnp.concatenate([table * mu_k, jnp.full(k - self.count, self.mu_ball)])
        return jnp.stack(rows), mu_s, mu_k

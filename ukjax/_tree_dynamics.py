r"""Recursive dynamics of a tree of hinges and slides: the mass matrix by the composite
rigid-body algorithm and the velocity and gravity forces by the recursive Newton-Euler
algorithm, as two `lax.scan` loops over the bodies.

Featherstone, *Rigid Body Dynamics Algorithms*, Springer 2008: the recursive Newton-Euler
algorithm (sec. 5.3, Table 5.1) and the composite rigid-body algorithm (sec. 6.2, Table
6.2), here in absolute coordinates: every spatial vector is expressed in the world frame
at its origin O, so nothing is transformed from body to body. A motion vector is
$(\omega, v_O)$, a force vector $(n_O, f)$. A hinge with world axis $a$ through the point
$x$ has motion subspace $S = (a, x\times a)$, a slide $S = (0, a)$; both are fixed in the
bodies on either side, so $\dot S = V\times S$.

Root to leaves (one scan step per body, its parent's row read from the carries): the
body's frame, $V_b = V_{\lambda(b)} + \sum_j S_j\dot q_j$ and $A_b = A_{\lambda(b)} +
\sum_j V\times S_j\dot q_j$ (its joints in order), with $A_0 = (0, -g)$; and its spatial
inertia at O as (m, h = mc, $K = I_c + m(|c|^21 - cc^T)$), which maps a motion $(s, u)$ to
$(Ks + h\times u,\ mu + s\times h)$. Leaves to root: $f_b = I_bA_b + V_b\times^*I_bV_b$ and
$I_b$ summed into the parent's row, giving each subtree's force $F_b$ and composite
inertia $I^c_b$; then $\tau_j = S_j^TF_{b(j)}$ and $M_{ij} = S_i^TI^c_{b(j)}S_j$ for joint
i at or above joint j. The equations of motion are $M\ddot q = -\tau$ + the other forces.

A scan compiles one body's step whatever the number of bodies (the straight-line form of
the same algorithms compiles a copy per body; see benchmarks/RESULTS.md, stop 63).

Example:
    >>> import jax.numpy as jnp, numpy as np, ukjax
    >>> from ukjax._tree_dynamics import tree_dynamics
    >>> pendulum = ukjax.from_mjcf('''<mujoco><worldbody><body>
    ...   <joint type="hinge" axis="0 1 0"/>
    ...   <geom type="sphere" size="0.05" pos="0 0 -1" mass="1"/>
    ... </body></worldbody></mujoco>''')
    >>> M, tau = tree_dynamics(pendulum, jnp.array([0.5]), jnp.zeros(1), np.zeros((1, 1), bool))
    >>> round(float(M[0, 0]), 4), round(float(tau[0]), 4)  # m l^2 + 2/5 m r^2, m g l sin(0.5)
    (1.001, 4.7032)
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ._quaternion import rotation_matrix
from ._shared_trig import shared_cos, shared_sin
from ._static_index import take


HINGE = 3  # MuJoCo's mjtJoint code (the other joint of these trees: a slide)


def _vec(a, start=0):
    return a[start], a[start + 1], a[start + 2]


def _mat(a):
    return tuple(_vec(a, 3 * i) for i in range(3))


def _add(a, b):
    return tuple(x + y for x, y in zip(a, b))


def _sub(a, b):
    return tuple(x - y for x, y in zip(a, b))


def _scale(a, s):
    return tuple(x * s for x in a)


def _dot(a, b):
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


def _cross(a, b):
    return (
        a[1] * b[2] - a[2] * b[1],
        a[2] * b[0] - a[0] * b[2],
        a[0] * b[1] - a[1] * b[0],
    )


def _matvec(R, v):
    return tuple(_dot(row, v) for row in R)


def _matmul(A, B):
    columns = tuple(zip(*B))
    return tuple(tuple(_dot(row, col) for col in columns) for row in A)


def _axis_rotation(u, angle):
    r"""$R = \cos\theta\,1 + \sin\theta\,[u]_\times + (1 - \cos\theta)uu^T$."""
    c, s = shared_cos(angle), shared_sin(angle)  # once each, not in every entry
    v = 1.0 - c
    return (
        (c + v * u[0] * u[0], v * u[0] * u[1] - s * u[2], v * u[0] * u[2] + s * u[1]),
        (v * u[1] * u[0] + s * u[2], c + v * u[1] * u[1], v * u[1] * u[2] - s * u[0]),
        (v * u[2] * u[0] - s * u[1], v * u[2] * u[1] + s * u[0], c + v * u[2] * u[2]),
    )


def _flat(*parts):
    return jnp.stack([x for part in parts for x in part])


def _inertia_apply(I, X):
    """The spatial inertia I = (m, h, K) (13,) at O applied to the motion X (6,)."""
    m, h, K = I[0], _vec(I, 1), _mat(I[4:])
    s, u = _vec(X), _vec(X, 3)
    return _add(_matvec(K, s), _cross(h, u)), _add(_scale(u, m), _cross(s, h))


def _body_force(I, V, A):
    r"""$f = IA + V\times^*IV$ (6,)."""
    n, f = _inertia_apply(I, A)
    n_v, f_v = _inertia_apply(I, V)
    w, v = _vec(V), _vec(V, 3)
    return _flat(_add(n, _add(_cross(w, n_v), _cross(v, f_v))), _add(f, _cross(w, f_v)))


class _Layout:
    """The tree's static layout: each body's parent and joints (padded to the most joints
    on one body; a padding slot neither turns nor slides)."""

    def __init__(self, model):
        nb = len(model.parents)
        self.slots = max(1, max((len(model.body_joints[b]) for b in range(1, nb)), default=1))
        self.parents = np.array(model.parents[1:], int)
        joint = np.zeros((nb - 1, self.slots), int)
        hinge = np.zeros((nb - 1, self.slots))
        slide = np.zeros((nb - 1, self.slots))
        for b in range(1, nb):
            for k, j in enumerate(model.body_joints[b]):
                joint[b - 1, k] = j
                hinge[b - 1, k] = model.joints[j].kind == HINGE
                slide[b - 1, k] = model.joints[j].kind != HINGE
        self.joint, self.hinge, self.slide = joint, hinge, slide
        self.qpos = np.array([j.qpos for j in model.joints], int)
        self.body = np.zeros(len(model.joints), int)  # each joint's body (row) and slot
        self.slot = np.zeros(len(model.joints), int)
        for b in range(1, nb):
            for k, j in enumerate(model.body_joints[b]):
                self.body[j], self.slot[j] = b - 1, k


def _forward_inputs(model, layout, q, qd):
    """The scanned inputs, one row per body (traced or batched parameters allowed)."""
    dtype = q.dtype

    def param(name):
        return jnp.asarray(getattr(model, name), dtype)

    at = layout.qpos[layout.joint]  # (nb-1, slots)
    used = jnp.asarray(layout.hinge + layout.slide, dtype)
    coordinate = lambda x: take(x, at.ravel()).reshape(at.shape)  # x[at], a slice if it can
    displacement = (coordinate(q) - coordinate(param("qpos0"))) * used
    return (
        jnp.arange(1, len(model.parents)),
        jnp.asarray(layout.parents),
        rotation_matrix(param("body_quat")[1:]).reshape(-1, 9),
        param("body_pos")[1:],
        rotation_matrix(param("body_iquat")[1:]).reshape(-1, 9),
        param("body_ipos")[1:],
        param("body_inertia")[1:],
        param("body_mass")[1:],
        param("jnt_axis")[layout.joint],
        param("jnt_pos")[layout.joint],
        jnp.asarray(layout.hinge, dtype),
        jnp.asarray(layout.slide, dtype),
        displacement,
        coordinate(qd) * used,
    )


def _joint_step(R, x, V, A, axis_local, anchor_local, hinge, slide, displacement, rate):
    """One joint slot: the frame after it, its S (6,), and V, A after it."""
    axis = _matvec(R, axis_local)
    anchor = _add(x, _matvec(R, anchor_local))
    S = (_scale(axis, hinge), _add(_scale(_cross(anchor, axis), hinge), _scale(axis, slide)))
    R = _matmul(R, _axis_rotation(axis_local, displacement * hinge))
    x = _add(_sub(anchor, _matvec(R, anchor_local)), _scale(axis, displacement * slide))
    Sq = (_scale(S[0], rate), _scale(S[1], rate))
    V = (_add(V[0], Sq[0]), _add(V[1], Sq[1]))
    dA = (_cross(V[0], Sq[0]), _add(_cross(V[0], Sq[1]), _cross(V[1], Sq[0])))
    return R, x, (_add(A[0], dA[0]), _add(A[1], dA[1])), V, S


def _forward_step(carry, inputs, slots):
    frames, motions, accelerations = carry
    (b, parent, R0, pos, Ri, ipos, moments, m, axes, anchors, hinge, slide, disp, rate) = inputs
    R_parent, x_parent = _mat(frames[parent]), _vec(frames[parent], 9)
    R = _matmul(R_parent, _mat(R0))
    x = _add(x_parent, _matvec(R_parent, _vec(pos)))
    V = (_vec(motions[parent]), _vec(motions[parent], 3))
    A = (_vec(accelerations[parent]), _vec(accelerations[parent], 3))
    subspaces = []
    for k in range(slots):
        R, x, A, V, S = _joint_step(
            R, x, V, A, _vec(axes[k]), _vec(anchors[k]), hinge[k], slide[k], disp[k], rate[k]
        )
        subspaces.append(_flat(*S))
    c = _add(x, _matvec(R, _vec(ipos)))
    principal = _matmul(R, _mat(Ri))
    world = tuple(
        tuple(
            sum(principal[i][n] * principal[k][n] * moments[n] for n in range(3)) for k in range(3)
        )
        for i in range(3)
    )
    h, cc = _scale(c, m), _dot(c, c)
    K = tuple(
        tuple(world[i][k] + (m * cc if i == k else 0.0) - h[i] * c[k] for k in range(3))
        for i in range(3)
    )
    V, A = _flat(*V), _flat(*A)
    carry = (
        frames.at[b].set(_flat(*R, x)),
        motions.at[b].set(V),
        accelerations.at[b].set(A),
    )
    return carry, (jnp.stack([m, *h, *K[0], *K[1], *K[2]]), jnp.stack(subspaces), V, A)


def _backward_step(carry, inputs):
    forces, inertias = carry
    b, parent = inputs
    out = forces[b], inertias[b]
    return (forces.at[parent].add(forces[b]), inertias.at[parent].add(inertias[b])), out


def tree_dynamics(model, q, qd, before: np.ndarray):
    r"""$(M, \tau)$ (nj, nj), (nj,) of a tree of hinges and slides at $(q, \dot q)$, in
    the joints' order: the joint-space inertia (no armature) and the forces of inverse
    dynamics at $\ddot q = 0$ (velocity products and gravity). `before` (nj, nj): joint i
    moves joint j's axis (:meth:`ukjax.RigidModel._tree_masks`)."""
    dtype = q.dtype
    layout = _Layout(model)
    nb = len(model.parents)
    gravity = jnp.asarray(model.gravity, dtype)
    identity = jnp.concatenate([jnp.eye(3, dtype=dtype).reshape(-1), jnp.zeros(3, dtype)])
    carry = (
        jnp.zeros((nb, 12), dtype).at[0].set(identity),
        jnp.zeros((nb, 6), dtype),
        jnp.zeros((nb, 6), dtype).at[0, 3:].set(-gravity),
    )
    _, (inertias, subspaces, V, A) = jax.lax.scan(
        lambda c, x: _forward_step(c, x, layout.slots),
        carry,
        _forward_inputs(model, layout, q, qd),
    )
    forces = jax.vmap(_body_force)(inertias, V, A)
    world = jnp.zeros((1, 6), dtype), jnp.zeros((1, 13), dtype)  # the root's rows
    _, (subtree_forces, composite) = jax.lax.scan(
        _backward_step,
        (jnp.concatenate([world[0], forces]), jnp.concatenate([world[1], inertias])),
        (jnp.arange(1, nb), jnp.asarray(layout.parents)),
        reverse=True,
    )
    nj, body = len(model.joints), layout.body
    S = subspaces[body, layout.slot]  # (nj, 6)
    tau = jnp.sum(S * subtree_forces[body], axis=1)
    momenta = jax.vmap(lambda I, X: _flat(*_inertia_apply(I, X)))(composite[body], S)
    products = S @ momenta.T  # S_i . I^c_{b(j)} S_j
    upper = before | np.eye(nj, dtype=bool)
    M = jnp.where(upper, products, 0.0) + jnp.where(before.T, products.T, 0.0)
    return M, tau

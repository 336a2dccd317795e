r"""Recursive dynamics of a tree of hinges and slides: the mass matrix by the composite
rigid-body algorithm and the velocity and gravity forces by the recursive Newton-Euler
algorithm, the kinematics by pointer jumping over the tree and the rest as sums over
static masks of the tree.

Featherstone, *Rigid Body Dynamics Algorithms*, Springer 2008: the recursive Newton-Euler
algorithm (sec. 5.3, Table 5.1) and the composite rigid-body algorithm (sec. 6.2, Table
6.2), here in absolute coordinates: every spatial vector is expressed in the world frame
at its origin O, so nothing is transformed from body to body. A motion vector is
$(\omega, v_O)$, a force vector $(n_O, f)$. A hinge with world axis $a$ through the point
$x$ has motion subspace $S = (a, x\times a)$, a slide $S = (0, a)$; both are fixed in the
bodies on either side, so $\dot S = V\times S$.

The kinematics: each body's frame in its parent's and its joints' axes and anchors there,
for all bodies at once; the world frames by composing along the paths to the root,
$\lceil\log_2(\text{depth})\rceil$ rounds of pointer jumping (a frame composed with that
of the body its pointer names, the pointer moved to that body's pointer: Hillis and
Steele, *Data parallel algorithms*, Communications of the ACM 29, 1986); the joints' world
axes and anchors from their parents' world frames. Then, for all bodies at once: the
spatial inertia at O as (m, h = mc, $K = I_c + m(|c|^21 - cc^T)$), which maps a motion
$(s, u)$ to $(Ks + h\times u,\ mu + s\times h)$; $V_b = \sum_j S_j\dot q_j$ over the
joints above b (b's own included) and $A_b = A_0 + \sum_j V_j^-\times S_j\dot q_j$, with
$V_j^-$ the sum over the joints before j and $A_0 = (0, -g)$: the recursion's
$V_b = V_{\lambda(b)} + \sum_j S_j\dot q_j$, $A_b = A_{\lambda(b)} + \sum_j V\times
S_j\dot q_j$ unrolled ($S\dot q\times S\dot q = 0$). Leaves to root: $f_b = I_bA_b +
V_b\times^*I_bV_b$ and $I_b$ summed over each subtree, giving its force $F_b$ and
composite inertia $I^c_b$; then $\tau_j = S_j^TF_{b(j)}$ and $M_{ij} = S_i^TI^c_{b(j)}S_j$
for joint i at or above joint j. The equations of motion are $M\ddot q = -\tau$ + the
other forces.

The straight-line recursion compiles a copy of a body's step per body (benchmarks/RESULTS.md,
stop 63) and a `lax.scan` over the bodies runs one step's kernels per body (stop 99);
pointer jumping and the sums over the tree's masks are a few fused kernels for all bodies
per round (stop 100).

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
from ._static_index import masked_sum, replace, take


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
        # subtree[d, b]: body d + 1 is body b + 1 or below it
        self.subtree = np.eye(nb - 1, dtype=bool)
        for d in range(1, nb):
            a = model.parents[d]
            while a > 0:
                self.subtree[d - 1, a - 1] = True
                a = model.parents[a]
        self.body = np.zeros(len(model.joints), int)  # each joint's body (row) and slot
        self.slot = np.zeros(len(model.joints), int)
        for b in range(1, nb):
            for k, j in enumerate(model.body_joints[b]):
                self.body[j], self.slot[j] = b - 1, k


def _forward_inputs(model, layout, q):
    """Each body's rotation and position in its parent, its joint slots' axes, anchors,
    kinds and displacements: one row per body (traced or batched parameters allowed)."""
    dtype = q.dtype

    def param(name):
        return jnp.asarray(getattr(model, name), dtype)

    at = layout.qpos[layout.joint]  # (nb-1, slots)
    used = jnp.asarray(layout.hinge + layout.slide, dtype)
    coordinate = take(q, at.ravel()).reshape(at.shape)  # q[at], a slice if it can
    displacement = (coordinate - take(param("qpos0"), at.ravel()).reshape(at.shape)) * used
    return (
        rotation_matrix(param("body_quat")[1:]).reshape(-1, 9),
        param("body_pos")[1:],
        param("jnt_axis")[layout.joint],
        param("jnt_pos")[layout.joint],
        jnp.asarray(layout.hinge, dtype),
        jnp.asarray(layout.slide, dtype),
        displacement,
    )


def _joint_step(R, x, axis_local, anchor_local, hinge, slide, displacement):
    """One joint slot: the frame after it, and its axis and anchor before it moves, all in
    the frame that (R, x) are given in."""
    axis = _matvec(R, axis_local)
    anchor = _add(x, _matvec(R, anchor_local))
    R = _matmul(R, _axis_rotation(axis_local, displacement * hinge))
    x = _add(_sub(anchor, _matvec(R, anchor_local)), _scale(axis, displacement * slide))
    return R, x, axis, anchor


def _local_frames(inputs, slots):
    """Every body's frame in its parent's, (12, nb-1), and its joint slots' axes and
    anchors there, (slots, 6, nb-1): the bodies side by side (components first)."""
    (R0, pos, axes, anchors, hinge, slide, disp) = inputs
    R, x = _mat(R0.T), _vec(pos.T)
    slot_frames = []
    for k in range(slots):
        R, x, axis, anchor = _joint_step(
            R, x, _vec(axes[:, k].T), _vec(anchors[:, k].T), hinge[:, k], slide[:, k], disp[:, k]
        )
        slot_frames.append(_flat(axis, anchor))
    return _flat(*R, x), jnp.stack(slot_frames)


def _compose(outer, inner):
    r"""The frames (12, k) `inner` given in the frames `outer` (12, k), in the latter's frame:
    $(R_oR_i,\ x_o + R_ox_i)$."""
    R_o, x_o = _mat(outer), _vec(outer, 9)
    return _flat(*_matmul(R_o, _mat(inner)), _add(x_o, _matvec(R_o, _vec(inner, 9))))


def _world_frames(local, parents: np.ndarray):
    """The bodies' world frames (12, nb-1) from their frames in their parents' by pointer
    jumping: each round composes a body's frame with that of the body its pointer names
    and moves the pointer to that body's pointer, so after round r a frame spans 2^r links
    of its path to the root; ceil(log2(depth)) rounds of static indices (slices on a
    chain) in place of one step per body."""
    pointer = np.concatenate([[0], parents])  # body b's pointer; 0: the world
    T = local
    while True:
        rows = np.flatnonzero(pointer[1:] > 0)  # bodies (rows = body - 1) not yet in world
        if rows.size == 0:
            return T
        source = pointer[rows + 1] - 1
        T = replace(T, rows, _compose(take(T, source, axis=1), take(T, rows, axis=1)), axis=1)
        pointer = np.concatenate([[0], pointer[pointer[1:]]])


def _spatial_cross(V, X):
    r"""$V\times X$ of motion vectors (..., 6): $(w\times s,\ w\times u + v\times s)$."""
    w, v, s, u = (_vec(Z.T, k) for Z in (V, X) for k in (0, 3))
    return jnp.stack([*_cross(w, s), *_add(_cross(w, u), _cross(v, s))]).T


def _inertias(model, world, dtype):
    """Each body's spatial inertia at O, (m, h = mc, K) (nb-1, 13), from its world frame
    (12, nb-1)."""
    param = lambda name: jnp.asarray(getattr(model, name), dtype)[1:].T
    R, x = _mat(world), _vec(world, 9)
    m, moments = param("body_mass"), param("body_inertia")
    c = _add(x, _matvec(R, _vec(param("body_ipos"))))
    Ri = rotation_matrix(jnp.asarray(model.body_iquat, dtype)[1:]).reshape(-1, 9)
    principal = _matmul(R, _mat(Ri.T))
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
    return jnp.stack([m, *h, *K[0], *K[1], *K[2]], axis=1)


def _motions(model, layout, slot_frames, qd, before):
    r"""The joints' $S_j$ (nj, 6) and the bodies' $V_b$ and $A_b$ (nb-1, 6): $V_b$ the sum
    of $S_j\dot q_j$ over the joints above it, $A_b = A_0 + \sum_j V_j^-\times S_j\dot q_j$
    with $V_j^-$ the motion the joints before j give it (static masks, no recursion)."""
    dtype = qd.dtype
    frames = slot_frames[layout.body, layout.slot]  # (nj, 6): world axis, anchor
    axis, anchor = frames[:, :3], frames[:, 3:]
    hinge = jnp.asarray(layout.hinge[layout.body, layout.slot], dtype)[:, None]
    linear = jnp.stack(_cross(_vec(anchor.T), _vec(axis.T)), axis=1) * hinge
    S = jnp.concatenate([axis * hinge, linear + axis * (1.0 - hinge)], axis=1)
    Sq = S * take(qd, layout.qpos)[:, None]
    dA = _spatial_cross(masked_sum(before, Sq[:, None, :]), Sq)
    moves = layout.subtree[:, layout.body].T  # (nj, nb-1): joint j moves body b
    A0 = jnp.concatenate([jnp.zeros(3, dtype), -jnp.asarray(model.gravity, dtype)])
    return S, masked_sum(moves, Sq[:, None, :]), A0 + masked_sum(moves, dA[:, None, :])


def tree_dynamics(model, q, qd, before: np.ndarray):
    r"""$(M, \tau)$ (nj, nj), (nj,) of a tree of hinges and slides at $(q, \dot q)$, in
    the joints' order: the joint-space inertia (no armature) and the forces of inverse
    dynamics at $\ddot q = 0$ (velocity products and gravity). `before` (nj, nj): joint i
    moves joint j's axis (:meth:`ukjax.RigidModel._tree_masks`)."""
    dtype = q.dtype
    layout = _Layout(model)
    local, slot_local = _local_frames(_forward_inputs(model, layout, q), layout.slots)
    world = _world_frames(local, layout.parents)
    identity = jnp.concatenate([jnp.eye(3, dtype=dtype).reshape(-1), jnp.zeros(3, dtype)])
    # the parents' world frames (the world's own first), for the slots' axes and anchors
    parent = take(jnp.concatenate([identity[:, None], world], axis=1), layout.parents, axis=1)
    R_p, x_p = _mat(parent), _vec(parent, 9)
    axes = tuple(_matvec(R_p, _vec(slot_local[k])) for k in range(layout.slots))
    anchors = tuple(_add(x_p, _matvec(R_p, _vec(slot_local[k], 3))) for k in range(layout.slots))
    slot_frames = jnp.stack([_flat(a, x) for a, x in zip(axes, anchors)]).transpose(2, 0, 1)
    inertias = _inertias(model, world, dtype)
    S, V, A = _motions(model, layout, slot_frames, qd, before)
    forces = jax.vmap(_body_force)(inertias, V, A)
    # each subtree's force and composite inertia: sums over its bodies (a static mask)
    subtree_forces = masked_sum(layout.subtree, forces[:, None, :])
    composite = masked_sum(layout.subtree, inertias[:, None, :])
    nj, body = len(model.joints), layout.body
    tau = jnp.sum(S * subtree_forces[body], axis=1)
    momenta = jax.vmap(lambda I, X: _flat(*_inertia_apply(I, X)))(composite[body], S)
    products = S @ momenta.T  # S_i . I^c_{b(j)} S_j
    upper = before | np.eye(nj, dtype=bool)
    M = jnp.where(upper, products, 0.0) + jnp.where(before.T, products.T, 0.0)
    return M, tau

r"""Rigid-body mechanisms as :class:`ukjax.System`: a tree of bodies connected by joints,
closed by exact loop constraints, with contacts between geometric primitives.

**Coordinates.** The generalized coordinates are MuJoCo's joint positions `qpos` (nq,):
a free joint's world position and unit quaternion ``[x y z qw qx qy qz]``, a ball joint's
unit quaternion ``[qw qx qy qz]``, a hinge's angle and a slide's displacement, the bodies'
poses following by forward kinematics; $\dot q = d\,\mathrm{qpos}/dt$ (a quaternion's rate
has four components, not the three of MuJoCo's `qvel`). These are exact and free of
singularities: each quaternion's unit norm is a holonomic constraint
$\varphi = p\cdot p - 1$ that the UK equation enforces like any other, and the rotational
kinetic energy $T = \tfrac12\omega^TJ\omega$, $\omega = 2\,\mathrm{vec}(\bar p\otimes\dot
p)$, whose mass matrix is singular along $p$, is completed by $2J_0(p\cdot\dot p)^2$ with
any $J_0 > 0$, which vanishes on the constraint and does not change the motion (Udwadia
and Schutte, *An alternative derivation of the quaternion equations of motion for
rigid-body rotational dynamics*, J. Appl. Mech. 77 (2010) 044505, eqs. 12-21). Why joint
coordinates rather than six per body with every joint a constraint (Schutte and Udwadia,
*New approach to the modeling of complex multibody dynamical systems*, J. Appl. Mech. 78
(2011) 021018): the same motion from 7 to 16 coordinates instead of 49 to 112 for the
arms and chains people simulate, every MuJoCo joint combination at once, and MuJoCo's own
`qpos` as the state; the loop closures (`connect`, `weld`, `joint` equalities), the
quaternion norms, joint limits and contacts are the constraints, all exact.

**Dynamics.** $T = \sum_b \tfrac12 m_b|\dot c_b|^2 + \tfrac12\omega_b^TI_b\omega_b$ plus
the joints' armature $\tfrac12\sum a_i v_i^2$ (MuJoCo's `qvel` $v$), $V = -\sum_b m_b
g\cdot c_b$ plus the joints' springs; the mass matrix is $\sum J^TWJ$ from the velocity
Jacobians and the Coriolis terms come from $T$ by automatic differentiation
(:class:`ukjax.System`). Joint damping acts on `qvel`. Actuators on joints are the columns
of :meth:`RigidModel.actuators`: force = gear x control, as in MuJoCo.

**Contacts.** Each colliding pair of geoms gives unilateral gaps (:meth:`unilateral`):
plane-sphere (1), plane-capsule (2: the end spheres), plane-box (8: the corners),
sphere-sphere (1), with Coulomb friction rows (:meth:`friction`) where the pair's
friction coefficient is positive.

Build one with :func:`ukjax.from_mjcf` or :func:`ukjax.from_urdf` (or
:func:`ukjax.from_mujoco` from a compiled `mujoco.MjModel`, e.g. one built in Python with
`mujoco.MjSpec`).
"""

from __future__ import annotations

import dataclasses
from types import MappingProxyType
from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ._projection import project_initial_conditions
from ._quaternion import (
    body_rate,
    conjugate,
    cross,
    from_axis_angle,
    multiply,
    rate_from_body,
    rotate,
    rotate_unit,
    world_rate,
)
from ._rigid_animation import animate as _animate
from ._static_index import masked_sum, scatter, take
from ._system import System
from ._tree_dynamics import tree_dynamics


FREE, BALL, SLIDE, HINGE = 0, 1, 2, 3  # MuJoCo's mjtJoint
# Trees of hinges and slides with at least this many bodies take the recursive dynamics
# (:mod:`ukjax._tree_dynamics`); smaller ones the joint-axes Jacobian. Measured on chains
# (benchmarks/RESULTS.md, stops 63, 99 and 100): with the recursion's sums over static masks
# and its frames by pointer jumping, the Jacobian is faster at 4 bodies, the recursion from 5.
RECURSIVE_MIN_BODIES = 5


class Joint(NamedTuple):
    """A joint of the tree (static): MuJoCo's type code, its body, `qpos`/`qvel` address."""

    kind: int
    body: int
    qpos: int
    qvel: int
    name: str


class Equality(NamedTuple):
    """An exact loop closure (static): 'connect', 'weld' or 'joint', between bodies (or
    joints, for 'joint'; obj2 = -1: the joint is fixed) and its row in `eq_data`."""

    kind: str
    obj1: int
    obj2: int
    row: int


class Contact(NamedTuple):
    """A colliding pair of geoms (static): 'plane_sphere', 'plane_capsule', 'plane_box' or
    'sphere_sphere', the two geoms (the plane first), and its row in `pair_friction`."""

    kind: str
    geom1: int
    geom2: int
    row: int


NUM_GAPS = MappingProxyType(
    {"plane_sphere": 1, "plane_capsule": 2, "plane_box": 8, "sphere_sphere": 1}
)


Param = np.ndarray | jax.Array  # a physical parameter: float64 NumPy, or traced


def _array(x) -> Param:
    """Parameters given as numbers or NumPy arrays are stored in float64 (cast to the
    state's dtype where used); JAX arrays (a traced or batched model) are kept."""
    return x if isinstance(x, jax.Array) else np.asarray(x, dtype=np.float64)


class RigidModel(System):
    r"""A tree of rigid bodies with joints, exact loop closures, joint limits and contacts,
    in MuJoCo's joint coordinates (see :mod:`ukjax._rigid`). Usually built by
    :func:`ukjax.from_mjcf` / :func:`ukjax.from_urdf`; every method of
    :class:`ukjax.System` works, so `simulate`, `sweep`, `fit`, contacts, friction and
    :class:`ukjax.ServoControlled` take it unchanged.

    The float fields are the physical parameters (differentiable, `vmap`-able): body
    masses `body_mass` (nb,), principal inertias `body_inertia` (nb, 3), centres of mass
    `body_ipos` (nb, 3) with inertia frames `body_iquat`, the bodies' reference poses in
    their parents `body_pos`, `body_quat`, joint anchors and axes, springs, damping,
    armature, `gravity`, the geoms' sizes and the pairs' friction coefficients.

    MuJoCo conventions at the boundary: :meth:`initial_state` builds $(q_0, \dot q_0)$
    from `qpos`, `qvel`; :meth:`qpos`, :meth:`qvel`, :meth:`qacc` map back;
    :meth:`body_poses` gives each body's world position and quaternion (like MuJoCo's
    `xpos`, `xquat`).

    Example:
        >>> import jax, jax.numpy as jnp, ukjax
        >>> jax.config.update("jax_enable_x64", True)
        >>> pendulum = ukjax.from_mjcf('''<mujoco><worldbody><body>
        ...   <joint type="hinge" axis="0 1 0"/>
        ...   <geom type="sphere" size="0.05" pos="0 0 -1" mass="1"/>
        ...   <geom type="capsule" fromto="0 0 0 0 0 -1" size="0.001" mass="0"/>
        ... </body></worldbody></mujoco>''')
        >>> q0, qd0 = pendulum.initial_state(qpos=jnp.array([0.5]))
        >>> qacc = pendulum.qacc(q0, qd0, ukjax.acceleration(pendulum, 0.0, q0, qd0))
        >>> round(float(qacc[0]), 4)   # -m g l sin(0.5) / (m l^2 + 2/5 m r^2)
        -4.6985
    """

    parents: tuple[int, ...] = eqx.field(static=True)
    body_joints: tuple[tuple[int, ...], ...] = eqx.field(static=True)
    joints: tuple[Joint, ...] = eqx.field(static=True)
    nq: int = eqx.field(static=True)
    nv: int = eqx.field(static=True)
    body_names: tuple[str, ...] = eqx.field(static=True)
    equalities: tuple[Equality, ...] = eqx.field(static=True)
    limited: tuple[int, ...] = eqx.field(static=True)  # joints with limits (hinge, slide)
    contacts: tuple[Contact, ...] = eqx.field(static=True)
    geom_body: tuple[int, ...] = eqx.field(static=True)
    geom_type: tuple[int, ...] = eqx.field(static=True)  # MuJoCo's mjtGeom codes
    actuated: tuple[int, ...] = eqx.field(static=True)  # the qvel index of each actuator
    frictional: bool = eqx.field(static=True)  # some contact pair has friction

    body_pos: Param = eqx.field(converter=_array)
    body_quat: Param = eqx.field(converter=_array)
    body_mass: Param = eqx.field(converter=_array)
    body_ipos: Param = eqx.field(converter=_array)
    body_iquat: Param = eqx.field(converter=_array)
    body_inertia: Param = eqx.field(converter=_array)
    jnt_pos: Param = eqx.field(converter=_array)
    jnt_axis: Param = eqx.field(converter=_array)
    jnt_range: Param = eqx.field(converter=_array)
    jnt_stiffness: Param = eqx.field(converter=_array)
    qpos0: Param = eqx.field(converter=_array)
    qpos_spring: Param = eqx.field(converter=_array)
    dof_damping: Param = eqx.field(converter=_array)
    dof_armature: Param = eqx.field(converter=_array)
    gravity: Param = eqx.field(converter=_array)
    eq_data: Param = eqx.field(converter=_array)
    geom_pos: Param = eqx.field(converter=_array)
    geom_quat: Param = eqx.field(converter=_array)
    geom_size: Param = eqx.field(converter=_array)
    pair_friction: Param = eqx.field(converter=_array)
    actuator_gear: Param = eqx.field(converter=_array)
    quaternion_inertia: Param = eqx.field(converter=_array)

    # --- the model's structure --------------------------------------------------------

    def num_coordinates(self) -> int:
        return self.nq

    def body_id(self, name: str) -> int:
        """The index of the body called `name` (a URDF link, an MJCF body)."""
        if name not in self.body_names:
            raise ValueError(f"No body {name!r}; the bodies are {list(self.body_names)}.")
        return self.body_names.index(name)

    def with_motors(self, joints=None, gear=1.0) -> RigidModel:
        r"""This model with a motor on each of `joints` (names; None: every hinge and
        slide), replacing the model's actuators: force = `gear` x control, along the
        joint (MuJoCo's `<motor>`). URDF files declare no actuators; this gives a robot
        from one the inputs that :class:`ukjax.ServoControlled` needs."""
        names = [j.name for j in self.joints]
        if joints is None:
            chosen = [i for i, j in enumerate(self.joints) if j.kind in (HINGE, SLIDE)]
        else:
            unknown = [n for n in joints if n not in names]
            if unknown:
                raise ValueError(f"No joint(s) {unknown}; the joints are {names}.")
            chosen = [names.index(n) for n in joints]
        bad = [self.joints[i].name for i in chosen if self.joints[i].kind not in (HINGE, SLIDE)]
        if bad:
            raise ValueError(f"Motors go on hinge and slide joints only; not on {bad}.")
        gears = np.broadcast_to(np.asarray(gear, np.float64), (len(chosen),))
        actuated = tuple(self.joints[i].qvel for i in chosen)
        return dataclasses.replace(self, actuated=actuated, actuator_gear=gears.copy())

    def _quaternion_joints(self) -> tuple[tuple[int, int], ...]:
        """(qpos index of each joint quaternion, its joint id)."""
        return tuple(
            (j.qpos + (3 if j.kind == FREE else 0), i)
            for i, j in enumerate(self.joints)
            if j.kind in (FREE, BALL)
        )

    def _param(self, name, dtype):
        return jnp.asarray(getattr(self, name), dtype)

    # --- kinematics -----------------------------------------------------------------

    def _joint_frame(self, j: int, joint: Joint, q, pos, rot):
        """The body frame (pos, rot) after joint `j` moves it by its coordinates in q."""
        dtype = q.dtype
        anchor_local = self._param("jnt_pos", dtype)[j]
        if joint.kind == FREE:
            return q[joint.qpos : joint.qpos + 3], q[joint.qpos + 3 : joint.qpos + 7]
        if joint.kind == SLIDE:
            shift = q[joint.qpos] - self._param("qpos0", dtype)[joint.qpos]
            axis = self._param("jnt_axis", dtype)[j]
            return pos + rotate(rot, axis) * shift, rot
        anchor = pos + rotate(rot, anchor_local)
        if joint.kind == BALL:
            local = q[joint.qpos : joint.qpos + 4]
        else:
            angle = q[joint.qpos] - self._param("qpos0", dtype)[joint.qpos]
            local = from_axis_angle(self._param("jnt_axis", dtype)[j], angle)
        rot = multiply(rot, local)
        return anchor - rotate(rot, anchor_local), rot

    def body_poses(self, q):
        r"""World positions (nb, 3) and quaternions (nb, 4) of the bodies' frames at q
        (MuJoCo's `xpos`, `xquat`; body 0 is the world)."""
        q = jnp.asarray(q)
        dtype = q.dtype
        body_pos, body_quat = self._param("body_pos", dtype), self._param("body_quat", dtype)
        positions = [jnp.zeros(3, dtype)]
        rotations = [jnp.array([1.0, 0.0, 0.0, 0.0], dtype)]
        for b in range(1, len(self.parents)):
            p = self.parents[b]
            pos = positions[p] + rotate(rotations[p], body_pos[b])
            rot = multiply(rotations[p], body_quat[b])
            for j in self.body_joints[b]:
                pos, rot = self._joint_frame(j, self.joints[j], q, pos, rot)
            positions.append(pos)
            rotations.append(rot)
        return jnp.stack(positions), jnp.stack(rotations)

    def _inertial_frames(self, q):
        pos, rot = self.body_poses(q)
        com = pos + rotate(rot, self._param("body_ipos", q.dtype))
        return com, multiply(rot, self._param("body_iquat", q.dtype))

    def points(self, q, bodies, local):
        """World positions (k, 3) of the points `local` (k, 3) fixed in `bodies` (k,)."""
        pos, rot = self.body_poses(q)
        b = np.asarray(bodies)
        return pos[b] + rotate(rot[b], local)

    def geom_poses(self, q):
        """World positions (ngeom, 3) and quaternions (ngeom, 4) of the geoms at q."""
        pos, rot = self.body_poses(q)
        b = np.asarray(self.geom_body, dtype=int)
        gpos, gquat = self._param("geom_pos", pos.dtype), self._param("geom_quat", pos.dtype)
        return pos[b] + rotate(rot[b], gpos), multiply(rot[b], gquat)

    def animate(self, q, path, *, ts=None, fps: int = 30, every: int = 1):
        """Save an animation (.gif) of the configurations `q` (T, nq) (e.g. `solution.q`)
        drawn as the model's geoms; see :func:`ukjax._rigid_animation.animate`."""
        return _animate(self, q, path, ts=ts, fps=fps, every=every)

    # --- MuJoCo's coordinates -------------------------------------------------------

    def qvel(self, q, qd):
        r"""MuJoCo's joint velocities `qvel` (nv,) of the state $(q, \dot q)$: a free
        joint's linear velocity (world frame) and angular velocity (body frame), a ball's
        body-frame angular velocity, hinge and slide rates."""
        q, qd = jnp.asarray(q), jnp.asarray(qd)
        parts = []
        for j in self.joints:
            a = j.qpos
            if j.kind == FREE:
                parts += [qd[a : a + 3], body_rate(q[a + 3 : a + 7], qd[a + 3 : a + 7])]
            elif j.kind == BALL:
                parts.append(body_rate(q[a : a + 4], qd[a : a + 4]))
            else:
                parts.append(qd[a : a + 1])
        return jnp.concatenate(parts) if parts else jnp.zeros(0, q.dtype)

    def qpos(self, q):
        """MuJoCo's joint positions `qpos` (nq,) of q: q itself, quaternions normalised."""
        q = jnp.asarray(q)
        for a, _ in self._quaternion_joints():
            q = q.at[a : a + 4].set(q[a : a + 4] / jnp.linalg.norm(q[a : a + 4]))
        return q

    def qacc(self, q, qd, qdd):
        r"""MuJoCo's joint accelerations `qacc` (nv,): $d\,\mathrm{qvel}/dt$ along the
        motion with acceleration $\ddot q$ (e.g. from :func:`ukjax.acceleration`)."""
        q, qd, qdd = jnp.asarray(q), jnp.asarray(qd), jnp.asarray(qdd)
        return jax.jvp(self.qvel, (q, qd), (qd, qdd))[1]

    def qd_from_qvel(self, q, qvel):
        r"""$\dot q$ (nq,) at q from MuJoCo's `qvel` (nv,): the inverse of :meth:`qvel` on
        the unit quaternions ($\dot p = \tfrac12 p\otimes(0, \omega)$)."""
        q, qvel = jnp.asarray(q), jnp.asarray(qvel)
        parts = []
        for j in self.joints:
            a, v = j.qpos, j.qvel
            if j.kind == FREE:
                parts += [
                    qvel[v : v + 3],
                    rate_from_body(q[a + 3 : a + 7], qvel[v + 3 : v + 6]),
                ]
            elif j.kind == BALL:
                parts.append(rate_from_body(q[a : a + 4], qvel[v : v + 3]))
            else:
                parts.append(qvel[v : v + 1])
        return jnp.concatenate(parts) if parts else jnp.zeros(0, q.dtype)

    def initial_state(self, qpos=None, qvel=None, *, t0=0.0, project: bool = True):
        r"""A consistent state $(q_0, \dot q_0)$ from MuJoCo-convention `qpos` (nq,) and
        `qvel` (nv,) (None: the model's reference pose `qpos0`, at rest). Quaternions are
        normalised; with `project` (default) the state is then moved onto the loop
        closures and equality constraints in the mass metric
        (:func:`ukjax.project_initial_conditions`), so that a pose that only roughly closes
        a loop is accepted. The state takes the dtype of a floating `qpos`/`qvel` (float32
        runs), else the default float. Works under `jax.vmap`."""
        given = [jnp.asarray(x) for x in (qpos, qvel) if x is not None]
        inexact = [x.dtype for x in given if jnp.issubdtype(x.dtype, jnp.inexact)]
        dtype = jnp.result_type(*inexact) if inexact else jnp.result_type(float)
        q = jnp.asarray(self.qpos0 if qpos is None else qpos, dtype)
        if q.shape != (self.nq,):
            raise ValueError(f"qpos must have shape ({self.nq},) (the model's nq); got {q.shape}.")
        v = jnp.zeros(self.nv, dtype) if qvel is None else jnp.asarray(qvel, dtype)
        if v.shape != (self.nv,):
            raise ValueError(f"qvel must have shape ({self.nv},) (the model's nv); got {v.shape}.")
        q = self.qpos(q)
        qd = self.qd_from_qvel(q, v)
        if project and self.equalities:
            q, qd = project_initial_conditions(self, t0, q, qd)
        return q, qd

    # --- dynamics ---------------------------------------------------------------------

    def _weights(self, dtype):
        """The weights W of the quasi-velocities u of :meth:`_quasi_velocities`:
        $T = \tfrac12\\sum W_iu_i^2$."""
        mass = self._param("body_mass", dtype)
        num_quats = len(self._quaternion_joints())
        J0 = self._param("quaternion_inertia", dtype)
        return jnp.concatenate(
            [
                jnp.repeat(mass, 3),
                self._param("body_inertia", dtype).reshape(-1),
                self._param("dof_armature", dtype),
                jnp.full(num_quats, 4.0, dtype) * J0,
            ]
        )

    def _quasi_velocities(self, q, qd):
        r"""u (flat), linear in $\dot q$: the bodies' centre-of-mass velocities (world
        frame), their angular velocities in their principal inertia frames, MuJoCo's
        `qvel` (for the armature) and $p\cdot\dot p$ of every joint quaternion (for the
        completion $2J_0(p\cdot\dot p)^2$)."""
        (_, rot), (com_dot, rot_dot) = jax.jvp(self._inertial_frames, (q,), (qd,))
        omega = body_rate(rot, rot_dot)
        radial = [
            jnp.reshape(q[a : a + 4] @ qd[a : a + 4], (1,)) for a, _ in self._quaternion_joints()
        ]
        parts = [com_dot.reshape(-1), omega.reshape(-1), self.qvel(q, qd), *radial]
        return jnp.concatenate(parts)

    def kinetic_energy(self, t, q, qd):
        u = self._quasi_velocities(q, qd)
        return 0.5 * jnp.sum(self._weights(q.dtype) * u * u)

    def _velocity_jacobian(self, q):
        r"""$J = \partial u/\partial\dot q$ of the quasi-velocities ($u = J\dot q$):
        from the joints' world axes and anchors (:meth:`_joint_jacobian`) for a tree of
        hinges and slides, by forward-mode differentiation of the kinematics otherwise."""
        if self._hinges_and_slides():
            return self._joint_jacobian(q)
        return jax.jacfwd(lambda v: self._quasi_velocities(q, v))(jnp.zeros_like(q))

    def _hinges_and_slides(self) -> bool:
        """Whether every joint is a hinge or a slide (no quaternion coordinates)."""
        return all(j.kind in (HINGE, SLIDE) for j in self.joints)

    def _joint_axes(self, q):
        """The forward kinematics with each joint's world axis and anchor (for a tree of
        hinges and slides): centres of mass (nb, 3), inertial-frame quaternions (nb, 4),
        axes (nj, 3) and anchors (nj, 3) in the world frame."""
        dtype = q.dtype
        body_pos, body_quat = self._param("body_pos", dtype), self._param("body_quat", dtype)
        anchors_local, axes_local = self._param("jnt_pos", dtype), self._param("jnt_axis", dtype)
        positions = [jnp.zeros(3, dtype)]
        rotations = [jnp.array([1.0, 0.0, 0.0, 0.0], dtype)]
        axes: dict[int, jax.Array] = {}
        anchors: dict[int, jax.Array] = {}
        for b in range(1, len(self.parents)):
            p = self.parents[b]
            pos = positions[p] + rotate(rotations[p], body_pos[b])
            rot = multiply(rotations[p], body_quat[b])
            for j in self.body_joints[b]:
                axes[j] = rotate(rot, axes_local[j])
                anchors[j] = pos + rotate(rot, anchors_local[j])
                pos, rot = self._joint_frame(j, self.joints[j], q, pos, rot)
            positions.append(pos)
            rotations.append(rot)
        pos, rot = jnp.stack(positions), jnp.stack(rotations)
        com = pos + rotate(rot, self._param("body_ipos", dtype))
        inertial = multiply(rot, self._param("body_iquat", dtype))
        order = range(len(self.joints))
        return (
            com,
            inertial,
            jnp.stack([axes[j] for j in order]),
            jnp.stack([anchors[j] for j in order]),
        )

    def _tree_masks(self) -> tuple[np.ndarray, np.ndarray]:
        """Static masks of a tree of hinges and slides: `moves` (nj, nb), body i moves with
        joint j; `before` (nj, nj), joint k moves joint j's axis and anchor (an ancestor
        body's joint, or an earlier joint of the same body)."""
        nb, nj = len(self.parents), len(self.joints)
        moves = np.zeros((nj, nb), bool)
        before = np.zeros((nj, nj), bool)
        for i in range(1, nb):
            b = i
            while b > 0:
                moves[list(self.body_joints[b]), i] = True
                b = self.parents[b]
        for j, joint in enumerate(self.joints):
            own = list(self.body_joints[joint.body])
            before[own[: own.index(j)], j] = True
            before[:, j] |= moves[:, self.parents[joint.body]]
        return moves, before

    def _joint_rates(self, qd, axes):
        """Each joint's rate and its twist: angular velocity (nj, 3) (hinges) and linear
        velocity (nj, 3) (slides) that it alone gives the bodies it moves."""
        at = np.array([j.qpos for j in self.joints], int)  # one coordinate per joint
        hinge = np.array([j.kind == HINGE for j in self.joints])[:, None]
        rate = take(qd, at)
        twist = axes * rate[:, None]
        return rate, jnp.where(hinge, twist, 0.0), jnp.where(hinge, 0.0, twist)

    def _joint_jacobian(self, q, kinematics=None):
        r"""$J$ of a tree of hinges and slides from the joints' world axes $a_j$ and anchors
        $x_j$: a hinge moves the centre of mass $c_i$ of every body below it at
        $a_j\times(c_i - x_j)$ and turns it at $a_j$ (in the body's principal frame,
        $R_i^Ta_j$), a slide moves it at $a_j$; the armature rows are the identity. The
        same matrix as the forward-mode Jacobian of :meth:`_quasi_velocities` (tested),
        without pushing one tangent per coordinate through the kinematics."""
        com, inertial, axes, anchors = self._joint_axes(q) if kinematics is None else kinematics
        nj = len(self.joints)
        moves, _ = self._tree_masks()
        hinge = np.array([j.kind == HINGE for j in self.joints])
        mask = jnp.asarray(moves, q.dtype)[:, :, None]
        turning = cross(axes[:, None, :], com[None, :, :] - anchors[:, None, :])
        linear = jnp.where(hinge[:, None, None], turning, axes[:, None, :]) * mask
        spin = jnp.where(hinge[:, None, None], axes[:, None, :], 0.0) * mask
        angular = rotate_unit(conjugate(inertial)[None], spin)  # R_i^T a_j
        columns = jnp.concatenate([linear.reshape(nj, -1), angular.reshape(nj, -1)], axis=1)
        armature = np.zeros((nj, self.nv))
        for j, joint in enumerate(self.joints):
            armature[j, joint.qvel] = 1.0
        columns = jnp.concatenate([columns, jnp.asarray(armature, q.dtype)], axis=1)
        order = np.argsort([joint.qpos for joint in self.joints])
        return take(columns, order).T

    def _joint_bias(self, q, qd, kinematics):
        r"""$\dot J\dot q$ of a tree of hinges and slides (the quasi-velocities' rate at
        $\ddot q = 0$) from the joints' axes and anchors, without differentiating the
        kinematics: a joint's axis turns with the joints before it,
        $\dot a_j = \omega_j^- \times a_j$, and its anchor moves at $\dot x_j$, the velocity
        they give it; then $\dot v_i = \sum_j \dot\theta_j [\dot a_j\times(c_i - x_j) +
        a_j\times(v_i - \dot x_j)]$ (hinges; $\dot\theta_j\dot a_j$ for slides) and, in the
        principal frame, $R_i^T\sum_j\dot\theta_j\dot a_j$ (hinges); the armature rows are
        constant. The same vector as the forward derivative of :meth:`_quasi_velocities`
        (tested)."""
        com, inertial, axes, anchors = kinematics
        moves, before = self._tree_masks()
        hinge = np.array([j.kind == HINGE for j in self.joints])[:, None]
        rate, spin, slide = self._joint_rates(qd, axes)
        # velocities that the joints before j give its axis and anchor
        axis_rate = cross(masked_sum(before, spin[:, None, :]), axes)
        pushed = cross(spin[:, None, :], anchors[None, :, :] - anchors[:, None, :])
        anchor_rate = masked_sum(before, pushed + slide[:, None, :])
        # the bodies' centre-of-mass velocities
        lever = com[None, :, :] - anchors[:, None, :]  # (nj, nb, 3)
        com_rate = masked_sum(moves, cross(spin[:, None, :], lever) + slide[:, None, :])
        turning = cross(axis_rate[:, None, :], lever) + cross(
            axes[:, None, :], com_rate[None, :, :] - anchor_rate[:, None, :]
        )
        linear = jnp.where(hinge[:, :, None], turning, axis_rate[:, None, :])
        linear = masked_sum(moves, rate[:, None, None] * linear)
        angular = masked_sum(moves, (rate[:, None] * jnp.where(hinge, axis_rate, 0.0))[:, None])
        angular = rotate_unit(conjugate(inertial), angular)
        return jnp.concatenate(
            [linear.reshape(-1), angular.reshape(-1), jnp.zeros(self.nv, q.dtype)]
        )

    def _recursive(self) -> bool:
        """Whether M and Q come from :mod:`ukjax._tree_dynamics` (a tree of hinges and
        slides with at least `RECURSIVE_MIN_BODIES` bodies)."""
        return self._hinges_and_slides() and len(self.parents) - 1 >= RECURSIVE_MIN_BODIES

    def _tree_dynamics(self, q, qd):
        r"""$(M, \tau)$ of a tree of hinges and slides in q's order, armature included:
        :func:`ukjax._tree_dynamics.tree_dynamics` (composite rigid bodies and recursive
        Newton-Euler, the frames by pointer jumping)."""
        M, tau = tree_dynamics(self, q, qd, self._tree_masks()[1])
        order = np.argsort([joint.qpos for joint in self.joints])
        M = take(take(M, order, 0), order, 1) + jnp.diag(self._param("dof_armature", q.dtype))
        return M, take(tau, order)

    def mass_matrix(self, t, q):
        r"""$M = J^TWJ$ with $J = \partial u/\partial\dot q$ of the quasi-velocities
        (by composite rigid bodies for a large tree of hinges and slides)."""
        if self._recursive():
            return self._tree_dynamics(q, jnp.zeros_like(q))[0]
        J = self._velocity_jacobian(q)
        return J.T @ (self._weights(q.dtype)[:, None] * J)

    def mass_and_force(self, t, q, qd):
        r"""$(M, Q)$ by Kane's equations (the TMT method): $M = J^TWJ$ and
        $Q = J^T(f - W\dot J\dot q - \omega\times I\omega) - \partial V/\partial q$ +
        damping, with the gyroscopic torques in the principal frames; the same as the
        Lagrange equations of $T$ (checked in the tests), from one Jacobian of $u$. For a
        tree of hinges and slides $J$ and $\dot J\dot q$ come from one pass of the
        kinematics (:meth:`_joint_jacobian`, :meth:`_joint_bias`) instead of
        differentiating it; otherwise $\dot J\dot q$ is one forward derivative of $u$
        along $\dot q$. A tree of hinges and slides with at least `RECURSIVE_MIN_BODIES`
        bodies takes the composite rigid-body and recursive Newton-Euler algorithms instead
        (:mod:`ukjax._tree_dynamics`; the same M and Q, tested): O(n) per body for the
        forces and log2 of the depth in rounds for the frames, where the Jacobian's work
        grows with the number of bodies times the joints above them."""
        dtype = q.dtype
        damping = self.forces(t, q, qd)
        if self._recursive():  # composite rigid bodies and recursive Newton-Euler
            M, tau = self._tree_dynamics(q, qd)
            Q = -tau - self._spring_gradient(q)
            return M, Q if damping is None else Q + damping
        W = self._weights(dtype)
        if self._hinges_and_slides():  # J and its rate from one pass of the kinematics
            kinematics = self._joint_axes(q)
            J = self._joint_jacobian(q, kinematics)
            u_dot = self._joint_bias(q, qd, kinematics)
        else:  # u is linear in qd: J gives M, u and the pullback
            J = self._velocity_jacobian(q)
            u_dot = jax.jvp(lambda x: self._quasi_velocities(x, qd), (q,), (qd,))[1]
        M = J.T @ (W[:, None] * J)
        u = J @ qd
        nb = len(self.parents)
        omega = u[3 * nb : 6 * nb].reshape(nb, 3)
        inertia = self._param("body_inertia", dtype)
        gyroscopic = cross(omega, inertia * omega).reshape(-1)
        bias = W * u_dot
        bias = bias.at[3 * nb : 6 * nb].add(gyroscopic)
        Q = -J.T @ bias - self._potential_gradient(t, q, J)
        return M, Q if damping is None else Q + damping

    def _potential_gradient(self, t, q, J):
        r"""$\partial V/\partial q$: for a tree of hinges and slides from the Jacobian J of
        the centres of mass ($-J_c^T m g$) and the joint springs, by reverse-mode
        differentiation of :meth:`potential_energy` otherwise."""
        if not self._hinges_and_slides():
            return jax.grad(lambda x: self.potential_energy(t, x))(q)
        nb = len(self.parents)
        weight = self._param("body_mass", q.dtype)[:, None] * self._param("gravity", q.dtype)
        return -J[: 3 * nb].T @ weight.reshape(-1) + self._spring_gradient(q)

    def _spring_gradient(self, q):
        r"""$\partial V/\partial q$ of the joint springs of a tree of hinges and slides."""
        dtype = q.dtype
        at = np.array([j.qpos for j in self.joints], int)  # one coordinate per joint
        k = self._param("jnt_stiffness", dtype)
        stretch = k * (take(q, at) - take(self._param("qpos_spring", dtype), at))
        return scatter(stretch, at, q.shape[0])

    def potential_energy(self, t, q):
        dtype = q.dtype
        com, _ = self._inertial_frames(q)
        V = -jnp.sum(self._param("body_mass", dtype) * (com @ self._param("gravity", dtype)))
        k = self._param("jnt_stiffness", dtype)
        spring = self._param("qpos_spring", dtype)
        for i, j in enumerate(self.joints):
            if j.kind in (HINGE, SLIDE):
                V = V + 0.5 * k[i] * (q[j.qpos] - spring[j.qpos]) ** 2
        return V

    def forces(self, t, q, qd):
        if isinstance(self.dof_damping, np.ndarray) and not np.any(self.dof_damping):
            return None
        damping = self._param("dof_damping", q.dtype)
        v, pullback = jax.vjp(lambda u: self.qvel(q, u), qd)
        return pullback(-damping * v)[0]

    def actuators(self, t, q):
        r"""The (nq, nu) directions $G$ of the actuators (force $G u$ for controls u):
        gear x the joint's unit generalized force, mapped from MuJoCo's `qvel` space."""
        if not self.actuated:
            return None
        _, pullback = jax.vjp(lambda u: self.qvel(q, u), jnp.zeros_like(q))
        E = jnp.zeros((self.nv, len(self.actuated)), q.dtype)
        E = E.at[jnp.asarray(self.actuated), jnp.arange(len(self.actuated))].set(
            self._param("actuator_gear", q.dtype)
        )
        return jax.vmap(lambda e: pullback(e)[0], in_axes=1, out_axes=1)(E)

    # --- constraints ------------------------------------------------------------------

    def holonomic(self, t, q):
        rows = [q[a : a + 4] @ q[a : a + 4] - 1.0 for a, _ in self._quaternion_joints()]
        rows = [jnp.reshape(r, (1,)) for r in rows]
        if self.equalities:
            rows += [self._equality(e, q) for e in self.equalities]
        return jnp.concatenate(rows) if rows else None

    def _equality(self, eq: Equality, q):
        data = self._param("eq_data", q.dtype)[eq.row]
        if eq.kind == "joint":
            a = self.joints[eq.obj1].qpos
            ref = self._param("qpos0", q.dtype)
            y = q[a] - ref[a]
            if eq.obj2 < 0:
                return jnp.reshape(y - data[0], (1,))
            b = self.joints[eq.obj2].qpos
            x = q[b] - ref[b]
            return jnp.reshape(y - jnp.polyval(data[4::-1], x), (1,))
        pos, rot = self.body_poses(q)
        p1, r1, p2, r2 = pos[eq.obj1], rot[eq.obj1], pos[eq.obj2], rot[eq.obj2]
        if eq.kind == "connect":
            return p1 + rotate(r1, data[0:3]) - p2 - rotate(r2, data[3:6])
        # weld: body 2's pose in body 1's frame is data[3:6], data[6:10]
        rel_pos = rotate(conjugate(r1), p2 - p1) - data[3:6]
        rel_rot = multiply(conjugate(data[6:10]), multiply(conjugate(r1), r2))
        return jnp.concatenate([rel_pos, rel_rot[1:]])

    def _limits(self, q):
        if not self.limited:
            return None
        rng = self._param("jnt_range", q.dtype)
        rows = []
        for i in self.limited:
            x = q[self.joints[i].qpos]
            rows += [x - rng[i, 0], rng[i, 1] - x]
        return jnp.stack(rows)

    def _contact_geometry(self, q):
        """For every gap: (gap (k,), normal (k, 3), point (k, 3), body (k,), other (k,))
        with the normal pointing from `other` to `body`."""
        dtype = q.dtype
        geom_pos, geom_rot = self.geom_poses(q)
        size = self._param("geom_size", dtype)
        frame = lambda g: (geom_pos[g], geom_rot[g])

        gaps, normals, points, bodies, others = [], [], [], [], []
        for c in self.contacts:
            c1, r1 = frame(c.geom1)
            c2, r2 = frame(c.geom2)
            b1, b2 = self.geom_body[c.geom1], self.geom_body[c.geom2]
            if c.kind == "sphere_sphere":
                d = c2 - c1
                dist = jnp.sqrt(d @ d)
                n = d / dist
                gaps.append(jnp.reshape(dist - size[c.geom1, 0] - size[c.geom2, 0], (1,)))
                normals.append(n[None])
                points.append((c1 + size[c.geom1, 0] * n)[None])
                bodies.append((b2,))
                others.append((b1,))
                continue
            n = rotate(r1, jnp.array([0.0, 0.0, 1.0], dtype))
            if c.kind == "plane_sphere":
                r = size[c.geom2, 0]
                centres = c2[None]
            elif c.kind == "plane_capsule":
                r = size[c.geom2, 0]
                half = rotate(r2, jnp.array([0.0, 0.0, 1.0], dtype)) * size[c.geom2, 1]
                centres = jnp.stack([c2 + half, c2 - half])
            else:  # plane_box: the 8 corners
                r = jnp.zeros((), dtype)
                signs = jnp.array(np.array(np.meshgrid(*[[-1.0, 1.0]] * 3)).reshape(3, -1).T, dtype)
                centres = c2 + rotate(r2[None], signs * size[c.geom2])
            gaps.append((centres - c1) @ n - r)
            normals.append(jnp.broadcast_to(n, centres.shape))
            points.append(centres - r * n)
            bodies.append((b2,) * centres.shape[0])
            others.append((b1,) * centres.shape[0])
        flat = lambda xs: tuple(x for group in xs for x in group)
        return (
            jnp.concatenate(gaps),
            jnp.concatenate(normals),
            jnp.concatenate(points),
            flat(bodies),
            flat(others),
        )

    def unilateral(self, t, q):
        rows = []
        limits = self._limits(q)
        if limits is not None:
            rows.append(limits)
        if self.contacts:
            rows.append(self._contact_geometry(q)[0])
        return jnp.concatenate(rows) if rows else None

    def _relative_velocity_rows(self, q, bodies, others, points):
        """(k, 3, nq): the velocity of the material point of `bodies` at `points` relative
        to that of `others` there, from one forward pass of the kinematics per column."""
        b, o = np.asarray(bodies), np.asarray(others)

        def relative(qd):
            (pos, rot), (pos_dot, rot_dot) = jax.jvp(self.body_poses, (q,), (qd,))
            omega = world_rate(rot, rot_dot)
            v = lambda i: pos_dot[i] + cross(omega[i], points - pos[i])
            return v(b) - v(o)

        return jax.jacfwd(relative)(jnp.zeros_like(q))

    def friction(self, t, q):
        r"""Coulomb friction on every contact gap whose pair has a positive coefficient:
        tangent rows $T$ (k, 2, nq) of the relative slip velocity at the contact point
        (isotropic cone), and the pair's coefficient as both $\mu_s$ and $\mu_k$ (MuJoCo
        has one); joint limits get zero rows and zero coefficients."""
        if not self.frictional:
            return None
        dtype = q.dtype
        _, normal, point, bodies, others = self._contact_geometry(q)
        v_rel = self._relative_velocity_rows(q, bodies, others, point)
        t1, t2 = _tangents(normal)
        T = jnp.stack([jnp.einsum("kd,kdn->kn", t1, v_rel), jnp.einsum("kd,kdn->kn", t2, v_rel)], 1)
        mu = jnp.concatenate(
            [
                jnp.full(NUM_GAPS[c.kind], self._param("pair_friction", dtype)[c.row])
                for c in self.contacts
            ]
        )
        num_limits = 2 * len(self.limited)
        if num_limits:
            T = jnp.concatenate([jnp.zeros((num_limits, 2, self.nq), dtype), T])
            mu = jnp.concatenate([jnp.zeros(num_limits, dtype), mu])
        return T, mu, mu


def _tangents(n):
    """Two unit tangents orthogonal to the unit normals n (k, 3) and to each other,
    continuous in n away from n_z = -1 (Duff et al., *Building an orthonormal basis,
    revisited*, JCGT 6 (2017))."""
    sign = jnp.where(n[:, 2] >= 0, 1.0, -1.0)
    a = -1.0 / (sign + n[:, 2])
    b = n[:, 0] * n[:, 1] * a
    t1 = jnp.stack([1.0 + sign * n[:, 0] ** 2 * a, sign * b, -sign * n[:, 0]], 1)
    t2 = jnp.stack([b, sign + n[:, 1] ** 2 * a, -n[:, 1]], 1)
    return t1, t2

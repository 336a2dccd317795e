r"""Models from MJCF and URDF files: :func:`from_mjcf`, :func:`from_urdf`, :func:`from_mujoco`.

The files are parsed and compiled by MuJoCo (the optional `mujoco` package:
``pip install "ukjax[mjcf]"``), which reads both formats and computes the bodies' masses,
centres of mass and inertias from their geoms; ukjax reads the compiled model's tree,
joints, equality constraints, joint limits, actuators and collision geoms into a
:class:`ukjax.RigidModel` (see :mod:`ukjax._rigid` for its coordinates and physics).

What changes from MuJoCo's own simulation: the equality constraints (`connect`, `weld`,
`joint`), the joint limits and the contacts are exact (MuJoCo makes them soft, with
`solref`/`solimp`), the contacts follow the law given to :func:`ukjax.simulate`
(`contact=ukjax.Impact(restitution=0.0)` for MuJoCo-like inelastic contact), and friction
is exact Coulomb stick-slip with the pair's sliding coefficient.

What is refused (`ValueError` naming the element and, for a file or string, its line):
tendons, flexes, equality constraints other than the three above or between sites,
actuators on anything but hinge and slide joints, joint friction loss, springs on ball
and free joints, limits on ball joints, gravity compensation, fluid forces, and colliders
of mesh, height-field or SDF type. Ignored with a warning (harmless to the motion):
sensors; pairs of supported geoms that ukjax cannot collide yet (box-box,
capsule-capsule, cylinders, ellipsoids), listed by name; actuators' gain, bias and
activation dynamics (an actuator is a force direction, gear x control, for
:class:`ukjax.ServoControlled` or your own forces).
"""

from __future__ import annotations

import os
import re
import warnings
from types import MappingProxyType
from typing import Any

import numpy as np

from ._rigid import BALL, FREE, HINGE, SLIDE, Contact, Equality, Joint, RigidModel


_PLANE, _SPHERE, _CAPSULE, _ELLIPSOID, _CYLINDER, _BOX, _MESH = 0, 2, 3, 4, 5, 6, 7
_REFUSED_GEOMS = MappingProxyType({1: "hfield", 7: "mesh", 8: "sdf"})
_PAIRS = MappingProxyType(
    {
        (_PLANE, _SPHERE): "plane_sphere",
        (_PLANE, _CAPSULE): "plane_capsule",
        (_PLANE, _BOX): "plane_box",
        (_SPHERE, _SPHERE): "sphere_sphere",
    }
)
_EQUALITY = MappingProxyType({0: "connect", 1: "weld", 2: "joint"})


def _mujoco() -> Any:
    try:
        import mujoco
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise ImportError(
            "Reading MJCF and URDF files needs the `mujoco` package: "
            'pip install "ukjax[mjcf]" (or pip install mujoco).'
        ) from error
    return mujoco


def _read(source) -> tuple[str, str]:
    """(XML text, a name for messages) of a file path or an XML string."""
    if isinstance(source, os.PathLike) or not str(source).lstrip().startswith("<"):
        path = os.fspath(source)
        if not os.path.exists(path):
            raise ValueError(f"No such model file: {path!r} (give a path or an XML string).")
        with open(path, encoding="utf-8") as f:
            return f.read(), path
    return str(source), "<string>"


class _Where:
    """Names the element of a compiled model, with its line in the XML text if known."""

    def __init__(self, model, text: str | None, origin: str):
        self.model, self.origin = model, origin
        urdf = text is not None and re.search(r"<robot\b", text) is not None
        self.tags = {"geom": "collision", "body": "link"} if urdf else {}
        # <default> classes hold element tags too: blank them, keeping the line breaks
        blank = lambda found: re.sub(r"[^\n]", " ", found.group())
        self.text = (
            None if text is None else re.sub(r"<default\b.*</default>", blank, text, flags=re.S)
        )

    def __call__(self, kind: str, index: int, tag: str | None = None) -> str:
        mujoco = _mujoco()
        obj = getattr(mujoco.mjtObj, f"mjOBJ_{kind.upper()}")
        name = mujoco.mj_id2name(self.model, obj, index)
        label = f"{kind} {name!r}" if name else f"{kind} #{index}"
        line = self._line(self.tags.get(kind, tag or kind), name, index)
        return f"{label} ({self.origin}, line {line})" if line else f"{label} ({self.origin})"

    def _line(self, tag: str, name: str | None, index: int) -> int | None:
        """The line of the element named `name`, else of the index-th `<tag`."""
        if self.text is None:
            return None
        if name:
            pattern = rf"<({tag})\b[^>]*name\s*=\s*[\"']{re.escape(name)}[\"']"
            found = list(re.finditer(pattern, self.text))[:1]
        else:
            found = list(re.finditer(rf"<({tag})\b", self.text))[index : index + 1]
        return self.text.count("\n", 0, found[0].start()) + 1 if found else None


def from_mjcf(source, *, contacts: bool = True, limits: bool = True) -> RigidModel:
    r"""A :class:`ukjax.RigidModel` from an MJCF model: `source` is a file path or the XML
    text. `contacts=False` leaves out every geom contact, `limits=False` every joint limit
    (the model then has no unilateral constraints from them). Raises `ValueError` for
    what ukjax does not support (see :mod:`ukjax._mjcf`), naming the element and its line.

    Example:
        >>> import jax, jax.numpy as jnp, ukjax
        >>> jax.config.update("jax_enable_x64", True)
        >>> top = ukjax.from_mjcf('''<mujoco><option gravity="0 0 0"/><worldbody>
        ...   <body><freejoint/><geom type="box" size="0.1 0.2 0.3" mass="1"/></body>
        ... </worldbody></mujoco>''')
        >>> q0, qd0 = top.initial_state(qvel=jnp.array([0, 0, 0, 0.01, 5.0, 0.0]))
        >>> sol = ukjax.simulate(top, q0, qd0, jnp.linspace(0.0, 1.0, 3))
        >>> round(float(jnp.linalg.norm(sol.q[-1, 3:])), 9)   # the quaternion stays unit
        1.0
    """
    mujoco = _mujoco()
    text, origin = _read(source)
    try:
        model = (
            mujoco.MjModel.from_xml_string(text)
            if origin == "<string>"
            else (mujoco.MjModel.from_xml_path(origin))
        )
    except ValueError as error:
        raise ValueError(f"MuJoCo could not compile {origin}: {error}") from error
    return _build(model, _Where(model, text, origin), contacts, limits)


def from_urdf(source, *, contacts: bool = True, limits: bool = True) -> RigidModel:
    r"""A :class:`ukjax.RigidModel` from a URDF robot (file path or XML text), compiled by
    MuJoCo's URDF reader (fixed joints fused, visual geometry discarded, `mimic` joints
    as exact linear couplings where MuJoCo maps them). The root link is fixed to the
    world, as in URDF. Options as in :func:`ukjax.from_mjcf`.

    Example:
        >>> import jax, jax.numpy as jnp, ukjax
        >>> jax.config.update("jax_enable_x64", True)
        >>> arm = ukjax.from_urdf('''<robot name="r"><link name="base"/>
        ...   <link name="l1"><inertial><mass value="1"/><origin xyz="0 0 -0.5"/>
        ...     <inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" ixz="0" iyz="0"/>
        ...   </inertial></link>
        ...   <joint name="j1" type="continuous"><parent link="base"/><child link="l1"/>
        ...     <axis xyz="0 1 0"/></joint></robot>''')
        >>> arm.nq, arm.nv
        (1, 1)
    """
    return from_mjcf(source, contacts=contacts, limits=limits)


def from_mujoco(model, *, contacts: bool = True, limits: bool = True) -> RigidModel:
    """A :class:`ukjax.RigidModel` from a compiled `mujoco.MjModel` (e.g. from
    `mujoco.MjSpec(...).compile()`, bodies and joints built in Python). Messages name the
    elements without lines.

    Example:
        >>> import mujoco, ukjax
        >>> spec = mujoco.MjSpec()
        >>> body = spec.worldbody.add_body(pos=[0, 0, 1])
        >>> joint = body.add_joint(type=mujoco.mjtJoint.mjJNT_BALL)
        >>> sphere = mujoco.mjtGeom.mjGEOM_SPHERE
        >>> geom = body.add_geom(type=sphere, size=[0.1, 0, 0], pos=[0, 0, -1])
        >>> model = ukjax.from_mujoco(spec.compile())
        >>> model.nq, model.nv, model.holonomic(0.0, model.qpos0).tolist()  # the unit norm
        (4, 3, [0.0])
    """
    return _build(model, _Where(model, None, "MjModel"), contacts, limits)


def _check_supported(m, where: _Where) -> None:
    mujoco = _mujoco()
    if m.ntendon:
        raise ValueError(f"Tendons are not supported: {where('tendon', 0, 'spatial|fixed')}.")
    if getattr(m, "nflex", 0):
        raise ValueError(f"Flexible bodies are not supported: {where('flex', 0)}.")
    for option in ("density", "viscosity"):
        if getattr(m.opt, option):
            raise ValueError(f"Fluid forces are not supported: <option {option}=...> is set.")
    if np.any(m.opt.wind):
        raise ValueError("Fluid forces are not supported: <option wind=...> is set.")
    for b in np.flatnonzero(m.body_gravcomp):
        raise ValueError(f"Gravity compensation is not supported: {where('body', int(b))}.")
    for j in range(m.njnt):
        kind, dof = int(m.jnt_type[j]), int(m.jnt_dofadr[j])
        span = slice(dof, dof + (6 if kind == FREE else 3 if kind == BALL else 1))
        if np.any(m.dof_frictionloss[span]):
            raise ValueError(f"Joint friction loss is not supported: {where('joint', j)}.")
        if kind in (FREE, BALL) and m.jnt_stiffness[j]:
            raise ValueError(
                f"Springs on ball and free joints are not supported: {where('joint', j)}."
            )
        if kind == BALL and m.jnt_limited[j]:
            raise ValueError(f"Limits on ball joints are not supported: {where('joint', j)}.")
    for e in range(m.neq):
        if int(m.eq_type[e]) not in _EQUALITY:
            raise ValueError(
                "Only connect, weld and joint equality constraints are supported: "
                f"{where('equality', e, 'equality|connect|weld|joint|tendon|flex|distance')}."
            )
        if int(m.eq_type[e]) != 2 and int(m.eq_objtype[e]) != int(mujoco.mjtObj.mjOBJ_BODY):
            raise ValueError(
                f"Equality constraints between sites are not supported (name bodies): "
                f"{where('equality', e, 'connect|weld')}."
            )
    for a in range(m.nu):
        joint = int(m.actuator_trnid[a, 0])
        if int(m.actuator_trntype[a]) != 0 or int(m.jnt_type[joint]) not in (HINGE, SLIDE):
            raise ValueError(
                "Only actuators on hinge and slide joints are supported: "
                f"{where('actuator', a, 'motor|position|velocity|general|intvelocity|damper')}."
            )
    if m.nsensor:
        warnings.warn(f"{where.origin}: sensors are ignored by ukjax.", stacklevel=3)


def _collides(m, g1: int, g2: int, excluded: frozenset[int]) -> bool:
    """MuJoCo's filter for a dynamic geom pair: different weld bodies, not parent and
    child (unless disabled), compatible contype/conaffinity, not excluded."""
    mujoco = _mujoco()
    b1, b2 = int(m.geom_bodyid[g1]), int(m.geom_bodyid[g2])
    w1, w2 = int(m.body_weldid[b1]), int(m.body_weldid[b2])
    if w1 == w2:
        return False
    if not m.opt.disableflags & int(mujoco.mjtDisableBit.mjDSBL_FILTERPARENT):
        p1, p2 = int(m.body_weldid[m.body_parentid[w1]]), int(m.body_weldid[m.body_parentid[w2]])
        if w1 and w2 and (w1 == p2 or w2 == p1):
            return False
    if not (
        m.geom_contype[g1] & m.geom_conaffinity[g2] or m.geom_contype[g2] & m.geom_conaffinity[g1]
    ):
        return False
    signature = (min(b1, b2) << 16) + max(b1, b2)
    return signature not in excluded


def _contacts(m, where: _Where):
    """The colliding pairs ukjax handles, and their friction coefficients."""
    excluded = frozenset(int(s) for s in m.exclude_signature)
    candidates = [
        (g1, g2, max(m.geom_friction[g1, 0], m.geom_friction[g2, 0]))
        for g1 in range(m.ngeom)
        for g2 in range(g1 + 1, m.ngeom)
        if _collides(m, g1, g2, excluded)
    ]
    candidates += [
        (int(m.pair_geom1[p]), int(m.pair_geom2[p]), m.pair_friction[p, 0]) for p in range(m.npair)
    ]
    contacts, friction, skipped = [], [], []
    for g1, g2, mu in candidates:
        types: tuple[int, int] = (int(m.geom_type[g1]), int(m.geom_type[g2]))
        for g in (g1, g2):
            if int(m.geom_type[g]) in _REFUSED_GEOMS:
                raise ValueError(
                    f"{_REFUSED_GEOMS[int(m.geom_type[g])]} colliders are not supported: "
                    f"{where('geom', g)}; set its contype and conaffinity to 0, or use "
                    "contacts=False."
                )
        if types[::-1] in _PAIRS:
            g1, g2, types = g2, g1, (types[1], types[0])
        if types not in _PAIRS:
            skipped.append(f"{where('geom', g1)} - {where('geom', g2)}")
            continue
        contacts.append(Contact(_PAIRS[types], g1, g2, len(friction)))
        friction.append(mu)
    if skipped:
        warnings.warn(
            "ukjax ignores these colliding pairs (it collides plane-sphere, plane-capsule, "
            "plane-box and sphere-sphere): " + "; ".join(skipped),
            stacklevel=4,
        )
    return tuple(contacts), np.asarray(friction, np.float64).reshape(-1)


def _build(m, where: _Where, contacts: bool, limits: bool) -> RigidModel:
    mujoco = _mujoco()
    _check_supported(m, where)
    joints = tuple(
        Joint(
            int(m.jnt_type[j]),
            int(m.jnt_bodyid[j]),
            int(m.jnt_qposadr[j]),
            int(m.jnt_dofadr[j]),
            mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_JOINT, j) or f"joint{j}",
        )
        for j in range(m.njnt)
    )
    body_joints = tuple(
        tuple(j for j in range(m.njnt) if joints[j].body == b) for b in range(m.nbody)
    )
    active = [e for e in range(m.neq) if m.eq_active0[e]]
    equalities = tuple(
        Equality(_EQUALITY[int(m.eq_type[e])], int(m.eq_obj1id[e]), int(m.eq_obj2id[e]), e)
        for e in active
    )
    no_limits = m.opt.disableflags & int(mujoco.mjtDisableBit.mjDSBL_LIMIT)
    limited = tuple(
        j
        for j in range(m.njnt)
        if limits and not no_limits and m.jnt_limited[j] and joints[j].kind in (HINGE, SLIDE)
    )
    no_contacts = m.opt.disableflags & int(mujoco.mjtDisableBit.mjDSBL_CONTACT)
    pairs, friction = _contacts(m, where) if contacts and not no_contacts else ((), np.zeros(0))
    no_gravity = m.opt.disableflags & int(mujoco.mjtDisableBit.mjDSBL_GRAVITY)
    massive = m.body_mass > 0
    J0 = float(np.mean(m.body_inertia[massive])) if np.any(massive) else 1.0
    _warn_actuator_dynamics(m, where)
    return RigidModel(
        parents=tuple(int(p) for p in m.body_parentid),
        body_joints=body_joints,
        joints=joints,
        nq=int(m.nq),
        nv=int(m.nv),
        body_names=tuple(
            mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_BODY, b) or f"body{b}" for b in range(m.nbody)
        ),
        equalities=equalities,
        limited=limited,
        contacts=pairs,
        geom_body=tuple(int(b) for b in m.geom_bodyid),
        geom_type=tuple(int(g) for g in m.geom_type),
        actuated=tuple(int(m.jnt_dofadr[m.actuator_trnid[a, 0]]) for a in range(m.nu)),
        frictional=bool(np.any(friction > 0)),
        body_pos=m.body_pos,
        body_quat=m.body_quat,
        body_mass=m.body_mass,
        body_ipos=m.body_ipos,
        body_iquat=m.body_iquat,
        body_inertia=m.body_inertia,
        jnt_pos=m.jnt_pos.reshape(-1, 3),
        jnt_axis=m.jnt_axis.reshape(-1, 3),
        jnt_range=m.jnt_range.reshape(-1, 2),
        jnt_stiffness=m.jnt_stiffness,
        qpos0=m.qpos0,
        qpos_spring=m.qpos_spring,
        dof_damping=m.dof_damping,
        dof_armature=m.dof_armature,
        gravity=np.zeros(3) if no_gravity else m.opt.gravity,
        eq_data=m.eq_data.reshape(m.neq, -1) if m.neq else np.zeros((0, 11)),
        geom_pos=m.geom_pos.reshape(-1, 3),
        geom_quat=m.geom_quat.reshape(-1, 4),
        geom_size=m.geom_size.reshape(-1, 3),
        pair_friction=friction,
        actuator_gear=m.actuator_gear[:, 0] if m.nu else np.zeros(0),
        quaternion_inertia=J0,
    )


def _warn_actuator_dynamics(m, where: _Where) -> None:
    motor = [
        m.actuator_dyntype[a] == 0
        and m.actuator_gaintype[a] == 0
        and m.actuator_gainprm[a, 0] == 1.0
        and m.actuator_biastype[a] == 0
        for a in range(m.nu)
    ]
    others = [
        where("actuator", a, "position|velocity|general|intvelocity|damper")
        for a in range(m.nu)
        if not motor[a]
    ]
    if others:
        warnings.warn(
            "ukjax treats every actuator as a motor (generalized force = gear x control); "
            "the gain, bias and activation dynamics of these are ignored: " + "; ".join(others),
            stacklevel=4,
        )

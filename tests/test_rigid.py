"""Rigid bodies from MJCF and URDF (`ukjax.from_mjcf`, `ukjax.from_urdf`, `ukjax.RigidModel`).

References, all independent of ukjax's rigid-body code:
- MuJoCo's `mj_forward` (its `qacc`, `xpos`, `xquat`): exact for contact-free trees;
- a free body's energy and angular momentum (Dzhanibekov's flip);
- the heavy symmetric top's energy equation in u = cos(theta), u'^2 = f(u), with f the
  classical cubic (Goldstein, *Classical Mechanics*, 3rd ed., sec. 5.7, eq. 5.74);
- a planar four-bar closed by MJCF `connect`, against a Lagrange-multiplier formulation
  in the links' absolute angles written here and integrated by scipy's DOP853;
- the same arm from URDF and from MJCF; finite differences for the gradients.
"""

import warnings

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ukjax


mujoco = pytest.importorskip("mujoco")

TREE = """<mujoco><option gravity="0 0 -9.81"/><worldbody>
<body name="free" pos="0 0 1"><joint type="free"/>
  <geom type="box" size=".1 .2 .3" mass="1" contype="0" conaffinity="0"/></body>
<body name="b" pos="1 0 0" quat="0.9 0.1 0.3 0.2">
  <joint name="h1" type="hinge" axis="0 1 0" pos="0 0 .5" ref="10" damping="0.3" armature="0.1"/>
  <geom type="capsule" fromto="0 0 0 0.2 0 -1" size=".05" contype="0" conaffinity="0"/>
  <body name="c" pos="0 0.1 -1" euler="10 20 30"><joint name="ball" type="ball" pos="0 0 0.1"/>
    <geom type="ellipsoid" size=".1 .2 .3" pos="0 0.1 -.5" euler="5 7 9"
          contype="0" conaffinity="0"/>
    <body name="d" pos="0 0 -1">
      <joint type="slide" axis="1 1 0" stiffness="3" springref="0.1" damping="0.2"/>
      <joint type="hinge" axis="0 0 1" pos="0.1 0 0"/>
      <geom type="box" size=".1 .1 .1" contype="0" conaffinity="0"/></body></body></body>
</worldbody></mujoco>"""


def _random_state(m, rng, scale=0.4):
    qpos = m.qpos0 + scale * rng.standard_normal(m.nq)
    for j in range(m.njnt):
        if m.jnt_type[j] in (0, 1):
            a = m.jnt_qposadr[j] + (3 if m.jnt_type[j] == 0 else 0)
            qpos[a : a + 4] /= np.linalg.norm(qpos[a : a + 4])
    return qpos, rng.standard_normal(m.nv)


def test_tree_poses_and_accelerations_equal_mujoco_at_random_states():
    """Free, ball, hinge (with ref, damping, armature), slide (spring) and two joints in
    one body: body poses, qvel and qacc against mj_forward at random states."""
    m = mujoco.MjModel.from_xml_string(TREE)
    data = mujoco.MjData(m)
    model = ukjax.from_mjcf(TREE)
    assert (model.nq, model.nv) == (m.nq, m.nv)
    poses = jax.jit(lambda q: model.body_poses(q))
    qacc = jax.jit(lambda q, qd: model.qacc(q, qd, ukjax.acceleration(model, 0.0, q, qd)))
    rng = np.random.default_rng(0)
    for _ in range(3):
        qpos, qvel = _random_state(m, rng)
        data.qpos[:], data.qvel[:] = qpos, qvel
        mujoco.mj_forward(m, data)
        q, qd = model.initial_state(jnp.asarray(qpos), jnp.asarray(qvel))
        xpos, xquat = poses(q)
        np.testing.assert_allclose(xpos, data.xpos, atol=1e-12)
        np.testing.assert_allclose(xquat, data.xquat, atol=1e-12)
        np.testing.assert_allclose(model.qvel(q, qd), qvel, atol=1e-12)
        np.testing.assert_allclose(model.qpos(q), qpos, atol=1e-12)
        np.testing.assert_allclose(qacc(q, qd), data.qacc, rtol=1e-9, atol=1e-9)


HINGE_SLIDE_TREE = """<mujoco><option gravity="0 0 -9.81"/><worldbody>
<body name="b" pos="1 0 0" quat="0.9 0.1 0.3 0.2">
  <joint name="h1" type="hinge" axis="0 1 0" pos="0 0 .5" ref="10" damping="0.3" armature="0.1"/>
  <geom type="capsule" fromto="0 0 0 0.2 0 -1" size=".05" contype="0" conaffinity="0"/>
  <body name="c" pos="0 0.1 -1" euler="10 20 30">
    <joint type="hinge" axis="1 0 1" pos="0 0 0.1" stiffness="2" springref="20"/>
    <geom type="ellipsoid" size=".1 .2 .3" pos="0 0.1 -.5" euler="5 7 9"
          contype="0" conaffinity="0"/>
    <body name="d" pos="0 0 -1">
      <joint type="slide" axis="1 1 0" stiffness="3" springref="0.1" damping="0.2"/>
      <joint type="hinge" axis="0 0 1" pos="0.1 0 0"/>
      <geom type="box" size=".1 .1 .1" contype="0" conaffinity="0"/></body></body>
  <body name="e" pos="0.3 0 0"><joint type="hinge" axis="0 0 1"/>
    <geom type="box" size=".2 .1 .1" pos="0.2 0 0" contype="0" conaffinity="0"/></body></body>
</worldbody></mujoco>"""


@pytest.mark.slow  # default-suite time (10 s)
def test_a_tree_of_hinges_and_slides_takes_its_jacobian_from_the_joint_axes():
    """A branching tree of hinges (ref, armature, springs) and a slide, two joints in one
    body: the Jacobian from the joints' world axes and anchors equals the forward-mode
    Jacobian of the kinematics, the velocity-product term from them (J-dot qd) equals the
    forward derivative of the quasi-velocities, the potential's gradient from J equals
    autodiff's, and qacc equals mj_forward's at random states."""
    m = mujoco.MjModel.from_xml_string(HINGE_SLIDE_TREE)
    data = mujoco.MjData(m)
    model = ukjax.from_mjcf(HINGE_SLIDE_TREE)
    qacc = jax.jit(lambda q, qd: model.qacc(q, qd, ukjax.acceleration(model, 0.0, q, qd)))
    rng = np.random.default_rng(1)
    for _ in range(3):
        qpos, qvel = _random_state(m, rng, scale=1.0)
        q, qd = model.initial_state(jnp.asarray(qpos), jnp.asarray(qvel))
        J = model._velocity_jacobian(q)
        by_autodiff = jax.jacfwd(lambda v: model._quasi_velocities(q, v))(jnp.zeros_like(q))
        np.testing.assert_allclose(J, by_autodiff, atol=1e-14)
        bias = model._joint_bias(q, qd, model._joint_axes(q))
        bias_by_autodiff = jax.jvp(lambda x: model._quasi_velocities(x, qd), (q,), (qd,))[1]
        np.testing.assert_allclose(bias, bias_by_autodiff, atol=1e-13)
        grad_V = jax.grad(lambda x: model.potential_energy(0.0, x))(q)
        np.testing.assert_allclose(model._potential_gradient(0.0, q, J), grad_V, atol=1e-13)
        data.qpos[:], data.qvel[:] = qpos, qvel
        mujoco.mj_forward(m, data)
        np.testing.assert_allclose(qacc(q, qd), data.qacc, rtol=1e-9, atol=1e-9)


@pytest.mark.slow  # default-suite time
def test_recursive_dynamics_of_trees_of_hinges_and_slides_equal_the_jacobian_form():
    """The composite rigid-body and recursive Newton-Euler algorithms (the frames by
    pointer jumping) against Kane's equations from the joint-axes Jacobian, at random states: a
    branching tree with a slide, two joints on one body, springs, armature and damping;
    and a 12-link chain, which takes the recursion by default (`RECURSIVE_MIN_BODIES`),
    against the Jacobian form, also in float32 and under vmap over the link masses."""
    tree = ukjax.from_mjcf(HINGE_SLIDE_TREE)
    chain = ukjax.from_mjcf(_chain_xml(12))
    assert chain._recursive() and not tree._recursive()
    rng = np.random.default_rng(3)
    for model in (tree, chain):
        n = model.nq
        q, qd = (jnp.asarray(rng.uniform(-1.5, 1.5, n)) for _ in range(2))
        M, tau = jax.jit(lambda q, qd: model._tree_dynamics(q, qd))(q, qd)
        M_ref = jax.jit(lambda q: _jacobian_mass_matrix(model, q))(q)
        np.testing.assert_allclose(M, M_ref, atol=1e-12)
        Q_ref = jax.jit(lambda q, qd: _jacobian_force(model, q, qd))(q, qd)
        Q = -tau - model._spring_gradient(q)
        np.testing.assert_allclose(Q, Q_ref, atol=1e-11 * float(jnp.abs(Q_ref).max()))
    q, qd = (rng.uniform(-1.5, 1.5, chain.nq) for _ in range(2))
    M, Q = chain.mass_and_force(0.0, jnp.asarray(q, jnp.float32), jnp.asarray(qd, jnp.float32))
    assert M.dtype == Q.dtype == jnp.float32
    M64, Q64 = chain.mass_and_force(0.0, jnp.asarray(q), jnp.asarray(qd))
    np.testing.assert_allclose(M, M64, atol=1e-5 * float(jnp.abs(M64).max()))
    np.testing.assert_allclose(Q, Q64, atol=1e-4 * float(jnp.abs(Q64).max()))
    masses = jnp.asarray(chain.body_mass) * jnp.linspace(0.5, 2.0, 3)[:, None]

    def with_masses(m):
        return eqx.tree_at(lambda c: c.body_mass, chain, m)

    batched = jax.vmap(lambda m: with_masses(m).mass_matrix(0.0, jnp.asarray(q)))(masses)
    for k in range(3):
        expected = _jacobian_mass_matrix(with_masses(masses[k]), jnp.asarray(q))
        np.testing.assert_allclose(batched[k], expected, atol=1e-12)


def _chain_xml(n):
    body = '<geom type="capsule" fromto="0 0 0 0 0 -0.2" size="0.02"/>'
    xml = ""
    for _ in range(n):
        xml += f'<body pos="0 0 -0.2"><joint type="hinge" axis="0 1 0" damping="0.01"/>{body}'
    xml += "</body>" * n
    return (
        f'<mujoco><option><flag contact="disable"/></option><worldbody>{xml}</worldbody></mujoco>'
    )


def _jacobian_mass_matrix(model, q):
    J = model._joint_jacobian(q)
    return J.T @ (model._weights(q.dtype)[:, None] * J)


def _jacobian_force(model, q, qd):
    """Q without damping from the joint-axes Jacobian (Kane's equations)."""
    kinematics = model._joint_axes(q)
    J = model._joint_jacobian(q, kinematics)
    W = model._weights(q.dtype)
    u, u_dot = J @ qd, model._joint_bias(q, qd, kinematics)
    nb = len(model.parents)
    omega = u[3 * nb : 6 * nb].reshape(nb, 3)
    gyroscopic = jnp.cross(omega, jnp.asarray(model.body_inertia) * omega).reshape(-1)
    bias = (W * u_dot).at[3 * nb : 6 * nb].add(gyroscopic)
    return -J.T @ bias - model._potential_gradient(0.0, q, J)


def test_float32_accelerations_match_mujoco_to_single_precision():
    m = mujoco.MjModel.from_xml_string(TREE)
    data = mujoco.MjData(m)
    model = ukjax.from_mjcf(TREE)
    qpos, qvel = _random_state(m, np.random.default_rng(5))
    data.qpos[:], data.qvel[:] = qpos, qvel
    mujoco.mj_forward(m, data)
    q, qd = model.initial_state(qpos.astype(np.float32), qvel.astype(np.float32))
    assert q.dtype == qd.dtype == jnp.float32
    qacc = jax.jit(lambda q, qd: model.qacc(q, qd, ukjax.acceleration(model, 0.0, q, qd)))(q, qd)
    assert qacc.dtype == jnp.float32
    np.testing.assert_allclose(qacc, data.qacc, atol=1e-4 * np.abs(data.qacc).max())


@pytest.mark.slow  # moved from the default suite to keep it under 5 minutes
def test_kane_equations_equal_the_lagrange_equations_of_the_kinetic_energy():
    """RigidModel.mass_and_force (Kane/TMT) against the Lagrange terms that ukjax.System
    derives from the same kinetic energy by automatic differentiation (no armature: MuJoCo
    adds it to M only, without its gyroscopic term): the same M, forces that differ only
    along the quaternions' norm constraints, so the same accelerations."""
    xml = TREE.replace('armature="0.1"', "")
    model = ukjax.from_mjcf(xml)

    class Lagrangian(ukjax.System):
        rigid: ukjax.RigidModel

        def kinetic_energy(self, t, q, qd):
            return self.rigid.kinetic_energy(t, q, qd)

        def potential_energy(self, t, q):
            return self.rigid.potential_energy(t, q)

        def forces(self, t, q, qd):
            return self.rigid.forces(t, q, qd)

        def holonomic(self, t, q):
            return self.rigid.holonomic(t, q)

    m = mujoco.MjModel.from_xml_string(xml)
    qpos, qvel = _random_state(m, np.random.default_rng(1))
    q, qd = model.initial_state(jnp.asarray(qpos), jnp.asarray(qvel))
    M, Q = jax.jit(lambda q, qd: model.mass_and_force(0.0, q, qd))(q, qd)
    M_ref, Q_ref = jax.jit(lambda q, qd: ukjax.mass_and_force(Lagrangian(model), 0.0, q, qd))(q, qd)
    np.testing.assert_allclose(M, M_ref, atol=1e-12)
    qdd = jax.jit(lambda q, qd: ukjax.acceleration(model, 0.0, q, qd))(q, qd)
    qdd_ref = jax.jit(lambda q, qd: ukjax.acceleration(Lagrangian(model), 0.0, q, qd))(q, qd)
    np.testing.assert_allclose(qdd, qdd_ref, rtol=1e-10, atol=1e-10)
    A = jax.jacfwd(lambda x: model.holonomic(0.0, x))(q)[:2]  # the two norm rows
    coefficients = jnp.linalg.lstsq(A.T, Q - Q_ref)[0]
    np.testing.assert_allclose(A.T @ coefficients, Q - Q_ref, atol=1e-10)


FREE_BODY = """<mujoco><option gravity="0 0 0"/><worldbody><body><freejoint/>
  <inertial pos="0 0 0" mass="1" diaginertia="1 2 3"/></body></worldbody></mujoco>"""


@pytest.mark.slow  # default-suite time (7 s)
def test_free_body_flips_about_its_intermediate_axis_conserving_energy_and_momentum():
    body = ukjax.from_mjcf(FREE_BODY)
    q0, qd0 = body.initial_state(qvel=jnp.array([0.0, 0.0, 0.0, 0.01, 3.0, 0.0]))
    ts = jnp.linspace(0.0, 12.0, 241)
    sol = jax.jit(lambda q, qd: ukjax.simulate(body, q, qd, ts))(q0, qd0)
    omega = jax.vmap(body.qvel)(sol.q, sol.qd)[:, 3:]
    assert omega[:, 1].min() < -2.9 and omega[:, 1].max() > 2.9  # it flipped
    inertia = jnp.array([1.0, 2.0, 3.0])
    energy = 0.5 * jnp.sum(inertia * omega**2, axis=1)
    from ukjax._quaternion import rotate

    momentum = jax.vmap(rotate)(sol.q[:, 3:], inertia * omega)  # world frame
    np.testing.assert_allclose(energy, energy[0], rtol=1e-7)
    np.testing.assert_allclose(momentum, np.broadcast_to(momentum[0], momentum.shape), atol=1e-6)
    np.testing.assert_allclose(jnp.linalg.norm(sol.q[:, 3:], axis=1), 1.0, atol=1e-10)


@pytest.mark.slow  # default-suite time (11 s)
def test_heavy_symmetric_top_obeys_the_cubic_of_its_nutation():
    """A top on a ball joint: u = cos(theta) of its axis satisfies u'^2 = f(u) =
    (alpha - beta u)(1 - u^2) - (b - a u)^2 (Goldstein eq. 5.74) along the run, and the
    nutation fills the interval between the two roots of f in [-1, 1]."""
    mass, l, A0, C, g = 1.0, 0.3, 0.01, 0.02, 9.81
    xml = f"""<mujoco><option gravity="0 0 -{g}"/><worldbody><body><joint type="ball"/>
      <inertial pos="0 0 {l}" mass="{mass}" diaginertia="{A0} {A0} {C}"/>
      </body></worldbody></mujoco>"""
    top = ukjax.from_mjcf(xml)
    theta0, spin = 0.5, 30.0
    qpos = jnp.array([np.cos(theta0 / 2), np.sin(theta0 / 2), 0.0, 0.0])
    q0, qd0 = top.initial_state(qpos, jnp.array([0.0, 0.0, spin]))
    ts = jnp.linspace(0.0, 2.0, 801)
    sol = jax.jit(lambda q, qd: ukjax.simulate(top, q, qd, ts))(q0, qd0)

    from ukjax._quaternion import rotate

    axis = lambda q: rotate(q, jnp.array([0.0, 0.0, 1.0]))[2]
    u, udot = jax.vmap(lambda q, qd: jax.jvp(axis, (q,), (qd,)))(sol.q, sol.qd)
    A = A0 + mass * l**2  # about the fixed point
    E = 0.5 * C * spin**2 + mass * g * l * np.cos(theta0)  # at rest in theta and phi
    a = C * spin / A
    b = a * np.cos(theta0)  # p_phi / A
    alpha, beta = (2 * E - C * spin**2) / A, 2 * mass * g * l / A
    f = lambda u: (alpha - beta * u) * (1 - u**2) - (b - a * u) ** 2
    np.testing.assert_allclose(udot**2, f(u), atol=1e-7)
    roots = np.roots([beta, -(alpha + a**2), 2 * a * b - beta, alpha - b**2])
    roots = np.sort(roots[(np.abs(roots.imag) < 1e-12) & (np.abs(roots.real) <= 1)].real)
    assert len(roots) == 2 and abs(roots[1] - np.cos(theta0)) < 1e-10
    assert abs(float(u.min()) - roots[0]) < 1e-4  # the lowest point is reached
    assert float(u.min()) > roots[0] - 1e-7


L1, L2, L3, D = 0.3, 1.0, 0.8, 1.0
TH1, TH2, TH3 = 1.0, 0.5794429379199424, 1.572223208242397  # closed at qpos0


def _four_bar_xml():
    def link(name, pos, angle, length, mass, joint):
        return (
            f'<body name="{name}" pos="{pos} 0 0" axisangle="0 -1 0 {angle}">'
            f'<joint name="{joint}" type="hinge" axis="0 -1 0"/>'
            f'<geom type="capsule" fromto="0 0 0 {length} 0 0" size="0.02" mass="{mass}"/>'
        )

    return (
        '<mujoco><compiler angle="radian"/><option gravity="0 0 -9.81"/><worldbody>'
        + link("crank", 0, TH1, L1, 0.5, "a")
        + link("coupler", L1, TH2 - TH1, L2, 1.0, "b")
        + "</body></body>"
        + link("rocker", D, TH3, L3, 0.8, "c")
        + "</body></worldbody>"
        + f'<equality><connect body1="coupler" body2="rocker" anchor="{L2} 0 0"/></equality>'
        + '<contact><exclude body1="coupler" body2="rocker"/>'
        + '<exclude body1="crank" body2="rocker"/></contact></mujoco>'
    )


@pytest.mark.slow
def test_four_bar_closed_by_connect_follows_a_lagrange_multiplier_reference():
    from scipy.integrate import solve_ivp

    xml = _four_bar_xml()
    m = mujoco.MjModel.from_xml_string(xml)
    model = ukjax.from_mjcf(xml)
    masses = m.body_mass[1:4]
    inertias = m.body_inertia[1:4].max(axis=1)  # about the transverse axes
    lengths = np.array([L1, L2, L3])
    e = lambda x: jnp.array([jnp.cos(x), jnp.sin(x)])  # in the (x, z) plane

    def coms(x):  # absolute angles (crank, coupler, rocker)
        a, b, c = x
        return [
            0.5 * lengths[0] * e(a),
            lengths[0] * e(a) + 0.5 * lengths[1] * e(b),
            jnp.array([D, 0.0]) + 0.5 * lengths[2] * e(c),
        ]

    def T(x, xd):
        v = jax.jvp(coms, (x,), (xd,))[1]
        return sum(0.5 * masses[i] * v[i] @ v[i] + 0.5 * inertias[i] * xd[i] ** 2 for i in range(3))

    V = lambda x: sum(masses[i] * 9.81 * coms(x)[i][1] for i in range(3))
    closure = lambda x: (
        lengths[0] * e(x[0]) + lengths[1] * e(x[1]) - jnp.array([D, 0.0]) - (lengths[2] * e(x[2]))
    )

    @jax.jit
    def rhs(y):
        x, xd = y[:3], y[3:]
        M = jax.hessian(T, argnums=1)(x, xd)
        Q = jax.grad(T, argnums=0)(x, xd) - jax.jacfwd(jax.grad(T, argnums=1))(x, xd) @ xd
        Q = Q - jax.grad(V)(x)
        Phi = jax.jacfwd(closure)(x)
        gamma = -jax.jvp(lambda z: jax.jacfwd(closure)(z) @ xd, (x,), (xd,))[1]
        K = jnp.block([[M, Phi.T], [Phi, jnp.zeros((2, 2))]])
        xdd = jnp.linalg.solve(K, jnp.concatenate([Q, gamma]))[:3]
        return jnp.concatenate([xd, xdd])

    q0, qd0 = model.initial_state(qvel=jnp.array([2.0, -2.0, 0.5]))
    x0 = np.array([TH1, TH2, TH3]) + np.array([q0[0], q0[0] + q0[1], q0[2]])
    xd0 = np.array([qd0[0], qd0[0] + qd0[1], qd0[2]])
    np.testing.assert_allclose(closure(jnp.asarray(x0)), 0.0, atol=1e-12)
    ts = np.linspace(0.0, 2.0, 21)
    ref = solve_ivp(
        lambda t, y: np.asarray(rhs(jnp.asarray(y))),
        (0.0, 2.0),
        np.concatenate([x0, xd0]),
        method="DOP853",
        rtol=1e-12,
        atol=1e-12,
        t_eval=ts,
    )
    sol = jax.jit(lambda q, qd: ukjax.simulate(model, q, qd, jnp.asarray(ts)))(q0, qd0)
    angles = np.stack([sol.q[:, 0], sol.q[:, 0] + sol.q[:, 1], sol.q[:, 2]], 1)
    np.testing.assert_allclose(angles + np.array([TH1, TH2, TH3]), ref.y[:3].T, atol=1e-6)
    closure_error = jax.vmap(lambda q: model.holonomic(0.0, q))(sol.q)
    assert float(jnp.abs(closure_error).max()) < 1e-9  # exact, where MuJoCo's is soft


ARM_URDF = """<robot name="arm">
 <link name="base"/>
 <link name="l1"><inertial><origin xyz="0 0 0.25"/><mass value="1"/>
   <inertia ixx="0.02" iyy="0.02" izz="0.001" ixy="0" ixz="0" iyz="0"/></inertial></link>
 <link name="l2"><inertial><origin xyz="0 0 0.2"/><mass value="0.8"/>
   <inertia ixx="0.01" iyy="0.011" izz="0.002" ixy="0" ixz="0" iyz="0"/></inertial></link>
 <link name="l3"><inertial><origin xyz="0 0 0.1"/><mass value="0.3"/>
   <inertia ixx="0.003" iyy="0.003" izz="0.001" ixy="0" ixz="0" iyz="0"/></inertial></link>
 <joint name="j1" type="continuous"><parent link="base"/><child link="l1"/>
   <origin xyz="0 0 0.1"/><axis xyz="0 0 1"/></joint>
 <joint name="j2" type="continuous"><parent link="l1"/><child link="l2"/>
   <origin xyz="0 0 0.5" rpy="0.1 0 0"/><axis xyz="0 1 0"/></joint>
 <joint name="j3" type="continuous"><parent link="l2"/><child link="l3"/>
   <origin xyz="0 0 0.4"/><axis xyz="1 0 0"/></joint>
</robot>"""

ARM_MJCF = """<mujoco><worldbody>
 <body name="l1" pos="0 0 0.1"><joint name="j1" axis="0 0 1"/>
  <inertial pos="0 0 0.25" mass="1" diaginertia="0.02 0.02 0.001"/>
  <body name="l2" pos="0 0 0.5" euler="0.1 0 0"><joint name="j2" axis="0 1 0"/>
   <inertial pos="0 0 0.2" mass="0.8" diaginertia="0.01 0.011 0.002"/>
   <body name="l3" pos="0 0 0.4"><joint name="j3" axis="1 0 0"/>
    <inertial pos="0 0 0.1" mass="0.3" diaginertia="0.003 0.003 0.001"/>
 </body></body></body></worldbody><compiler angle="radian"/></mujoco>"""


@pytest.mark.slow
def test_the_same_arm_from_urdf_and_mjcf_moves_the_same_and_batch_equals_loop():
    from_urdf, from_mjcf = ukjax.from_urdf(ARM_URDF), ukjax.from_mjcf(ARM_MJCF)
    ts = jnp.linspace(0.0, 1.0, 6)
    angles = jnp.array([[0.3, 1.0, -0.5], [0.0, 0.2, 0.4], [1.0, -1.0, 0.1]])

    def run(model, qpos):
        q0, qd0 = model.initial_state(qpos, jnp.array([1.0, 0.0, -1.0]))
        return ukjax.simulate(model, q0, qd0, ts).q

    batch = jax.jit(jax.vmap(lambda a: run(from_urdf, a)))(angles)
    other = jax.jit(jax.vmap(lambda a: run(from_mjcf, a)))(angles)
    np.testing.assert_allclose(batch, other, atol=1e-10)
    single = jax.jit(lambda a: run(from_urdf, a))
    for i in range(len(angles)):
        np.testing.assert_allclose(single(angles[i]), batch[i], atol=1e-12)


@pytest.mark.extended  # 95 s; CI keeps the URDF arm against MJCF and fitting in test_fit.py
def test_a_urdf_arm_is_swept_and_its_joint_damping_fitted_as_any_system():
    """A model read from a file is an ordinary System for the tools around `simulate`:
    `ukjax.sweep` over initial angles, and `ukjax.fit` recovering the three joints'
    damping (from a guess 2-6x off) from two of the swept runs' angles - which holds only
    where the sweep's trajectories are `simulate`'s."""
    arm = ukjax.from_urdf(ARM_URDF)
    true = eqx.tree_at(lambda m: m.dof_damping, arm, np.array([0.3, 0.2, 0.05]))
    ts = jnp.linspace(0.0, 1.0, 11)
    angles = jnp.array([[0.3, 1.0, -0.5], [0.0, 0.2, 0.4], [1.0, -1.0, 0.1], [0.5, 0.5, 0.5]])
    q0, qd0 = jax.vmap(lambda a: true.initial_state(a, jnp.array([1.0, 0.0, -1.0])))(angles)
    swept = ukjax.sweep(true, q0, qd0, ts, progress=False)
    assert swept.ok.all() and swept.q.shape == (4, 11, 3)
    data = ukjax.TrajectoryData(ts, q0[:2], qd0[:2], q=jnp.asarray(swept.q[:2]))
    guess = eqx.tree_at(lambda m: m.dof_damping, arm, np.array([0.1, 0.1, 0.1]))
    res = ukjax.fit(guess, data, params=["dof_damping"], progress=False, max_steps=50)
    assert res.converged, res.message
    np.testing.assert_allclose(res.params["dof_damping"], [0.3, 0.2, 0.05], rtol=1e-6)


@pytest.mark.extended  # 98 s here: the third tier (pytest -m extended), to keep CI in budget
def test_gradients_with_respect_to_masses_inertias_and_initial_angles_match_finite_differences():
    model = ukjax.from_mjcf(ARM_MJCF)
    ts = jnp.linspace(0.0, 0.5, 3)

    def loss(mass, inertia, angles):
        arm = eqx.tree_at(lambda m: (m.body_mass, m.body_inertia), model, (mass, inertia))
        q0, qd0 = arm.initial_state(angles)
        return jnp.sum(ukjax.simulate(arm, q0, qd0, ts).q[-1] ** 2)

    args = (
        jnp.asarray(model.body_mass),
        jnp.asarray(model.body_inertia),
        jnp.array([0.3, 1.0, -0.5]),
    )
    grads = jax.jit(jax.grad(loss, argnums=(0, 1, 2)))(*args)
    f = jax.jit(loss)
    for k, index in ((0, (2,)), (1, (3, 1)), (2, (1,))):
        h = 1e-6
        plus = list(args)
        minus = list(args)
        plus[k] = args[k].at[index].add(h)
        minus[k] = args[k].at[index].add(-h)
        fd = (f(*plus) - f(*minus)) / (2 * h)
        np.testing.assert_allclose(grads[k][index], fd, rtol=1e-5, atol=1e-8)


def test_mujoco_conventions_work_under_vmap():
    m = mujoco.MjModel.from_xml_string(TREE)
    model = ukjax.from_mjcf(TREE)
    rng = np.random.default_rng(3)
    states = [_random_state(m, rng) for _ in range(4)]
    qpos = jnp.asarray(np.stack([s[0] for s in states]))
    qvel = jnp.asarray(np.stack([s[1] for s in states]))
    q, qd = jax.vmap(model.initial_state)(qpos, qvel)
    np.testing.assert_allclose(jax.vmap(model.qpos)(q), qpos, atol=1e-12)
    np.testing.assert_allclose(jax.vmap(model.qvel)(q, qd), qvel, atol=1e-12)
    q_ref, _ = model.initial_state()
    np.testing.assert_allclose(q_ref, m.qpos0, atol=1e-15)


def test_unsupported_elements_are_refused_with_their_line():
    xml = """<mujoco>
<worldbody><site name="s1"/>
<body><joint type="hinge"/><geom size="0.1"/><site name="s2" pos="0 0 1"/></body>
</worldbody>
<tendon>
  <spatial name="rope"><site site="s1"/><site site="s2"/></spatial>
</tendon></mujoco>"""
    with pytest.raises(ValueError, match=r"Tendons.*'rope'.*line 6"):
        ukjax.from_mjcf(xml)
    loss = TREE.replace('damping="0.3"', 'frictionloss="0.1"')
    with pytest.raises(ValueError, match=r"friction loss.*'h1'.*line 5"):
        ukjax.from_mjcf(loss)
    with pytest.raises(ValueError, match="No such model file"):
        ukjax.from_mjcf("does/not/exist.xml")


def test_unsupported_collider_pairs_are_named_in_a_warning(tmp_path):
    xml = """<mujoco><worldbody>
<body pos="0 0 1"><freejoint/><geom name="a" type="box" size=".1 .1 .1"/></body>
<body pos="0 0 2"><freejoint/><geom name="b" type="box" size=".1 .1 .1"/></body>
</worldbody></mujoco>"""
    path = tmp_path / "boxes.xml"
    path.write_text(xml)
    with pytest.warns(UserWarning, match=r"geom 'a' \(.*boxes.xml, line 2\) - geom 'b'"):
        model = ukjax.from_mjcf(path)
    assert model.contacts == () and model.unilateral(0.0, model.initial_state()[0]) is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ukjax.from_mjcf(path, contacts=False)


BALL_ON_TABLE = """<mujoco><worldbody><geom type="plane" size="5 5 .1" friction="0.3"/>
<body pos="0 0 0.1"><freejoint/><geom type="sphere" size="0.1" mass="2" friction="0.3"/></body>
</worldbody></mujoco>"""  # (MuJoCo's pair coefficient is the larger of the two: 1 by default)


@pytest.mark.slow
def test_a_ball_thrown_along_a_rough_table_slides_then_rolls_at_five_sevenths_its_speed():
    """Exact Coulomb friction at the plane-sphere contact of an MJCF model: the ball slides
    with deceleration mu g while its spin grows (5 mu g / (2 r)), and rolls from
    t* = 2 v0 / (7 mu g) on at v = 5 v0 / 7 (a solid sphere, I = 2/5 m r^2)."""
    ball = ukjax.from_mjcf(BALL_ON_TABLE)
    assert ball.frictional and ball.contacts[0].kind == "plane_sphere"
    assert float(ball.pair_friction[0]) == 0.3
    v0, mu, g, r = 2.0, 0.3, 9.81, 0.1
    q0, qd0 = ball.initial_state(qvel=jnp.array([v0, 0, 0, 0, 0, 0]))
    t_roll = 2 * v0 / (7 * mu * g)
    ts = jnp.array([0.0, 0.5 * t_roll, 2 * t_roll, 3 * t_roll])
    law = ukjax.Impact(restitution=0.0)
    sol = jax.jit(lambda q, qd: ukjax.simulate(ball, q, qd, ts, contact=law))(q0, qd0)
    qvel = jax.vmap(ball.qvel)(sol.q, sol.qd)
    np.testing.assert_allclose(qvel[1, 0], v0 - mu * g * ts[1], rtol=1e-8)
    np.testing.assert_allclose(qvel[1, 4], 5 * mu * g * ts[1] / (2 * r), rtol=1e-8)
    np.testing.assert_allclose(qvel[2:, 0], 5 * v0 / 7, rtol=1e-8)
    np.testing.assert_allclose(qvel[2:, 4], 5 * v0 / (7 * r), rtol=1e-8)  # rolling
    np.testing.assert_allclose(sol.q[:, 2], r, atol=1e-10)  # on the table throughout


TIPPING_CAPSULE = """<mujoco><worldbody><geom type="plane" size="5 5 .1" friction="0.8"/>
<body pos="0 0 0.5" euler="0 25 0"><freejoint/>
<geom type="capsule" fromto="0 0 -0.25 0 0 0.25" size="0.05" friction="0.8"/></body>
</worldbody></mujoco>"""


@pytest.mark.extended  # 90 s; CI keeps a rigid body on a rough floor (the ball at 5/7)
def test_a_capsule_tipping_over_on_a_rough_floor_slips_once_then_lands_flat():
    """A capsule dropped tilted lands on its lower end (inelastic, sticking), pivots, starts
    to slip where its holding friction reaches the cone (|F| = mu N) and lands flat:
    three events, no more - the slip starts from v = 0 and its round-off must not point
    the kinetic force or fire turn events (it used to chatter through ~100 release /
    impact events at one instant) - no penetration, energy never rising, at rest lying
    on the floor at the end."""
    rod = ukjax.from_mjcf(TIPPING_CAPSULE)
    law, mu, r = ukjax.Impact(restitution=0.0), 0.8, 0.05
    q0, qd0 = rod.initial_state()
    run = jax.jit(lambda q, qd, ts: ukjax.simulate(rod, q, qd, ts, contact=law))
    sol = run(q0, qd0, jnp.linspace(0.0, 1.0, 101))
    n = int(sol.events.count)
    kinds = [ukjax.EVENT_KINDS[int(k)] for k in sol.events.kind[:n]]
    assert kinds == ["impact", "slip", "impact"]
    assert [int(c) for c in sol.events.contact[:n]] == [0, 0, 1]
    gaps = jax.vmap(lambda q: rod.unilateral(0.0, q))(sol.q)
    assert float(gaps.min()) > -1e-10
    E = jax.vmap(lambda q, qd: rod.kinetic_energy(0.0, q, qd) + rod.potential_energy(0.0, q))(
        sol.q, sol.qd
    )
    # never rising beyond the integration error of the pivoting phase (stuck end, no
    # dissipation; about 3,500 steps at rtol 1e-12 on E = 22 J: rises up to 0.95e-9 in
    # diffrax's stage loop and 1.4e-9 in the StageLoop measured); an impact or a slip
    # that added energy would be orders of magnitude above
    assert float(jnp.diff(E).max()) < 5e-9
    np.testing.assert_allclose(sol.q[-1, 2], r, atol=1e-9)  # lying on the floor
    assert float(jnp.abs(rod.qvel(sol.q[-1], sol.qd[-1])).max()) < 1e-9  # at rest
    # just before the slip, the end is held by friction at the edge of the cone
    t_slip = float(sol.events.time[1])
    before = run(q0, qd0, jnp.linspace(0.0, t_slip - 1e-9, 101))
    q, qd = before.q[-1], before.qd[-1]
    _, N, F = ukjax.friction_forces(rod, 0.0, q, qd, jnp.array([True, False]), contact=law)
    np.testing.assert_allclose(jnp.linalg.norm(F[0]) / N[0], mu, rtol=1e-6)


ROUGH_BOX = """<mujoco><option gravity="0 0 -9.81"/><worldbody>
<geom type="plane" size="5 5 .1" friction="0.5"/>
<body pos="0 0 0.1"><freejoint/><geom type="box" size="0.2 0.1 0.1" mass="1" friction="0.5"/>
</body></worldbody></mujoco>"""


@pytest.mark.extended  # 90-100 s (one compile of the 8-corner box with 3-D cones, five scenes);
# CI keeps a rigid body on a rough floor in the ball that rolls at 5/7 of its speed
def test_a_rough_box_slides_lands_and_tumbles_to_rest():
    """Redundant frictional contacts: a box (8 corners, 3-D cones, mu = 0.5), five scenes
    in one batch. (a) On its four bottom corners, launched sliding at v0 = (1, 0.5): it
    decelerates at mu g and stops at |v0| / (mu g) after v0^2 / (2 mu g) along v0 - it
    used to stop with `contact_unsolved` at a corner "impact" at 1e-18 m/s, judged against
    rates of that size. (b) Dropped flat from 5 cm while moving at vx = 1: the four corners
    land at once (inelastic), the frictional impact takes mu P_n of the speed, it slides to
    rest, and the motion stays in its plane of symmetry - it used to yaw by 1.7 degrees
    when three of the four corners carried the load. (c)-(e) Dropped tilted and spinning,
    three drops that each failed before the multi-contact fallbacks of stop 57: (c) a
    corner's impact while three others slide had no solution with sliding impacts
    (`contact_unsolved`; now the impact of maximal dissipation); (d) coming to rest, the
    corners stuck one at a time, each making the others slip on (`max_events_reached`
    after 256 events at one instant; now the slips at round-off stop together); (e) a
    corner whose hold fails after a sticking impact started to slip against its holding
    force, off the direction its slip grows in, and the run crawled (`max_steps_stiff`;
    now the consistent heading). Each of (c)-(e) must come to rest on a face, never gain
    energy, never sink into the floor."""
    box = ukjax.from_mjcf(ROUGH_BOX)
    mu, g, m = 0.5, 9.81, 1.0
    qa, qda = box.initial_state(qvel=jnp.array([1.0, 0.5, 0.0, 0.0, 0.0, 0.0]))
    qb, qdb = box.initial_state(
        qpos=jnp.array([0.0, 0.0, 0.15, 1.0, 0.0, 0.0, 0.0]), qvel=jnp.array([1.0, 0, 0, 0, 0, 0])
    )
    drops = [  # MuJoCo qpos (position, quaternion wxyz) and qvel (linear, angular)
        ([0.0, 0.0, 0.174843, 0.999414, -0.008862, 0.000588, -0.033057],
         [-0.732267, -0.544259, 0.0, -0.6326, 0.823261, 2.085027]),
        ([0.0, 0.0, 0.174799, 0.994564, -0.037657, -0.068207, -0.069081],
         [1.322457, -0.013915, 0.0, 2.08368, 2.80453, 2.300331]),
        ([0.0, 0.0, 0.211081, 0.994973, -0.05845, 0.078553, -0.021],
         [-0.510622, -0.011533, 0.0, -2.97075, 0.60137, -0.212145]),
    ]  # fmt: skip
    states = [(qa, qda), (qb, qdb)]
    states += [box.initial_state(qpos=jnp.array(p), qvel=jnp.array(v)) for p, v in drops]
    q0, qd0 = (jnp.stack(x) for x in zip(*states))
    ts = jnp.linspace(0.0, 1.0, 101)
    law = ukjax.Impact(restitution=0.0)
    run = lambda q, qd: ukjax.simulate(box, q, qd, ts, contact=law, throw=False)
    sol = jax.jit(jax.vmap(run))(q0, qd0)
    assert list(sol.status) == ["successful"] * 5
    # (a)
    v0 = np.array([1.0, 0.5])
    speed = np.linalg.norm(v0)
    np.testing.assert_allclose(sol.q[0, -1, :2], v0 * speed / (2 * mu * g), atol=1e-9)
    np.testing.assert_allclose(sol.q[0, :, 2], 0.1, atol=1e-12)  # on its face throughout
    np.testing.assert_allclose(sol.q[0, :, 3:], np.tile([1.0, 0, 0, 0], (len(ts), 1)), atol=1e-12)
    n = int(sol.events.count[0])
    first_stick = min(
        float(sol.events.time[0, i])
        for i in range(n)
        if ukjax.EVENT_KINDS[int(sol.events.kind[0, i])] == "stick"
    )
    np.testing.assert_allclose(first_stick, speed / (mu * g), rtol=1e-7)
    # (b)
    t_hit = np.sqrt(2 * 0.05 / g)
    v_after = 1.0 - mu * g * t_hit  # the tangential impulse mu * m * g * t_hit
    x_rest = t_hit + v_after**2 / (2 * mu * g)
    assert ukjax.EVENT_KINDS[int(sol.events.kind[1, 0])] == "impact"
    np.testing.assert_allclose(float(sol.events.time[1, 0]), t_hit, rtol=1e-9)
    np.testing.assert_allclose(sol.q[1, -1, 0], x_rest, atol=1e-9)
    np.testing.assert_allclose(sol.q[1, -1, 2], 0.1, atol=1e-12)
    assert float(jnp.abs(sol.q[1, :, 1]).max()) < 1e-12  # no sideways drift
    assert float(jnp.abs(sol.q[1, :, 4:]).max()) < 1e-12  # no roll, pitch or yaw
    assert float(jnp.abs(sol.qd[:2, -1]).max()) < 1e-12  # both at rest
    # (c)-(e)
    assert int(sol.stats["num_steps"][2:].max()) < 5000
    assert int(sol.events.count[2:].max()) < 40
    inertia = np.diag(m / 3 * np.array([0.1**2 + 0.1**2, 0.2**2 + 0.1**2, 0.2**2 + 0.1**2]))
    corners = np.array([[x, y, z] for x in (-0.2, 0.2) for y in (-0.1, 0.1) for z in (-0.1, 0.1)])
    for i in range(2, 5):
        q, qd = np.asarray(sol.q[i]), np.asarray(sol.qd[i])
        w, x, y, z = q[:, 3:].T
        R = np.stack(
            [
                np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], -1),
                np.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], -1),
                np.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], -1),
            ],
            -2,
        )  # (T, 3, 3) body to world
        heights = q[:, None, 2] + np.einsum("tj,cj->tc", R[:, 2], corners)
        assert heights.min() > -1e-9  # never into the floor
        omega = np.asarray(jax.vmap(box.qvel)(sol.q[i], sol.qd[i]))[:, 3:]
        # qvel's angular velocity is in the body frame (MuJoCo's free joint)
        energy = (
            0.5 * m * np.sum(qd[:, :3] ** 2, axis=1)
            + 0.5 * np.einsum("ti,ij,tj->t", omega, inertia, omega)
            + m * g * q[:, 2]
        )
        assert np.diff(energy).max() < 1e-9  # rigid impacts and friction only take energy
        np.testing.assert_allclose(q[-1, 2], 0.1, atol=1e-9)  # on a face
        np.testing.assert_allclose(np.sort(heights[-1])[:4], 0.0, atol=1e-9)
        assert np.abs(qd[-1]).max() < 1e-9  # at rest


def bricard_mjcf() -> str:
    """IFToMM A04 from bodies and hinges: five rods (boxes 1 x 0.1 x 0.1 m, 1 kg) hinged in a
    chain from the ground at J0; the sixth hinge, rod 5 to the ground at J5, is two
    `connect`s on its axis (six rows for five conditions: redundant, on top of the
    mechanism's own redundancy)."""
    rods = [  # (joint point relative to the previous one, hinge axis, rod direction)
        ("0 0 0", "0 1 0", (1, 0, 0)),
        ("1 0 0", "0 0 1", (0, -1, 0)),
        ("0 -1 0", "1 0 0", (0, 0, 1)),
        ("0 0 1", "0 1 0", (-1, 0, 0)),
        ("-1 0 0", "0 0 1", (0, 1, 0)),
    ]
    body = ""
    for k, (pos, axis, d) in reversed(list(enumerate(rods))):
        size = " ".join("0.5" if c else "0.05" for c in d)
        centre = " ".join(str(0.5 * c) for c in d)
        body = (
            f'<body name="rod{k + 1}" pos="{pos}"><joint type="hinge" axis="{axis}"/>'
            f'<geom type="box" size="{size}" pos="{centre}" mass="1"/>{body}</body>'
        )
    return (
        '<mujoco><option gravity="0 -9.81 0"><flag contact="disable"/></option>'
        f"<worldbody>{body}</worldbody><equality>"
        '<connect body1="rod5" body2="world" anchor="0 1 0"/>'
        '<connect body1="rod5" body2="world" anchor="0.5 1 0"/></equality></mujoco>'
    )


@pytest.mark.extended  # 48 s here
def test_bricard_mechanism_from_bodies_and_hinges_moves_as_the_natural_coordinate_model():
    from ukjax.systems import Bricard

    model = ukjax.from_mjcf(bricard_mjcf())
    assert len(model.equalities) == 2 and model.nq == 5  # 5 hinges, 6 + 6 rows close them
    ts = jnp.linspace(0.0, 2.0, 11)
    q0, qd0 = model.initial_state()
    sol = jax.jit(lambda q, qd: ukjax.simulate(model, q, qd, ts))(q0, qd0)
    j3 = jax.vmap(lambda q: model.body_poses(q)[0][model.body_id("rod4")])(sol.q)
    natural = Bricard()
    p0, pd0 = natural.initial_state()
    ref = jax.jit(lambda q, qd: ukjax.simulate(natural, q, qd, ts))(p0, pd0)
    np.testing.assert_allclose(j3, ref.q[:, 6:9], atol=1e-5)
    assert float(jnp.ptp(j3[:, 0])) > 0.1  # it moved
    closure = jax.vmap(lambda q: model.holonomic(0.0, q))(sol.q)
    assert float(jnp.abs(closure).max()) < 1e-8

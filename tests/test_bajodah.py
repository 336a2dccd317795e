"""Seed 004 Ex. 2.1/4.2 (cone particle) and Ex. 2.2 (alpha(t) particle): UK against the
Kane-form closed forms printed in the thesis."""

import jax.numpy as jnp
import numpy as np

import ukjax
from ukjax.systems import ConeSurfaceParticle, NonholonomicParticle


def _cone_state(rng, c):
    ph = rng.uniform(0.3, 1.2)
    r = c / ph
    th = rng.uniform(-3, 3)
    rd, thd = rng.standard_normal(2)
    phd = -ph * rd / r  # d(r phi)/dt = 0
    return jnp.array([r, th, ph]), jnp.array([rd, thd, phd])


def test_cone_particle_eqs_73_75_and_281_283(rng):
    for _ in range(10):
        m, c = rng.uniform(0.5, 2), rng.uniform(0.3, 1.0)
        Fr, Ft, Fp = rng.standard_normal(3)
        s = ConeSurfaceParticle(mass=m, c=c, F_r=Fr, F_theta=Ft, F_phi=Fp)
        q, qd = _cone_state(rng, c)
        r, th, ph = np.asarray(q)
        rd, thd, phd = np.asarray(qd)
        u1, u2, u3 = np.asarray(s.generalized_speeds(q, qd))
        a = m**2 * (1 + ph**2)
        tan = np.tan(ph)
        common = u2**2 + u3**2 - ph * u2**2 / tan
        ud1 = m / a * (Fr + ph * Fp) + m**2 / (a * r) * common
        ud2 = Ft / m - (u1 * u2 - u2 * u3 / tan) / r
        ud3 = m * ph / a * (Fr + ph * Fp) + m**2 * ph / (a * r) * common - u1 * u3 / r
        qdd = np.asarray(ukjax.acceleration(s, 0.0, q, qd))
        rdd, thdd, phdd = qdd
        got = [
            rdd,
            rd * thd * np.sin(ph) + r * thdd * np.sin(ph) + r * thd * phd * np.cos(ph),
            -rd * phd - r * phdd,
        ]
        np.testing.assert_allclose(got, [ud1, ud2, ud3], rtol=1e-10, atol=1e-12)
        # Constraint forces in the seed's frame (eqs 281-283).
        M, Q = ukjax.mass_and_force(s, 0.0, q, qd)
        A, b = ukjax.constraint_matrices(s, 0.0, q, qd)
        Qc, _ = ukjax.constraint_forces(M, Q, A, b)
        Qc = np.asarray(Qc)
        Fc = [Qc[0], Qc[1] / (r * np.sin(ph)), -Qc[2] / r]
        V2 = u2**2 + u3**2
        Fc1 = (
            (m**2 - a) / a * Fr
            + m**2 * ph / a * Fp
            - m**3 * ph / (a * r) * u2**2 / tan
            + (m**3 - a * m) * V2 / (a * r)
        )
        Fc3 = (
            m**2 * ph / a * Fr
            + (m**2 * ph**2 - a) / a * Fp
            + m**3 * ph / (a * r) * (V2 - ph * u2**2 / tan)
            + m * u2**2 / (r * tan)
        )
        np.testing.assert_allclose(Fc, [Fc1, 0.0, Fc3], rtol=1e-9, atol=1e-12)
        assert abs(Fc[0] / Fc[2] + ph) < 1e-9  # along the surface normal


def test_cone_particle_stays_on_the_surface():
    s = ConeSurfaceParticle()
    q0, qd0 = _cone_state(np.random.default_rng(3), s.c)
    sol = ukjax.simulate(s, q0, qd0, jnp.linspace(0.0, 3.0, 31))
    np.testing.assert_allclose(sol.q[:, 0] * sol.q[:, 2], s.c, atol=1e-9)


def test_nonholonomic_particle_eqs_94_96(rng):
    for _ in range(10):
        m = rng.uniform(0.5, 2)
        Fx, Fy, Fz = rng.standard_normal(3)
        s = NonholonomicParticle(mass=m, F_x=Fx, F_y=Fy, F_z=Fz, alpha0=0.7, omega=1.3)
        t = rng.uniform(0, 5)
        q, qd = rng.standard_normal(3), rng.standard_normal(3)
        z = q[2]
        u1, u2 = qd[0], qd[2]
        alpha_dot = 0.7 * 1.3 * np.cos(1.3 * t)
        a = m * (1 + z**2)
        expected = [
            -m * z / a * (u1 * u2 + alpha_dot) + (Fx + Fy * z) / a,
            m / a * (u1 * u2 + alpha_dot) + z / a * (Fx + Fy * z),
            Fz / m,
        ]
        np.testing.assert_allclose(
            ukjax.acceleration(s, t, q, qd), expected, rtol=1e-10, atol=1e-12
        )


def test_nonholonomic_particle_motion():
    """psi = ydot - z xdot - alpha(t) stays at 0 and z(t) = z0 + zd0 t + Fz t^2 / (2m)."""
    s = NonholonomicParticle()
    q0 = jnp.array([0.1, -0.2, 0.3])
    qd0 = jnp.array([0.5, 0.3 * 0.5 + 0.0, -0.4])  # ydot = z xdot + alpha(0) = 0.15
    ts = jnp.linspace(0.0, 4.0, 41)
    sol = ukjax.simulate(s, q0, qd0, ts)
    psi = sol.qd[:, 1] - sol.q[:, 2] * sol.qd[:, 0] - s.alpha(ts)
    assert float(jnp.max(jnp.abs(psi))) < 1e-10
    np.testing.assert_allclose(
        sol.q[:, 2], 0.3 - 0.4 * ts + s.F_z * ts**2 / (2 * s.mass), atol=1e-10
    )

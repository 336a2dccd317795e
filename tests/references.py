"""Independent references (NumPy, closed forms, hand-derived minimal equations) and random
problem generators for the tests. Reference solutions live here, never in ukjax/."""

import jax.numpy as jnp
import numpy as np


def random_spd(rng, n, cond=1e3):
    """A random SPD matrix with condition number about `cond` (some eigenvalues repeat)."""
    Qm, _ = np.linalg.qr(rng.standard_normal((n, n)))
    eig = np.exp(rng.uniform(0, np.log(cond), n))
    if n >= 3:
        eig[1] = eig[0]  # a repeated eigenvalue: what breaks eigh/sqrtm gradients
    return (Qm * eig) @ Qm.T


def random_constraints(rng, m, n, rank):
    """A random (m, n) matrix of the given rank (rank <= min(m, n)), b in its range."""
    A = rng.standard_normal((m, rank)) @ rng.standard_normal((rank, n))
    b = A @ rng.standard_normal(n)
    return A, b


def sqrtm_inv_numpy(M):
    w, V = np.linalg.eigh(M)
    return (V / np.sqrt(w)) @ V.T


def uk_reference(M, Q, A, b, C=None):
    """Dense reference: qdd = a + M^{-1/2} (A M^{-1/2})^+ (b - A a) + (I - A_M^+ A) M^{-1} C."""
    Mih = sqrtm_inv_numpy(M)
    a = np.linalg.solve(M, Q)
    AMp = Mih @ np.linalg.pinv(A @ Mih, rcond=1e-10)  # A_M^+
    qdd = a + AMp @ (b - A @ a)
    if C is not None:
        qdd = qdd + (np.eye(len(Q)) - AMp @ A) @ np.linalg.solve(M, C)
    return qdd


def null_space(A, tol=1e-10):
    U, s, Vt = np.linalg.svd(A)
    rank = int(np.sum(s > tol * max(s.max(), 1e-300)))
    return Vt[rank:].T  # (n, n - rank)


# ---------------------------------------------------------------------------------------
# Independent references for the systems of ukjax.systems (written by hand, not by UK).
# The examples import them too (examples/_common.py puts tests/ on the path), so each is
# written once.
# ---------------------------------------------------------------------------------------


def pendulum_momentum(pend, qd):
    """Generalized momentum p = m l^2 thetadot of SimplePendulum (On Dynamics 2020, §3.4.3)."""
    return pend.mass * pend.length**2 * qd


def pendulum_hamiltonian(pend, q, p):
    """H = p^2/(2 m l^2) - m g l cos q (On Dynamics 2020, eq 21g)."""
    ml2 = pend.mass * pend.length**2
    return 0.5 * p[0] ** 2 / ml2 - pend.mass * pend.g * pend.length * jnp.cos(q[0])


def pendulum_hamilton_rhs(pend, t, y):
    """Hamilton's equations for y = (q, p), by hand (On Dynamics 2020, eqs 21h-i, corrected:
    qdot = p/(m l^2), where the notes print p^2/(m l^2)); pdot = -m g l sin q."""
    q, p = y[0], y[1]
    ml2 = pend.mass * pend.length**2
    return jnp.stack([p / ml2, -pend.mass * pend.g * pend.length * jnp.sin(q)])


def appell_hamel_reduced_rhs(s, t, y):
    r"""Minimal equations of the Appell-Hamel mechanism, by Kane's method (not by UK).

    State y = (theta, phi, x, y, z, thetadot, phidot). With the constraints, P moves with
    (a phid cos th - rho thd sin th, a phid sin th + rho thd cos th, -b phid) and the wheel
    centre with a phid (cos th, sin th, 0). Kane's equations for the speeds thd, phid:
    (I + m rho^2) thdd = -m rho a thd phid,
    (I + (M + m) a^2 + m b^2) phdd = m a rho thd^2 + m g b.
    """
    th, _, _, _, _, thd, phd = y
    a, b, rho, m = s.a, s.b, s.rho, s.m
    thdd = -m * rho * a * thd * phd / (s.I + m * rho**2)
    phdd = (m * a * rho * thd**2 + m * s.g * b) / (s.I + (s.M + m) * a**2 + m * b**2)
    xd = a * phd * jnp.cos(th) - rho * thd * jnp.sin(th)
    yd = a * phd * jnp.sin(th) + rho * thd * jnp.cos(th)
    return jnp.stack([thd, phd, xd, yd, -b * phd, thdd, phdd])


def _ellipse_kane_terms(s, q, qd):
    x, y = q
    u1, u2 = qd
    xb = x - s.x0
    eps = s.a_e * xb / (s.b_e * y)
    e1 = s.a_e * s.b_e * u1 * (-y * u1 + xb * u2) / (s.b_e * y) ** 2
    e2 = s.K * (x - s.a_e / s.b_e * xb)
    return eps, e1, e2, eps**2 + 1


def ellipse_kane_constraint_force(s, q, qd):
    """Bajodah 2003, eqs 251-253: F = [(m eps e1 - e2)/d + K x, (m e1 + eps e2)/d + K y]."""
    eps, e1, e2, d = _ellipse_kane_terms(s, q, qd)
    m = s.mass
    return jnp.stack([(m * eps * e1 - e2) / d + s.K * q[0], (m * e1 + eps * e2) / d + s.K * q[1]])


def ellipse_normal_constraint_force(s, q, qd):
    """Bajodah 2003, eq 269: F = [m e1 + K(eps x + y)] tau / sqrt(d), tau = (eps, 1)/sqrt(d)."""
    eps, e1, _, d = _ellipse_kane_terms(s, q, qd)
    mag = (s.mass * e1 + s.K * (eps * q[0] + q[1])) / jnp.sqrt(d)
    return mag * jnp.stack([eps, jnp.ones_like(eps)]) / jnp.sqrt(d)


def coulomb_bead_exact_speed(bead, t, v0=2.0):
    """Closed form for g = 0: m vdot = -mu m v^2/R, v = v0/(1 + mu v0 t/R), arc length
    s = (R/mu) ln(1 + mu v0 t/R)."""
    k = 1.0 + bead.mu * v0 * t / bead.R
    return v0 / k, bead.R / bead.mu * jnp.log(k)


def log_spiral_exact(s, t):
    """The exact motion on the log spiral: theta = theta0 - t, r = exp(k theta)."""
    th = s.theta0 - t
    return jnp.exp(s.k * th), th


# ---- hybrid dynamics: closed forms and an event-driven minimal-coordinate reference ----


def bouncing_ball_impacts(h0, e, g, count):
    """Impact times of a ball dropped from rest at height h0 (restitution e), the impact
    speeds before each impact, and the Zeno time."""
    v = np.sqrt(2.0 * g * h0)
    times, speeds, t = [], [], np.sqrt(2.0 * h0 / g)
    for _ in range(count):
        times.append(t)
        speeds.append(v)
        v *= e
        t += 2.0 * v / g
    zeno = np.sqrt(2.0 * h0 / g) + 2.0 * e * np.sqrt(2.0 * g * h0) / (g * (1.0 - e))
    return np.array(times), np.array(speeds), zeno


def pendulum_wall_reference(L, g, wall, e, theta0, omega0, ts):
    """A pendulum (angle theta from the downward vertical, bob x = L sin(theta)) that hits
    a wall at x = wall: theta'' = -(g/L) sin(theta), and theta' -> -e theta' at each
    impact, integrated by scipy DOP853 (rtol 1e-12) with its own event location."""
    from scipy.integrate import solve_ivp

    theta_wall = np.arcsin(wall / L)

    def rhs(t, y):
        return [y[1], -(g / L) * np.sin(y[0])]

    def hit(t, y):
        return theta_wall - y[0]

    hit.terminal, hit.direction = True, -1
    out = np.full((len(ts), 2), np.nan)
    t, y = ts[0], np.array([theta0, omega0])
    impacts = []
    while t < ts[-1]:
        sel = ts[ts >= t]
        sol = solve_ivp(
            rhs,
            (t, ts[-1]),
            y,
            method="DOP853",
            rtol=1e-12,
            atol=1e-12,
            events=hit,
            dense_output=True,
        )
        t_end = sol.t[-1]
        mask = (ts >= t) & (ts <= t_end)
        out[mask] = sol.sol(ts[mask]).T
        if sol.status != 1:
            break
        impacts.append(t_end)
        y = sol.y[:, -1].copy()
        y[0] = theta_wall
        y[1] = -e * y[1]
        t = t_end
        del sel
    return out, np.array(impacts)


def kkt_impulse(M, J, qd, impulse):
    """Post-impulse velocity from the Lagrange-multiplier (KKT) impulse equations
    [M J^T; J 0][qd+; P] = [M qd + I; J qd]."""
    n, m = M.shape[0], J.shape[0]
    K = np.block([[M, J.T], [J, np.zeros((m, m))]])
    return np.linalg.solve(K, np.concatenate([M @ qd + impulse, J @ qd]))[:n]


def two_block_friction_reference(p, ts):
    """Two blocks on a rough table (Bajodah 2003, Ex. 5.3) with exact Coulomb stick-slip,
    integrated by scipy DOP853 (rtol = atol = 1e-12) with its own event location.

    `p`: dict with m1, m2, k1, k2, amplitude, omega, mu_s, mu_k, g. State (x1, x2, u1, u2);
    each block is stuck (s = 0) or slides with direction s = +-1. Net applied forces
    F1 = -k1 x1 + k2 (x2 - x1), F2 = A sin(w t) - k2 (x2 - x1); sliding, m u' = F - mu_k m g s;
    stuck, u = 0 while |F| <= mu_s m g. A slide ends where u crosses zero: the block sticks
    if |F| <= mu_s m g there, else slides along F. Returns (states at ts (T, 4), events as
    a list of (time, block, 'stick' | 'slip'))."""
    from scipy.integrate import solve_ivp

    m = np.array([p["m1"], p["m2"]])
    cap_s, cap_k = p["mu_s"] * m * p["g"], p["mu_k"] * m * p["g"]

    def applied(t, x):
        spring = p["k2"] * (x[1] - x[0])
        return np.array(
            [-p["k1"] * x[0] + spring, p["amplitude"] * np.sin(p["omega"] * t) - spring]
        )

    def rhs(t, y, s):
        F = applied(t, y[:2])
        acc = np.where(s == 0, 0.0, (F - cap_k * s) / m)
        return np.concatenate([np.where(s == 0, 0.0, y[2:]), acc])

    def stuck_event(i):
        return lambda t, y, s: cap_s[i] - abs(applied(t, y[:2])[i])

    def slide_event(i, si):
        return lambda t, y, s: si * y[2 + i]

    def events_for(s):
        fns = [stuck_event(i) if s[i] == 0 else slide_event(i, s[i]) for i in range(2)]
        for fn in fns:
            fn.terminal, fn.direction = True, -1
        return fns

    def settle(t, y, s):
        F = applied(t, y[:2])
        for i in range(2):
            if s[i] == 0 and abs(F[i]) > cap_s[i]:
                s[i] = int(np.sign(F[i]))
        return s

    out = np.full((len(ts), 4), np.nan)
    t, y = ts[0], np.zeros(4)
    s = settle(t, y, np.zeros(2, int))
    events = []
    while t < ts[-1]:
        sol = solve_ivp(
            rhs,
            (t, ts[-1]),
            y,
            args=(s,),
            method="DOP853",
            rtol=1e-12,
            atol=1e-12,
            events=events_for(s),
            dense_output=True,
            max_step=0.01,
        )  # max_step: a stuck phase's rhs is zero, and a long step would miss the force crossing
        t_end = sol.t[-1]
        mask = (ts >= t) & (ts <= t_end)
        if mask.any():
            out[mask] = sol.sol(ts[mask]).T
        if sol.status != 1:
            break
        i = next(j for j in range(2) if sol.t_events[j].size)
        y = sol.y[:, -1].copy()
        F = applied(t_end, y[:2])
        if s[i] == 0:
            s[i] = int(np.sign(F[i]))
            events.append((t_end, i, "slip"))
        else:
            y[2 + i] = 0.0
            s[i] = 0 if abs(F[i]) <= cap_s[i] else int(np.sign(F[i]))
            events.append((t_end, i, "stick" if s[i] == 0 else "slip"))
        s = settle(t_end, y, s)
        t = t_end
    return out, events


def rough_table_turning_points(m, g, k, mu_s, mu_k, x0, count):
    """Mass-spring on a rough table released from rest at x0 (|k x0| > mu_s m g):
    each half cycle is harmonic about -+mu_k m g / k, so the turning points are
    x_{j+1} = -x_j + 2 sgn(x_j) mu_k m g / k at t_j = j pi / sqrt(k / m), until
    |k x| <= mu_s m g, where the block stays. Returns [(t_j, x_j)] up to `count` turns."""
    w, d = np.sqrt(k / m), mu_k * m * g / k
    x, t, out = x0, 0.0, []
    while abs(k * x) > mu_s * m * g and len(out) < count:
        x, t = 2 * d * np.sign(x) - x, t + np.pi / w
        out.append((t, x))
    return out


# ---- IFToMM multibody benchmarks A02 / A04 (issue 16) -------------------------------------


def nfour_bar_crank_angle(N, ts, L=1.0, m=1.0, g=9.81, speed=1.0):
    """Crank angle of the N-four-bar (IFToMM A02) on its parallelogram branch, from the
    one-degree-of-freedom reduced equation (every crank at the same angle):
    ((N+1)/3 + N) m L^2 th'' = -((N+1)/2 + N) m g L cos th, th(0) = pi/2,
    th'(0) = -speed/L, by scipy DOP853 at rtol = atol = 1e-13."""
    from scipy.integrate import solve_ivp

    inertia = ((N + 1) / 3 + N) * m * L**2
    moment = ((N + 1) / 2 + N) * m * g * L

    def rhs(t, y):
        return [y[1], -moment / inertia * np.cos(y[0])]

    ts = np.asarray(ts)
    y0 = [np.pi / 2, -speed / L]
    s = solve_ivp(rhs, (ts[0], ts[-1]), y0, method="DOP853", rtol=1e-13, atol=1e-13, t_eval=ts)
    return s.y[0]


class BricardKKT:
    """The Bricard mechanism (IFToMM A04) in the same natural coordinates as
    `ukjax.systems.Bricard`, written independently in NumPy: mass matrix, gravity,
    hand-derived constraint Jacobian J and acceleration term gamma of its 24 bilinear
    constraints, and the index-1 DAE right-hand side by a least-squares solve of the
    (singular, since one constraint is redundant) KKT system
    [[M, J^T], [J, 0]] [qdd; lam] = [Q; gamma]."""

    points = np.array([(0, 0, 0), (1, 0, 0), (1, -1, 0), (1, -1, 1), (0, -1, 1), (0, 0, 1)], float)
    axes = np.array([(0, 1, 0), (0, 0, 1), (1, 0, 0), (0, 1, 0), (0, 0, 1), (1, 0, 0)], float)

    def __init__(self, m=1.0, L=1.0, s=0.1, g=9.81):
        self.m, self.L, self.g = m, L, g
        M = np.zeros((24, 24))
        for k in range(5):  # rod k from joint k to joint k + 1 (moving joints 1..4)
            ends = [j for j in (k, k + 1) if 1 <= j <= 4]
            for a in ends:
                ia = slice(3 * (a - 1), 3 * a)
                M[ia, ia] += m / 3 * np.eye(3)
            if len(ends) == 2:
                ia, ib = slice(3 * (k - 1), 3 * k), slice(3 * k, 3 * k + 3)
                M[ia, ib] += m / 6 * np.eye(3)
                M[ib, ia] += m / 6 * np.eye(3)
        M[12:, 12:] += 2 * m * s**2 / 12 * np.eye(12)
        self.M = M
        Q = np.zeros(24)
        for k in range(5):
            for j in (k, k + 1):
                if 1 <= j <= 4:
                    Q[3 * (j - 1) + 1] -= m * g / 2
        self.Q = Q

    def initial_state(self):
        q0 = np.concatenate([self.points[1:5].ravel() * self.L, self.axes[1:5].ravel()])
        return q0, np.zeros(24)

    def _split(self, q):
        p = np.concatenate(
            [self.points[:1] * self.L, q[:12].reshape(4, 3), self.points[5:] * self.L]
        )
        u = np.concatenate([self.axes[:1], q[12:].reshape(4, 3), self.axes[5:]])
        return p, u

    @staticmethod
    def _p(j):  # columns of joint point j (None for the ground)
        return slice(3 * (j - 1), 3 * j) if 1 <= j <= 4 else None

    @staticmethod
    def _u(j):  # columns of axis vector j
        return slice(12 + 3 * (j - 1), 12 + 3 * j) if 1 <= j <= 4 else None

    def phi(self, q):
        p, u = self._split(q)
        r = p[1:] - p[:-1]
        ua, ub = u[:-1], u[1:]
        return np.concatenate(
            [
                np.sum(r * r, 1) - self.L**2,
                np.sum(r * ua, 1),
                np.sum(r * ub, 1),
                np.sum(ua * ub, 1),
                np.sum(u[1:5] ** 2, 1) - 1.0,
            ]
        )

    def jacobian_and_gamma(self, q, qd):
        p, u = self._split(q)
        vp, vu = self._split(qd)
        vp[0] = vp[5] = 0.0
        vu[0] = vu[5] = 0.0
        J = np.zeros((24, 24))
        gamma = np.zeros(24)

        def add(row, cols, vec):
            if cols is not None:
                J[row, cols] += vec

        for k in range(5):
            a, b = k, k + 1
            r, vr = p[b] - p[a], vp[b] - vp[a]
            add(k, self._p(b), 2 * r)
            add(k, self._p(a), -2 * r)
            gamma[k] = -2 * vr @ vr
            for block, j in ((5, a), (10, b)):  # r . u_a and r . u_b
                add(block + k, self._p(b), u[j])
                add(block + k, self._p(a), -u[j])
                add(block + k, self._u(j), r)
                gamma[block + k] = -2 * vr @ vu[j]
            add(15 + k, self._u(a), u[b])
            add(15 + k, self._u(b), u[a])
            gamma[15 + k] = -2 * vu[a] @ vu[b]
        for j in range(1, 5):
            add(19 + j, self._u(j), 2 * u[j])
            gamma[19 + j] = -2 * vu[j] @ vu[j]
        return J, gamma

    def rhs(self, t, y):
        q, qd = y[:24], y[24:]
        J, gamma = self.jacobian_and_gamma(q, qd)
        K = np.block([[self.M, J.T], [J, np.zeros((24, 24))]])
        sol = np.linalg.lstsq(K, np.concatenate([self.Q, gamma]), rcond=1e-10)[0]
        return np.concatenate([qd, sol[:24]])

    def energy(self, q, qd):
        p, _ = self._split(q)
        return 0.5 * qd @ self.M @ qd + self.m * self.g * np.sum(p[:-1, 1] + p[1:, 1]) / 2

    def solve(self, ts, rtol=1e-12, atol=1e-12):
        from scipy.integrate import solve_ivp

        q0, qd0 = self.initial_state()
        ts = np.asarray(ts)
        return solve_ivp(
            self.rhs,
            (ts[0], ts[-1]),
            np.concatenate([q0, qd0]),
            method="DOP853",
            rtol=rtol,
            atol=atol,
            t_eval=ts,
        )


class NFourBarKKT:
    """The N-four-bar (IFToMM A02) in natural coordinates, written independently in NumPy,
    with the index-1 DAE right-hand side by a least-squares KKT solve (the peer of
    `benchmarks/mechanisms.py`)."""

    def __init__(self, N, L=1.0, m=1.0, g=9.81):
        self.N, self.L, self.m, self.g = N, L, m, g
        n = 2 * (N + 1)
        M = np.zeros((n, n))
        for i in range(N + 1):
            M[2 * i : 2 * i + 2, 2 * i : 2 * i + 2] += m / 3 * np.eye(2)  # crank
        for i in range(1, N + 1):  # coupler B_{i-1} B_i
            a, b = slice(2 * i - 2, 2 * i), slice(2 * i, 2 * i + 2)
            M[a, a] += m / 3 * np.eye(2)
            M[b, b] += m / 3 * np.eye(2)
            M[a, b] += m / 6 * np.eye(2)
            M[b, a] += m / 6 * np.eye(2)
        self.M = M
        Q = np.zeros(n)
        Q[1::2] = -m * g / 2 * np.array([1 + (i > 0) + (i < N) for i in range(N + 1)])
        self.Q = Q
        self.ground = np.stack([np.arange(N + 1) * L, np.zeros(N + 1)], 1)

    def initial_state(self, speed=1.0):
        q0 = (self.ground + [0.0, self.L]).ravel()
        return q0, np.tile([speed, 0.0], self.N + 1)

    def rhs(self, t, y):
        n = 2 * (self.N + 1)
        p, v = y[:n].reshape(-1, 2), y[n:].reshape(-1, 2)
        J = np.zeros((2 * self.N + 1, n))
        gamma = np.zeros(2 * self.N + 1)
        for i in range(self.N + 1):
            J[i, 2 * i : 2 * i + 2] = 2 * (p[i] - self.ground[i])
            gamma[i] = -2 * v[i] @ v[i]
        for i in range(1, self.N + 1):
            r, w = p[i] - p[i - 1], v[i] - v[i - 1]
            J[self.N + i, 2 * i : 2 * i + 2] = 2 * r
            J[self.N + i, 2 * i - 2 : 2 * i] = -2 * r
            gamma[self.N + i] = -2 * w @ w
        m = J.shape[0]
        K = np.block([[self.M, J.T], [J, np.zeros((m, m))]])
        sol = np.linalg.lstsq(K, np.concatenate([self.Q, gamma]), rcond=1e-10)[0]
        return np.concatenate([y[n:], sol[:n]])


def housner_ratio(b, h):
    """theta' after / before an impact of the block on a smooth floor (no slip needed)."""
    return (h**2 - 2 * b**2) / (h**2 + 4 * b**2)


def housner_rough_ratio(b, h):
    """The same on a rough floor (the impacting corner sticks): 1 - (3/2) sin^2(alpha)."""
    return 1.0 - 1.5 * b**2 / (b**2 + h**2)


def rocking_block_reference(b, h, g, th0, n_impacts, rough=False, ts=None):
    """Impact times of Housner's rocking block (half-width b, half-height h; Housner 1963)
    released from rest at th0 > 0 (and, with `ts`, the tilt theta at those times): one
    degree of freedom theta about the pivot corner, y = h cos th + b |sin th| the centre's
    height. Smooth floor: the pivot slides (x fixed: no horizontal force); rough: the pivot
    is fixed (inertia about it I + m(b^2 + h^2)). At theta = 0 the pivot moves to the other
    corner and theta' is scaled by Housner's ratio. scipy DOP853, rtol 1e-12, with events."""
    from scipy.integrate import solve_ivp

    inertia = (b**2 + h**2) / 3
    ratio = housner_rough_ratio(b, h) if rough else housner_ratio(b, h)

    def rhs(t, s):
        th, w = s
        sg = np.sign(th) if th != 0 else np.sign(w)  # the pivot: the corner on the floor
        yp = -h * np.sin(th) + b * sg * np.cos(th)  # dy/dth
        ypp = -h * np.cos(th) - b * sg * np.sin(th)
        if rough:
            return [w, -g * yp / (inertia + b**2 + h**2)]
        return [w, -(yp * ypp * w**2 + g * yp) / (yp**2 + inertia)]

    def flat(t, s):
        return s[0]

    flat.terminal = True
    t, s, times, direction, pieces = 0.0, [th0, 0.0], [], -1.0, []
    for _ in range(n_impacts):
        flat.direction = direction  # the return to theta = 0, not the departure from it
        out = solve_ivp(
            rhs,
            (t, t + 10),
            s,
            method="DOP853",
            rtol=1e-12,
            atol=1e-14,
            events=flat,
            dense_output=True,
        )
        pieces.append((t, float(out.t_events[0][0]), out.sol))
        t = float(out.t_events[0][0])
        w = float(out.y_events[0][0][1]) * ratio
        times.append(t)
        s, direction = [0.0, w], -np.sign(w)
        if ts is not None and t > np.max(ts):
            break
    if ts is None:
        return np.array(times)
    theta = np.full(len(ts), np.nan)
    for start, end, dense in pieces:
        inside = (np.asarray(ts) >= start) & (np.asarray(ts) <= end)
        if inside.any():
            theta[inside] = dense(np.asarray(ts)[inside])[0]
    return np.array(times), theta


def ball_slide_then_roll(R, g, mu, v0, w0, t):
    """A homogeneous ball on a rough table (Routh 1905, sec. 243): centre velocity and spin
    (v, w) at time t from (v0, w0) (3-vectors, v0[2] = 0). The slip u = v + w x (-R z) shrinks
    along a fixed line, u(t) = u0 (1 - t / t*), t* = 2|u0| / (7 mu g); then it rolls.
    Returns (v, w, t*)."""
    v0, w0 = np.asarray(v0, float), np.asarray(w0, float)
    u0 = v0[:2] + R * np.array([-w0[1], w0[0]])
    speed = np.linalg.norm(u0)
    t_star = 2 * speed / (7 * mu * g)
    s = min(t, t_star)
    a = -mu * g * u0 / speed  # the centre's deceleration, opposite the slip
    v = v0.copy()
    v[:2] += a * s
    # I dw/dt = r x F, r = -R z, F = m a: dw = (5 / (2 R)) (a_y, -a_x, 0) s
    w = w0 + (5.0 / (2.0 * R)) * np.array([a[1], -a[0], 0.0]) * s
    return v, w, t_star


def incline_slide_reference(alpha, g, mu, v0, t_end):
    """A particle sliding on a plane inclined at alpha with kinetic friction mu (slip speed
    never reaching zero before t_end or the stop), in plane coordinates (down the slope,
    across it): m v' = m g sin(alpha) e_1 - mu m g cos(alpha) v / |v|, by scipy DOP853
    (rtol 1e-12) with a terminal event where |v| reaches 1e-9 (the stop). `mu` of shape
    (2,) is an elliptic cone (one coefficient per plane direction) with the force of
    maximal dissipation, F_j = -N mu_j^2 v_j / sqrt(sum_l mu_l^2 v_l^2).
    Returns (t_stop or None, position (2,) at the stop or t_end)."""
    from scipy.integrate import solve_ivp

    mu = np.broadcast_to(np.asarray(mu, float), (2,))

    def rhs(t, y):
        v = y[2:]
        friction = mu**2 * v / np.linalg.norm(mu * v)
        a = np.array([g * np.sin(alpha), 0.0]) - g * np.cos(alpha) * friction
        return np.concatenate([v, a])

    def stopped(t, y):
        return np.linalg.norm(y[2:]) - 1e-9

    stopped.terminal = True
    y0 = np.concatenate([np.zeros(2), np.asarray(v0, float)])
    sol = solve_ivp(rhs, (0.0, t_end), y0, method="DOP853", rtol=1e-12, atol=1e-14, events=stopped)
    t_stop = sol.t_events[0][0] if sol.t_events[0].size else None
    return t_stop, sol.y[:2, -1]


def ball_column_impacts(q0, v0, r, e, g, count):
    """The first `count` impacts of equal balls of radius `r` stacked on a line above a floor
    (centres q0 upward, velocities v0), each a binary Newton impact of restitution `e`:
    (time, contact) with contact 0 the floor and i the gap between balls i - 1 and i. Exact
    while every impact involves two bodies only: in free flight all balls fall alike, so a
    gap between two balls closes linearly and the floor's quadratically."""
    q, v = np.array(q0, float), np.array(v0, float)
    t, out = 0.0, []
    for _ in range(count):
        hits = []
        # floor: q0 - r + v0 s - g s^2 / 2 = 0, the positive root
        a, b, c = -0.5 * g, v[0], q[0] - r
        s = (-b - np.sqrt(b * b - 4 * a * c)) / (2 * a)
        hits.append((s if s > 1e-15 else np.inf, 0))
        for i in range(1, len(q)):
            gap, closing = q[i] - q[i - 1] - 2 * r, v[i] - v[i - 1]
            hits.append((gap / -closing if closing < 0 and gap >= 0 else np.inf, i))
        s, j = min(hits)
        q = q + v * s - 0.5 * g * s * s
        v = v - g * s
        t += s
        if j == 0:
            v[0] = -e * v[0]
        else:
            lo, hi = v[j - 1], v[j]
            v[j - 1] = 0.5 * ((1 - e) * lo + (1 + e) * hi)
            v[j] = 0.5 * ((1 + e) * lo + (1 - e) * hi)
        out.append((t, j))
    return out


def double_pendulum_limit_reference(limit, g, z0, t_end):
    """A double pendulum of unit masses and lengths in absolute angles (a, b) from the
    downward vertical, with a joint limit b - a <= `limit` (gap g = limit - (b - a)) and
    plastic impacts: written with the Lagrange multiplier of the limit, independent of
    ukjax. Free: M qdd = Q. Locked: [M, -J^T; J, 0] [qdd; lam] = [Q; 0], J = dg/dq =
    (1, -1). At an impact the velocity is projected in the mass metric onto J qd = 0, and
    the limit holds while its multiplier lam >= 0 (a release event where it falls through
    zero); it locks when lam > 0 after the impact, else the links part at once. scipy
    DOP853 (rtol = atol = 1e-12) with its own events. Returns (segments, events): the
    segments (t0, t1, dense solution of (a, b, a', b')) and the events (time, 'impact' or
    'release')."""
    from scipy.integrate import solve_ivp

    J = np.array([1.0, -1.0])

    def terms(z):
        (a, b), (ad, bd) = z[:2], z[2:]
        d = a - b
        M = np.array([[2.0, np.cos(d)], [np.cos(d), 1.0]])
        Q = np.array([-(bd**2) * np.sin(d) - 2 * g * np.sin(a), ad**2 * np.sin(d) - g * np.sin(b)])
        return M, Q

    def locked_solve(z):
        M, Q = terms(z)
        K = np.block([[M, -J[:, None]], [J[None, :], np.zeros((1, 1))]])
        return np.linalg.solve(K, np.r_[Q, 0.0])

    def free(t, z):
        M, Q = terms(z)
        return np.r_[z[2:], np.linalg.solve(M, Q)]

    def locked(t, z):
        return np.r_[z[2:], locked_solve(z)[:2]]

    def hit(t, z):
        return limit - (z[1] - z[0])

    def release(t, z):
        return locked_solve(z)[2]

    hit.terminal, hit.direction = True, -1
    release.terminal, release.direction = True, -1
    kw = dict(method="DOP853", rtol=1e-12, atol=1e-12, dense_output=True)
    z = np.asarray(z0, float)
    t, mode = 0.0, ("locked" if abs(hit(0.0, z)) < 1e-14 and release(0.0, z) > 0 else "free")
    segments, events = [], []
    while t < t_end:
        event = hit if mode == "free" else release
        sol = solve_ivp(free if mode == "free" else locked, (t, t_end), z, events=event, **kw)
        segments.append((t, sol.t[-1], sol.sol))
        if sol.status != 1:
            break
        t, z = sol.t[-1], sol.y[:, -1].copy()
        if mode == "free":
            M, _ = terms(z)
            Minv_J = np.linalg.solve(M, J)
            z[2:] -= Minv_J * (J @ z[2:]) / (J @ Minv_J)
            events.append((t, "impact"))
            mode = "locked" if release(t, z) > 0 else "free"
            if mode == "free":  # parting at once: step off the limit before watching it
                sol = solve_ivp(free, (t, t + 1e-6), z, **kw)
                segments.append((t, t + 1e-6, sol.sol))
                t, z = t + 1e-6, sol.y[:, -1]
        else:
            events.append((t, "release"))
            mode = "free"
    return segments, events


def cart_pendulum_friction_reference(mu, theta0, t_end, g=9.81, cart=1.0, bob=1.0, length=1.0):
    """A cart resting on a rough floor (Coulomb, mu_static = mu_kinetic = mu) with a
    pendulum hung from it, released from rest at `theta0`: minimal coordinates (x,
    theta), the floor's normal force N and friction F as unknowns of the Lagrange
    equations (y = 0). Stick: x'' = 0, while |F| <= mu N; slip: F = -mu N sign(x'),
    until x' = 0, then stick if the cone allows, else slip the other way. scipy DOP853
    (rtol = atol = 1e-12) with its own events. Returns (segments, events): (t0, t1, dense
    solution of (x, theta, x', theta')) and the event times."""
    from scipy.integrate import solve_ivp

    def unknowns(z, sign):  # (x'', theta'', N, F); sign None: stuck
        _, th, _, thd = z
        c, s = np.cos(th), np.sin(th)
        A = np.array(
            [
                [cart + bob, bob * length * c, 0.0, -1.0],
                [0.0, bob * length * s, -1.0, 0.0],
                [bob * length * c, bob * length**2, 0.0, 0.0],
                [1.0, 0.0, 0.0, 0.0] if sign is None else [0.0, 0.0, mu * sign, 1.0],
            ]
        )
        r = [
            bob * length * s * thd**2,
            -bob * length * c * thd**2 - (cart + bob) * g,
            -bob * g * length * s,
            0.0,
        ]
        return np.linalg.solve(A, r)

    def mode_at(z):  # None (stick) or the slip direction
        F, N = unknowns(z, None)[3], unknowns(z, None)[2]
        return None if abs(F) <= mu * N else -np.sign(F)

    kw = dict(method="DOP853", rtol=1e-12, atol=1e-12, dense_output=True)
    t, z = 0.0, np.array([0.0, theta0, 0.0, 0.0])
    sign, segments, events = mode_at(z), [], []
    while t < t_end:
        if sign is None:
            end = lambda t, z: mu * unknowns(z, None)[2] - abs(unknowns(z, None)[3])  # noqa: E731
        else:
            end = lambda t, z, s=sign: s * z[2]  # noqa: E731
        end.terminal, end.direction = True, -1
        rhs = lambda t, z, s=sign: np.r_[z[2:], unknowns(z, s)[:2]]  # noqa: E731
        sol = solve_ivp(rhs, (t, t_end), z, events=end, **kw)
        segments.append((t, sol.t[-1], sol.sol))
        if sol.status != 1:
            break
        t, z = sol.t[-1], sol.y[:, -1].copy()
        events.append(t)
        if sign is None:
            sign = -np.sign(unknowns(z, None)[3])
        else:
            z[2] = 0.0
            sign = mode_at(z)
    return segments, events


def turntable_ball_centre(spin, x0, v0, t):
    """The centre of a uniform ball rolling without slipping on a turntable that spins at
    `spin`, from (x0, v0) at t = 0 (jax.numpy, differentiable): m v' = F, I w' = (-r e_z)
    x F and the rolling constraint give v' = spin / (1 + m r^2 / I) e_z x v = (2/7) spin
    e_z x v, a circle at the rate 2 spin / 7."""
    w = 2.0 * spin / 7.0
    c, s = jnp.cos(w * t), jnp.sin(w * t)
    x = x0[0] + (s * v0[0] + (c - 1.0) * v0[1]) / w
    y = x0[1] + ((1.0 - c) * v0[0] + s * v0[1]) / w
    return jnp.stack([x, y], axis=-1)


def belt_drop_reference(t, mu, speed, height, g=9.81):
    """A block dropped from rest at `height` onto a belt running at `speed` (Coulomb, mu,
    a plastic landing): it lands at sqrt(2 h / g) with v_y = sqrt(2 g h), the landing's
    tangential impulse mu m v_y leaves it at mu v_y (below the belt's speed), then it
    slides at mu g until it moves with the belt. Returns (x(t), landing time, stick time);
    `height` 0 is a block set down at rest on the belt."""
    t_land, v_y = np.sqrt(2 * height / g), np.sqrt(2 * g * height)
    v0 = mu * v_y
    t_stick = t_land + (speed - v0) / (mu * g)
    s = np.clip(t - t_land, 0.0, t_stick - t_land)
    x = v0 * s + 0.5 * mu * g * s**2 + speed * np.clip(t - t_stick, 0.0, None)
    return x, t_land, t_stick


def turntable_puck_slip(t, mu, spin, g=9.81):
    """A puck placed at (1, 0) moving with a turntable spinning at `spin`, where the cone
    cannot hold it: kinetic friction relative to the table's velocity spin e_z x r by scipy
    DOP853 (rtol = atol = 1e-12); the slip starts along the outward radius (set by 1e-13).
    Returns the (x, y) path at `t`."""
    from scipy.integrate import solve_ivp

    def rhs(_, z):
        rel = np.array([z[2] + spin * z[1], z[3] - spin * z[0]])
        return [z[2], z[3], *(-mu * g * rel / np.linalg.norm(rel))]

    z0 = [1.0, 0.0, 1e-13, spin]
    sol = solve_ivp(rhs, (0.0, t[-1]), z0, method="DOP853", rtol=1e-12, atol=1e-12,
                    dense_output=True)  # fmt: skip
    return sol.sol(t)[:2].T

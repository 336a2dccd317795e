"""One error model: every bad input gets a clear error that names the failure and the fix,
or (throw=False, sweeps) a per-trajectory result code; nothing silent, and one bad member
never changes or aborts the others."""

import json
import warnings

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ukjax
from ukjax._cli import main as cli_main
from ukjax.systems import CartesianPendulum


RUNTIME = (eqx.EquinoxRuntimeError, RuntimeError)
TS = jnp.linspace(0.0, 0.5, 4)
Q0, QD0 = jnp.array([1.0, 0.0]), jnp.zeros(2)
R = ukjax.RESULTS


def sim(system, q0=Q0, qd0=QD0, **kw):
    return ukjax.simulate(system, q0, qd0, TS, **kw)


class Contradictory(ukjax.System):
    """x = 0 and x = 1 at once."""

    def num_coordinates(self):
        return 2

    def mass_matrix(self, t, q):
        return jnp.eye(2)

    def holonomic(self, t, q):
        return jnp.stack([q[0], q[0] - 1.0])


class InconsistentRows(ukjax.System):
    """Raw rows x'' = 0 and x'' = 1: b is not in the range of A."""

    def num_coordinates(self):
        return 2

    def mass_matrix(self, t, q):
        return jnp.eye(2)

    def acceleration_constraint(self, t, q, qd):
        return jnp.array([[1.0, 0.0], [1.0, 0.0]]), jnp.array([0.0, 1.0])


# --- each failure: raised (plain, filter_jit, vmap) with throw=True, coded with throw=False


def test_negative_mass(capfd):
    with pytest.raises(RUNTIME, match="not symmetric positive definite"):
        sim(CartesianPendulum(mass=-1.0))
    assert "smallest_diagonal_entry_of_M = -1.0" in capfd.readouterr().err
    sol = sim(CartesianPendulum(mass=-1.0), throw=False)
    assert bool(sol.result == R.mass_matrix_not_spd)
    assert np.all(np.isnan(sol.q))  # no value a user could take for data


def test_nan_initial_state_is_named_as_nan():
    with pytest.raises(ValueError, match=r"contains NaN or inf: q0\[0\] = nan"):
        sim(CartesianPendulum(), q0=jnp.array([jnp.nan, 0.0]))
    f = eqx.filter_jit(lambda q: sim(CartesianPendulum(), q0=q).q)
    with pytest.raises(RUNTIME, match="non-finite value"):
        jax.block_until_ready(f(jnp.array([jnp.nan, 0.0])))
    sol = sim(CartesianPendulum(), q0=jnp.array([jnp.nan, 0.0]), throw=False)
    assert bool(sol.result == R.nonfinite_state)


class BlowingUpMass(ukjax.System):
    """A written M whose entry `entry` is 1/x: non-finite once the bead reaches x = 0 (an
    entry above the diagonal only, as a user's typo makes, is the case the Cholesky
    factor never reads)."""

    entry: tuple[int, int] = (0, 1)

    def num_coordinates(self):
        return 2

    def mass_matrix(self, t, q):
        bad = 1.0 / q[0] - 1.0 / q[0]  # 0 for x != 0, NaN at x = 0
        return jnp.eye(2).at[self.entry].add(bad)

    def potential_energy(self, t, q):
        return 9.81 * q[1]


@pytest.mark.parametrize("entry", [(0, 1), (1, 0), (0, 0)])
def test_a_non_finite_entry_of_a_written_mass_matrix_is_named_as_such(entry):
    """Wherever the non-finite entry of M is, the verdict is `nonfinite_state`, not a
    mass matrix that is not SPD (the asymmetry of M is also its finiteness check)."""
    system = BlowingUpMass(entry)
    q, qd = jnp.array([0.0, 1.0]), jnp.zeros(2)
    with pytest.raises(RUNTIME, match="non-finite value"):
        jax.block_until_ready(ukjax.acceleration(system, 0.0, q, qd))
    ev = ukjax.acceleration(system, 0.0, q.at[0].set(0.5), qd)
    np.testing.assert_allclose(np.asarray(ev), [0.0, -9.81], rtol=1e-15)
    for value in (jnp.inf, -jnp.inf):
        M = jnp.eye(2).at[entry].set(value)
        with pytest.raises(RUNTIME, match="non-finite value"):
            ukjax.udwadia_kalaba(M, jnp.zeros(2), jnp.zeros((0, 2)), jnp.zeros(0))
    if entry != (0, 1):  # a run's verdict once (the same checks at every stage)
        return
    sol = jax.vmap(lambda x: sim(system, q0=jnp.array([x, 1.0]), throw=False))(
        jnp.array([0.0, 0.5])
    )
    assert bool((sol.result == R.nonfinite_state)[0]) and bool((sol.result == R.successful)[1])


def test_initial_state_off_the_constraints():
    q0 = jnp.array([1.1, 0.0])
    with pytest.raises(ValueError, match=r"max\|phi\| = 2\.100e-01"):
        sim(CartesianPendulum(), q0=q0)
    f = eqx.filter_jit(lambda q: sim(CartesianPendulum(), q0=q).q)
    with pytest.raises(RUNTIME, match="initial conditions violate the constraints"):
        jax.block_until_ready(f(q0))
    sol = eqx.filter_jit(lambda q: sim(CartesianPendulum(), q0=q, throw=False))(q0)
    assert bool(sol.result == R.initial_conditions_inconsistent)


def test_inconsistent_constraints(capfd):
    ign = ukjax.IgnoreInitial()
    with pytest.raises(RUNTIME, match="inconsistent constraints"):
        sim(InconsistentRows(), initial_conditions=ign)
    assert "relative_residual" in capfd.readouterr().err
    sol = sim(InconsistentRows(), initial_conditions=ign, throw=False)
    assert bool(sol.result == R.inconsistent_constraints)


@pytest.mark.slow  # default-suite time; the same paths run in other default tests
def test_projection_onto_contradictory_constraints_is_refused():
    q0 = jnp.array([0.3, 0.0])
    with pytest.raises(RUNTIME, match="could not be projected onto the constraints"):
        jax.block_until_ready(ukjax.project_initial_conditions(Contradictory(), 0.0, q0, QD0))
    with pytest.raises(RUNTIME, match="could not be projected"):
        sim(Contradictory(), q0=q0, initial_conditions=ukjax.ProjectInitial())
    sol = sim(Contradictory(), q0=q0, initial_conditions=ukjax.ProjectInitial(), throw=False)
    assert bool(sol.result == R.projection_failed)


class MassLostAt(ukjax.System):
    """A particle in free fall whose mass turns negative at t_loss: the run-time check
    of the vector field, not the initial one, must catch it."""

    t_loss: float = 0.3

    def num_coordinates(self):
        return 2

    def mass_matrix(self, t, q):
        return jnp.where(t < self.t_loss, 1.0, -1.0) * jnp.eye(2)

    def forces(self, t, q, qd):
        return jnp.array([0.0, -1.0])


# Slow: 20 s of compilation (six programs); in the default suite the field's checks raise in
# test_negative_mass and test_inconsistent_constraints.
@pytest.mark.slow
def test_a_check_failing_mid_run_raises_with_its_numbers_everywhere(capfd):
    system, ts = MassLostAt(), jnp.linspace(0.0, 1.0, 5)
    run = lambda s, q, **kw: ukjax.simulate(s, q, QD0, ts, **kw)
    with pytest.raises(RUNTIME, match="not symmetric positive definite"):
        jax.block_until_ready(run(system, Q0).q)
    assert "smallest_diagonal_entry_of_M = " in capfd.readouterr().err
    with pytest.raises(RUNTIME, match="not symmetric positive definite"):
        jax.block_until_ready(eqx.filter_jit(lambda q: run(system, q).q)(Q0))
    batch = jnp.stack([Q0, Q0 + 1.0])
    with pytest.raises(RUNTIME, match="not symmetric positive definite"):
        jax.block_until_ready(jax.vmap(lambda q: run(system, q).q)(batch))
    # throw=False: the same code per member (the step size collapses onto t_loss and the
    # states probed just ahead name the check), with nothing saved after it.
    sol = jax.vmap(lambda q: run(system, q, throw=False))(batch)
    assert bool(jnp.all(sol.result == R.mass_matrix_not_spd))
    assert np.all(np.isfinite(np.asarray(sol.q)[:, :2]))  # saved before t = 0.3
    assert np.all(np.isnan(np.asarray(sol.q)[:, 2:]))  # nothing after the failure
    # A run that stays clear of the failure: the checks leave the derivative alone
    # (q(t) = g q0 + t^2/2 e_y, so d/dg of the summed saves is sum(q0) per save).
    clear = MassLostAt(t_loss=10.0)
    grad = lambda check: jax.grad(lambda g: jnp.sum(run(clear, g * Q0, check=check).q))(1.0)
    assert float(grad(True)) == pytest.approx(float(grad(False)), rel=1e-12)
    assert float(grad(True)) == pytest.approx(float(jnp.sum(Q0)) * len(ts), rel=1e-12)


class MassLostBelow(MassLostAt):
    """The same particle, whose mass turns negative below the height y_loss: a failure
    in the state, not in t."""

    y_loss: float = -0.05

    def mass_matrix(self, t, q):
        return jnp.where(q[1] > self.y_loss, 1.0, -1.0) * jnp.eye(2)


@pytest.mark.parametrize("system", [MassLostAt(), MassLostBelow()], ids=["in t", "in q"])
def test_throw_false_names_a_check_that_fails_ahead_of_the_accepted_steps(system):
    # The failure event sees accepted steps only, and every step into the failure has a
    # NaN stage, so none is accepted: the step size collapses onto the failure (a few
    # dozen steps, not max_steps = 100 000), and the states probed just ahead of the last
    # accepted one name the check, the code throw=True raises.
    ts = jnp.linspace(0.0, 1.0, 5)
    sol = ukjax.simulate(system, Q0, QD0, ts, throw=False)
    assert bool(sol.result == R.mass_matrix_not_spd)
    assert int(sol.stats["num_steps"]) < 1000
    free_fall = np.stack([np.ones(5), -0.5 * np.asarray(ts) ** 2], axis=1)  # g = 1 along -y
    np.testing.assert_allclose(np.asarray(sol.q)[:2], free_fall[:2], rtol=0, atol=1e-12)
    assert np.all(np.isnan(np.asarray(sol.q)[2:]))  # the failure: t = 0.3, or y = -0.05 at 0.32


def test_a_collapsed_step_size_ends_the_run_with_its_own_code():
    # check=False: no check names the cause, so the run reports the collapse itself,
    # after a few dozen steps instead of burning max_steps, and raises it with throw=True.
    ts = jnp.linspace(0.0, 1.0, 5)
    run = lambda **kw: ukjax.simulate(MassLostAt(), Q0, QD0, ts, check=False, **kw)
    sol = run(throw=False)
    assert bool(sol.result == R.step_size_collapsed)
    assert int(sol.stats["num_steps"]) < 1000
    with pytest.raises(RUNTIME, match="step size collapsed"):
        jax.block_until_ready(run().q)


def test_stall_guard_flags_only_steps_shorter_than_ten_ulps_of_t():
    from ukjax._wrapped import StallGuard

    term, y0 = diffrax.ODETerm(lambda t, y, args: -y), jnp.ones(1)
    solver = StallGuard(diffrax.Tsit5())  # pyright: ignore[reportCallIssue]

    def code(t0, t1):
        state = solver.init(term, t0, t1, y0, None)
        return solver.step(term, t0, t1, y0, None, state, False)[-1]

    eps = float(jnp.finfo(jnp.float64).eps)
    for t0 in (1.0, 1e3, -2.0):
        ulp = eps * abs(t0)
        assert bool(code(t0, t0 + 1e-3) == diffrax.RESULTS.successful)
        assert bool(code(t0, t0 + 20 * ulp) == diffrax.RESULTS.successful)
        assert bool(code(t0, t0 + 4 * ulp) == diffrax.RESULTS.dt_min_reached)
        assert bool(code(t0, t0) == diffrax.RESULTS.dt_min_reached)


@pytest.mark.slow  # default-suite time (8 s)
def test_vmap_throw_true_raises_and_throw_false_codes_each_member():
    batch = jnp.array([[1.0, 0.0], [1.1, 0.0], [jnp.nan, 0.0], [0.0, -1.0]])
    with pytest.raises(RUNTIME, match="ukjax:"):
        jax.block_until_ready(jax.vmap(lambda q: sim(CartesianPendulum(), q0=q).q)(batch))
    out = jax.vmap(lambda q: sim(CartesianPendulum(), q0=q, throw=False))(batch)
    codes = [
        bool((out.result == c)[i])
        for i, c in enumerate(
            (R.successful, R.initial_conditions_inconsistent, R.nonfinite_state, R.successful)
        )
    ]
    assert all(codes)
    assert np.all(np.isfinite(out.q[np.array([0, 3])]))
    assert np.all(np.isnan(out.q[np.array([1, 2])]))


def test_bad_members_do_not_change_their_neighbours_bit_for_bit():
    bad = jnp.array([[1.0, 0.0], [jnp.nan, 0.0], [0.0, -1.0], [0.6, -0.8]])
    clean = bad.at[1].set(jnp.array([0.0, 1.0]))
    f = jax.vmap(lambda q: sim(CartesianPendulum(), q0=q, throw=False))
    a, b = f(bad), f(clean)
    keep = np.array([0, 2, 3])
    np.testing.assert_array_equal(np.asarray(a.q)[keep], np.asarray(b.q)[keep])


class StiffSpring(ukjax.System):
    """k = 1e6, c = 1e3: explicit solvers crawl at the stability limit."""

    def num_coordinates(self):
        return 1

    def mass_matrix(self, t, q):
        return jnp.eye(1)

    def forces(self, t, q, qd):
        return -1e6 * q - 1e3 * qd


def _stiff(solver):
    return ukjax.simulate(
        StiffSpring(),
        jnp.ones(1),
        jnp.zeros(1),
        jnp.linspace(0.0, 5.0, 3),
        solver=solver,
        rtol=1e-6,
        atol=1e-6,
        max_steps=300,
        throw=False,
    )


def test_step_limit_names_stiffness_and_the_cure():
    with pytest.raises(ValueError, match="max_steps must be a positive integer"):
        sim(CartesianPendulum(), max_steps=0)
    with pytest.raises(RUNTIME, match=r"diffrax\.Kvaerno5\(\)"):
        sim(CartesianPendulum(), max_steps=3)
    assert bool(_stiff(diffrax.Tsit5()).result == R.max_steps_stiff)


@pytest.mark.slow
def test_the_suggested_implicit_solver_does_solve_the_stiff_problem():
    ok = _stiff(diffrax.Kvaerno5())
    assert bool(ok.result == R.successful) and int(ok.stats["num_steps"]) < 300


# --- validated inputs ---------------------------------------------------------------


def test_integer_constraint_is_refused_not_dropped():
    class IntPhi(CartesianPendulum):
        def holonomic(self, t, q):
            return jnp.stack([q @ q - 1.0]).astype(jnp.int32)

    with pytest.raises(ValueError, match="dtype int32.*silently vanish"):
        ukjax.acceleration(IntPhi(), 0.0, Q0, QD0)


def test_state_length_is_checked():
    with pytest.raises(ValueError, match=r"CartesianPendulum has 2 generalized coordinates"):
        sim(CartesianPendulum(), q0=jnp.array([1.0]), qd0=jnp.zeros(1))

    class Undeclared(ukjax.System):  # no num_coordinates: found by the index probe
        def mass_matrix(self, t, q):
            return jnp.eye(q.shape[0])

        def holonomic(self, t, q):
            return jnp.stack([q[0] ** 2 + q[2] ** 2 - 1.0])

    with pytest.raises(ValueError, match="indexes the state past its end"):
        sim(Undeclared(), q0=jnp.array([1.0, 0.0]), qd0=jnp.zeros(2))


def test_strings_get_the_object_to_pass():
    with pytest.raises(TypeError, match=r"ukjax\.IgnoreInitial\(\)"):
        sim(CartesianPendulum(), initial_conditions="ignore")
    with pytest.raises(TypeError, match="uk_solver must be"):
        sim(CartesianPendulum(), uk_solver="svd")


# --- sweeps and files -----------------------------------------------------------------


def _sweep_batch(bad: bool):
    th = np.linspace(-1.0, 1.0, 8)
    q0 = np.stack([np.sin(th), -np.cos(th)], axis=1)
    if bad:
        q0[3] = [np.nan, 0.0]
        q0[5] = [1.5, 0.0]  # off the circle
    return jnp.asarray(q0), jnp.zeros((8, 2))


def test_sweep_reports_bad_trajectories_and_keeps_the_others(tmp_path, capfd):
    q0, qd0 = _sweep_batch(bad=True)
    res = ukjax.sweep(CartesianPendulum(), q0, qd0, TS, out=tmp_path / "s", chunk_size=4)
    assert res.ok.tolist() == [True, True, True, False, True, False, True, True]
    assert ukjax.RESULT_NAMES[res.result[3]] == "nonfinite_state"
    assert ukjax.RESULT_NAMES[res.result[5]] == "initial_conditions_inconsistent"
    assert "2 of 8 trajectories failed" in capfd.readouterr().err
    assert set(res.failures()) == {"nonfinite_state", "initial_conditions_inconsistent"}
    clean = ukjax.sweep(
        CartesianPendulum(), *_sweep_batch(bad=False), TS, chunk_size=4, progress=False
    )
    good = res.ok
    np.testing.assert_array_equal(res.q[good], clean.q[good])  # bit for bit
    loaded = ukjax.load_sweep(tmp_path / "s")
    np.testing.assert_array_equal(loaded.result, res.result)


@pytest.mark.parametrize(
    "damage",
    [
        "zeros",
        pytest.param("truncated", marks=pytest.mark.slow),
        pytest.param("fewer_rows", marks=pytest.mark.slow),
        pytest.param("deleted_record", marks=pytest.mark.slow),
    ],
)
def test_damaged_chunks_are_named_and_recomputed(tmp_path, damage):
    q0, qd0 = _sweep_batch(bad=False)
    out = tmp_path / "s"
    first = ukjax.sweep(CartesianPendulum(), q0, qd0, TS, out=out, chunk_size=4, progress=False)
    chunk = out / "chunk_000001.npz"
    if damage == "zeros":
        np.savez(
            chunk,
            q=np.zeros((4, 4, 2)),
            qd=np.zeros((4, 4, 2)),
            result=np.zeros(4, int),
            num_steps=np.zeros(4, int),
        )
    elif damage == "fewer_rows":
        with np.load(chunk) as z:
            np.savez(chunk, **{k: z[k][:1] for k in z.files})
    elif damage == "truncated":
        chunk.write_bytes(chunk.read_bytes()[:100])
    else:
        (out / "chunk_000001.json").unlink()
    with pytest.raises(FileNotFoundError, match="chunk_000001"):
        ukjax.load_sweep(out)
    with pytest.warns(UserWarning, match="computing chunk 1 again"):
        again = ukjax.sweep(CartesianPendulum(), q0, qd0, TS, out=out, chunk_size=4, progress=False)
    assert again.chunks_computed == 1 and again.chunks_loaded == 1
    np.testing.assert_array_equal(again.q, first.q)
    np.testing.assert_array_equal(ukjax.load_sweep(out).q, first.q)


def test_broken_or_missing_meta_json(tmp_path):
    with pytest.raises(FileNotFoundError, match="no meta.json"):
        ukjax.load_sweep(tmp_path)
    q0, qd0 = _sweep_batch(bad=False)
    out = tmp_path / "s"
    ukjax.sweep(CartesianPendulum(), q0, qd0, TS, out=out, chunk_size=4, progress=False)
    (out / "meta.json").write_text(json.dumps({"fingerprint": "x"})[:7])
    with pytest.raises(ValueError, match="meta.json.*is damaged.*delete"):
        ukjax.load_sweep(out)


def test_failed_validation_writes_nothing(tmp_path):
    class BadPhi(CartesianPendulum):
        def holonomic(self, t, q):
            return jnp.ones((2, 2))

    with pytest.raises(ValueError, match="1-D array"):
        ukjax.sweep(BadPhi(), *_sweep_batch(bad=False), TS, out=tmp_path / "s", progress=False)
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize(
    "args, option",
    [
        (["--batch", "-5"], "--batch"),
        (["--batch", "0"], "--batch"),
        (["--saves", "1"], "--saves"),
        (["--t1", "-1"], "--t1"),
        (["--chunk", "x"], "--chunk"),
        (["--t1", "nan"], "--t1"),
    ],
)
def test_cli_bad_values_are_usage_errors(args, option, capsys):
    with pytest.raises(SystemExit) as info:
        cli_main(["sweep", *args])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert f"argument {option}" in err and "Traceback" not in err


# --- property: random invalid inputs never give silent output ------------------------


@eqx.filter_jit
def _run_no_throw(system, q0, qd0):
    return sim(system, q0=q0, qd0=qd0, throw=False)


@settings(max_examples=12, deadline=None)
@given(
    kind=st.sampled_from(["nan_q", "inf_qd", "neg_mass", "off_circle", "zero_mass"]),
    index=st.integers(0, 1),
    scale=st.floats(0.05, 5.0),
)
def test_random_invalid_inputs_are_never_silent(kind, index, scale):
    q0, qd0, mass = np.array([0.6, -0.8]), np.zeros(2), 1.0
    if kind == "nan_q":
        q0[index] = np.nan
    elif kind == "inf_qd":
        qd0[index] = np.inf
    elif kind == "neg_mass":
        mass = -scale
    elif kind == "zero_mass":
        mass = 0.0
    else:
        q0 = q0 * (1.0 + scale)
    system = CartesianPendulum(
        mass=jnp.asarray(mass), length=jnp.asarray(1.0), g=jnp.asarray(9.81)
    )  # arrays: one compilation for all
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sol = _run_no_throw(system, q0, qd0)
    assert not bool(sol.result == R.successful), kind
    assert not np.any(np.isfinite(np.asarray(sol.q)[1:])), kind


class MassLostAboveFloor(MassLostAt):
    """MassLostAt with a floor far below (y >= -10): a hybrid run, whose segments end
    with the same stall and probe."""

    def unilateral(self, t, q):
        return jnp.array([q[1] + 10.0])


@pytest.mark.slow  # default-suite time (9 s)
def test_a_hybrid_run_names_a_failure_ahead_of_its_accepted_steps():
    ts = jnp.linspace(0.0, 1.0, 5)
    sol = ukjax.simulate(MassLostAboveFloor(), Q0, QD0, ts, throw=False)
    assert bool(sol.result == R.mass_matrix_not_spd)
    assert int(sol.stats["num_steps"]) < 1000
    # A hybrid segment's checks run on its end state only, so a failed segment's saves are
    # not trusted: here the run is one segment, and nothing of it is returned as data.
    assert np.all(np.isnan(np.asarray(sol.q)[1:]))
    with pytest.raises(RUNTIME, match="not symmetric positive definite"):
        jax.block_until_ready(ukjax.simulate(MassLostAboveFloor(), Q0, QD0, ts).q)


def test_the_run_program_does_not_depend_on_how_it_is_traced():
    """The checks' placement is decided by the run's arguments alone: the same under a
    plain call, vmap, grad, vmap of grad, jit of vmap and forward mode through a jit.
    throw=True checks every stage inside the field, throw=False by the failure event (it
    returns codes); an adjoint that refuses events checks in the field."""
    from ukjax._field import Field
    from ukjax._simulate import _place_checks

    system = CartesianPendulum()

    def placement(throw, adjoint):
        field = Field(
            system,
            ukjax.NoStabilization(),
            ukjax.Regularized(),
            check=True,
            consistency_tol=None,
            throw=throw,
        )
        seen = []

        def f(q):
            seen.append(_place_checks(field, adjoint).per_stage)
            return jnp.sum(q**2)

        batch = jnp.stack([Q0, 2 * Q0])
        f(Q0), jax.vmap(f)(batch), jax.grad(f)(Q0), jax.vmap(jax.grad(f))(batch)
        jax.jit(jax.vmap(f))(batch), jax.jacfwd(jax.jit(f))(Q0)
        return seen

    assert placement(True, ukjax.ReplayAdjoint()) == [True] * 6
    assert placement(False, ukjax.ReplayAdjoint()) == [False] * 6
    assert placement(True, diffrax.BacksolveAdjoint()) == [True] * 6


def test_an_adjoint_that_refuses_events_cannot_return_codes():
    loss = lambda L: sim(
        CartesianPendulum(length=L),
        q0=jnp.array([L, 0.0]),
        adjoint=diffrax.BacksolveAdjoint(),
        stabilization=ukjax.NoStabilization(),
        throw=False,
    ).q.sum()
    with pytest.raises(ValueError, match="throw=True"):
        jax.grad(loss)(1.0)

"""ukjax.sweep: chunking, parameter batches, resuming after an interruption or a kill,
sharding over two (forced) host devices, and the ``ukjax sweep`` command line."""

import os
import signal
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import ukjax
from ukjax.systems import CartesianPendulum


B = 12
TS = jnp.linspace(0.0, 0.5, 6)


def _batch():
    th = jnp.linspace(0.2, 2.8, B)
    q0 = jnp.stack([jnp.sin(th), -jnp.cos(th)], axis=1)
    qd0 = jnp.stack([jnp.cos(th), jnp.sin(th)], axis=1) * 0.5
    return q0, qd0


def _params():
    return {"length": jnp.ones(B), "g": jnp.linspace(5.0, 15.0, B)}


@pytest.fixture(scope="module")
def reference():
    """The whole batch in memory, in one chunk."""
    q0, qd0 = _batch()
    return ukjax.sweep(
        CartesianPendulum(), q0, qd0, TS, params=_params(), chunk_size=B, progress=False
    )


def test_matches_individual_simulations(reference):
    q0, qd0 = _batch()
    assert reference.q.shape == (B, 6, 2) and reference.ok.all()
    for i in (0, 5, B - 1):  # each trajectory with its own gravity
        sol = ukjax.simulate(CartesianPendulum(g=float(_params()["g"][i])), q0[i], qd0[i], TS)
        np.testing.assert_allclose(
            reference.q[i], sol.q, rtol=0, atol=1e-10
        )  # solver rtol 1e-12; batching changes rounding


def test_chunked_and_final_only(reference, tmp_path):
    q0, qd0 = _batch()
    r = ukjax.sweep(
        CartesianPendulum(),
        q0,
        qd0,
        TS,
        params=_params(),
        chunk_size=5,
        save_final_only=True,
        out=tmp_path,
        progress=False,
    )
    assert r.chunks_computed == 3 and r.q.shape == (B, 1, 2)  # 5 + 5 + 2 (padded)
    np.testing.assert_allclose(
        r.q[:, 0], reference.q[:, -1], rtol=0, atol=1e-10
    )  # solver rtol 1e-12; batching changes rounding
    # the default chunk size of a sweep resumed in that folder is the folder's
    again = ukjax.sweep(
        CartesianPendulum(),
        q0,
        qd0,
        TS,
        params=_params(),
        save_final_only=True,
        out=tmp_path,
        progress=False,
    )
    assert (again.chunks_loaded, again.chunks_computed) == (3, 0)
    np.testing.assert_array_equal(again.q, r.q)


class _Device:
    """What the default chunk size reads of a device."""

    def __init__(self, platform, bytes_limit=None):
        self.platform, self.limit = platform, bytes_limit

    def memory_stats(self):
        return None if self.limit is None else {"bytes_limit": self.limit}


def test_default_chunk_size_by_device(tmp_path):
    from ukjax._sweep import ACCELERATOR_CHUNK, CPU_CHUNK, CPU_LAPACK_CHUNK, _default_chunk

    item = 8
    assert _default_chunk(None, [_Device("cpu")] * 2, 301, 3, item, False) == CPU_CHUNK
    assert _default_chunk(None, [_Device("cpu")], 301, 3, item, True) == CPU_LAPACK_CHUNK
    gpu = _Device("gpu", 80 * 2**30)  # 80 GiB: the double rod's saves fit
    assert _default_chunk(None, [gpu], 301, 3, item, False) == ACCELERATOR_CHUNK
    assert _default_chunk(None, [gpu, gpu], 301, 3, item, False) == 2 * ACCELERATOR_CHUNK
    # 1,001 saves of 30 coordinates: 1.44 MB per trajectory; an eighth of 80 GiB holds fewer
    per = 3 * 2 * 1_001 * 30 * item
    assert _default_chunk(None, [gpu], 1_001, 30, item, False) == 80 * 2**30 // 8 // per < 16384
    assert (
        _default_chunk(None, [_Device("gpu", 2**20)], 1_001, 30, item, False) == 1
    )  # at least one
    assert _default_chunk(None, [_Device("tpu")], 301, 3, item, False) == ACCELERATOR_CHUNK


@pytest.mark.slow  # default-suite time; the same paths run in other default tests
def test_vector_width_groups_give_the_same_result(reference):
    """A device's share run as a loop over groups of `vector_width` equals
    the whole batch at once; the chunk is rounded up to whole groups (5 -> 6 = 2 x 3)."""
    q0, qd0 = _batch()
    r = ukjax.sweep(
        CartesianPendulum(),
        q0,
        qd0,
        TS,
        params=_params(),
        chunk_size=5,
        vector_width=3,
        progress=False,
    )
    assert r.chunks_computed == 2 and r.ok.all()
    np.testing.assert_allclose(r.q, reference.q, rtol=0, atol=1e-10)
    with pytest.raises(ValueError, match="vector_width must be"):
        ukjax.sweep(CartesianPendulum(), q0, qd0, TS, vector_width=0, progress=False)


class Stop(Exception):
    pass


def test_resumes_after_an_interruption(reference, tmp_path):
    q0, qd0 = _batch()
    seen = []

    def interrupt(i, n):
        seen.append(i)
        if len(seen) == 2:
            raise Stop

    with pytest.raises(Stop):
        ukjax.sweep(
            CartesianPendulum(),
            q0,
            qd0,
            TS,
            params=_params(),
            chunk_size=3,
            out=tmp_path,
            progress=False,
            on_chunk=interrupt,
        )
    done = sorted(p.name for p in tmp_path.glob("chunk_*.npz"))
    assert done == ["chunk_000000.npz", "chunk_000001.npz"]
    with pytest.raises(FileNotFoundError, match="2 of 4 chunks in .* missing 2, 3") as err:
        ukjax.load_sweep(tmp_path)
    assert err.value.missing == [2, 3] and err.value.damaged == []
    mtimes = {p: os.stat(tmp_path / p).st_mtime_ns for p in done}
    r = ukjax.sweep(
        CartesianPendulum(),
        q0,
        qd0,
        TS,
        params=_params(),
        chunk_size=3,
        out=tmp_path,
        progress=False,
    )
    assert (r.chunks_loaded, r.chunks_computed) == (2, 2)
    assert all(os.stat(tmp_path / p).st_mtime_ns == t for p, t in mtimes.items())  # not recomputed
    np.testing.assert_allclose(
        r.q, reference.q, rtol=0, atol=1e-10
    )  # solver rtol 1e-12; batching changes rounding
    np.testing.assert_array_equal(ukjax.load_sweep(tmp_path).q, r.q)


@pytest.mark.slow  # default-suite time; the same paths run in other default tests
def test_refuses_a_folder_of_another_sweep(tmp_path):
    q0, qd0 = _batch()
    ukjax.sweep(CartesianPendulum(), q0, qd0, TS, chunk_size=B, out=tmp_path, progress=False)
    with pytest.raises(ValueError, match="different sweep"):
        ukjax.sweep(
            CartesianPendulum(length=1.0, g=3.0),
            q0,
            qd0,
            TS,
            chunk_size=B,
            out=tmp_path,
            progress=False,
        )


def test_workers_run_chunks_at_once_with_the_same_results_in_order(reference):
    """Chunks computed on several threads (`workers`) give the bitwise result of one
    thread, and are handed over (on_chunk) in chunk order; in memory, a batch smaller than
    workers x chunk_size is cut into one chunk per worker."""
    q0, qd0 = _batch()
    run = lambda **kw: ukjax.sweep(
        CartesianPendulum(), q0, qd0, TS, params=_params(), progress=False, **kw
    )
    runs, order = {}, {1: [], 3: []}
    for w in (1, 3):
        runs[w] = run(chunk_size=3, workers=w, on_chunk=lambda i, n, w=w: order[w].append(i))
        assert order[w] == [0, 1, 2, 3] and runs[w].chunks_computed == 4
    np.testing.assert_array_equal(runs[3].q, runs[1].q)
    np.testing.assert_array_equal(runs[3].result, runs[1].result)
    np.testing.assert_allclose(runs[3].q, reference.q, rtol=0, atol=1e-10)
    split = run(chunk_size=B, workers=4)
    assert split.chunks_computed == 4  # 12 = 4 x 3
    np.testing.assert_allclose(split.q, reference.q, rtol=0, atol=1e-10)
    # the default never holds more chunks at once than fit in a quarter of the memory
    from ukjax._sweep import _memory_cap, _plan

    plan = _plan(4096, 1024, jax.local_devices(), None, 1)
    assert _memory_cap(plan, 101, 2, 8) >= 2 and _memory_cap(plan, 10**6, 10**3, 8) == 1
    for bad in (0, 1.5, True, "all"):
        with pytest.raises(ValueError, match="workers must be"):
            ukjax.sweep(CartesianPendulum(), q0, qd0, TS, workers=bad, progress=False)


def test_bad_inputs():
    q0, qd0 = _batch()
    with pytest.raises(ValueError, match="no field 'mass_typo'"):
        ukjax.sweep(CartesianPendulum(), q0, qd0, TS, params={"mass_typo": jnp.ones(B)})
    with pytest.raises(ValueError, match="ambiguous"):
        ukjax.sweep(CartesianPendulum(), q0, qd0, TS, params={"g": jnp.ones(B + 1)})
    with pytest.raises(ValueError, match="vector_width must be"):
        ukjax.sweep(CartesianPendulum(), q0, qd0, TS, vector_width="auto")
    with pytest.raises(ValueError, match="chunk_size must be"):
        ukjax.sweep(CartesianPendulum(), q0, qd0, TS, chunk_size=0)


_SCRIPT = textwrap.dedent(
    """
    import os, signal, sys
    import jax
    jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp, numpy as np
    sys.path.insert(0, {tests!r})
    import ukjax
    from test_sweep import _batch, _params, TS
    from ukjax.systems import CartesianPendulum

    def kill(i, n):
        if {kill_after} >= 0 and i == {kill_after}:
            os.kill(os.getpid(), signal.SIGKILL)  # no cleanup, no exception handlers

    q0, qd0 = _batch()
    r = ukjax.sweep(CartesianPendulum(), q0, qd0, TS, params=_params(), chunk_size={chunk},
                    out={out!r}, progress=False, on_chunk=kill)
    np.save({out!r} + "/q.npy", r.q)
    print("devices", r.devices, "computed", r.chunks_computed, "loaded", r.chunks_loaded)
    """
)


def _run(tmp_path, out, kill_after, chunk, devices=1):
    script = tmp_path / "run.py"
    script.write_text(
        _SCRIPT.format(
            tests=os.path.dirname(__file__), kill_after=kill_after, chunk=chunk, out=str(out)
        )
    )
    env = dict(
        os.environ,
        XLA_FLAGS=f"--xla_force_host_platform_device_count={devices}",
        JAX_PLATFORMS="cpu",
    )
    return subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300
    )


@pytest.mark.slow
def test_resumes_after_sigkill_and_shards_over_two_devices(reference, tmp_path):
    out = tmp_path / "sweep"
    killed = _run(tmp_path, out, kill_after=1, chunk=4, devices=2)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert sorted(p.name for p in out.glob("chunk_*.npz")) == [
        "chunk_000000.npz",
        "chunk_000001.npz",
    ]
    done = _run(tmp_path, out, kill_after=-1, chunk=4, devices=2)
    assert done.returncode == 0, done.stderr
    assert "devices 2 computed 1 loaded 2" in done.stdout
    np.testing.assert_allclose(
        np.load(out / "q.npy"), reference.q, rtol=0, atol=1e-10
    )  # solver rtol 1e-12; batching changes rounding


@pytest.mark.slow
def test_command_line(tmp_path):
    out = tmp_path / "cli"
    cmd = [
        sys.executable,
        "-m",
        "ukjax",
        "sweep",
        "--system",
        "pendulum",
        "--batch",
        "10",
        "--chunk",
        "4",
        "--workers",
        "2",
        "--t1",
        "0.5",
        "--saves",
        "3",
        "--out",
        str(out),
        "--quiet",
    ]
    first = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr
    assert "3 chunks computed, 0 resumed" in first.stdout
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert "0 chunks computed, 3 resumed" in again.stdout
    r = ukjax.load_sweep(out)
    assert r.q.shape == (10, 3, 2) and r.ok.all()
    np.testing.assert_allclose(np.sum(r.q**2, axis=-1), 1.0, atol=1e-9)  # on the circle


def test_command_line_says_it_compiles_and_stops_cleanly_on_ctrl_c(tmp_path):
    """The folder exists from the start; Ctrl-C (SIGINT) while the first chunk compiles
    ends with a resume hint and exit code 130, not a traceback."""
    out = tmp_path / "interrupted"
    cmd = [sys.executable, "-m", "ukjax", "sweep", "--system", "pendulum", "--batch", "8"]
    proc = subprocess.Popen(
        [*cmd, "--out", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    seen = ""
    while "compiling" not in seen:  # the progress line announces the compilation
        line = proc.stderr.readline()
        assert line, "ukjax sweep ended before it said it was compiling"
        seen += line
    assert out.is_dir()
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 130, stderr
    assert "interrupted" in stderr and "run the same command again" in stderr.lower()
    assert "Traceback" not in stderr


def _compiles(fn):
    """(fn's value, the XLA compile durations it caused)."""
    compiles = []
    listener = lambda event, seconds, **kw: (
        compiles.append(seconds) if event == "/jax/core/compile/backend_compile_duration" else None
    )
    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        return fn(), compiles
    finally:
        jax.monitoring.unregister_event_duration_listener(listener)


@pytest.mark.slow  # moved from the default suite to keep it under 5 minutes
def test_sweeps_of_one_structure_compile_at_most_twice_and_match_simulate():
    """The first values of a structure get a program with them as constants; once other
    values are swept, one program with the values (and ts) as arguments serves all later
    ones. Every program gives what simulate gives, trajectory by trajectory."""
    q0, qd0 = _batch()
    run = lambda g, qd, ts: ukjax.sweep(
        CartesianPendulum(g=g), q0, qd, ts, chunk_size=B, progress=False
    )
    qd0_2, ts_2 = 0.5 * qd0, TS + 1.0  # (computed before listening: eager ops compile)
    first = run(4.25, qd0, TS)
    same, compiles = _compiles(lambda: run(4.25, qd0_2, TS))  # same values, other states
    assert not compiles, f"same values: compiled {len(compiles)} programs"
    other = run(3.0, qd0_2, ts_2)  # other values: the generic program (compiled at most once)
    third, compiles = _compiles(lambda: run(2.0, qd0, TS))
    assert not compiles, f"third values: compiled {len(compiles)} programs"
    cases = ((first, 4.25, qd0, TS), (same, 4.25, qd0_2, TS), (other, 3.0, qd0_2, ts_2))
    for res, g, qd, ts in cases + ((third, 2.0, qd0, TS),):
        assert res.ok.all()
        for i in (0, B - 1):
            sol = ukjax.simulate(CartesianPendulum(g=g), q0[i], qd[i], ts)
            np.testing.assert_allclose(res.q[i], sol.q, rtol=0, atol=1e-10)
            np.testing.assert_allclose(res.qd[i], sol.qd, rtol=0, atol=1e-10)
    assert np.abs(other.q - same.q).max() > 1e-3  # it ran with the new values


_DENSE_CHAIN = """
import sys
import diffrax, jax, jax.numpy as jnp, numpy as np, ukjax
jax.config.update("jax_enable_x64", True)

class WrittenMassChain(ukjax.System):  # a 16-angle pendulum chain, M written by the user
    links: int

    def mass_matrix(self, t, q):
        i = jnp.arange(self.links)
        weight = self.links - jnp.maximum(i[:, None], i[None, :])
        return weight * jnp.cos(q[:, None] - q[None, :])

    def potential_energy(self, t, q):
        return -9.81 * jnp.sum(jnp.cumsum(jnp.cos(q)))

q0 = np.random.default_rng(0).uniform(-0.5, 0.5, (256, 16))
for _ in range(2):  # the second call ran two chunks at once from the start
    res = ukjax.sweep(WrittenMassChain(16), np.concatenate([q0, q0]), np.zeros((512, 16)),
                      np.array([0.0, 0.25]), solver=ukjax.RK4(),
                      stepsize_controller=diffrax.ConstantStepSize(), dt0=1e-3,
                      chunk_size=256, save_final_only=True, progress=False)
one = ukjax.simulate(WrittenMassChain(16), q0[7], np.zeros(16), np.array([0.0, 0.25]),
                     solver=ukjax.RK4(), stepsize_controller=diffrax.ConstantStepSize(),
                     dt0=1e-3)
print(bool(res.ok.all()), float(np.max(np.abs(res.q[7, -1] - one.q[-1]))))
"""


def test_a_sweep_factors_large_matrices_in_a_stage_loop():
    """Written-out stages, and several chunks at once, only where no UK solve of the run
    factors with LAPACK: around LAPACK's factorisations they hang XLA:CPU (jaxlib 0.10.2).
    That is asked of the run's own kernels (M's and the Gram matrix's sizes), and in a
    hybrid run also of the event code's, which takes LAPACK from 3 coordinates."""
    from ukjax._sweep import _factors_with_lapack
    from ukjax._unrolled import Unrolled, batched_solver
    from ukjax.systems import BouncingBall, PlanarChain, TwoBlockFriction

    chain = PlanarChain.uniform(5)  # n = 10 Cartesian coordinates, 5 links
    q, qd = chain.state_from_angles(jnp.linspace(0.1, 0.5, 5), jnp.zeros(5))
    assert _factors_with_lapack(chain, 0.0, q, qd, {})
    chain4 = PlanarChain.uniform(4)  # n = 8, m = 4: unrolled kernels
    q, qd = chain4.state_from_angles(jnp.linspace(0.1, 0.4, 4), jnp.zeros(4))
    assert not _factors_with_lapack(chain4, 0.0, q, qd, {})
    lapack = {"uk_solver": ukjax.Regularized(kernels=ukjax.LapackKernels())}
    assert _factors_with_lapack(chain4, 0.0, q, qd, lapack)  # the user's own kernels
    one = jnp.ones(1)  # a ball on the floor: one coordinate, one contact, unrolled throughout
    assert not _factors_with_lapack(BouncingBall(), 0.0, one, 0 * one, {})
    blocks = jnp.zeros(4)  # two blocks, two frictional contacts: LAPACK at events
    assert _factors_with_lapack(TwoBlockFriction(), 0.0, blocks, blocks, {})
    assert isinstance(batched_solver(ukjax.RK4(), lapack=False), Unrolled)
    assert isinstance(batched_solver(ukjax.RK4(), lapack=True), ukjax.StageLoop)


@pytest.mark.slow
def test_a_sweep_of_a_dense_16_coordinate_chain_with_rk4_finishes():
    """The batches that hung (`benchmarks/RESULTS.md`, stop 76), with the stages written out
    and with two chunks running at once, finish, equal to a single `simulate` of one of
    their trajectories."""
    run = subprocess.run(
        [sys.executable, "-c", _DENSE_CHAIN], capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr
    ok, err = run.stdout.split()
    assert ok == "True" and float(err) < 1e-12


_ROCKING_BLOCKS = """
import jax, jax.numpy as jnp, numpy as np, ukjax
jax.config.update("jax_enable_x64", True)

class Block(ukjax.System):  # Housner's block in (x, y, theta), rough bottom corners
    b: float = 0.2
    h: float = 0.6

    def mass_matrix(self, t, q):
        return jnp.diag(jnp.array([1.0, 1.0, (self.b**2 + self.h**2) / 3]))

    def forces(self, t, q, qd):
        return jnp.array([0.0, -9.81, 0.0])

    def unilateral(self, t, q):
        side = jnp.array([-1.0, 1.0])
        return q[1] + side * self.b * jnp.sin(q[2]) - self.h * jnp.cos(q[2])

    def friction(self, t, q):
        side = jnp.array([-1.0, 1.0])
        lever = -side * self.b * jnp.sin(q[2]) + self.h * jnp.cos(q[2])
        return jnp.stack([jnp.ones(2), jnp.zeros(2), lever], axis=1), 1.0, 1.0

th = np.random.default_rng(0).uniform(0.05, 0.15, 1024)
q0 = np.stack([np.zeros_like(th), 0.2 * np.sin(th) + 0.6 * np.cos(th), th], axis=1)
ts = np.linspace(0.0, 2.0, 11)
res = ukjax.sweep(Block(), q0, np.zeros_like(q0), ts, progress=False)
one = ukjax.simulate(Block(), q0[5], np.zeros(3), ts)
print(bool(res.ok.all()), float(np.max(np.abs(res.q[5] - one.q))))
"""


@pytest.mark.slow
def test_a_sweep_of_rocking_blocks_at_the_defaults_finishes():
    """A hybrid run of 3 coordinates factors with LAPACK in its event code: 1024 rocking
    blocks in one chunk never finished (`benchmarks/RESULTS.md`, stop 78); the default
    sweep (one chunk at a time, 256 each, the stages in a loop) finishes, equal to a single
    `simulate` of one of its members."""
    run = subprocess.run(
        [sys.executable, "-c", _ROCKING_BLOCKS], capture_output=True, text=True, timeout=400
    )
    assert run.returncode == 0, run.stderr
    ok, err = run.stdout.split()
    assert ok == "True" and float(err) < 1e-10

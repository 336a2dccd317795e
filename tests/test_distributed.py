"""Sweeps beyond one process: chunks as tasks of an executor (a process pool, a Dask
cluster and a Ray instance, each with a worker killed mid-sweep), workers without a
coordinator (worker=(k, P) and SLURM job arrays filling one folder), and the
jax.distributed mode. Every result is compared bitwise with the same sweep run plainly in
this process."""

import concurrent.futures
import json
import multiprocessing
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
import warnings

import equinox as eqx
import jax.numpy as jnp
import numpy as np
import pytest

import ukjax
from ukjax._sweep_share import share


class Swing(ukjax.System):
    """A user's pendulum in Cartesian coordinates with an int field (the unit rod's
    count of segments, unused by the physics but carried along)."""

    segments: int = eqx.field(static=True, default=3)
    length: float = 1.0
    g: float = 9.81

    def mass_matrix(self, t, q):
        return jnp.eye(2, dtype=q.dtype)

    def forces(self, t, q, qd):
        return jnp.array([0.0, -self.g], dtype=q.dtype)

    def holonomic(self, t, q):
        return jnp.array([q @ q - self.length**2])


B, CHUNK = 24, 6
TS = np.linspace(0.0, 1.0, 5)


def _batch():
    th = np.linspace(0.2, 2.8, B)
    q0 = np.stack([np.sin(th), -np.cos(th)], axis=1)
    return q0, 0.5 * np.stack([np.cos(th), np.sin(th)], axis=1)


def _run(**kwargs):
    q0, qd0 = _batch()
    g = np.linspace(5.0, 15.0, B)
    return ukjax.sweep(
        Swing(), q0, qd0, TS, params={"g": g}, chunk_size=CHUNK, progress=False, **kwargs
    )


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    """The sweep in this process, written to a folder (chunks of CHUNK)."""
    return _run(out=tmp_path_factory.mktemp("plain"))


def _same(a, b):
    for name in ("q", "qd", "result", "num_steps"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name), err_msg=name)
    assert a.complete and b.complete


# --- executors ---------------------------------------------------------------------------


@pytest.mark.slow  # moved from the default suite to keep it under 5 minutes
def test_process_pool_is_bitwise_equal_to_the_plain_sweep(plain, tmp_path):
    """Spawned worker processes (float32 by default there: the tasks run in the caller's
    float64) compute each chunk and write it; in memory the chunks come back as results."""
    spawn = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(2, mp_context=spawn) as pool:
        far = _run(out=tmp_path, executor=pool)
        in_memory = _run(executor=pool)
    assert far.q.dtype == np.float64 and far.chunks_computed == B // CHUNK
    _same(far, plain)
    _same(in_memory, plain)
    _same(ukjax.load_sweep(tmp_path), plain)


@pytest.mark.slow  # a second pool of fresh processes
def test_a_fork_started_pool_is_replaced_by_a_spawn_started_one(plain, tmp_path):
    """A forked child of a process that has used JAX deadlocks: the default pool on Linux
    (fork, before Python 3.14) would hang; the sweep runs in a spawn-started pool instead."""
    fork = multiprocessing.get_context("fork")
    with concurrent.futures.ProcessPoolExecutor(2, mp_context=fork) as pool:
        with pytest.warns(RuntimeWarning, match="starts its workers by fork"):
            r = _run(out=tmp_path, executor=pool)
    _same(r, plain)


class _Inline:
    """An executor that runs each task at once in this process, and loses the tasks of
    the chunks in `lose` (each time they are submitted, `times` times)."""

    def __init__(self, lose=(), times=1):
        self.lost = {i: times for i in lose}
        self.submitted = []

    def submit(self, fn, *args, **kwargs):
        global _IN_WORKER
        i = args[1]
        self.submitted.append(i)
        future = concurrent.futures.Future()
        if self.lost.get(i, 0) > 0:
            self.lost[i] -= 1
            future.set_exception(ConnectionError(f"worker running chunk {i} died"))
            return future
        _IN_WORKER = True
        try:
            future.set_result(fn(*args, **kwargs))
        finally:
            _IN_WORKER = False
        return future


_IN_WORKER = False


def test_a_lost_task_is_submitted_again(plain, tmp_path):
    ex = _Inline(lose=[1, 3])
    with pytest.warns(RuntimeWarning) as caught:
        r = _run(out=tmp_path, executor=ex)
    for i in (1, 3):  # one warning for each lost chunk
        assert any(f"lost chunk {i} (ConnectionError: worker running chunk {i} died)" in
                   str(w.message) for w in caught)  # fmt: skip
    assert sorted(ex.submitted) == [0, 1, 1, 2, 3, 3]
    _same(r, plain)


def test_an_executor_that_keeps_losing_a_chunk_stops_and_keeps_the_finished_ones(plain, tmp_path):
    ex = _Inline(lose=[2], times=ukjax._sweep_exec.ATTEMPTS)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        with pytest.raises(RuntimeError, match="lost chunk 2 3 times.*finished chunks are saved"):
            _run(out=tmp_path, executor=ex)
    status = ukjax.sweep_status(tmp_path)  # every other task had finished and written
    assert status.done == [0, 1, 3] and status.missing == [2] and not status.complete
    again = _run(out=tmp_path, executor=_Inline())  # resumes: only chunk 2 is computed
    assert (again.chunks_loaded, again.chunks_computed) == (3, 1)
    _same(again, plain)


def test_an_error_in_a_task_is_raised_with_its_traceback(tmp_path):
    q0, qd0 = _batch()
    bad = ukjax.systems.CartesianPendulum()

    with pytest.raises(ValueError, match="no field 'stiffness'"):  # refused before any task
        ukjax.sweep(bad, q0, qd0, TS, params={"stiffness": np.ones(B)}, executor=_Inline())

    class Broken(Swing):  # fails in the worker (say, a data file only here), not here
        def forces(self, t, q, qd):
            if _IN_WORKER:
                raise RuntimeError("the user's force law failed")
            return super().forces(t, q, qd)

    with pytest.raises(RuntimeError, match="force law failed") as err:
        ukjax.sweep(Broken(), q0, qd0, TS, out=tmp_path, executor=_Inline(), progress=False)
    notes = "".join(getattr(err.value, "__notes__", []))
    assert "computing chunk 0 in an executor's task" in notes or sys.version_info < (3, 11)
    assert not (tmp_path / "chunk_000000.npz").exists()


def test_distribution_arguments_are_checked(tmp_path):
    q0, qd0 = _batch()
    go = lambda **kw: ukjax.sweep(Swing(), q0, qd0, TS, progress=False, **kw)
    with pytest.raises(ValueError, match="submit"):
        go(out=tmp_path, executor=object())
    with pytest.raises(ValueError, match="workers= and devices="):
        go(out=tmp_path, executor=_Inline(), workers=2)
    with pytest.raises(ValueError, match="give out=FOLDER"):
        go(worker=(0, 2))
    for bad in ((2, 2), (0, 0), (1,), (0.0, 2), "0/2"):
        with pytest.raises(ValueError, match=r"pair \(k, P\)"):
            go(out=tmp_path, worker=bad)
    with pytest.raises(ValueError, match="compilation_cache"):
        go(compilation_cache=str(tmp_path))


# --- workers without a coordinator ---------------------------------------------------------


def test_the_share_comes_from_the_argument_then_slurm():
    assert share((1, 3)).chunks(8) == [1, 4, 7]
    env = {"SLURM_ARRAY_TASK_ID": "1", "SLURM_ARRAY_TASK_COUNT": "2"}
    assert share(None, env)[:2] == (1, 2)
    assert share((0, 4), env)[:2] == (0, 4)  # the argument wins
    env_min = {**env, "SLURM_ARRAY_TASK_ID": "5", "SLURM_ARRAY_TASK_MIN": "4"}  # --array=4-5
    assert share(None, env_min)[:2] == (1, 2)
    stepped = {  # --array=0-6:2 -> 0, 2, 4, 6
        "SLURM_ARRAY_TASK_ID": "4",
        "SLURM_ARRAY_TASK_COUNT": "4",
        "SLURM_ARRAY_TASK_MIN": "0",
        "SLURM_ARRAY_TASK_STEP": "2",
    }
    assert share(None, stepped)[:2] == (2, 4)
    with pytest.raises(ValueError, match="worker=\\(k, P\\)"):
        share(None, {**env, "SLURM_ARRAY_TASK_ID": "7"})
    with pytest.raises(ValueError, match="not an integer"):
        share(None, {**env, "SLURM_ARRAY_TASK_COUNT": "two"})
    assert share(None, {"SLURM_ARRAY_TASK_ID": "3"})[:2] == (0, 1)  # not an array job


def test_one_worker_of_two_leaves_a_folder_that_names_its_gaps(plain, tmp_path, monkeypatch):
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "1")
    monkeypatch.setenv("SLURM_ARRAY_TASK_COUNT", "2")
    mine = _run(out=tmp_path)
    assert not mine.complete and mine.missing == (0, 2)
    np.testing.assert_array_equal(mine.index, np.r_[6:12, 18:24])
    np.testing.assert_array_equal(mine.q, plain.q[mine.index])
    with pytest.raises(ukjax.IncompleteSweepError, match="missing 0, 2") as err:
        ukjax.load_sweep(tmp_path)
    assert err.value.missing == [0, 2]
    part = ukjax.load_sweep(tmp_path, partial=True)
    assert part.missing == (0, 2) and "partial result" in part.summary()
    np.testing.assert_array_equal(part.q, mine.q)
    # a damaged chunk is named apart from the missing ones
    with open(tmp_path / "chunk_000001.npz", "r+b") as f:
        f.seek(100)
        f.write(b"\0" * 16)
    status = ukjax.sweep_status(tmp_path)
    assert status.missing == [0, 2] and list(status.damaged) == [1] and status.done == [3]
    cli = subprocess.run(
        [sys.executable, "-m", "ukjax", "sweep", "status", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert cli.returncode == 1 and "1 of 4 chunks done" in cli.stdout
    assert "missing: 0, 2" in cli.stdout and "damaged: 1" in cli.stdout


_SCRIPT = textwrap.dedent(
    """
    import sys
    import jax
    {setup}
    jax.config.update("jax_enable_x64", True)
    sys.path.insert(0, {tests!r})
    from test_distributed import _run
    r = _run(out={out!r})
    print("share", r.index.tolist(), r.missing)
    """
)


def _processes(out, envs, setup=""):
    """Run the sweep in one process per environment at once; their outputs."""
    tests = os.path.dirname(__file__)
    code = _SCRIPT.format(setup=setup, tests=tests, out=str(out))
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code],
            env={**os.environ, **env},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for env in envs
    ]
    outs = [p.communicate(timeout=300) for p in procs]
    for p, (so, se) in zip(procs, outs):
        assert p.returncode == 0, se[-3000:]
    return [so for so, _ in outs]


@pytest.mark.slow  # two fresh processes; the share logic runs in the default tests above
def test_two_slurm_array_tasks_fill_one_folder(plain, tmp_path):
    envs = [{"SLURM_ARRAY_TASK_ID": str(k), "SLURM_ARRAY_TASK_COUNT": "2"} for k in (0, 1)]
    outs = _processes(tmp_path, envs)
    assert "(1, 3)" in outs[0] and "(0, 2)" in outs[1]  # each names the other's chunks
    _same(ukjax.load_sweep(tmp_path), plain)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


@pytest.mark.slow  # two fresh processes
def test_jax_distributed_processes_fill_one_folder(plain, tmp_path):
    port = _free_port()
    setup = (
        f"jax.distributed.initialize('localhost:{port}', num_processes=2, "
        "process_id=int(__import__('os').environ['UKJAX_TEST_PROCESS']))"
    )
    outs = _processes(tmp_path, [{"UKJAX_TEST_PROCESS": str(k)} for k in (0, 1)], setup)
    assert "(1, 3)" in outs[0] and "(0, 2)" in outs[1]
    _same(ukjax.load_sweep(tmp_path), plain)
    assert json.load(open(tmp_path / "meta.json"))["n_chunks"] == 4


# --- Dask ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def dask_client():
    distributed = pytest.importorskip("distributed")
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        yield client


class _KillOnSubmit:
    """A Dask client whose second task submission SIGKILLs one worker process (still
    compiling the program: the chunks given to it are in flight and lost)."""

    def __init__(self, client):
        self.client, self.n, self.killed = client, 0, []

    def submit(self, fn, *args, **kwargs):
        future = self.client.submit(fn, *args, **kwargs)
        self.n += 1
        if self.n == 2:
            pid = next(iter(self.client.run(os.getpid).values()))
            os.kill(pid, signal.SIGKILL)
            self.killed.append(pid)
        return future


@pytest.mark.slow  # a local Dask cluster of two processes
def test_dask_cluster_survives_a_killed_worker_and_is_bitwise_equal(plain, dask_client, tmp_path):
    killer = _KillOnSubmit(dask_client)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a resubmission, if Dask gave up
        survived = _run(out=tmp_path / "killed", executor=killer)
    assert killer.killed and survived.chunks_computed == B // CHUNK
    _same(survived, plain)
    _same(ukjax.load_sweep(tmp_path / "killed"), plain)
    dask_client.wait_for_workers(2, timeout=120)
    assert killer.killed[0] not in dask_client.run(os.getpid).values()  # replaced
    _same(_run(out=tmp_path / "plain", executor=dask_client), plain)


# --- Ray ----------------------------------------------------------------------------------


class _RayExecutor:
    """README's thin wrapper: each chunk a Ray task, whose ObjectRef.future() is a
    concurrent.futures.Future. With `kill_at`, the tasks first wait a second (so that a
    task is running whatever the workers have compiled already) and the `kill_at`-th
    submission SIGKILLs a worker process in the middle of one."""

    def __init__(self, ray, kill_at=None):
        self.ray, self.kill_at, self.n, self.killed = ray, kill_at, 0, []

    def submit(self, fn, *args, **kwargs):
        if self.kill_at is None:
            return self.ray.remote(fn).remote(*args, **kwargs).future()
        future = self.ray.remote(_after_a_second).remote(fn, *args, **kwargs).future()
        self.n += 1
        if self.n == self.kill_at:
            self.killed.append(_kill_a_running_task())
        return future


def _after_a_second(fn, *args, **kwargs):
    time.sleep(1.0)
    return fn(*args, **kwargs)


def _kill_a_running_task(timeout=120.0) -> int:
    """SIGKILL a Ray worker process while it runs a chunk's task (its process title is
    `ray::_after_a_second`)."""
    psutil = pytest.importorskip("psutil")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for p in psutil.process_iter(["cmdline"]):
            if "ray::_after_a_second" in " ".join(p.info["cmdline"] or []):
                os.kill(p.pid, signal.SIGKILL)
                return p.pid
        time.sleep(0.05)
    raise AssertionError("no Ray worker started a chunk")


@pytest.fixture(scope="module")
def ray_module():
    """A local Ray instance of two worker CPUs; the workers import this module (the
    system's class) from the tests' folder and equinox with EQX_ON_ERROR=nan."""
    ray = pytest.importorskip("ray")
    env = {"PYTHONPATH": os.path.dirname(os.path.abspath(__file__)), "EQX_ON_ERROR": "nan"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # Ray forks, then execs, its daemons
        ray.init(
            num_cpus=2,
            include_dashboard=False,
            object_store_memory=200 * 2**20,
            log_to_driver=False,
            runtime_env={"env_vars": env},
        )
    yield ray
    ray.shutdown()


@pytest.mark.slow  # a local Ray instance (ray is not among the test extras: skipped without it)
def test_ray_tasks_are_bitwise_equal_and_survive_a_killed_worker(plain, ray_module, tmp_path):
    far = _run(out=tmp_path / "ray", executor=_RayExecutor(ray_module))
    assert far.chunks_computed == B // CHUNK
    _same(far, plain)
    _same(ukjax.load_sweep(tmp_path / "ray"), plain)
    _same(_run(executor=_RayExecutor(ray_module)), plain)  # chunks returned, no folder
    killer = _RayExecutor(ray_module, kill_at=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a resubmission, if Ray gave up
        survived = _run(out=tmp_path / "killed", executor=killer)
    assert killer.killed and survived.chunks_computed == B // CHUNK
    _same(survived, plain)

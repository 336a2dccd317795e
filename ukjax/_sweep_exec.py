r"""Where a sweep's chunks are computed: on this process's threads, or as tasks of an
executor (a process pool, Dask, Ray, submitit) in other processes and on other machines.

A :class:`ChunkJob` is everything a process needs to compute any chunk of one sweep:
the system (its arrays as NumPy arrays, so that it pickles and is read in the receiving
process's precision), the save times, the program's layout, the options and, for tasks,
the output folder. The same job computes a chunk on a thread here and in a task there,
through the same compiled program, so the results are bitwise equal whichever ran it.

JAX's persistent compilation cache stores only programs without host callbacks.
Equinox's run-time checks (``equinox.error_if``, which diffrax applies to the save times
of every solve) are host callbacks unless equinox was imported with ``EQX_ON_ERROR=nan``
(or ``off``); with ``throw=False`` (a sweep's default) a sweep program has no other
callbacks, and its save times were checked before any task started. So a task uses the
cache only in a worker process started with ``EQX_ON_ERROR=nan`` in its environment, and
says so.
"""

from __future__ import annotations

import contextlib
import itertools
import multiprocessing
import os
import pickle
import socket
import time
import traceback
import warnings
from collections import deque
from collections.abc import Callable, Generator
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from typing import Any, NamedTuple

import equinox as eqx
import jax
import numpy as np

from ._results import code_of
from ._simulate import simulate
from ._sweep_store import Chunk, ChunkStore
from ._system import System, floatify
from ._xla import jit


ATTEMPTS = 3
"""How many times a chunk is submitted to an executor that loses it (a worker died, a
connection dropped) before the sweep gives up."""


class Layout(NamedTuple):
    """The static shape of one chunk's program: `devices` x `per_device` trajectories, each
    device's share run as groups of `width`; `final_only` keeps the last save only."""

    devices: int
    per_device: int
    width: int
    final_only: bool


def _chunk(system: System, ts, params, q0, qd0, layout: Layout, kwargs):
    """One (padded) chunk: (chunk, ...) -> (devices, per_device, ...), vmapped over the
    sharded device axis; each device's share is a loop over groups of `width` (lax.map
    vmaps within a group)."""

    def one(p, a, b):
        s = system
        if p:
            names = sorted(p)
            s = eqx.tree_at(
                lambda s_: [getattr(s_, k) for k in names], system, [p[k] for k in names]
            )
        sol = simulate(s, a, b, ts, **kwargs)
        q, qd = (sol.q[-1:], sol.qd[-1:]) if layout.final_only else (sol.q, sol.qd)
        return q, qd, code_of(sol.result), sol.stats["num_steps"]

    nd, per_device = layout.devices, layout.per_device
    if layout.width == per_device:  # one group per device: a vmap (lax.map's loop of one
        per_dev = jax.vmap(one)  # pass cost 5-10 %)
    else:
        per_dev = lambda *xs: jax.lax.map(lambda ys: one(*ys), xs, batch_size=layout.width)
    if nd == 1:
        return per_dev(params, q0, qd0)
    split = lambda x: x.reshape((nd, per_device) + x.shape[1:])
    out = jax.vmap(per_dev)(*jax.tree_util.tree_map(split, (params, q0, qd0)))
    return jax.tree_util.tree_map(lambda y: y.reshape((nd * per_device,) + y.shape[2:]), out)


_run_chunk = jit(_chunk)  # one program per structure: the system's values and ts are arguments


def _x64() -> bool:
    """Whether this thread runs JAX in 64-bit precision."""
    return jax.dtypes.canonicalize_dtype(np.float64) == np.float64


def _host(system: System) -> System:
    """The system with Python floats as arrays (traced, not baked in) and every array as
    a NumPy array (picklable; read in the receiving process's precision)."""
    return jax.tree_util.tree_map(
        lambda x: np.asarray(x) if isinstance(x, jax.Array) else x, floatify(system)
    )


class ChunkJob(NamedTuple):
    """Everything a process needs to compute the chunks of one sweep (picklable).

    - `system`, `ts`, `layout`, `kwargs`: the program and its inputs but the rows.
    - `x64`: whether the sweep runs in float64 (the caller's ``jax_enable_x64``); a task
      in a process set otherwise runs under ``jax.enable_x64(x64)``.
    - `out`, `meta`: where a task writes its chunk (``None``: it returns the chunk).
    - `cache`: a folder for JAX's persistent compilation cache, set in a task's process
      when that process has none and its programs can be stored (:func:`cacheable`; JAX
      reads the folder at the process's first compilation).
    """

    system: System
    ts: np.ndarray
    layout: Layout
    kwargs: dict
    x64: bool
    out: str | None = None
    meta: dict | None = None
    cache: str | None = None

    @classmethod
    def create(cls, system: System, ts, layout: Layout, kwargs: dict) -> ChunkJob:
        x64 = _x64()
        return cls(_host(system), np.asarray(ts), layout, kwargs, x64)

    def compute(self, rows: tuple, n: int, devices: list) -> Chunk:
        """The chunk of the padded `rows` = (params, q0, qd0), on `devices` (sharded along
        the batch), trimmed to its `n` real trajectories."""
        mesh = jax.sharding.Mesh(np.array(devices), ("batch",))
        sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("batch"))
        p, a, b = jax.device_put(rows, sharding)
        outs = _run_chunk(self.system, self.ts, p, a, b, self.layout, self.kwargs)
        return Chunk(*(np.asarray(x[:n]) for x in jax.device_get(outs)))

    @contextlib.contextmanager
    def environment(self, cacheable: bool):
        """The precision of the sweep, and the compilation cache where none is set and
        this process's programs can be stored (`cacheable`, :func:`cacheable`)."""
        unset = not jax.config.values.get("jax_compilation_cache_dir")
        if self.cache is not None and cacheable and unset:
            jax.config.update("jax_compilation_cache_dir", self.cache)
        if _x64() == self.x64:
            yield
        else:
            with jax.enable_x64(self.x64):
                yield


def cacheable() -> bool:
    """Whether this process's sweep programs can be stored in JAX's persistent cache:
    equinox's checks are not host callbacks here (equinox was imported with
    ``EQX_ON_ERROR=nan`` or ``off``). Asked of equinox itself, by tracing one check: a
    process may have imported equinox before its environment was set (a spawned worker
    re-imports its parent's main module first)."""
    jaxpr = jax.make_jaxpr(lambda x: eqx.error_if(x, x > 0, "probe"))(np.float32(0.0))
    return "callback" not in str(jaxpr)


class Done(NamedTuple):
    """What a task sends back: the chunk (``None`` when it wrote it to the job's folder),
    or the error it raised with its traceback; the seconds it took, the process that ran
    it (``host:pid``) and whether that process could use the compilation cache."""

    chunk: Chunk | None
    error: BaseException | None
    trace: str
    seconds: float
    worker: str
    cacheable: bool


def _picklable(error: BaseException) -> BaseException:
    try:
        pickle.dumps(error)
        return error
    except Exception:
        return RuntimeError(f"{type(error).__name__}: {error}")


def _process() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def run_task(job: ChunkJob, i: int, rows: tuple, n: int, attempt: int = 0) -> Done:
    """Compute chunk `i` in the current process (the function an executor runs).

    `attempt` only makes a resubmitted task a new task for executors that key tasks by
    their arguments (Dask)."""
    del attempt
    start = time.perf_counter()
    stored = cacheable()
    try:
        with job.environment(stored):
            chunk = job.compute(rows, n, jax.local_devices()[:1])
        if job.out is not None:
            assert job.meta is not None
            store = ChunkStore(job.out, job.meta)
            store.create()
            store.save(i, chunk)
            chunk = None
        return Done(chunk, None, "", time.perf_counter() - start, _process(), stored)
    except Exception as e:  # sent back: raised by the caller, where the user sees it
        trace, seconds = traceback.format_exc(), time.perf_counter() - start
        return Done(None, _picklable(e), trace, seconds, _process(), stored)


def on_threads(
    fn: Callable[[int], Chunk], items: list[int], workers: int
) -> Generator[tuple[int, Chunk], None, None]:
    """Yield (i, fn(i)) for the items in their order, with up to `workers` calls running
    at once on threads (XLA:CPU runs a program on the thread that calls it, on one core:
    two chunks on two threads take the time of one). An exception of fn(i) is raised when
    i's turn comes; the calls not yet started are then cancelled."""
    if workers <= 1:
        for i in items:
            yield i, fn(i)
        return
    pool = ThreadPoolExecutor(workers, thread_name_prefix="ukjax-sweep")
    running: deque = deque()
    pending = iter(items)
    try:
        for i in itertools.islice(pending, workers):
            running.append((i, pool.submit(fn, i)))
        while running:
            i, future = running.popleft()
            result = future.result()
            for j in itertools.islice(pending, 1):
                running.append((j, pool.submit(fn, j)))
            yield i, result
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


@contextlib.contextmanager
def fork_safe(executor: Any):
    """The executor, or, for a process pool that starts its workers by ``fork`` (Python's
    default on Linux before 3.14), a pool of the same size that starts them by ``spawn``
    (shut down on exit): a forked child of a process that has used JAX deadlocks at its
    first JAX operation (JAX is multithreaded)."""
    context = getattr(executor, "_mp_context", None)
    forks = isinstance(executor, ProcessPoolExecutor) and (
        context is None or context.get_start_method() == "fork"
    )
    if not forks:
        yield executor
        return
    size = getattr(executor, "_max_workers", None) or os.cpu_count() or 1
    warnings.warn(
        "sweep: this ProcessPoolExecutor starts its workers by fork, and a forked child of a "
        f"process that has used JAX deadlocks; the chunks run in a pool of {size} workers "
        "started by spawn instead. Create the pool with "
        "mp_context=multiprocessing.get_context('spawn') to use your own.",
        RuntimeWarning,
        stacklevel=4,
    )
    with ProcessPoolExecutor(size, mp_context=multiprocessing.get_context("spawn")) as pool:
        yield pool


class _Lost(Exception):
    """The executor could not run a chunk after :data:`ATTEMPTS` submissions."""


def _submit(executor: Any, job: ChunkJob, i: int, task: tuple, attempt: int):
    try:
        return executor.submit(run_task, job, i, *task, attempt=attempt)
    except Exception as e:
        raise _Lost(f"sweep: the executor refused chunk {i} ({type(e).__name__}: {e})") from e


def _wait(
    executor: Any, job: ChunkJob, i: int, task_of: Callable[[int], tuple], futures: dict
) -> Done:
    """The result of chunk i's task, submitting it again (its arguments built anew by
    `task_of`) when the executor lost it (the task itself never raises: an error in the
    computation comes back in `Done`)."""
    for attempt in range(1, ATTEMPTS + 1):
        try:
            return futures[i].result()
        except Exception as e:
            if attempt == ATTEMPTS:
                raise _Lost(
                    f"sweep: the executor lost chunk {i} {ATTEMPTS} times (last: "
                    f"{type(e).__name__}: {e})"
                ) from e
            warnings.warn(
                f"sweep: the executor lost chunk {i} ({type(e).__name__}: {e}); submitting "
                f"it again (attempt {attempt + 1} of {ATTEMPTS}).",
                RuntimeWarning,
                stacklevel=2,
            )
            futures[i] = _submit(executor, job, i, task_of(i), attempt)
    raise AssertionError("unreachable")


def _raise(done: Done, i: int):
    error = done.error
    assert error is not None
    note = f"(raised while computing chunk {i} in an executor's task; its traceback:\n{done.trace})"
    if hasattr(error, "add_note"):
        error.add_note(note)  # type: ignore[attr-defined]
    raise error


def on_executor(
    executor: Any,
    job: ChunkJob,
    todo: list[int],
    task_of: Callable[[int], tuple],
    written: Callable[[int], Chunk] | None,
    explicit_cache: bool = False,
) -> Generator[tuple[int, Chunk], None, None]:
    """Yield (i, chunk) for the chunks `todo` in their order, each computed by one task of
    `executor` (``executor.submit(fn, *args, **kwargs)`` returning a future with
    ``.result()``). All tasks are submitted at once (the executor schedules them); a task
    the executor loses is submitted again, up to :data:`ATTEMPTS` times. With an output
    folder the tasks write their chunks and `written(i)` reads them back here. On any
    exit the tasks not yet finished are cancelled. With `explicit_cache` (a cache folder
    the user asked for), a warning says when the workers cannot use it."""
    futures: dict[int, Any] = {}
    warned = not explicit_cache
    try:
        for i in todo:
            futures[i] = _submit(executor, job, i, task_of(i), 0)
        for i in todo:
            done = _wait(executor, job, i, task_of, futures)
            if done.error is not None:
                _raise(done, i)
            if not (warned or done.cacheable):
                warned = True
                warnings.warn(
                    "sweep: the executor's workers do not store programs in the "
                    "compilation cache: JAX stores only programs without host callbacks, "
                    "and equinox's checks are callbacks unless EQX_ON_ERROR=nan is set in "
                    "the workers' environment (before they import equinox).",
                    RuntimeWarning,
                    stacklevel=2,
                )
            if done.chunk is None:
                assert written is not None  # a task without a folder returns its chunk
                yield i, written(i)
            else:
                yield i, done.chunk
            futures.pop(i)
    except _Lost as e:
        saved = "" if job.out is None else f" The finished chunks are saved in {job.out!r}."
        raise RuntimeError(
            f"{e}.{saved} Run the same sweep again (with a working executor) to compute the rest."
        ) from e.__cause__
    finally:
        for future in futures.values():
            with contextlib.suppress(Exception):
                future.cancel()

r"""Large batched sweeps: chunked, sharded over local devices or handed to a distributed
executor, written to disk chunk by chunk and resumable after an interruption."""

from __future__ import annotations

import contextlib
import os
import re
import sys
import time
from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ._constraints import rows as constraint_rows
from ._field import count_contacts
from ._friction import declares_friction, tangent_dim
from ._latches import num_latches
from ._probe import probe_indexing
from ._results import NAMES, name_of
from ._simulate import _check_ts
from ._sweep_exec import ChunkJob, Layout, fork_safe, on_executor, on_threads
from ._sweep_share import ALL, Share, share
from ._sweep_store import (
    Chunk,
    ChunkStore,
    chunk_file,
    chunk_rows,
    concatenate,
    fingerprint,
    ranges,
    read_chunks,
    read_meta,
    system_signature,
)
from ._system import System, check_state
from ._uk_solvers import check_uk_solver
from ._unrolled import batched_solver


RESULT_NAMES = NAMES
"""Meaning of the integer result codes of a sweep (0 = success): the names of
:class:`ukjax.RESULTS` items."""


class SweepResult(NamedTuple):
    """The outcome of :func:`sweep` (or :func:`load_sweep`).

    - `ts` (T,): save times.
    - `q`, `qd` (B, T, n): trajectories, batch first (`save_final_only`: T = 1, the last
      time).
    - `result` (B,): integer result codes, one per trajectory (0 = success;
      :data:`RESULT_NAMES` names them; :meth:`failures` and :meth:`summary` say which
      failed and why). A failed trajectory's saves from its failure on are NaN.
    - `num_steps` (B,): integrator steps of each trajectory.
    - `ok` (B,): ``result == 0``.
    - `path`: the output folder, or ``None``.
    - `chunks_computed`, `chunks_loaded`: how many chunks this call computed, and how many
      it found already on disk (a resumed sweep).
    - `devices`: the number of devices the batch axis was sharded over.
    - `index` (B,): the trajectory index (row of the sweep's batch) of each row here.
    - `missing`: the chunks of the sweep that are *not* in this result: empty for a whole
      sweep; a worker's own share (``worker=(k, P)``, a SLURM array task) and
      ``load_sweep(..., partial=True)`` name the rest here. :attr:`complete` says which.
    """

    ts: np.ndarray
    q: np.ndarray
    qd: np.ndarray
    result: np.ndarray
    num_steps: np.ndarray
    ok: np.ndarray
    path: str | None
    chunks_computed: int
    chunks_loaded: int
    devices: int
    index: np.ndarray
    missing: tuple[int, ...] = ()

    @property
    def complete(self) -> bool:
        """Whether this result holds every trajectory of the sweep."""
        return not self.missing

    def failures(self) -> dict[str, np.ndarray]:
        """The indices of the failed trajectories, by the name of their result code."""
        codes = np.asarray(self.result)
        names = {c: name_of(int(c)) for c in np.unique(codes)}
        return {names[c]: np.flatnonzero(codes == c) for c in sorted(names) if c != 0}

    def summary(self) -> str:
        """One line: how many trajectories failed, why, and the first indices of each."""
        fails = self.failures()
        part = (
            ""
            if self.complete
            else f" (a partial result: chunks {ranges(self.missing)} are not in it)"
        )
        if not fails:
            return f"all {len(self.result)} trajectories succeeded{part}"
        n = sum(len(v) for v in fails.values())
        parts = [
            f"{len(v)} x {k} (indices {v[:5].tolist()}{' ...' if len(v) > 5 else ''})"
            for k, v in fails.items()
        ]
        return f"{n} of {len(self.result)} trajectories failed{part}: " + "; ".join(parts)


class _Batch(NamedTuple):
    """The validated inputs of a sweep: (B, n) states and per-trajectory field values, as
    host arrays (NumPy's indexing of a chunk costs microseconds where an eager JAX gather
    costs milliseconds)."""

    q0: np.ndarray
    qd0: np.ndarray
    params: dict[str, np.ndarray]

    @property
    def size(self) -> int:
        return self.q0.shape[0]

    def take(self, idx) -> tuple:
        """The rows `idx`."""
        return ({k: v[idx] for k, v in self.params.items()}, self.q0[idx], self.qd0[idx])


def _batch(system, q0, qd0, params) -> _Batch:
    q0, qd0 = jnp.asarray(q0), jnp.asarray(qd0)
    if q0.ndim not in (1, 2) or qd0.ndim not in (1, 2):
        raise ValueError(
            f"sweep: q0 and qd0 must be (B, n) batches or (n,) shared states; got shapes "
            f"{q0.shape} and {qd0.shape}."
        )
    sizes = {a.shape[0] for a in (q0, qd0) if a.ndim == 2}
    checked = {}
    for name, value in sorted((params or {}).items()):
        if not hasattr(system, name):
            raise ValueError(f"sweep: {type(system).__name__} has no field {name!r} to vary.")
        value = jnp.asarray(value)
        if value.ndim == 0:
            raise ValueError(f"sweep: params[{name!r}] needs a leading batch axis; got a scalar.")
        checked[name] = np.asarray(value)
        sizes.add(value.shape[0])
    if len(sizes) != 1:
        raise ValueError(
            "sweep: the batch size is ambiguous: give q0/qd0 as (B, n) and/or params with a "
            f"leading axis of the same length B (got lengths {sorted(sizes)})."
        )
    (B,) = sizes
    n = q0.shape[-1]
    if qd0.shape[-1] != n:
        raise ValueError(f"sweep: q0 and qd0 have different state sizes ({n} and {qd0.shape[-1]}).")
    host = lambda x: np.broadcast_to(np.asarray(x), (B, n))
    return _Batch(host(q0), host(qd0), checked)


class _Plan(NamedTuple):
    """How a batch of B trajectories is cut: chunks of `chunk` = devices x per_device, each
    device's share run as groups of `width`."""

    devices: list
    per_device: int
    width: int
    chunk: int
    n_chunks: int

    def bounds(self, i: int, B: int) -> tuple[int, int]:
        return i * self.chunk, min((i + 1) * self.chunk, B)


def _plan(B: int, chunk_size: int, devices: list, vector_width: int | None, spread: int) -> _Plan:
    """Chunks of at most `chunk_size` trajectories, and at least `spread` chunks when the
    batch allows (one per worker)."""
    if not isinstance(chunk_size, int) or chunk_size < 1:
        raise ValueError(f"sweep: chunk_size must be a positive integer; got {chunk_size!r}.")
    if vector_width is not None and (not isinstance(vector_width, int) or vector_width < 1):
        raise ValueError(
            f"sweep: vector_width must be a positive integer or None; got {vector_width!r}."
        )
    nd = len(devices)
    per_device = -(-min(chunk_size, -(-B // spread)) // nd)
    width = per_device if vector_width is None else min(vector_width, per_device)
    per_device = -(-per_device // width) * width
    chunk = per_device * nd
    return _Plan(devices, per_device, width, chunk, -(-B // chunk))


def _store(out, system, ts, batch: _Batch, plan: _Plan, final_only: bool, kwargs) -> ChunkStore:
    names = sorted(batch.params)
    treedef, leaves = system_signature(system)
    extra = repr(
        [
            type(system).__name__,
            treedef,
            names,
            final_only,
            plan.chunk,
            sorted(kwargs.items(), key=lambda kv: kv[0]),
        ]
    )
    # the same sweep in another process (a worker, a resumed run) has objects at other
    # addresses: reprs such as <function f at 0x7f...> must not change the fingerprint
    extra = re.sub(r"0x[0-9a-fA-F]+", "0x", extra)
    fp = fingerprint(
        ts, batch.q0, batch.qd0, *[batch.params[k] for k in names], *leaves, extra=extra
    )
    meta = {
        "fingerprint": fp,
        "batch": batch.size,
        "chunk_size": plan.chunk,
        "n_chunks": plan.n_chunks,
        "save_final_only": final_only,
        "system": type(system).__name__,
        "params": names,
        "result_names": list(NAMES),
        "ts": np.asarray(ts)[-1:].tolist() if final_only else np.asarray(ts).tolist(),
    }
    return ChunkStore(out, meta)


class _Progress:
    """A one-line progress bar on stderr (redrawn in place on a terminal). It says when
    the first computed chunk is compiling, and its rate and ETA count the chunks after
    that one (whose time is mostly compilation)."""

    def __init__(self, total_chunks, enabled):
        self.total, self.enabled = total_chunks, enabled
        self.start = time.perf_counter()
        self.tty = sys.stderr.isatty()
        self.first: float | None = None  # when the first computed chunk finished
        self.after_first = 0  # trajectories computed since then

    def compiling(self, todo: int) -> None:
        if self.enabled and todo:
            print(
                f"sweep: compiling, then computing {todo} chunk{'s' * (todo > 1)} (the first "
                "chunk includes the compilation)",
                file=sys.stderr,
                flush=True,
            )

    def update(self, done_chunks: int, new_traj: int, loaded: int) -> None:
        if not self.enabled:
            return
        now = time.perf_counter()
        el = now - self.start
        computed = done_chunks - loaded
        if computed == 1 and new_traj:
            self.first, self.after_first = now, 0
        elif computed > 1:
            self.after_first += new_traj
        if self.first is not None and computed > 1:
            since = now - self.first
            rate = f"{self.after_first / since:,.0f} traj/s" if since > 0 else "? traj/s"
            eta = f"{(self.total - done_chunks) * since / (computed - 1):.0f} s"
        else:
            rate, eta = "? traj/s", "?" if done_chunks < self.total else "0 s"
        width = 30
        fill = int(width * done_chunks / self.total)
        line = (
            f"[{'#' * fill}{'.' * (width - fill)}] chunk {done_chunks}/{self.total} "
            f"({loaded} resumed) {rate}, {el:.1f} s elapsed, ETA {eta}"
        )
        end = "" if self.tty and done_chunks < self.total else "\n"
        print(("\r" if self.tty else "") + line, end=end, file=sys.stderr, flush=True)


def _factors_with_lapack(system: System, t, q, qd, simulate_kwargs: dict) -> bool:
    r"""Whether the run's UK solves factor a matrix with LAPACK anywhere in its program:
    the kernels of its `uk_solver` (:class:`ukjax.Regularized`'s by default) for the
    larger of the n coordinates and the rows of the Gram matrix (the bilateral rows, and
    in a run with contacts each contact's normal and tangent rows), in the stages, and in
    a hybrid run (contacts, impulses or latches) also in the code that runs at events
    (:meth:`ukjax.AbstractKernels.at_events`: LAPACK from 3 coordinates by default). A
    sweep of Housner's rocking block (3 coordinates, 2 contacts) on two threads never
    finished while only the stages' kernels were asked (`benchmarks/RESULTS.md`, stop 78)."""
    kernels = check_uk_solver(simulate_kwargs.get("uk_solver")).kernels
    A = jax.eval_shape(lambda q_, qd_: constraint_rows(system, t, q_, qd_)[0], q, qd)
    k = count_contacts(system, t, q) or 0
    d = tangent_dim(system, t, q) if k and declares_friction(system, t, q) else 0
    size = max(q.shape[0], A.shape[0] + k * (1 + d))
    hybrid = bool(k) or num_latches(system, t, q) > 0
    hybrid = hybrid or simulate_kwargs.get("impulses") is not None
    everywhere = [kernels, kernels.at_events()] if hybrid else [kernels]
    return any(used.ops(size).calls_lapack for used in everywhere)


def _cores() -> int:
    """The CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


CPU_CHUNK = 1024  # the default chunk on the CPU backend
# ... and where the program factors with LAPACK: a sweep of 1024 rocking blocks (LAPACK in
# its event code) never finished in chunks of 1024 and ran in chunks of 256 (RESULTS, stop 78)
CPU_LAPACK_CHUNK = 256
ACCELERATOR_CHUNK = 16384  # per device, the default on a GPU/TPU (RESULTS, GPU section)


def _default_chunk(out, devices: list, n_saves: int, n: int, itemsize: int, lapack: bool) -> int:
    """`chunk_size` when none is given: that of the sweep already in `out` (a resumed sweep
    keeps its chunks, whatever the machine); else CPU_CHUNK on the CPU backend, where a
    chunk runs on one core and the cores share the batch (CPU_LAPACK_CHUNK where the
    program factors with LAPACK, `lapack`: :func:`_factors_with_lapack`), and on an accelerator
    ACCELERATOR_CHUNK per device (a GPU runs a chunk's steps in lockstep across the
    batch; one wide chunk keeps it busy where many small ones wait on each step's
    latency), fewer where a chunk's saves would not fit in an eighth of the device's
    memory."""
    if out is not None and os.path.exists(os.path.join(os.fspath(out), "meta.json")):
        return int(read_meta(os.fspath(out))["chunk_size"])
    first = devices[0]
    platform = jax.default_backend() if first is None else first.platform
    if platform == "cpu":
        return CPU_LAPACK_CHUNK if lapack else CPU_CHUNK
    stats = first.memory_stats() if first is not None else None
    limit = (stats or {}).get("bytes_limit", 2**34)
    per_trajectory = 3 * 2 * n_saves * n * itemsize
    fits = max(1, limit // 8 // max(per_trajectory, 1))
    return min(ACCELERATOR_CHUNK, fits) * len(devices)


def _workers(workers: int | None, devices: list, lapack: bool) -> int:
    """How many chunks run at once: `workers`, or by default one per CPU core available
    (per device when the batch is sharded over several host devices) on the CPU backend
    and one elsewhere; one when the UK solve factors with LAPACK (`lapack`,
    :func:`_factors_with_lapack`): two threads running such a program at once never
    finished on XLA:CPU (jaxlib 0.10.2, `benchmarks/RESULTS.md`, stop 76), one runs it."""
    if workers is None:
        cpu = all(d.platform == "cpu" for d in devices)
        if not cpu or lapack:
            return 1
        return max(1, _cores() // len(devices))
    if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
        raise ValueError(f"sweep: workers must be a positive integer or None; got {workers!r}.")
    return workers


def _memory_cap(plan: _Plan, n_saves: int, n: int, itemsize: int) -> int:
    """How many chunks fit at once in a quarter of the machine's memory (2 GiB where it
    cannot be read), counting three copies of a chunk's saved positions and velocities
    (its outputs, the program's save buffers, the host's copy)."""
    per_chunk = 3 * 2 * plan.chunk * n_saves * n * itemsize
    try:
        budget = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 4
    except (AttributeError, ValueError, OSError):
        budget = 2**31
    return max(1, budget // max(per_chunk, 1))


def _distribution(out, executor, worker, workers, devices, compilation_cache) -> None:
    """Refuse combinations of the distribution arguments that cannot mean anything."""
    if worker is not None and out is None:
        raise ValueError(
            "sweep: worker=(k, P) computes a share of the chunks into a folder that the other "
            "workers fill too: give out=FOLDER (shared by all workers), and gather the whole "
            "result with ukjax.load_sweep(FOLDER)."
        )
    if executor is None:
        if compilation_cache is not None:
            raise ValueError(
                "sweep: compilation_cache is set in an executor's worker processes; without "
                "executor= set JAX's own jax_compilation_cache_dir (or the environment "
                "variable JAX_COMPILATION_CACHE_DIR) before the first compilation."
            )
        return
    if not callable(getattr(executor, "submit", None)):
        raise ValueError(
            "sweep: executor must have a submit(fn, *args, **kwargs) method that returns a "
            "future with .result() (concurrent.futures.ProcessPoolExecutor, "
            f"dask.distributed.Client, submitit's executors, ...); got {type(executor).__name__}."
        )
    if workers is not None or devices is not None:
        raise ValueError(
            "sweep: workers= and devices= choose threads and devices of this process; with "
            "executor= the executor's workers compute the chunks (each on its default "
            "device). Drop workers/devices, or drop executor."
        )


def _cache_dir(compilation_cache, out) -> str | None:
    """Where executor tasks keep JAX's persistent compilation cache."""
    if compilation_cache is False:
        return None
    if compilation_cache is None:
        return None if out is None else os.path.join(os.fspath(out), "compilation_cache")
    return os.path.abspath(os.fspath(compilation_cache))


def _announce(mine: list[int], n_chunks: int, part: Share, progress: bool) -> None:
    if progress and part.count > 1:
        print(
            f"sweep: {part}: {len(mine)} of {n_chunks} chunks ({ranges(mine) or 'none'})",
            file=sys.stderr,
            flush=True,
        )


def _written(store: ChunkStore) -> Callable[[int], Chunk]:
    """Read back a chunk a task wrote; an error if this process cannot see it."""

    def read(i: int) -> Chunk:
        chunk = store.load(i)
        if chunk is None:
            raise RuntimeError(
                f"sweep: a worker computed chunk {i}, but {chunk_file(store.path, i)!r} is "
                "not readable from this process. With an executor, out must be a folder that "
                "this process and every worker share (the same path on a shared file system)."
            )
        return chunk

    return read


def _tasks(executor, job: ChunkJob, store, todo, rows, compilation_cache, out):
    """The chunks `todo` computed as tasks of `executor`, written by them into `store`."""
    if store is not None:
        store.create()  # the workers write into the folder: it exists first
        job = job._replace(out=store.path, meta=store.meta)
    job = job._replace(cache=_cache_dir(compilation_cache, out))
    written = _written(store) if store is not None else None
    explicit = compilation_cache is not None and compilation_cache is not False
    return on_executor(executor, job, todo, rows, written, explicit)


def sweep(
    system: System,
    q0,
    qd0,
    ts,
    *,
    params: dict[str, Any] | None = None,
    out: str | None = None,
    chunk_size: int | None = None,
    save_final_only: bool = False,
    devices=None,
    vector_width: int | None = None,
    progress: bool = True,
    on_chunk: Callable[[int, int], None] | None = None,
    workers: int | None = None,
    executor: Any = None,
    worker: tuple[int, int] | None = None,
    compilation_cache: str | bool | None = None,
    **simulate_kwargs,
) -> SweepResult:
    r"""Simulate one system over a large batch of initial conditions and/or parameters.

    The batch is cut into chunks of `chunk_size` trajectories. Each chunk is one call of a
    jitted ``vmap`` of :func:`ukjax.simulate` (compiled once: the last chunk is padded),
    sharded over `devices` along the batch axis with :mod:`jax.sharding`, and, when `out`
    is given, written to ``out/chunk_XXXXXX.npz`` as soon as it finishes (atomically: a
    temporary file is renamed). Calling :func:`sweep` again with the same arguments and
    `out` loads the finished chunks and computes only the missing ones, so a sweep that
    was killed resumes where it stopped. ``out/meta.json`` holds a fingerprint of the
    inputs; a folder that holds a different sweep is refused.

    **On a cluster: an executor.** With ``executor=EX`` (anything with
    ``EX.submit(fn, *args, **kwargs)`` returning a future with ``.result()``: a
    ``concurrent.futures.ProcessPoolExecutor``, a ``dask.distributed.Client``, submitit's
    executors, a thin wrapper around Ray), each chunk is one task. The task computes the
    chunk in the worker's process, on its default device, with the same program as a
    sweep without an executor (results are bitwise equal) and, with `out` (a folder all
    workers and this process share), writes the chunk file itself; this process reads it
    back. A task the executor loses (a worker died, a connection dropped) is submitted
    again, up to 3 times; nothing already written is lost, and a sweep that still cannot
    finish says so and resumes when run again. Each worker process compiles the program
    once and keeps it for its later tasks; with `out`, tasks also use JAX's persistent
    compilation cache in ``out/compilation_cache`` (or `compilation_cache`) where the
    workers run with ``EQX_ON_ERROR=nan``, so that a worker started later (or a
    restarted one) loads the program instead of compiling it.

    **Workers without a coordinator.** With ``worker=(k, P)`` (or, when `worker` is not
    given, in a SLURM job array: ``SLURM_ARRAY_TASK_ID`` and ``SLURM_ARRAY_TASK_COUNT`` in
    the environment; or under ``jax.distributed``, process k of P), a call with `out`
    computes only the chunks ``i`` with ``i % P == k`` (skipping those already on disk),
    and returns its own share: a :class:`SweepResult` whose ``missing`` names the other
    chunks (``complete`` is false). :func:`load_sweep` reads the whole sweep once every
    worker is done, and names the missing chunks until then; :func:`sweep_status` (``ukjax
    sweep status OUT``) lists done, missing and damaged chunks. Any worker may be run
    again: it computes only what is missing from its share. Without `out`, every call
    computes the whole sweep.

    **Compilation.** One program per system structure (its type, field shapes and static
    fields, `params` names), save count and options: the system's values and the save
    times are arguments, so a loop of sweeps over other values compiles once (JAX's own
    jit cache; ukjax keeps none).

    **Arguments:**

    - `system`: a :class:`ukjax.System`, shared by the batch except for `params`.
    - `q0`, `qd0`: (B, n) initial states, or (n,) shared by all.
    - `ts`: (T,) save times.
    - `params`: optional ``{field_name: array (B, ...)}``: per-trajectory values of
      system fields (e.g. ``{"length": lengths}``).
    - `out`: folder for the chunk files (``None``: keep everything in memory).
    - `chunk_size`: trajectories per chunk at most (rounded up to a multiple of the device
      count). Default: that of the sweep already in `out`, else 1024 on the CPU backend
      (256 where the run's UK solves factor with LAPACK: more than 8 coordinates or
      constraint rows, or a hybrid run of 3 or more coordinates, whose event code does;
      in chunks of 1024 such a batch could wait forever on XLA:CPU) and 16384 per device
      on a GPU or TPU (fewer where a chunk's saves would take more than an
      eighth of its memory): a GPU advances a chunk's trajectories in lockstep, and many
      small chunks leave it waiting on each step's latency (``benchmarks/RESULTS.md``, GPU
      section). Give it explicitly when workers on different kinds of machine share one
      `out`. A vmapped chunk steps in lockstep until its slowest member is done, so a
      batch in grid order (neighbours alike) wastes less in chunks than in one wide call
      (``benchmarks/RESULTS.md``, sweep section). In memory (no `out`, no `executor`), a
      batch of fewer than `workers` x `chunk_size` trajectories is cut into `workers`
      equal chunks, so that every core has one; otherwise the chunks are `chunk_size`
      whatever the machine (the folder's chunks must match when a sweep resumes, possibly
      elsewhere).
    - `save_final_only`: keep only the last state of each trajectory (`q`, `qd` of shape
      (B, 1, n)) instead of all of `ts`.
    - `devices`: devices to shard over; default all local devices of the default backend.
    - `vector_width`: how many trajectories each device advances together (one ``vmap``);
      a device's share of a chunk is run as a loop over groups of this size, and the chunk
      size is rounded up to a multiple of devices x width. ``None`` (default): the whole
      share at once, i.e. the same program as a plain ``jax.vmap`` of :func:`simulate`.
    - `progress`: print a progress line on stderr.
    - `on_chunk`: called as ``on_chunk(i, n_chunks)`` after chunk ``i`` is finished and
      saved (in the order of ``i``).
    - `workers`: how many chunks run at once, each on its own thread of this process.
      ``None`` (default): on the CPU backend one per core this process may use (divided by
      the number of devices the batch is sharded over), elsewhere 1; also 1 for a run
      whose UK solves factor with LAPACK (matrices of more than 8 rows, M or the Gram
      matrix, or the event code of a hybrid run of 3 or more coordinates), which XLA:CPU
      (jaxlib 0.10.2) was seen never to finish when two threads ran it at once
      (``benchmarks/RESULTS.md``, stops 76 and 78). XLA:CPU runs such a
      program on the thread that calls it, on one core, so a plain ``vmap`` of
      :func:`simulate` uses one core however wide it is. The default runs no more chunks
      at once than fit in a quarter of the machine's memory (three copies of a chunk's
      saves each). Results, files and `on_chunk` calls are handled in chunk order on the
      calling thread; an error in one chunk is raised when its turn comes, after the
      chunks before it are saved.
    - `executor`: compute each chunk as a task of this executor (above); not with
      `workers` or `devices`. An error raised inside a task (a bad system, a trace-time
      error) is raised here with the task's traceback attached.
    - `worker`: ``(k, P)``: compute only this worker's share of the chunks (above); needs
      `out`. ``None`` (default): from the SLURM array variables or ``jax.distributed``
      when present, else every chunk.
    - `compilation_cache`: folder for JAX's persistent compilation cache in the
      executor's worker processes (set there at a task's start when that process has
      none and has not compiled yet; JAX reads it once per process). ``None`` (default):
      ``out/compilation_cache`` when `out` is given; ``False``: none. JAX stores only
      programs without host callbacks: set ``EQX_ON_ERROR=nan`` in the workers'
      environment (equinox's checks are callbacks otherwise; a sweep with ``throw=False``
      needs none of them, its save times are checked here). For `worker` and SLURM runs,
      set ``JAX_COMPILATION_CACHE_DIR`` and ``EQX_ON_ERROR=nan`` in the job's
      environment.
    - `simulate_kwargs`: passed to :func:`ukjax.simulate` (solver, rtol, atol, ...);
      ``throw`` defaults to ``False`` so that one failed trajectory does not stop a sweep:
      check ``result.ok``. An explicit Runge-Kutta `solver` of at most 7 stages
      (`Dopri5`, `Tsit5`, `Bosh3`, `RK4`, ...) is run as :class:`ukjax.Unrolled` (the same
      method, its stages written out); a longer one (the default `Dopri8`, 14 stages) as
      :class:`ukjax.StageLoop` (its stages in a loop of sums); the saves of `Dopri8` and
      `Tsit5` are formed once per step (:mod:`ukjax._dense`).

    Example:
        >>> import jax, jax.numpy as jnp, ukjax
        >>> from ukjax.systems import SimplePendulum
        >>> theta0 = jnp.linspace(0.1, 3.0, 8)[:, None]
        >>> res = ukjax.sweep(SimplePendulum(), theta0, jnp.zeros_like(theta0),
        ...                   jnp.linspace(0.0, 1.0, 5), chunk_size=4, progress=False)
        >>> res.q.shape, bool(res.ok.all()), res.complete
        ((8, 5, 1), True, True)

        On a process pool (a Dask ``Client`` is used the same way):

        >>> import concurrent.futures, multiprocessing, tempfile
        >>> spawn = multiprocessing.get_context("spawn")
        >>> with concurrent.futures.ProcessPoolExecutor(2, mp_context=spawn) as pool:
        ...     far = ukjax.sweep(SimplePendulum(), theta0, jnp.zeros_like(theta0),
        ...                       jnp.linspace(0.0, 1.0, 5), chunk_size=4, progress=False,
        ...                       out=tempfile.mkdtemp(), executor=pool)
        >>> bool((far.q == res.q).all())
        True
    """
    _distribution(out, executor, worker, workers, devices, compilation_cache)
    batch = _batch(system, q0, qd0, params)
    q_first, qd_first = check_state(batch.q0[0], batch.qd0[0], system)
    ts = _check_ts(ts, q_first.dtype)
    probe_indexing(system, ts[0], q_first, qd_first)
    B = batch.size
    if executor is not None:  # each task runs on its worker's default device
        devices = [None]
    devices = list(jax.local_devices() if devices is None else devices)
    lapack = _factors_with_lapack(system, ts[0], q_first, qd_first, simulate_kwargs)
    n_workers = 1 if executor is not None else _workers(workers, devices, lapack)
    # in memory, a small batch is cut so that every worker has a chunk; with `out`, the
    # chunks are `chunk_size` whatever the machine (a sweep resumes on another one)
    spread = n_workers if out is None and executor is None else 1
    if chunk_size is None:
        n_saves = 1 if save_final_only else ts.shape[0]
        n, size = q_first.shape[0], q_first.itemsize
        chunk_size = _default_chunk(out, devices, n_saves, n, size, lapack)
    plan = _plan(B, chunk_size, devices, vector_width, spread)
    simulate_kwargs.setdefault("throw", False)
    layout = Layout(len(plan.devices), plan.per_device, plan.width, save_final_only)
    store = (
        None
        if out is None
        else _store(out, system, ts, batch, plan, save_final_only, simulate_kwargs)
    )
    solver = batched_solver(simulate_kwargs.get("solver"), lapack)
    run_kwargs = dict(simulate_kwargs, solver=solver)
    job = ChunkJob.create(system, ts, layout, run_kwargs)
    part = share(worker) if store is not None else ALL
    mine = part.chunks(plan.n_chunks)
    _announce(mine, plan.n_chunks, part, progress)
    results: dict[int, Chunk] = {}
    bar = _Progress(len(mine), progress)
    todo = []
    for i in mine:
        chunk = None if store is None else store.load(i)
        if chunk is None:
            todo.append(i)
            continue
        results[i] = chunk
        bar.update(len(results), 0, len(results))

    def rows(i: int) -> tuple[tuple, int]:
        """Chunk i's rows, padded with the last trajectory, and how many are real."""
        lo, hi = plan.bounds(i, B)
        return batch.take(np.minimum(np.arange(lo, lo + plan.chunk), B - 1)), hi - lo

    loaded = len(results)
    bar.compiling(len(todo))
    with contextlib.ExitStack() as stack:
        if executor is None:
            if workers is None:  # the default never runs more chunks at once than fit
                n = batch.q0.shape[-1]
                n_workers = min(n_workers, _memory_cap(plan, ts.shape[0], n, ts.dtype.itemsize))
            compute = lambda i: job.compute(*rows(i), plan.devices)
            chunks = on_threads(compute, todo, min(n_workers, len(todo)))
        else:
            executor = stack.enter_context(fork_safe(executor))
            chunks = _tasks(executor, job, store, todo, rows, compilation_cache, out)
        for i, chunk in stack.enter_context(contextlib.closing(chunks)):
            # trace-time errors surface with the first chunk, before anything is written
            results[i] = chunk
            if store is not None and executor is None:
                store.create()  # idempotent: meta.json is written once
                store.save(i, chunk)
            lo, hi = plan.bounds(i, B)
            bar.update(len(results), hi - lo, loaded)
            if on_chunk is not None:
                on_chunk(i, plan.n_chunks)
    ts_out = np.asarray(ts)[-1:] if save_final_only else np.asarray(ts)
    res = (
        concatenate([results[i] for i in mine])
        if mine
        else _empty(ts_out.shape[0], batch.q0.shape[-1], batch.q0.dtype)
    )
    index = np.concatenate([np.arange(*plan.bounds(i, B)) for i in mine] or [np.zeros(0, int)])
    out_ = SweepResult(
        ts_out,
        *res,
        res.result == 0,
        None if store is None else store.path,
        len(todo),
        loaded,
        1 if executor is not None else len(plan.devices),
        index,
        tuple(sorted(set(range(plan.n_chunks)) - set(mine))),
    )
    if progress and not out_.ok.all():
        print(f"sweep: {out_.summary()}", file=sys.stderr, flush=True)
    if progress and not out_.complete:
        print(
            f"sweep: {part} done; ukjax.load_sweep({out_.path!r}) reads the whole sweep once "
            "every worker has finished.",
            file=sys.stderr,
            flush=True,
        )
    return out_


def _empty(T: int, n: int, dtype) -> Chunk:
    """The arrays of no trajectories (a worker whose share is empty, a folder with no
    chunk yet)."""
    states = np.zeros((0, T, n), dtype)
    return Chunk(states, states.copy(), np.zeros(0, np.int32), np.zeros(0, np.int32))


class IncompleteSweepError(FileNotFoundError):
    """A sweep folder without all its chunks: `missing` and `damaged` list the chunk
    indices (run the same sweep again, or the workers that own them, to compute them)."""

    def __init__(self, message: str, missing: list[int], damaged: list[int]):
        super().__init__(message)
        self.missing = missing
        self.damaged = damaged


def load_sweep(path: str, *, partial: bool = False) -> SweepResult:
    """Load a sweep written by :func:`sweep` (all chunks, from every worker or host).

    If chunks are missing or damaged (unreadable, of the wrong shape, or not matching
    their recorded checksum), raises :class:`IncompleteSweepError` (a
    ``FileNotFoundError``) whose message and ``missing``/``damaged`` attributes list their
    indices; with ``partial=True`` returns the chunks that are there instead, as a
    :class:`SweepResult` whose ``index`` gives each row's trajectory and ``missing`` the
    chunks not in it. An error names the folder if its ``meta.json`` is missing or
    broken.

    Example:
        >>> import jax.numpy as jnp, ukjax, tempfile
        >>> from ukjax.systems import SimplePendulum
        >>> out = tempfile.mkdtemp()
        >>> _ = ukjax.sweep(SimplePendulum(), jnp.ones((4, 1)), jnp.zeros((4, 1)),
        ...                 jnp.linspace(0.0, 1.0, 3), out=out, chunk_size=2, progress=False)
        >>> ukjax.load_sweep(out).q.shape
        (4, 3, 1)
    """
    meta = read_meta(path)
    n_chunks = meta["n_chunks"]
    present, missing, damaged = {}, [], {}
    for i, chunk, problem in read_chunks(path, meta):
        if chunk is not None:
            present[i] = chunk
        elif problem is None:
            missing.append(i)
        else:
            damaged[i] = problem
    if (missing or damaged) and not partial:
        first = f" (first: {next(iter(damaged.values()))})" if damaged else ""
        raise IncompleteSweepError(
            f"load_sweep: {len(missing) + len(damaged)} of {n_chunks} chunks in {path!r} are "
            f"not there: missing {ranges(missing) or 'none'}; damaged "
            f"{ranges(damaged) or 'none'}{first}. Run the same sweep "
            "again (same arguments and out folder; for worker=(k, P) runs, the workers "
            "that own them: chunk i belongs to worker i % P) to compute them, or pass "
            "partial=True for the chunks that are there.",
            missing,
            sorted(damaged),
        )
    ts = np.asarray(meta["ts"])
    size = meta["chunk_size"]
    index = [np.arange(i * size, i * size + chunk_rows(meta, i)) for i in present]
    res = concatenate(list(present.values())) if present else _empty(ts.shape[0], 0, float)
    return SweepResult(
        ts,
        *res,
        res.result == 0,
        path,
        0,
        len(present),
        0,
        np.concatenate(index) if index else np.zeros(0, int),
        tuple(sorted([*missing, *damaged])),
    )

r"""Large batched sweeps: chunked, sharded over local devices, written to disk chunk by chunk
and resumable after an interruption."""

from __future__ import annotations

import contextlib
import itertools
import os
import sys
import time
from collections import deque
from collections.abc import Callable, Generator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ._probe import probe_indexing
from ._results import NAMES, code_of
from ._simulate import _check_ts, simulate
from ._sweep_store import (
    Chunk,
    ChunkStore,
    DamagedChunk,
    chunk_rows,
    concatenate,
    fingerprint,
    load_chunk,
    read_meta,
    system_signature,
)
from ._system import System, check_state, floatify
from ._unrolled import batched_solver
from ._xla import jit


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

    def failures(self) -> dict[str, np.ndarray]:
        """The indices of the failed trajectories, by the name of their result code."""
        codes = np.asarray(self.result)
        names = {c: NAMES[c] if 0 <= c < len(NAMES) else f"code {c}" for c in np.unique(codes)}
        return {names[c]: np.flatnonzero(codes == c) for c in sorted(names) if c != 0}

    def summary(self) -> str:
        """One line: how many trajectories failed, why, and the first indices of each."""
        fails = self.failures()
        if not fails:
            return f"all {len(self.result)} trajectories succeeded"
        n = sum(len(v) for v in fails.values())
        parts = [
            f"{len(v)} x {k} (indices {v[:5].tolist()}{' ...' if len(v) > 5 else ''})"
            for k, v in fails.items()
        ]
        return f"{n} of {len(self.result)} trajectories failed: " + "; ".join(parts)


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

    def mine(self) -> list[int]:
        """The chunks this process computes (process k of P: i % P == k)."""
        pid, nproc = jax.process_index(), jax.process_count()
        return [i for i in range(self.n_chunks) if i % nproc == pid]


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


class _Layout(NamedTuple):
    """The static shape of one chunk's program: `devices` x `per_device` trajectories, each
    device's share run as groups of `width`; `final_only` keeps the last save only."""

    devices: int
    per_device: int
    width: int
    final_only: bool


def _chunk(system: System, ts, params, q0, qd0, layout: _Layout, kwargs):
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


def _program(system: System, ts, layout: _Layout, kwargs) -> Callable:
    """The compiled chunk program for this sweep, as a function of (params, q0, qd0): one
    program per system structure, taking the system's values and `ts` as arguments, so
    a loop of sweeps over other values compiles once (JAX's own jit cache; ukjax keeps
    no cache of its own). Baking the values in as constants runs faster but needs a
    compilation per set of values (`benchmarks/RESULTS.md`, sweep, stop 36)."""
    dynamic = floatify(system)
    return lambda p, a, b: _run_chunk(dynamic, ts, p, a, b, layout, kwargs)


def _sharding(plan: _Plan):
    mesh = jax.sharding.Mesh(np.array(plan.devices), ("batch",))
    return jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("batch"))


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
    """A one-line progress bar on stderr (redrawn in place on a terminal)."""

    def __init__(self, total_chunks, enabled):
        self.total, self.enabled = total_chunks, enabled
        self.start = time.perf_counter()
        self.done_traj = 0
        self.tty = sys.stderr.isatty()

    def update(self, done_chunks, new_traj, loaded):
        if not self.enabled:
            return
        self.done_traj += new_traj
        el = time.perf_counter() - self.start
        rate = self.done_traj / el if el > 0 and self.done_traj else 0.0
        left = self.total - done_chunks
        eta = f"{left * (el / max(done_chunks - loaded, 1)):.0f} s" if done_chunks > loaded else "?"
        width = 30
        fill = int(width * done_chunks / self.total)
        line = (
            f"[{'#' * fill}{'.' * (width - fill)}] chunk {done_chunks}/{self.total} "
            f"({loaded} resumed) {rate:,.0f} traj/s, {el:.1f} s elapsed, ETA {eta}"
        )
        end = "" if self.tty and done_chunks < self.total else "\n"
        print(("\r" if self.tty else "") + line, end=end, file=sys.stderr, flush=True)


def _cores() -> int:
    """The CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _workers(workers: int | None, devices: list) -> int:
    """How many chunks run at once: `workers`, or by default one per CPU core available
    (per device when the batch is sharded over several host devices) on the CPU backend
    and one elsewhere."""
    if workers is None:
        cpu = all(d.platform == "cpu" for d in devices)
        return max(1, _cores() // len(devices)) if cpu else 1
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


def _in_order(
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


def sweep(
    system: System,
    q0,
    qd0,
    ts,
    *,
    params: dict[str, Any] | None = None,
    out: str | None = None,
    chunk_size: int = 1024,
    save_final_only: bool = False,
    devices=None,
    vector_width: int | None = None,
    progress: bool = True,
    on_chunk: Callable[[int, int], None] | None = None,
    workers: int | None = None,
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

    **Several hosts.** Start every process with ``jax.distributed.initialize(...)``, give
    them a shared `out` folder and the same arguments: process ``k`` of ``P`` computes the
    chunks ``i`` with ``i % P == k`` on its local devices. Each returns when its own
    chunks are done; :func:`load_sweep` gathers the whole result once all have finished.

    **Compilation.** The first sweep of a system type (with its field shapes, `params`
    names, save count and options) compiles a program in which the system's other values
    and `ts` are constants, as in a ``jax.jit`` of a ``vmap`` that closes over them (XLA
    folds them: up to 1.2x faster, measured on a forced oscillator). A later sweep with
    the same values (another batch, a resumed sweep) reuses it. Once other values of the
    same structure are swept, that structure switches to one program that takes the values
    and `ts` as arguments, compiled once and reused by every later sweep: a loop of sweeps
    over a parameter compiles at most twice. Values that vary within a sweep belong in
    `params` (always arguments).

    **Arguments:**

    - `system`: a :class:`ukjax.System`, shared by the batch except for `params`.
    - `q0`, `qd0`: (B, n) initial states, or (n,) shared by all.
    - `ts`: (T,) save times.
    - `params`: optional ``{field_name: array (B, ...)}``: per-trajectory values of
      system fields (e.g. ``{"length": lengths}``).
    - `out`: folder for the chunk files (``None``: keep everything in memory).
    - `chunk_size`: trajectories per chunk at most (rounded up to a multiple of the device
      count). A vmapped chunk steps in lockstep until its slowest member is done, so a
      batch in grid order (neighbours alike) wastes less in chunks than in one wide call:
      1.5x less time for a 4096 double-rod grid in chunks of 1024; shuffled, that batch
      gained nothing (2.51 s in one call, 2.48 s in chunks of 256; `benchmarks/RESULTS.md`,
      sweep section). In memory (no `out`), a batch of fewer than `workers` x
      `chunk_size` trajectories is cut into `workers` equal chunks, so that every core
      has one; with `out` the chunks are `chunk_size` whatever the machine (the folder's
      chunks must match when a sweep resumes, possibly elsewhere).
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
    - `workers`: how many chunks run at once, each on its own thread. ``None`` (default):
      on the CPU backend one per core this process may use (divided by the number of
      devices the batch is sharded over), elsewhere 1. XLA:CPU runs such a program on the
      thread that calls it, on one core, so a plain ``vmap`` of :func:`simulate` uses one
      core however wide it is; on the 2-core test box two chunks on two threads ran a
      4096-member Duffing batch in 0.40 s against 0.68 s for one ``jax.jit(jax.vmap(...))``
      (``benchmarks/RESULTS.md``, sweep section). The default runs no more chunks at once
      than fit in a quarter of the machine's memory (three copies of a chunk's saves
      each). Results, files and `on_chunk` calls are handled in chunk order on the calling
      thread; an error in one chunk is raised when its turn comes, after the chunks before
      it are saved.
    - `simulate_kwargs`: passed to :func:`ukjax.simulate` (solver, rtol, atol, ...);
      ``throw`` defaults to ``False`` so that one failed trajectory does not stop a sweep:
      check ``result.ok``. An explicit Runge-Kutta `solver` of at most 7 stages
      (`Dopri5`, `Tsit5`, `Bosh3`, `RK4`, ...) is run as :class:`ukjax.Unrolled` (the same
      method, its stages written out: 1.4-1.9x faster batched); a longer one (the default
      `Dopri8`, 14 stages) as :class:`ukjax.StageLoop` (its stages in a loop of sums:
      1.2-2.2x faster than diffrax's loop batched, compiled as fast); the saves of
      `Dopri8` and `Tsit5` are formed once per step (:mod:`ukjax._dense`).

    Example:
        >>> import jax, jax.numpy as jnp, ukjax
        >>> from ukjax.systems import SimplePendulum
        >>> theta0 = jnp.linspace(0.1, 3.0, 8)[:, None]
        >>> res = ukjax.sweep(SimplePendulum(), theta0, jnp.zeros_like(theta0),
        ...                   jnp.linspace(0.0, 1.0, 5), chunk_size=4, progress=False)
        >>> res.q.shape, bool(res.ok.all())
        ((8, 5, 1), True)
    """
    batch = _batch(system, q0, qd0, params)
    q_first, qd_first = check_state(batch.q0[0], batch.qd0[0], system)
    ts = _check_ts(ts, q_first.dtype)
    probe_indexing(system, ts[0], q_first, qd_first)
    B = batch.size
    devices = list(jax.local_devices() if devices is None else devices)
    n_workers = _workers(workers, devices)
    # in memory, a small batch is cut so that every worker has a chunk; with `out`, the
    # chunks are `chunk_size` whatever the machine (a sweep resumes on another one)
    plan = _plan(B, chunk_size, devices, vector_width, n_workers if out is None else 1)
    simulate_kwargs.setdefault("throw", False)
    layout = _Layout(len(plan.devices), plan.per_device, plan.width, save_final_only)
    sharding = _sharding(plan)
    store = (
        None
        if out is None
        else _store(out, system, ts, batch, plan, save_final_only, simulate_kwargs)
    )
    run_kwargs = dict(simulate_kwargs, solver=batched_solver(simulate_kwargs.get("solver")))
    program = _program(system, ts, layout, run_kwargs)
    mine = plan.mine()
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

    def compute(i: int) -> Chunk:
        lo, hi = plan.bounds(i, B)
        idx = np.minimum(np.arange(lo, lo + plan.chunk), B - 1)  # pad with the last one
        p, a, b = jax.device_put(batch.take(idx), sharding)
        outs = jax.device_get(program(p, a, b))
        return Chunk(*(np.asarray(x[: hi - lo]) for x in outs))

    loaded = len(results)
    if workers is None:  # the default never runs more chunks at once than memory holds
        n = batch.q0.shape[-1]
        n_workers = min(n_workers, _memory_cap(plan, ts.shape[0], n, ts.dtype.itemsize))
    with contextlib.closing(_in_order(compute, todo, min(n_workers, len(todo)))) as chunks:
        for i, chunk in chunks:
            # trace-time errors surface with the first chunk, before anything is written
            results[i] = chunk
            if store is not None:
                store.create()  # idempotent: meta.json is written once
                store.save(i, chunk)
            lo, hi = plan.bounds(i, B)
            bar.update(len(results), hi - lo, loaded)
            if on_chunk is not None:
                on_chunk(i, plan.n_chunks)
    computed = len(todo)
    res = concatenate([results[i] for i in mine])
    ts_out = np.asarray(ts)[-1:] if save_final_only else np.asarray(ts)
    out_ = SweepResult(
        ts_out,
        *res,
        res.result == 0,
        None if store is None else store.path,
        computed,
        loaded,
        len(plan.devices),
    )
    if progress and not out_.ok.all():
        print(f"sweep: {out_.summary()}", file=sys.stderr, flush=True)
    return out_


def load_sweep(path: str) -> SweepResult:
    """Load a finished sweep written by :func:`sweep` (all chunks, from every host).

    Raises ``FileNotFoundError`` naming the chunks that are missing or damaged (unreadable,
    of the wrong shape, or not matching their recorded checksum) if the sweep is
    incomplete, and an error naming the folder if its ``meta.json`` is missing or broken.

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
    chunks, problems = [], []
    for i in range(n_chunks):
        try:
            chunks.append(load_chunk(path, i, chunk_rows(meta, i)))
        except DamagedChunk as e:
            problems.append(str(e))
    if problems:
        raise FileNotFoundError(
            f"load_sweep: {len(problems)} of {n_chunks} chunks in {path!r} are missing or "
            f"damaged ({'; '.join(problems[:3])}{' ...' if len(problems) > 3 else ''}); run "
            "the same sweep again (same arguments and out folder) to compute them."
        )
    res = concatenate(chunks)
    return SweepResult(np.asarray(meta["ts"]), *res, res.result == 0, path, 0, n_chunks, 0)

r"""Large batched sweeps: chunked, sharded over local devices, written to disk chunk by chunk
and resumable after an interruption."""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from typing import Any, Callable, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ._simulate import simulate
from ._system import System


class SweepResult(NamedTuple):
    """The outcome of :func:`sweep` (or :func:`load_sweep`).

    - `ts` (T,): save times.
    - `q`, `qd` (B, T, n): trajectories, batch first (``save="final"``: T = 1, the last time).
    - `result` (B,): diffrax ``RESULTS`` codes as integers (0 = success).
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


def _fingerprint(*arrays, extra: str) -> str:
    h = hashlib.sha256(extra.encode())
    for a in arrays:
        a = np.asarray(a)
        h.update(str((a.shape, a.dtype.str)).encode())
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()[:32]


def _system_signature(system) -> tuple[str, list[np.ndarray]]:
    leaves, treedef = jax.tree_util.tree_flatten(eqx.filter(system, eqx.is_array_like))
    return str(treedef), [np.asarray(x) for x in leaves]


def _chunk_file(path, i):
    return os.path.join(path, f"chunk_{i:06d}.npz")


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
        line = (f"[{'#' * fill}{'.' * (width - fill)}] chunk {done_chunks}/{self.total} "
                f"({loaded} resumed) {rate:,.0f} traj/s, {el:.1f} s elapsed, ETA {eta}")
        end = "" if self.tty and done_chunks < self.total else "\n"
        print(("\r" if self.tty else "") + line, end=end, file=sys.stderr, flush=True)


def sweep(
    system: System,
    q0,
    qd0,
    ts,
    *,
    params: dict[str, Any] | None = None,
    out: str | None = None,
    chunk_size: int = 1024,
    save: str = "trajectory",
    devices=None,
    vector_width: int | None | str = "auto",
    progress: bool = True,
    on_chunk: Callable[[int, int], None] | None = None,
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

    **Arguments:**

    - `system`: a :class:`ukjax.System`, shared by the batch except for `params`.
    - `q0`, `qd0`: (B, n) initial states, or (n,) shared by all.
    - `ts`: (T,) save times.
    - `params`: optional ``{field_name: array (B, ...)}``: per-trajectory values of
      system fields (e.g. ``{"length": lengths}``).
    - `out`: folder for the chunk files (``None``: keep everything in memory).
    - `chunk_size`: trajectories per chunk (rounded up to a multiple of the device count).
    - `save`: ``"trajectory"`` (all of `ts`) or ``"final"`` (only the last state: B x n).
    - `devices`: devices to shard over; default all local devices of the default backend.
    - `vector_width`: how many trajectories each device advances together (one ``vmap``);
      a device's share of a chunk is run as a loop over groups of this size. ``"auto"``
      (default): 128 on CPU, where wider groups fall out of cache and slow down (measured
      by `benchmarks/sweep.py`: 1.7x fewer trajectories/s at 1024 than at 128 for the
      double rod pendulum), and the whole share at once on GPU/TPU. ``None``: the whole
      share at once. The chunk size is rounded up to a multiple of devices x width.
    - `progress`: print a progress line on stderr.
    - `on_chunk`: called as ``on_chunk(i, n_chunks)`` after chunk ``i`` is finished and
      saved.
    - `simulate_kwargs`: passed to :func:`ukjax.simulate` (solver, rtol, atol, ...);
      ``throw`` defaults to ``False`` so that one failed trajectory does not stop a sweep:
      check ``result.ok``.

    Example:
        >>> import jax, jax.numpy as jnp, ukjax
        >>> from ukjax.systems import SimplePendulum
        >>> theta0 = jnp.linspace(0.1, 3.0, 8)[:, None]
        >>> res = ukjax.sweep(SimplePendulum(), theta0, jnp.zeros_like(theta0),
        ...                   jnp.linspace(0.0, 1.0, 5), chunk_size=4, progress=False)
        >>> res.q.shape, bool(res.ok.all())
        ((8, 5, 1), True)
    """
    if save not in ("trajectory", "final"):
        raise ValueError(f"sweep: save must be 'trajectory' or 'final'; got {save!r}.")
    if chunk_size < 1:
        raise ValueError(f"sweep: chunk_size must be a positive integer; got {chunk_size}.")
    params = dict(params or {})
    q0, qd0, ts = jnp.asarray(q0), jnp.asarray(qd0), jnp.asarray(ts)
    if q0.ndim not in (1, 2) or qd0.ndim not in (1, 2):
        raise ValueError(
            f"sweep: q0 and qd0 must be (B, n) batches or (n,) shared states; got shapes "
            f"{q0.shape} and {qd0.shape}."
        )
    sizes = {a.shape[0] for a in (q0, qd0) if a.ndim == 2}
    for name, value in params.items():
        if not hasattr(system, name):
            raise ValueError(f"sweep: {type(system).__name__} has no field {name!r} to vary.")
        value = jnp.asarray(value)
        if value.ndim == 0:
            raise ValueError(f"sweep: params[{name!r}] needs a leading batch axis; got a scalar.")
        params[name] = value
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
    q0 = jnp.broadcast_to(q0, (B, n))
    qd0 = jnp.broadcast_to(qd0, (B, n))
    simulate_kwargs.setdefault("throw", False)

    devices = list(jax.local_devices() if devices is None else devices)
    nd = len(devices)
    per_device = -(-min(chunk_size, B) // nd)
    if vector_width == "auto":
        vector_width = 128 if devices[0].platform == "cpu" else None
    if vector_width is not None and (not isinstance(vector_width, int) or vector_width < 1):
        raise ValueError(
            f"sweep: vector_width must be a positive integer, None or 'auto'; got {vector_width!r}."
        )
    width = per_device if vector_width is None else min(vector_width, per_device)
    per_device = -(-per_device // width) * width
    chunk = per_device * nd
    n_chunks = -(-B // chunk)
    names = sorted(params)

    def one(p, a, b):
        s = system
        if names:
            s = eqx.tree_at(lambda s_: [getattr(s_, k) for k in names], system, [p[k] for k in names])
        sol = simulate(s, a, b, ts, **simulate_kwargs)
        q, qd = (sol.q[-1:], sol.qd[-1:]) if save == "final" else (sol.q, sol.qd)
        return q, qd, sol.result._value, sol.stats["num_steps"]

    def run_chunk(*args):
        # (chunk, ...) -> (devices, per_device, ...): vmap over the sharded device axis; each
        # device's share is a loop over groups of `width` (lax.map vmaps within a group).
        split = lambda x: x.reshape((nd, per_device) + x.shape[1:])
        per_dev = lambda *xs: jax.lax.map(lambda ys: one(*ys), xs, batch_size=width)
        out = jax.vmap(per_dev)(*jax.tree_util.tree_map(split, args))
        return jax.tree_util.tree_map(lambda y: y.reshape((chunk,) + y.shape[2:]), out)

    run = jax.jit(run_chunk)
    mesh = jax.sharding.Mesh(np.array(devices), ("batch",))
    batch_sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("batch"))

    path = None
    if out is not None:
        path = os.fspath(out)
        treedef, leaves = _system_signature(system)
        extra = json.dumps([type(system).__name__, treedef, names, save, chunk,
                            repr(sorted(simulate_kwargs.items(), key=lambda kv: kv[0]))])
        fp = _fingerprint(ts, q0, qd0, *[params[k] for k in names], *leaves, extra=extra)
        meta = {"fingerprint": fp, "batch": B, "chunk_size": chunk, "n_chunks": n_chunks,
                "save": save, "system": type(system).__name__, "params": names,
                "ts": np.asarray(ts).tolist() if save == "trajectory" else [float(ts[-1])]}
        os.makedirs(path, exist_ok=True)
        meta_file = os.path.join(path, "meta.json")
        if os.path.exists(meta_file):
            with open(meta_file) as f:
                old = json.load(f)
            if old.get("fingerprint") != fp:
                raise ValueError(
                    f"sweep: {path!r} holds the chunks of a different sweep (other inputs, system "
                    "or options). Use another out folder, or delete this one to start over."
                )
        else:
            with open(meta_file + ".tmp", "w") as f:
                json.dump(meta, f)
            os.replace(meta_file + ".tmp", meta_file)

    pid, nproc = jax.process_index(), jax.process_count()
    mine = [i for i in range(n_chunks) if i % nproc == pid]
    results: dict[int, tuple] = {}
    loaded = computed = 0
    bar = _Progress(len(mine), progress)
    for done, i in enumerate(mine, start=1):
        lo, hi = i * chunk, min((i + 1) * chunk, B)
        if path is not None and os.path.exists(_chunk_file(path, i)):
            with np.load(_chunk_file(path, i)) as z:
                results[i] = (z["q"], z["qd"], z["result"], z["num_steps"])
            loaded += 1
            bar.update(done, 0, loaded)
            continue
        idx = np.minimum(np.arange(lo, lo + chunk), B - 1)  # pad by repeating the last one
        args = ({k: params[k][idx] for k in names}, q0[idx], qd0[idx])
        args = jax.device_put(args, batch_sharding)
        q, qd, res, steps = jax.device_get(run(*args))
        m = hi - lo
        results[i] = (q[:m], qd[:m], np.asarray(res[:m]), np.asarray(steps[:m]))
        if path is not None:
            tmp = _chunk_file(path, i)[:-4] + ".tmp.npz"
            np.savez(tmp, q=results[i][0], qd=results[i][1], result=results[i][2], num_steps=results[i][3])
            os.replace(tmp, _chunk_file(path, i))
        computed += 1
        bar.update(done, m, loaded)
        if on_chunk is not None:
            on_chunk(i, n_chunks)

    order = [results[i] for i in mine]
    q, qd, res, steps = (np.concatenate([r[j] for r in order]) for j in range(4))
    ts_out = np.asarray(ts) if save == "trajectory" else np.asarray(ts)[-1:]
    return SweepResult(ts_out, q, qd, res, steps, res == 0, path, computed, loaded, nd)


def load_sweep(path: str) -> SweepResult:
    """Load a finished sweep written by :func:`sweep` (all chunks, from every host).

    Raises ``FileNotFoundError`` naming the missing chunks if the sweep is incomplete.
    """
    with open(os.path.join(path, "meta.json")) as f:
        meta = json.load(f)
    missing = [i for i in range(meta["n_chunks"]) if not os.path.exists(_chunk_file(path, i))]
    if missing:
        raise FileNotFoundError(
            f"load_sweep: {len(missing)} of {meta['n_chunks']} chunks are missing in {path!r} "
            f"(first: {missing[:5]}); run the same sweep again to finish them."
        )
    parts = []
    for i in range(meta["n_chunks"]):
        with np.load(_chunk_file(path, i)) as z:
            parts.append((z["q"], z["qd"], z["result"], z["num_steps"]))
    q, qd, res, steps = (np.concatenate([p[j] for p in parts]) for j in range(4))
    return SweepResult(np.asarray(meta["ts"]), q, qd, res, steps, res == 0, path, 0, meta["n_chunks"], 0)

"""Storage of a sweep on disk: a folder with ``meta.json`` (a fingerprint of the inputs and
the layout) and, per finished chunk, ``chunk_XXXXXX.npz`` and ``chunk_XXXXXX.json`` (its
shapes and a SHA-256 checksum), each written atomically.

A chunk whose file is missing, unreadable, of the wrong shape or whose checksum does not
match is never returned as data: :func:`ukjax.sweep` warns and computes it again,
:func:`ukjax.load_sweep` names it.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import warnings
from collections.abc import Iterator
from typing import NamedTuple

import equinox as eqx
import jax
import numpy as np


class Chunk(NamedTuple):
    """The results of one chunk of trajectories (batch first)."""

    q: np.ndarray
    qd: np.ndarray
    result: np.ndarray
    num_steps: np.ndarray


class DamagedChunk(Exception):
    """A chunk file that cannot be trusted; the message says why."""


def concatenate(chunks: list[Chunk]) -> Chunk:
    return Chunk(*(np.concatenate([c[j] for c in chunks]) for j in range(len(Chunk._fields))))


def fingerprint(*arrays, extra: str) -> str:
    """A hash of the arrays' shapes, dtypes and bytes, and of `extra`."""
    h = hashlib.sha256(extra.encode())
    for a in arrays:
        a = np.asarray(a)
        h.update(str((a.shape, a.dtype.str)).encode())
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()[:32]


def _checksum(chunk: Chunk) -> str:
    return fingerprint(*chunk, extra="chunk")


def system_signature(system) -> tuple[str, list[np.ndarray]]:
    """The system's structure (as a string) and its array leaves."""
    leaves, treedef = jax.tree_util.tree_flatten(eqx.filter(system, eqx.is_array_like))
    return str(treedef), [np.asarray(x) for x in leaves]


def _temporary(path: str) -> str:
    """A name next to `path` that no other process or thread writes (several workers may
    write the same file at once: each renames its own complete copy)."""
    head, tail = os.path.split(path)
    return os.path.join(head, f".{tail}.{os.getpid()}.{threading.get_ident()}.tmp")


def _atomic_json(path: str, obj) -> None:
    tmp = _temporary(path)
    with open(tmp, "w") as f:
        json.dump(obj, f)
    os.replace(tmp, path)


def chunk_file(path: str, i: int) -> str:
    return os.path.join(path, f"chunk_{i:06d}.npz")


def _record_file(path: str, i: int) -> str:
    return os.path.join(path, f"chunk_{i:06d}.json")


def chunk_rows(meta: dict, i: int) -> int:
    """How many trajectories chunk i holds (the last one may be short)."""
    return min(meta["chunk_size"], meta["batch"] - i * meta["chunk_size"])


def load_chunk(path: str, i: int, rows: int) -> Chunk:
    """Chunk i, checked against its record; :class:`DamagedChunk` if it cannot be trusted."""
    name = chunk_file(path, i)
    if not os.path.exists(name):
        raise DamagedChunk(f"{os.path.basename(name)} is missing")
    try:
        with open(_record_file(path, i)) as f:
            record = json.load(f)
        with open(name, "rb") as fh, np.load(fh) as z:
            chunk = Chunk(*(z[k] for k in Chunk._fields))
    except FileNotFoundError as e:
        raise DamagedChunk(f"{os.path.basename(e.filename or name)} is missing") from None
    except Exception as e:  # truncated zip, bad JSON, missing array, ...
        raise DamagedChunk(f"{name} cannot be read ({type(e).__name__}: {e})") from None
    shapes = [list(x.shape) for x in chunk]
    if chunk.q.shape[0] != rows or shapes != record.get("shapes"):
        raise DamagedChunk(
            f"{name} holds arrays of shapes {shapes}; expected {rows} rows and "
            f"the recorded shapes {record.get('shapes')}"
        )
    if _checksum(chunk) != record.get("sha256"):
        raise DamagedChunk(f"{name} does not match its recorded checksum (altered or replaced)")
    return chunk


class ChunkStore:
    """The folder of one sweep. Refuses a folder that holds a different sweep."""

    def __init__(self, path: str, meta: dict):
        self.path = os.fspath(path)
        self.meta = meta
        if os.path.isdir(self.path) and os.path.exists(os.path.join(self.path, "meta.json")):
            old = read_meta(self.path)
            if old.get("fingerprint") != meta["fingerprint"]:
                raise ValueError(
                    f"sweep: {self.path!r} holds the chunks of a different sweep (other inputs, "
                    "system or options). Use another out folder, or delete this one to start "
                    "over."
                )

    def create(self) -> None:
        """Write meta.json (called once the sweep is known to run: a sweep that fails
        validation leaves nothing on disk)."""
        os.makedirs(self.path, exist_ok=True)
        meta_file = os.path.join(self.path, "meta.json")
        if not os.path.exists(meta_file):
            _atomic_json(meta_file, self.meta)

    def load(self, i: int) -> Chunk | None:
        """Chunk i if it is on disk and intact; None (with a warning if it was damaged)."""
        if not os.path.exists(chunk_file(self.path, i)):
            return None
        try:
            return load_chunk(self.path, i, chunk_rows(self.meta, i))
        except DamagedChunk as e:
            warnings.warn(f"sweep: {e}; computing chunk {i} again.", stacklevel=3)
            return None

    def save(self, i: int, chunk: Chunk) -> None:
        name = chunk_file(self.path, i)
        tmp = _temporary(name)
        with open(tmp, "wb") as f:
            np.savez(f, **chunk._asdict())
        _atomic_json(
            _record_file(self.path, i),
            {"shapes": [list(x.shape) for x in chunk], "sha256": _checksum(chunk)},
        )
        os.replace(tmp, name)


def read_meta(path: str) -> dict:
    """meta.json of a sweep folder, or an error that names the folder and the way out."""
    meta_file = os.path.join(path, "meta.json")
    if not os.path.exists(meta_file):
        raise FileNotFoundError(
            f"{path!r} is not a sweep folder: it has no meta.json. Give the out folder of a "
            "sweep written by ukjax.sweep (or `ukjax sweep --out`)."
        )
    try:
        with open(meta_file) as f:
            meta = json.load(f)
        for key in ("fingerprint", "batch", "chunk_size", "n_chunks", "ts"):
            meta[key]  # noqa: B018
    except (ValueError, KeyError, TypeError) as e:
        raise ValueError(
            f"{meta_file!r} is damaged ({type(e).__name__}: {e}). Its chunks cannot be "
            "matched to a sweep: delete the folder (or meta.json) and run the sweep again."
        ) from None
    return meta


def ranges(indices, spell_out: int = 20) -> str:
    """Indices as text: each of them when there are at most `spell_out`
    ([0, 1, 2, 5] -> "0, 1, 2, 5"), else as runs ("0-2, 5, 7-8")."""
    indices = sorted(int(i) for i in indices)
    if len(indices) <= spell_out:
        return ", ".join(map(str, indices))
    runs: list[list[int]] = []
    for i in indices:
        if runs and i == runs[-1][1] + 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def read_chunks(path: str, meta: dict) -> Iterator[tuple[int, Chunk | None, str | None]]:
    """Every chunk of the sweep folder `path`, in order, read and checked: ``(i, chunk,
    None)`` when intact, ``(i, None, None)`` when its file is missing, ``(i, None,
    reason)`` when damaged (one chunk in memory at a time)."""
    for i in range(meta["n_chunks"]):
        if not os.path.exists(chunk_file(path, i)):
            yield i, None, None
            continue
        try:
            yield i, load_chunk(path, i, chunk_rows(meta, i)), None
        except DamagedChunk as e:
            yield i, None, str(e)


class SweepStatus(NamedTuple):
    """Which chunks of a sweep folder are done, missing or damaged (:func:`sweep_status`).

    - `path`, `n_chunks`, `batch`: the folder, its number of chunks and trajectories.
    - `done`, `missing`: chunk indices that are intact on disk, and that are not there.
    - `damaged`: ``{index: reason}`` for chunk files that cannot be trusted (unreadable,
      wrong shape, checksum mismatch); a sweep run again computes them again.
    """

    path: str
    n_chunks: int
    batch: int
    done: list[int]
    missing: list[int]
    damaged: dict[int, str]

    @property
    def complete(self) -> bool:
        return len(self.done) == self.n_chunks

    def __str__(self) -> str:
        lines = [
            f"{self.path}: {len(self.done)} of {self.n_chunks} chunks done "
            f"({self.batch} trajectories in all)",
            f"  missing: {ranges(self.missing) or 'none'}",
            f"  damaged: {ranges(self.damaged) or 'none'}",
        ]
        lines += [f"    chunk {i}: {why}" for i, why in sorted(self.damaged.items())]
        return "\n".join(lines)


def sweep_status(path: str) -> SweepStatus:
    """The done, missing and damaged chunks of the sweep folder `path` (each chunk file is
    read and checked against its checksum).

    Example:
        >>> import jax.numpy as jnp, ukjax, tempfile
        >>> from ukjax.systems import SimplePendulum
        >>> out = tempfile.mkdtemp()
        >>> _ = ukjax.sweep(SimplePendulum(), jnp.ones((4, 1)), jnp.zeros((4, 1)),
        ...                 jnp.linspace(0.0, 1.0, 3), out=out, chunk_size=2,
        ...                 worker=(0, 2), progress=False)
        >>> st = ukjax.sweep_status(out)
        >>> st.done, st.missing, st.complete
        ([0], [1], False)
    """
    meta = read_meta(path)
    done, missing, damaged = [], [], {}
    for i, chunk, problem in read_chunks(path, meta):
        if chunk is not None:
            done.append(i)
        elif problem is None:
            missing.append(i)
        else:
            damaged[i] = problem
    return SweepStatus(os.fspath(path), meta["n_chunks"], meta["batch"], done, missing, damaged)

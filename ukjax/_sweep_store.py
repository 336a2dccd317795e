"""Storage of a sweep on disk: a folder with ``meta.json`` (a fingerprint of the inputs and
the layout) and one ``chunk_XXXXXX.npz`` per finished chunk, each written atomically."""

from __future__ import annotations

import hashlib
import json
import os
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


def system_signature(system) -> tuple[str, list[np.ndarray]]:
    """The system's structure (as a string) and its array leaves."""
    leaves, treedef = jax.tree_util.tree_flatten(eqx.filter(system, eqx.is_array_like))
    return str(treedef), [np.asarray(x) for x in leaves]


def _atomic_json(path: str, obj) -> None:
    with open(path + ".tmp", "w") as f:
        json.dump(obj, f)
    os.replace(path + ".tmp", path)


class ChunkStore:
    """The folder of one sweep. Refuses a folder that holds a different sweep."""

    def __init__(self, path: str, meta: dict):
        self.path = os.fspath(path)
        os.makedirs(self.path, exist_ok=True)
        meta_file = os.path.join(self.path, "meta.json")
        if os.path.exists(meta_file):
            with open(meta_file) as f:
                old = json.load(f)
            if old.get("fingerprint") != meta["fingerprint"]:
                raise ValueError(
                    f"sweep: {self.path!r} holds the chunks of a different sweep (other inputs, "
                    "system or options). Use another out folder, or delete this one to start over."
                )
        else:
            _atomic_json(meta_file, meta)

    def file(self, i: int) -> str:
        return chunk_file(self.path, i)

    def has(self, i: int) -> bool:
        return os.path.exists(self.file(i))

    def load(self, i: int) -> Chunk:
        return load_chunk(self.path, i)

    def save(self, i: int, chunk: Chunk) -> None:
        tmp = self.file(i)[:-4] + ".tmp.npz"
        np.savez(tmp, **chunk._asdict())
        os.replace(tmp, self.file(i))


def chunk_file(path: str, i: int) -> str:
    return os.path.join(path, f"chunk_{i:06d}.npz")


def load_chunk(path: str, i: int) -> Chunk:
    with np.load(chunk_file(path, i)) as z:
        return Chunk(*(z[k] for k in Chunk._fields))


def read_meta(path: str) -> dict:
    with open(os.path.join(path, "meta.json")) as f:
        return json.load(f)

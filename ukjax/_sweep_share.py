r"""Which chunks of a sweep this call computes, when several processes fill one folder
without a coordinator: worker ``k`` of ``P`` computes the chunks ``i`` with
``i % P == k``.

The share comes from, in this order: the `worker` argument of :func:`ukjax.sweep`; a
SLURM job array (``SLURM_ARRAY_TASK_ID`` and ``SLURM_ARRAY_TASK_COUNT`` in the
environment; ``SLURM_ARRAY_TASK_MIN`` and ``SLURM_ARRAY_TASK_STEP`` are honoured when
set, so ``--array=1-8`` gives workers 0..7); the processes of ``jax.distributed``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import NamedTuple

import jax


class Share(NamedTuple):
    """Worker `k` of `count`; `source` says where that came from (for messages)."""

    k: int
    count: int
    source: str

    def chunks(self, n_chunks: int) -> list[int]:
        return [i for i in range(n_chunks) if i % self.count == self.k]

    def __str__(self) -> str:
        return f"worker {self.k} of {self.count} ({self.source})"


ALL = Share(0, 1, "all chunks")


def from_argument(worker) -> Share:
    ok = (
        isinstance(worker, (tuple, list))
        and len(worker) == 2
        and all(isinstance(x, int) and not isinstance(x, bool) for x in worker)
    )
    if not ok or not (worker[1] >= 1 and 0 <= worker[0] < worker[1]):
        raise ValueError(
            f"sweep: worker must be a pair (k, P) of integers with 0 <= k < P (this call is "
            f"worker k of P and computes the chunks i with i % P == k); got {worker!r}."
        )
    return Share(worker[0], worker[1], "worker=")


def _int_var(environ: Mapping[str, str], name: str, default: int | None = None) -> int:
    text = environ.get(name)
    if text is None and default is not None:
        return default
    try:
        return int(str(text))
    except ValueError:
        raise ValueError(f"sweep: {name}={text!r} in the environment is not an integer.") from None


def _from_slurm(environ: Mapping[str, str]) -> Share:
    task = _int_var(environ, "SLURM_ARRAY_TASK_ID")
    count = _int_var(environ, "SLURM_ARRAY_TASK_COUNT")
    first = _int_var(environ, "SLURM_ARRAY_TASK_MIN", 0)
    step = max(_int_var(environ, "SLURM_ARRAY_TASK_STEP", 1), 1)
    k, rest = divmod(task - first, step)
    if rest or not (count >= 1 and 0 <= k < count):
        raise ValueError(
            f"sweep: cannot tell this SLURM array task's share: SLURM_ARRAY_TASK_ID={task}, "
            f"SLURM_ARRAY_TASK_COUNT={count}, MIN={first}, STEP={step} do not number the "
            "tasks 0..COUNT-1. Use a contiguous --array range, or pass worker=(k, P) "
            "(`ukjax sweep --worker k/P`) explicitly."
        )
    return Share(k, count, "SLURM job array")


def share(worker, environ: Mapping[str, str] | None = None) -> Share:
    """This call's share of the chunks (all of them when nothing splits the work)."""
    if worker is not None:
        return from_argument(worker)
    environ = os.environ if environ is None else environ
    if "SLURM_ARRAY_TASK_ID" in environ and "SLURM_ARRAY_TASK_COUNT" in environ:
        return _from_slurm(environ)
    if jax.process_count() > 1:
        return Share(jax.process_index(), jax.process_count(), "jax.distributed")
    return ALL

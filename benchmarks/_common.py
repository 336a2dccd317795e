"""Timing helpers shared by the benchmark scripts."""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np


OUT = Path(__file__).resolve().parent / "out"
"""Where every benchmark writes its JSON: benchmarks/out/, whatever the working directory."""


def out_path(name: str) -> str:
    """Default output path of a benchmark (JSON, plots): benchmarks/out/<name>, the
    folder created if missing (a fresh clone has none)."""
    OUT.mkdir(parents=True, exist_ok=True)
    return str(OUT / name)


def best_time(fn, *args, repeats: int = 3):
    """(best wall seconds of `repeats` calls, last output); JAX outputs are waited for.
    Compile or warm up `fn` before calling this if the first call is not to be timed."""
    best, out = float("inf"), None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = jax.block_until_ready(fn(*args))
        best = min(best, time.perf_counter() - t0)
    return best, out


def seed_workflow_uk(M, Q, A, b):
    """The seeds' MATLAB workflow for one state, in NumPy: M^{-1/2} by eigendecomposition,
    then `pinv`: qdd = a + M^{-1/2} (A M^{-1/2})^+ (b - A a), a = M^{-1} Q."""
    w, V = np.linalg.eigh(M)
    Mih = (V / np.sqrt(w)) @ V.T
    a = np.linalg.solve(M, Q)
    return a + Mih @ np.linalg.pinv(A @ Mih) @ (b - A @ a)


def machine_info() -> dict:
    return {
        "jax": jax.__version__,
        "backend": jax.default_backend(),
        "device": str(jax.devices()[0]),
        "cpu_count": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
    }


def time_compile_and_run(fn, *args, repeats: int = 3):
    """(seconds for lower+compile, best seconds of `repeats` compiled runs, output)."""
    jitted = jax.jit(fn)
    t0 = time.perf_counter()
    compiled = jitted.lower(*args).compile()
    t_compile = time.perf_counter() - t0
    jax.block_until_ready(compiled(*args))
    best, out = best_time(compiled, *args, repeats=repeats)
    return t_compile, best, out


def write_json(path: str, payload: dict) -> None:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w") as f:
        json.dump(payload, f, indent=2)
    print(f"wrote {path}")


def ball_batch(lib, throw: bool = True):
    """Item 3's 1024-ball batch on `lib` (ukjax or a revision of it): `BouncingBall`s with
    `Impact(0.8)` from heights uniform in [0.5, 2] m, 201 saves on [0, 2] s. Returns (one
    member's run, the batch's arguments)."""
    ball = lib.systems.BouncingBall()
    ts = jnp.linspace(0.0, 2.0, 201)
    heights = jnp.asarray(np.random.default_rng(0).uniform(0.5, 2.0, 1024))
    law = lib.Impact(0.8)
    one = lambda h: lib.simulate(ball, h[None], jnp.zeros(1), ts, contact=law, throw=throw).q
    return one, (heights,)


def friction_batch(lib, count: int = 1, throw: bool = True):
    """Item 3's frictional batch on `lib`: 1024 members of `count` balls (3 m apart: no
    collision within the run) sliding and spinning on a rough table, `Coulomb()`, 11 saves
    on [0, 0.8] s. Returns (one member's run, the batch's arguments)."""
    ball = lib.systems.BallsOnTable(count=count, mu_static=0.3, mu_kinetic=0.2)
    rng = np.random.default_rng(0)
    B = 1024
    slide, spin = rng.uniform(-1, 1, (B, count, 2)), rng.uniform(-50, 50, (B, count, 3))
    qd0 = jnp.asarray(np.concatenate([slide, np.zeros((B, count, 1)), spin], -1).reshape(B, -1))
    rest = np.tile([0.0, 0.0, ball.radius, 0.0, 0.0, 0.0], count)
    rest[0::6] = 3.0 * np.arange(count)
    q0 = jnp.asarray(np.tile(rest, (B, 1)))
    ts = jnp.linspace(0.0, 0.8, 11)
    law = lib.Coulomb()
    one = lambda q, qd: lib.simulate(ball, q, qd, ts, friction=law, throw=throw).q
    return one, (q0, qd0)

"""Two revisions of ukjax in one process, timed alternately: how to judge a performance
change on a machine whose speed drifts.

The project's 2-core box drifts by up to 1.5x within minutes (`benchmarks/RESULTS.md`,
stops 75-86): the same program timed in two processes a few minutes apart can differ by
more than the change being measured. Here the base revision (`--base`, default `HEAD`) is
extracted with `git archive` into a temporary folder and imported as the package
`ukjax_base` (its absolute `ukjax` imports rewritten), next to the working tree's `ukjax`;
each case is compiled once per revision, and then the two compiled programs run one after
the other, `--rounds` times (each first in every other round). Both revisions see the same
drift, so their ratio is steadier than either time. Reported per case: the best and the
median run of each revision, the ratios base / working tree (above 1: the working tree is
faster), and the largest difference of their outputs (0 or round-off for a change meant
to be numerically neutral).
With `--compile-rounds k`, each revision is also traced and compiled k times, alternately,
after `jax.clear_caches()`.

Cases (`--cases`, comma separated; every system is written as a user writes it, at the
defaults except the method and step, which make the work comparable):
- `angles<N>`: the N-link chain in absolute angles with its kinetic energy
  (`AngleChain` of `mujoco_compare.py`: M and the velocity terms by autodiff);
- `mass<N>`: the same with its mass matrix written (`AngleChainMass`);
- `cartesian<N>`: the chain in Cartesian coordinates with N link constraints (`UserChain`);
  all three `jax.jit(jax.vmap(simulate))` with `solver=RK4()` at the constant dt = 1e-3,
  `--steps` steps, batch min(1024, 8192 / N), everything else at the defaults; the time
  is per system-step.
- `default-<kind><N>`: the same chain at every default (Dopri8, adaptive, rtol = atol =
  1e-12) over t in [0, 1], batched as above; per batch. `single-<kind><N>`: one start,
  its own `simulate` call (the program `simulate` compiles); per run.
- `balls`: 1024 bouncing balls (`ukjax.systems.BouncingBall`, `Impact(0.8)`,
  `throw=False`, 201 saves on [0, 2] s, heights spread over [0.5, 2] m), the batch of
  issue 44 item 3; the time is per batch.
- `cartpole`: an MJCF cart-pole whose cart runs into its slider's limits (`CART_POLE`,
  `from_mjcf(..., contacts=False)`), one run at every default over [0, 2] s with 21
  saves: a robot model's joint limits make it a hybrid run; the program `simulate`
  compiles, per run.
- `arm6`, `rigid<N>`: rigid-body models read as a user reads them, the 6-DoF arm of
  `examples/models/arm6.urdf` (`ukjax.from_urdf`) and the N-hinge chain of capsules of
  `rigid.py` (`ukjax.from_mjcf`), `jax.jit(jax.vmap(simulate))` with RK4 at dt = 1e-3,
  `--steps` steps, batch 1024 (starts at rest, angles in [0.3, 0.7]); per system-step.
- `friction`: 1024 balls sliding and spinning on a rough table
  (`ukjax.systems.BallsOnTable(count=1, mu_static=0.3, mu_kinetic=0.2)`, `Coulomb()`,
  `throw=False`, 11 saves on [0, 0.8] s, the seeded velocities of `tests/
  test_lapack_concurrency.py`), the frictional batch of item 3; per batch.

    python benchmarks/revisions.py [--base HEAD] [--cases angles16,mass32,balls]
                                   [--rounds 15] [--compile-rounds 0] [--quick] [--json FILE]

`--quick`: a smoke run (4-link chains, 20 steps, 3 rounds).
"""

from __future__ import annotations

import argparse
import importlib
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import jax


jax.config.update("jax_enable_x64", True)
import diffrax
import jax.numpy as jnp
import mujoco_compare as mc
import numpy as np
import rigid

import ukjax
from _common import ball_batch, friction_batch, machine_info, out_path, write_json


ROOT = Path(__file__).resolve().parent.parent
BASE_PACKAGE = "ukjax_base"
_ABSOLUTE = re.compile(r"\bukjax(?=[._\s]|$)")


def import_revision(rev: str, into: Path):
    """ukjax at git revision `rev` as the package `ukjax_base`, extracted under `into`."""
    archive = subprocess.run(
        ["git", "archive", rev, "ukjax"], cwd=ROOT, check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    package = into / BASE_PACKAGE
    (into / "ukjax").rename(package)
    for path in package.rglob("*.py"):
        text = path.read_text()
        lines = [
            _ABSOLUTE.sub(BASE_PACKAGE, line) if re.match(r"\s*(import|from) ukjax\b", line)
            else line
            for line in text.splitlines(keepends=True)
        ]  # fmt: skip
        path.write_text("".join(lines))
    sys.path.insert(0, str(into))
    lib = importlib.import_module(BASE_PACKAGE)
    assert Path(lib.__file__).resolve().is_relative_to(package.resolve()), lib.__file__
    return lib


def chain_system(lib, kind: str, links: int):
    """The chain of `mujoco_compare.py` of `kind` (its class there) on `lib`'s System:
    the same methods, the class rebuilt on the revision's base class."""
    source = {"angles": mc.AngleChain, "mass": mc.AngleChainMass, "cartesian": mc.UserChain}
    cls = source[kind]
    methods = {}
    for klass in reversed(cls.__mro__[: cls.__mro__.index(ukjax.System)]):
        methods.update({k: v for k, v in vars(klass).items() if callable(v)})
    rebuilt = type(cls.__name__, (lib.System,), {
        "__annotations__": {"links": int, "mass": float}, "mass": 1.0, **methods,
    })  # fmt: skip
    return rebuilt(links=links)


def chain_start(kind: str, links: int, B: int) -> jax.Array:
    """B starting positions of the chain of `kind`, from rest-like random angles."""
    th = np.random.default_rng(0).uniform(-0.5, 0.5, (B, links))
    if kind != "cartesian":
        return jnp.asarray(th)
    x, y = np.cumsum(np.sin(th), 1), -np.cumsum(np.cos(th), 1)
    return jnp.asarray(np.stack([x, y], -1).reshape(B, 2 * links))


def default_case(lib, kind: str, links: int, batched: bool):
    """The chain at every default (Dopri8, adaptive, rtol = atol = 1e-12 in float64)
    over t in [0, 1]: `jax.vmap` over min(1024, 8192 / N) starts, or one start (its
    `simulate` call, compiled by `simulate` itself); per batch or per run."""
    system = chain_system(lib, kind, links)
    ts = jnp.array([0.0, 1.0])
    one = lambda a, b: lib.simulate(system, a, b, ts).q[-1]
    q0 = chain_start(kind, links, min(1024, 8192 // links) if batched else 1)
    if batched:
        return jax.vmap(one), (q0, jnp.zeros_like(q0)), 1
    return one, (q0[0], jnp.zeros_like(q0[0])), 1, True


def chain_case(lib, kind: str, links: int, steps: int):
    """(program, arguments, work units per call) of a chain case on `lib`."""
    system = chain_system(lib, kind, links)
    B = min(1024, 8192 // links)
    q0 = chain_start(kind, links, B)
    ts = jnp.array([0.0, 1e-3 * steps])
    rk4 = dict(solver=lib.RK4(), stepsize_controller=diffrax.ConstantStepSize(), dt0=1e-3)
    one = lambda a, b: lib.simulate(system, a, b, ts, max_steps=steps + 10, **rk4).q[-1]
    return jax.vmap(one), (q0, jnp.zeros_like(q0)), B * steps


def balls_case(lib, _steps: int):
    """The 1024-ball batch (`_common.ball_batch`) with `throw=False`."""
    one, args = ball_batch(lib, throw=False)
    return jax.vmap(one), args, 1


def friction_case(lib, _steps: int, count: int = 1):
    """1024 members of `count` balls sliding and spinning on a rough table (Coulomb;
    `_common.friction_batch`) with `throw=False`."""
    one, args = friction_batch(lib, count, throw=False)
    return jax.vmap(one), args, 1


CART_POLE = """<mujoco model="cart-pole"><worldbody>
  <body name="cart" pos="0 0 1">
    <joint name="slider" type="slide" axis="1 0 0" limited="true" range="-0.5 0.5"/>
    <geom type="box" size="0.2 0.15 0.1" mass="1"/>
    <body name="pole"><joint name="hinge" type="hinge" axis="0 1 0"/>
      <geom type="capsule" fromto="0 0 0 0 0 1" size="0.045" mass="0.1"/></body>
  </body></worldbody></mujoco>"""


def cartpole_case(lib, _steps: int):
    """An MJCF cart-pole (DeepMind-control style) whose cart runs into its slider's
    limits: one run at every default over [0, 2] s, 21 saves (a hybrid run: a joint
    limit is a unilateral constraint); the program `simulate` compiles, per run."""
    model = lib.from_mjcf(CART_POLE, contacts=False)
    q0, qd0 = model.initial_state(qpos=jnp.array([0.0, 0.3]), qvel=jnp.array([1.5, 0.0]))
    ts = jnp.linspace(0.0, 2.0, 21)
    return (lambda q, qd: lib.simulate(model, q, qd, ts).q), (q0, qd0), 1, True


def rigid_case(lib, name: str, steps: int):
    """(program, arguments, work units per call) of a rigid-body model on `lib`: `arm6`
    (URDF) or `rigid<N>` (an N-hinge MJCF chain), RK4 at dt = 1e-3, batch 1024."""
    if name == "arm6":
        with open(rigid.ARM) as f:
            model = lib.from_urdf(f.read())
    else:
        model = lib.from_mjcf(rigid.chain_xml(int(name[len("rigid") :])))
    B = 1024
    q0 = jnp.asarray(0.3 + 0.4 * np.random.default_rng(0).random((B, model.nq)))
    ts = jnp.array([0.0, 1e-3 * steps])
    rk4 = dict(solver=lib.RK4(), stepsize_controller=diffrax.ConstantStepSize(), dt0=1e-3)
    one = lambda a, b: lib.simulate(model, a, b, ts, max_steps=steps + 10, **rk4).q[-1]
    return jax.vmap(one), (q0, jnp.zeros_like(q0)), B * steps


def case(lib, name: str, steps: int):
    if name == "arm6" or re.fullmatch(r"rigid\d+", name):
        return rigid_case(lib, name, steps)
    if name == "balls":
        return balls_case(lib, steps)
    if name == "friction":
        return friction_case(lib, steps)
    if re.fullmatch(r"friction\d+", name):
        return friction_case(lib, steps, int(name[len("friction") :]))
    if name == "cartpole":
        return cartpole_case(lib, steps)
    m = re.fullmatch(r"(default-|single-)?(angles|mass|cartesian)(\d+)", name)
    if m is None:
        raise ValueError(
            f"unknown case {name!r}: [default-|single-]angles<N>, mass<N> or cartesian<N>, "
            "arm6, rigid<N>, balls, cartpole, friction or friction<balls>."
        )
    if m.group(1) is not None:
        return default_case(lib, m.group(2), int(m.group(3)), m.group(1) == "default-")
    return chain_case(lib, m.group(2), int(m.group(3)), steps)


def compile_seconds(fn, args, own: bool = False) -> float:
    """Seconds to compile `fn` under `jax.jit`; with `own`, to trace, compile and run a
    first call of `fn` itself (a `simulate` call, which compiles its own program)."""
    jax.clear_caches()
    t0 = time.perf_counter()
    if own:
        jax.block_until_ready(fn(*args))
    else:
        jax.jit(fn).lower(*args).compile()
    return time.perf_counter() - t0


def program(fn, args, own: bool = False):
    """`fn` compiled for `args` (with `own`, `fn` itself: it compiles on its first call)."""
    return fn if own else jax.jit(fn).lower(*args).compile()


def _order(libs: dict, i: int) -> list[str]:
    """The revisions in round `i`: each goes first in every other round."""
    keys = list(libs)
    return keys if i % 2 == 0 else keys[::-1]


def compare(libs: dict, name: str, steps: int, rounds: int, compile_rounds: int) -> dict:
    built = {k: case(lib, name, steps) for k, lib in libs.items()}
    compiles: dict[str, list[float]] = {k: [] for k in libs}
    for i in range(compile_rounds):
        for k in _order(libs, i):
            compiles[k].append(compile_seconds(*built[k][:2], *built[k][3:]))
    programs = {k: program(b[0], b[1], *b[3:]) for k, b in built.items()}
    outputs = {k: np.asarray(jax.block_until_ready(p(*built[k][1]))) for k, p in programs.items()}
    runs: dict[str, list[float]] = {k: [] for k in libs}
    for i in range(rounds):
        for k in _order(libs, i):
            t0 = time.perf_counter()
            jax.block_until_ready(programs[k](*built[k][1]))
            runs[k].append(time.perf_counter() - t0)
    units = built["base"][2]
    best = {k: min(v) / units for k, v in runs.items()}
    median = {k: float(np.median(v)) / units for k, v in runs.items()}
    return {
        "case": name,
        "unit": "system-step" if units > 1 else "batch",
        "best": best,
        "median": median,
        "best_ratio": best["base"] / best["new"],
        "median_ratio": median["base"] / median["new"],
        "compile": {k: (min(v) if v else None) for k, v in compiles.items()},
        "max_abs_diff": float(np.max(np.abs(outputs["base"] - outputs["new"]))),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", default="HEAD", help="git revision to compare against")
    ap.add_argument("--cases", default="angles16,mass16,cartesian16,balls")
    ap.add_argument("--steps", type=int, default=250, help="RK4 steps of the chain cases")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--compile-rounds", type=int, default=0)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json", default=out_path("revisions.json"))
    args = ap.parse_args()
    if args.quick:
        args.cases, args.steps, args.rounds = "angles4,mass4,cartesian4", 20, 3
    with tempfile.TemporaryDirectory() as tmp:
        libs = {"base": import_revision(args.base, Path(tmp)), "new": ukjax}
        info = machine_info()
        print(
            f"JAX {info['jax']} ({info['cpu_count']} CPUs); base {args.base} against the "
            f"working tree, {args.rounds} alternating rounds (us per unit; ratio > 1: the "
            "working tree is faster)"
        )
        print(
            f"{'case':<13} {'unit':<11} {'base best':>10} {'new best':>10} {'ratio':>6} "
            f"{'base med':>10} {'new med':>10} {'ratio':>6} {'compile base/new s':>19} "
            f"{'max |diff|':>10}"
        )
        rows = []
        for name in args.cases.split(","):
            r = compare(libs, name, args.steps, args.rounds, args.compile_rounds)
            rows.append(r)
            c = r["compile"]
            comp = "" if c["base"] is None else f"{c['base']:.2f} / {c['new']:.2f}"
            print(
                f"{name:<13} {r['unit']:<11} {1e6 * r['best']['base']:10.2f} "
                f"{1e6 * r['best']['new']:10.2f} {r['best_ratio']:6.3f} "
                f"{1e6 * r['median']['base']:10.2f} {1e6 * r['median']['new']:10.2f} "
                f"{r['median_ratio']:6.3f} {comp:>19} {r['max_abs_diff']:10.1e}",
                flush=True,
            )
    write_json(args.json, {"machine": info, "base": args.base, "rows": rows})


if __name__ == "__main__":
    main()

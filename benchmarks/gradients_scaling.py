"""value_and_grad / forward through simulate at the defaults, for chains of 2 to 16 links
(issue 44 item 4), against diffrax's own checkpointed adjoint in the same process.

Loss: a weighted sum of the coordinates at 21 saves on t in [0, 3] of a damped N-link
chain written as a user would, differentiated with respect to its N masses and N damping
coefficients. Systems (`--systems`): `cartesian` (`UserChain` below: an `int` field for the
links, Cartesian coordinates, distance constraints) and `angles` (`AngleChain`: absolute
angles from the downward vertical, no constraint, the kinetic energy from the bobs'
velocities, so M and the velocity terms by automatic differentiation). Two settings:
`simulate`'s defaults (Dopri8, rtol = atol = 1e-12, the per-step projection where there
are constraints, checks, default adjoint), and the same with `solver=Tsit5()` at rtol =
atol = 1e-8 as a user fitting parameters might pass. Peer: the same loss with
`adjoint=diffrax.RecursiveCheckpointAdjoint()` (diffrax's default). Each N runs in a fresh
process (timings in one process depend on the order the programs ran in); within it the
forward, default and peer programs are timed interleaved, best of 20 after the first
(compiling) call.

    python benchmarks/gradients_scaling.py [--links 2,4,8,16] [--systems cartesian,angles]
                                           [--json FILE]
"""

from __future__ import annotations

import argparse
import itertools
import json
import subprocess
import sys
import time

import jax


jax.config.update("jax_enable_x64", True)
import diffrax
import equinox as eqx
import jax.numpy as jnp

import ukjax
from _common import machine_info, out_path, write_json


class UserChain(ukjax.System):
    """N point masses on massless rods of unit length from a pin at the origin, with
    damping on each mass's velocity: q = (x_1, y_1, ..., x_N, y_N)."""

    masses: jax.Array
    damping: jax.Array
    links: int = eqx.field(static=True)

    def mass_matrix(self, t, q):
        return jnp.diag(jnp.repeat(self.masses, 2))

    def potential_energy(self, t, q):
        return 9.81 * jnp.sum(self.masses * q[1::2])

    def forces(self, t, q, qd):
        return -jnp.repeat(self.damping, 2) * qd

    def holonomic(self, t, q):
        p = q.reshape(self.links, 2)
        prev = jnp.concatenate([jnp.zeros((1, 2), q.dtype), p[:-1]])
        return 0.5 * (jnp.sum((p - prev) ** 2, axis=1) - 1.0)


class AngleChain(ukjax.System):
    """The same chain in absolute angles q_i from the downward vertical (no constraint):
    the kinetic energy from the bobs' velocities, damping on each angle's rate."""

    masses: jax.Array
    damping: jax.Array
    links: int = eqx.field(static=True)

    def kinetic_energy(self, t, q, qd):
        vx, vy = jnp.cumsum(jnp.cos(q) * qd), jnp.cumsum(jnp.sin(q) * qd)
        return 0.5 * jnp.sum(self.masses * (vx**2 + vy**2))

    def potential_energy(self, t, q):
        return -9.81 * jnp.sum(self.masses * jnp.cumsum(jnp.cos(q)))

    def forces(self, t, q, qd):
        return -self.damping * qd


SYSTEMS = {"cartesian": UserChain, "angles": AngleChain}


def start(links: int, system: str):
    """Positions and velocities at angles 0.3 ... 1.0 from the vertical, at rest."""
    th = jnp.linspace(0.3, 1.0, links)
    if system == "angles":
        return th, jnp.zeros(links)
    p = jnp.cumsum(jnp.stack([jnp.sin(th), -jnp.cos(th)], axis=1), axis=0)
    return p.reshape(-1), jnp.zeros(2 * links)


def measure(links: int, setting: str, system: str = "cartesian") -> dict:
    q0, qd0 = start(links, system)
    ts = jnp.linspace(0.0, 3.0, 21)
    w = jnp.linspace(1.0, 2.0, q0.shape[0])
    theta0 = jnp.concatenate([jnp.linspace(1.0, 1.5, links), jnp.full(links, 0.2)])
    kw = {} if setting == "defaults" else dict(solver=diffrax.Tsit5(), rtol=1e-8, atol=1e-8)

    def loss(theta, adjoint=None):
        s = SYSTEMS[system](theta[:links], theta[links:], links)
        return jnp.sum(ukjax.simulate(s, q0, qd0, ts, adjoint=adjoint, **kw).q @ w)

    peer_adjoint = diffrax.RecursiveCheckpointAdjoint()
    programs = {
        "forward": jax.jit(loss),
        "default": jax.jit(jax.value_and_grad(loss)),
        "peer": jax.jit(jax.value_and_grad(lambda th: loss(th, peer_adjoint))),
    }
    compile_s, best = {}, {}
    for name, f in programs.items():
        t0 = time.perf_counter()
        jax.block_until_ready(f(theta0))
        compile_s[name] = time.perf_counter() - t0
        best[name] = float("inf")
    for _ in range(20):
        for name, f in programs.items():
            t0 = time.perf_counter()
            jax.block_until_ready(f(theta0))
            best[name] = min(best[name], time.perf_counter() - t0)
    g, g_peer = programs["default"](theta0)[1], programs["peer"](theta0)[1]
    diff = float(jnp.max(jnp.abs(g - g_peer)) / jnp.max(jnp.abs(g_peer)))
    return {
        "system": system,
        "links": links,
        "setting": setting,
        "first_call_s": compile_s,
        "best_s": best,
        "ratio_default": best["default"] / best["forward"],
        "ratio_peer": best["peer"] / best["forward"],
        "max_rel_diff_default_vs_peer": diff,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--links", default="2,4,8,16")
    ap.add_argument("--systems", default="cartesian,angles")
    ap.add_argument("--json", default=out_path("gradients_scaling.json"))
    ap.add_argument("--one", nargs=3, help=argparse.SUPPRESS)  # links setting system (child)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(measure(int(args.one[0]), args.one[1], args.one[2])))
        return
    rows, systems = [], args.systems.split(",")
    for system in systems:
        if system not in SYSTEMS:
            raise SystemExit(f"--systems: {', '.join(SYSTEMS)}; got {system!r}")
    for system, setting in itertools.product(systems, ("defaults", "tsit5 1e-8")):
        for links in (int(x) for x in args.links.split(",")):
            cmd = [sys.executable, __file__, "--one", str(links), setting, system]
            out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
            rows.append(json.loads(out.strip().splitlines()[-1]))
            r = rows[-1]
            print(
                f"{system:9s} N={links:3d} {setting:11s} "
                f"forward {1e3 * r['best_s']['forward']:8.2f} ms  "
                f"value_and_grad {1e3 * r['best_s']['default']:8.2f} ms "
                f"({r['ratio_default']:.2f}x, first call {r['first_call_s']['default']:.1f} s)  "
                f"diffrax checkpointed {r['ratio_peer']:.2f}x  "
                f"rel diff {r['max_rel_diff_default_vs_peer']:.1e}",
                flush=True,
            )
    write_json(args.json, {"machine": machine_info(), "rows": rows})


if __name__ == "__main__":
    main()

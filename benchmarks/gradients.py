"""Cost of gradients through simulate at the defaults a user gets: value_and_grad time /
forward time for simulate's default adjoint (ukjax.ReplayAdjoint, every autodiff mode,
in reverse mode and with jax.jacfwd), the reverse-only ukjax.ReverseReplayAdjoint and each
diffrax adjoint, where the reverse pass spends its time (the forward sweep that records the
states vs the backward sweep), the same ratio for a plain diffrax ODE of the same size
(the floor set by diffrax's checkpointed loop), central finite differences over the p
parameters (the peer, 2p + 1 forward solves, in the same run), and the compiled working
memory for long horizons.

System: a 5-link planar chain with joint damping; p = 10 parameters (5 masses, 5 damping
coefficients); loss = weighted sum of the saved positions (21 save points on t in [0, 3]).
`simulate`'s defaults (CheckInitial, the default per-step projection, run-time checks, the
default UK solver, max_steps = 100 000) with `solver=diffrax.Tsit5()`, rtol = atol = 1e-8 as
a user fitting parameters would pass; the horizon sweep uses a fixed step of 0.01.

    python benchmarks/gradients.py [--links 5] [--skip-memory] [--json out.json]
"""

from __future__ import annotations

import argparse
import time

import jax


jax.config.update("jax_enable_x64", True)
import diffrax
import equinox as eqx
import jax.numpy as jnp

import ukjax
from _common import best_time as _best_time
from _common import machine_info, out_path, write_json
from ukjax.systems import PlanarChain


def best_time(f, *args, repeats=5):
    """Best of `repeats` after one warm-up call."""
    jax.block_until_ready(f(*args))
    return _best_time(f, *args, repeats=repeats)[0]


def compile_time(f, *args):
    t0 = time.perf_counter()
    c = jax.jit(f).lower(*args).compile()
    return time.perf_counter() - t0, c


def toy_floor(N, ts, w, theta0):
    """value_and_grad / forward of a plain diffrax ODE with the chain's state size, solver,
    tolerances, saves, adjoint and parameter count: N damped oscillators
    m_i x_i'' = -k x_i - c_i x_i' + sin(x_{i-1})."""

    def loss(theta):
        m, c = theta[:N], theta[N:]

        def f(t, y, args):
            x, v = y[:N], y[N:]
            coupling = jnp.concatenate([jnp.zeros(1), jnp.sin(x[:-1])])
            return jnp.concatenate([v, (-10.0 * x - c * v + coupling) / m])

        y0 = jnp.concatenate([jnp.linspace(0.3, 1.0, N), jnp.zeros(N)])
        sol = diffrax.diffeqsolve(
            diffrax.ODETerm(f),
            diffrax.Tsit5(),
            ts[0],
            ts[-1],
            None,
            y0,
            saveat=diffrax.SaveAt(ts=ts),
            stepsize_controller=diffrax.PIDController(rtol=1e-8, atol=1e-8),
            max_steps=100_000,
        )
        return jnp.sum(sol.ys @ w), sol.stats["num_steps"]

    fwd = jax.jit(lambda th: loss(th)[0])
    grad = jax.jit(jax.value_and_grad(lambda th: loss(th)[0]))
    t_f, t_g = best_time(fwd, theta0), best_time(grad, theta0)
    steps = int(jax.jit(loss)(theta0)[1])
    return {"forward_s": t_f, "grad_s": t_g, "ratio_to_forward": t_g / t_f, "steps": steps}


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--links", type=int, default=5)
    ap.add_argument("--skip-memory", action="store_true", help="no horizon/memory table")
    ap.add_argument("--json", default=out_path("gradients.json"))
    args = ap.parse_args()
    N = args.links
    base = PlanarChain.uniform(N, damping=0.2)
    q0, qd0 = base.state_from_angles(jnp.linspace(0.3, 1.0, N), jnp.zeros(N))
    ts = jnp.linspace(0.0, 3.0, 21)
    w = jnp.linspace(1.0, 2.0, 2 * N)
    theta0 = jnp.concatenate([base.masses, base.damping])

    def make_loss(adjoint=None, controller=None, dt0=None, ts_=ts, max_steps=100_000, plain=False):
        kw = dict(solver=diffrax.Tsit5(), adjoint=adjoint, max_steps=max_steps)
        if plain:  # no initial check and no projection (what the horizon sweep measures)
            kw["initial_conditions"] = ukjax.IgnoreInitial()
        if isinstance(adjoint, diffrax.BacksolveAdjoint):  # refuses the per-step projection
            kw["stabilization"] = ukjax.NoStabilization()
        if controller is None:
            kw.update(rtol=1e-8, atol=1e-8)
        else:
            kw.update(stepsize_controller=controller, dt0=dt0)

        def loss(theta):
            s = eqx.tree_at(lambda s: (s.masses, s.damping), base, (theta[:N], theta[N:]))
            return jnp.sum(ukjax.simulate(s, q0, qd0, ts_, **kw).q @ w)

        return loss

    fwd = jax.jit(make_loss())
    s0 = eqx.tree_at(lambda s: (s.masses, s.damping), base, (theta0[:N], theta0[N:]))
    sol0 = ukjax.simulate(s0, q0, qd0, ts, solver=diffrax.Tsit5(), rtol=1e-8, atol=1e-8)
    results_steps = int(sol0.stats["num_steps"])
    c_fwd, _ = compile_time(make_loss(), theta0)
    t_fwd = best_time(fwd, theta0)
    rows, results = [], {"steps": results_steps}
    g_ref = None
    adjoints = {
        "default: ukjax.ReplayAdjoint (reverse)": ("rev", None),
        "default: ukjax.ReplayAdjoint (jacfwd)": ("fwd", None),
        "ukjax.ReverseReplayAdjoint (reverse only; what fit uses)": (
            "rev",
            ukjax.ReverseReplayAdjoint(),
        ),
        "RecursiveCheckpointAdjoint (diffrax's default)": (
            "rev",
            diffrax.RecursiveCheckpointAdjoint(),
        ),
        "RecursiveCheckpointAdjoint(checkpoints=1024)": (
            "rev",
            diffrax.RecursiveCheckpointAdjoint(checkpoints=1024),
        ),
        "BacksolveAdjoint (reverse, continuous; NoStabilization)": (
            "rev",
            diffrax.BacksolveAdjoint(),
        ),
        "ForwardMode (jacfwd)": ("fwd", diffrax.ForwardMode()),
        # Reverse mode through diffrax's bounded loop: its program and memory grow with
        # max_steps, so it runs with max_steps = 4096 (diffrax's default), not 100 000.
        "DirectAdjoint (reverse, max_steps=4096)": ("rev", diffrax.DirectAdjoint()),
    }
    for name, (mode, adj) in adjoints.items():
        direct = isinstance(adj, diffrax.DirectAdjoint)
        loss = make_loss(adj, max_steps=4096) if direct else make_loss(adj)
        f = (
            jax.value_and_grad(loss)
            if mode == "rev"
            else (lambda th, loss=loss: (loss(th), jax.jacfwd(loss)(th)))
        )
        c, _ = compile_time(f, theta0)
        t = best_time(jax.jit(f), theta0)
        _, g = jax.jit(f)(theta0)
        g_ref = g if g_ref is None else g_ref
        err = float(jnp.max(jnp.abs(g - g_ref)) / jnp.max(jnp.abs(g_ref)))
        results[name] = {
            "compile_s": c,
            "run_s": t,
            "ratio_to_forward": t / t_fwd,
            "max_rel_diff_vs_default": err,
        }
        rows.append((name, c, t, t / t_fwd, err))
    # Where each reverse pass spends its time: the forward sweep that records the states
    # (every accepted step for the replay, checkpoints for diffrax's loop; jax.vjp without
    # the pullback) and the rest of value_and_grad (the pullback: each step replayed from
    # its stored state and transposed). A pullback jitted on its own is slower than inside
    # value_and_grad (its residuals cross a program boundary), so it is the difference.
    for key, name in (
        ("split of the default reverse pass", "default: ukjax.ReplayAdjoint (reverse)"),
        ("split of diffrax's checkpointed pass", "RecursiveCheckpointAdjoint (diffrax's default)"),
    ):
        loss = make_loss(adjoints[name][1])
        t_vjp_fwd = best_time(jax.jit(lambda th, loss=loss: jax.vjp(loss, th)), theta0)
        t_total = results[name]["run_s"]
        results[key] = {"recording_forward_s": t_vjp_fwd, "pullback_s": t_total - t_vjp_fwd}
    # The floor: the same loop, solver, tolerances and parameter count on a plain diffrax
    # ODE of the same state size (N damped oscillators, no constraints, no checks).
    results["plain diffrax ODE of the same size"] = toy_floor(N, ts, w, theta0)
    # The peer: central finite differences, 2p + 1 forward solves.
    p = theta0.size
    h = 1e-5

    def fd(theta):
        gs = []
        for i in range(p):
            e = jnp.zeros(p).at[i].set(h)
            gs.append((fwd(theta + e) - fwd(theta - e)) / (2 * h))
        return fwd(theta), jnp.stack(gs)

    t0 = time.perf_counter()
    _, g_fd = fd(theta0)
    jax.block_until_ready(g_fd)
    t_fd = time.perf_counter() - t0
    err_fd = float(jnp.max(jnp.abs(g_fd - g_ref)) / jnp.max(jnp.abs(g_ref)))
    results["central finite differences (2p+1 solves)"] = {
        "run_s": t_fd,
        "ratio_to_forward": t_fd / t_fwd,
        "max_rel_diff_vs_default": err_fd,
    }
    rows.append(("central finite differences (2p+1 solves)", 0.0, t_fd, t_fd / t_fwd, err_fd))

    info = machine_info()
    print(
        f"JAX {info['jax']} on {info['backend']} ({info['cpu_count']} CPUs), float64; "
        f"{N}-link chain, p = {p} parameters, adaptive Tsit5 rtol=atol=1e-8, t in [0, 3]"
    )
    print(f"forward simulate: compile {c_fwd:.2f} s, run {1e3 * t_fwd:.2f} ms")
    print(f"{'method':<46}{'compile s':>10}{'run ms':>10}{'/forward':>10}{'rel diff':>10}")
    for name, c, t, r, e in rows:
        print(f"{name:<46}{c:>10.2f}{1e3 * t:>10.2f}{r:>10.2f}{e:>10.1e}")
    for key in ("split of the default reverse pass", "split of diffrax's checkpointed pass"):
        split = results[key]
        print(
            f"{key[9:]}: recording forward sweep {1e3 * split['recording_forward_s']:.2f}"
            f" ms + pullback {1e3 * split['pullback_s']:.2f} ms"
        )
    toy = results["plain diffrax ODE of the same size"]
    print(
        f"plain diffrax ODE, {2 * N} states, same solver/tolerances: forward "
        f"{1e3 * toy['forward_s']:.3f} ms, value_and_grad {1e3 * toy['grad_s']:.3f} ms: "
        f"{toy['ratio_to_forward']:.2f}x ({toy['steps']} steps; ukjax chain "
        f"{results['steps']} steps)"
    )
    payload = {
        "machine": info,
        "links": N,
        "p": p,
        "forward_s": t_fwd,
        "forward_compile_s": c_fwd,
        "results": results,
    }
    if args.skip_memory:
        write_json(args.json, payload)
        return

    # Memory for long horizons (fixed step dt = 0.01): XLA's compiled temp allocation.
    print("\ncompiled working memory (MiB) of value_and_grad vs horizon, fixed dt = 0.01")
    print(
        f"{'horizon (steps)':<18}{'forward':>10}{'replay':>10}{'recursive ckpt':>16}"
        f"{'backsolve':>12}{'forward mode':>14}"
    )
    mem = {}
    for T in (10.0, 100.0, 1000.0):
        steps = int(T / 0.01)
        tsT = jnp.linspace(0.0, T, 21)
        mk = lambda adj: make_loss(
            adj, diffrax.ConstantStepSize(), 0.01, tsT, steps + 10, plain=True
        )
        entries = {
            "forward": mk(None),
            "replay": jax.value_and_grad(mk(None)),
            "recursive": jax.value_and_grad(mk(diffrax.RecursiveCheckpointAdjoint())),
            "backsolve": jax.value_and_grad(mk(diffrax.BacksolveAdjoint())),
            "forward_mode": jax.jacfwd(mk(diffrax.ForwardMode())),
        }
        mem[steps] = {}
        for k, f in entries.items():
            _, comp = compile_time(f, theta0)
            ma = comp.memory_analysis()
            mem[steps][k] = (ma.temp_size_in_bytes if ma is not None else float("nan")) / 2**20
        m = mem[steps]
        print(
            f"{steps:<18,}{m['forward']:>10.2f}{m['replay']:>10.2f}{m['recursive']:>16.2f}"
            f"{m['backsolve']:>12.2f}"
            f"{m['forward_mode']:>14.2f}"
        )
    write_json(args.json, {**payload, "temp_memory_mib": mem})


if __name__ == "__main__":
    main()

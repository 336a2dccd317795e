"""IFToMM benchmark A02: the N-four-bar mechanism through its singular positions.

A chain of N parallelogram four-bars (2N + 1 rods of 1 m and 1 kg, gravity -y) starts with
vertical cranks and B_0 moving at 1 m/s along +x (M. González et al., *A benchmarking
system for MBS simulation software*, Multibody Syst. Dyn. 16 (2006)). Twice per
revolution every bar is horizontal: the constraint Jacobian drops from rank 2N + 1 to
N + 1 and the mechanism could leave the parallelogram branch. ukjax runs it in natural
coordinates (`ukjax.systems.NFourBar`) at the default settings: Dopri8 at rtol = atol =
1e-12, the `Regularized` UK solve (continuous through the rank drop) and the default
projection after every step (`Projection(iterations=1, saves=False)`), which the singular
passes need: without it (`stabilization=ukjax.NoStabilization()`) drift splits the
branch crossing and the motion can leave the branch.

Reference: the parallelogram branch's one-degree-of-freedom equation
((N+1)/3 + N) th'' = -((N+1)/2 + N) g cos th, integrated by scipy DOP853 at 1e-13
(tests/references.py), which gives the benchmark's reference motion of B_0.

Printed per N: steps, run time, singular passes, the largest B_0 error (the benchmark asks
1e-3 for "high precision"), energy drift and constraint residual. Figures: B_0 against the
reference, and the error, energy drift and residual over time.

    python examples/n_four_bar_benchmark.py [--quick] [--out DIR] [--N 1 2 10]
"""

import time

import jax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

import ukjax
from _common import example_args, save_figure
from references import nfour_bar_crank_angle
from ukjax.systems import NFourBar


def run(N: int, T: float) -> dict:
    chain = NFourBar(N=N)
    q0, qd0 = chain.initial_state()
    ts = jnp.linspace(0.0, T, int(40 * T) + 1)
    t0 = time.perf_counter()
    sol = jax.block_until_ready(ukjax.simulate(chain, q0, qd0, ts))
    wall = time.perf_counter() - t0
    theta = nfour_bar_crank_angle(N, np.asarray(ts))
    ref = np.stack([np.cos(theta), np.sin(theta)], axis=1)
    err = np.max(np.abs(np.asarray(sol.q)[:, :2] - ref), axis=1)
    E = jax.vmap(lambda q, qd: ukjax.energy(chain, 0.0, q, qd))(sol.q, sol.qd)
    phi = jax.vmap(lambda q: chain.holonomic(0.0, q))(sol.q)
    passes = int(np.sum(np.diff(np.floor(theta / np.pi)) != 0))
    return dict(
        N=N,
        ts=np.asarray(ts),
        q=np.asarray(sol.q),
        ref=ref,
        err=err,
        dE=np.abs(np.asarray(E - E[0])),
        phi=np.max(np.abs(np.asarray(phi)), axis=1),
        steps=int(sol.stats["num_steps"]),
        wall=wall,
        passes=passes,
    )


def main() -> None:
    args = example_args(
        __doc__, lambda p: p.add_argument("--N", type=int, nargs="+", default=[1, 2, 10])
    )
    T = 2.0 if args.quick else 10.0
    runs = [run(N, T) for N in ([1] if args.quick else args.N)]
    print(
        f"{'N':>3} {'steps':>6} {'wall s':>7} {'passes':>6} {'max |B0 err|':>12} "
        f"{'max |dE|':>9} {'max |phi|':>9}"
    )
    for r in runs:
        print(
            f"{r['N']:>3} {r['steps']:>6} {r['wall']:>7.2f} {r['passes']:>6} "
            f"{r['err'].max():>12.2e} {r['dE'].max():>9.1e} {r['phi'].max():>9.1e}"
        )

    fig, axes = plt.subplots(2, 2, figsize=(11, 7))
    r0 = runs[0]
    ax = axes[0, 0]
    ax.plot(r0["ts"], r0["q"][:, 0], label="x_B0 ukjax")
    ax.plot(r0["ts"], r0["q"][:, 1], label="y_B0 ukjax")
    ax.plot(r0["ts"], r0["ref"][:, 0], "k--", lw=0.8, label="reference")
    ax.plot(r0["ts"], r0["ref"][:, 1], "k--", lw=0.8)
    singular = r0["ts"][np.abs(r0["ref"][:, 1]) < 0.08]
    ax.plot(singular, np.zeros_like(singular), "r.", ms=3, label="near singular")
    ax.set(xlabel="t [s]", ylabel="m", title=f"B0 of the N = {r0['N']} chain")
    ax.legend(fontsize=8)
    for key, ax, title in (
        ("err", axes[0, 1], "|B0 - reference|"),
        ("dE", axes[1, 0], "energy drift |E - E0| [J]"),
        ("phi", axes[1, 1], "constraint residual max|phi|"),
    ):
        for r in runs:
            ax.semilogy(r["ts"], np.maximum(r[key], 1e-17), label=f"N = {r['N']}")
        ax.set(xlabel="t [s]", title=title)
        ax.legend(fontsize=8)
    save_figure(fig, args, "n_four_bar_benchmark.png")


if __name__ == "__main__":
    main()

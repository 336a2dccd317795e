"""Zhao et al. 2018, §8.1: a unit-mass particle held on the logarithmic spiral r = e^{0.1 theta} and
driven along theta = 30 - t (two holonomic constraints, A square). Figs 2-5, for both the
seed's metric M = I and the Lagrangian metric M = diag(1, r^2).

    python examples/log_spiral_particle.py [--quick] [--out DIR]
"""

import jax.numpy as jnp
import matplotlib.pyplot as plt

import ukjax
from _common import example_args, save_figure
from references import log_spiral_exact
from ukjax.systems import LagrangianMetric, LogSpiralParticle, UnitMetric


METRICS = {"seed": UnitMetric(), "lagrangian": LagrangianMetric()}


def main():
    args = example_args(__doc__)
    ts = jnp.linspace(0.0, 30.0, 151 if args.quick else 601)
    fig, ax = plt.subplots(1, 4, figsize=(19, 4.3))
    for metric, style in (("seed", "-"), ("lagrangian", "--")):
        s = LogSpiralParticle(metric=METRICS[metric])
        q0, qd0 = s.initial_state()
        sol = ukjax.simulate(s, q0, qd0, ts)
        r, th = sol.q[:, 0], sol.q[:, 1]
        r_ex, th_ex = log_spiral_exact(s, ts)
        eps1 = jnp.hypot(r - jnp.exp(0.1 * th), th + ts - 30)
        eps2 = jnp.hypot(sol.qd[:, 0] - 0.1 * jnp.exp(0.1 * th) * sol.qd[:, 1], sol.qd[:, 1] + 1)
        d = ukjax.diagnostics(s, sol)
        print(
            f"metric={metric:<10} max|r - e^(3-0.1t)|/r = "
            f"{float(jnp.max(jnp.abs(r / r_ex - 1))):.1e}, "
            f"max eps1 = {float(eps1.max()):.1e}, max eps2 = {float(eps2.max()):.1e}, "
            f"F^C(0) = {[round(float(v), 4) for v in d.Qc_ideal[0]]}"
        )
        ax[0].plot(th, r, style, label=metric)
        ax[1].plot(ts, r, style, label=f"r ({metric})")
        ax[1].plot(ts, th, style, label=f"theta ({metric})")
        ax[2].plot(r * jnp.cos(th), r * jnp.sin(th), style, label=metric)
        ax[3].semilogy(ts, eps1 + 1e-18, style, label=f"eps1 ({metric})")
        ax[3].semilogy(ts, eps2 + 1e-18, style, label=f"eps2 ({metric})")
    ax[0].set(title="Fig 2: r vs theta", xlabel="theta (rad)", ylabel="r")
    ax[1].set(title="Fig 3: r(t), theta(t)", xlabel="t (s)")
    ax[2].set(title="Fig 4: Cartesian path (inward from G)", xlabel="x", ylabel="y", aspect="equal")
    ax[3].set(title="Fig 5: error measures eqs 58-59", xlabel="t (s)")
    for a in ax:
        a.legend(fontsize=7)
    save_figure(fig, args, "log_spiral_particle.png")


if __name__ == "__main__":
    main()

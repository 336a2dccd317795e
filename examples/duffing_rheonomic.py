"""Seed 000 §3.3: the two-mass Duffing oscillator with the rheonomic constraint
x1 - x2 = A0 e^{-alpha t} sin(omega t) (seed values; Figs 2-6).

    python examples/duffing_rheonomic.py [--quick] [--out DIR]
"""

import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

import ukjax
from _common import example_args, save_figure
from ukjax.systems import DuffingOscillator


def main():
    args = example_args(__doc__)
    con = DuffingOscillator()
    free = DuffingOscillator(constrained=False)
    q0, qd0 = con.initial_state()
    ts = jnp.linspace(0.0, 5.0, 201 if args.quick else 501)  # the seed's 0.01 s output
    sol_free = ukjax.simulate(free, q0, qd0, ts)
    sol = ukjax.simulate(con, q0, qd0, ts)
    d = ukjax.diagnostics(con, sol)
    target = con.prescribed_relative_motion(ts)
    error = sol.q[:, 0] - sol.q[:, 1] - target
    F = d.Qc_ideal
    print("Duffing oscillator, seed 000 §3.3 (Dopri8, rtol = atol = 1e-12)")
    print(
        f"  max |error(t)| = max |x1 - x2 - A0 e^(-at) sin(wt)| : {float(jnp.abs(error).max()):.2e}"
    )
    print(
        "  max |F1 + F2| (constraint forces cancel, eq 68)     : "
        f"{float(jnp.abs(F.sum(1)).max()):.2e}"
    )
    print(
        "  max |A qdd - b|                                      : "
        f"{float(jnp.abs(d.acceleration).max()):.2e}"
    )
    print(
        f"  x(5) constrained = {np.round(np.asarray(sol.q[-1]), 6)}, free = "
        f"{np.round(np.asarray(sol_free.q[-1]), 6)}"
    )

    fig, ax = plt.subplots(2, 3, figsize=(16, 8))
    ax[0, 0].plot(ts, sol_free.q[:, 0], label="x1")
    ax[0, 0].plot(ts, sol_free.q[:, 1], "--", label="x2")
    ax[0, 0].set(title="Fig 2: unconstrained response", xlabel="t (s)")
    ax[0, 1].plot(ts, sol.q[:, 0], label="x1")
    ax[0, 1].plot(ts, sol.q[:, 1], "--", label="x2")
    ax[0, 1].set(title="Fig 3: constrained response", xlabel="t (s)")
    ax[0, 2].plot(ts, sol.q[:, 0] - sol.q[:, 1], label="x1 - x2")
    ax[0, 2].plot(ts, target, "--", label="A0 e^{-at} sin(wt)")
    ax[0, 2].set(title="Fig 4: relative motion vs prescribed", xlabel="t (s)")
    ax[1, 0].plot(ts, F[:, 0], label="on m1")
    ax[1, 0].plot(ts, F[:, 1], "--", label="on m2")
    ax[1, 0].set(title="Fig 5: constraint forces", xlabel="t (s)", ylabel="N")
    ax[1, 1].plot(ts, error)
    ax[1, 1].set(title="Fig 6: error(t) = x1 - x2 - A0 e^{-at} sin(wt)", xlabel="t (s)")
    ax[1, 2].plot(ts, d.energy, label="E = T + V (not conserved: dampers, actuator)")
    ax[1, 2].set(title="mechanical energy", xlabel="t (s)")
    for a in ax.ravel():
        if a.get_legend_handles_labels()[0]:
            a.legend(fontsize=8)
    save_figure(fig, args, "duffing_rheonomic.png")


if __name__ == "__main__":
    main()

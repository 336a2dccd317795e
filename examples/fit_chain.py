"""Identify the link masses and joint damping of a 3-link planar pendulum chain from noisy
positions and measured constraint forces, with ukjax.fit.

Experiment (synthetic): the chain (masses 1.0, 0.7, 0.5 kg, links 1.0, 0.8, 0.6 m,
viscous joint damping 0.30, 0.20, 0.10 N s/m) is released from rest at 3 different
configurations; t in [0, 3] s, 61 samples. Measured: bob positions (sigma = 1 mm) and the
generalized constraint forces (the rod tensions resolved on the bobs; 1 % of their RMS),
e.g. from load cells in the links.

Why these observations. In a uniform gravity field, scaling every mass and every damping
coefficient by the same factor leaves the motion unchanged, so positions alone determine
only ratios (m_i / m_1, c_i / m_1). The rod tensions scale with the masses and fix the
absolute scale. Several release configurations excite every damper.

    python examples/fit_chain.py [--quick] [--out DIR]
"""

import diffrax
import jax.numpy as jnp
import matplotlib.pyplot as plt
import numpy as np

import ukjax
from _common import example_args, save_figure
from ukjax.systems import PlanarChain


def main():
    args = example_args(__doc__)
    lengths = jnp.array([1.0, 0.8, 0.6])
    true = PlanarChain(
        masses=jnp.array([1.0, 0.7, 0.5]), lengths=lengths, damping=jnp.array([0.3, 0.2, 0.1])
    )
    angles = jnp.array([[0.6, 1.0, 1.4], [-0.8, 0.2, 1.2], [1.2, -0.4, 0.3]])
    states = [true.state_from_angles(a, jnp.zeros(3)) for a in angles]
    Q0 = jnp.stack([s[0] for s in states])
    QD0 = jnp.stack([s[1] for s in states])
    n = 31 if args.quick else 61
    ts = jnp.linspace(0.0, 3.0, n)
    sim = dict(
        initial_conditions=ukjax.IgnoreInitial(),
        solver=diffrax.Tsit5(),
        rtol=1e-8,
        atol=1e-8,
        # LAPACK kernels: the reverse-mode program of this n = 6 chain compiles in 43 s with
        # them and in 100 s with the default unrolled kernels (2-core CPU, same results);
        # the unrolled kernels pay off in wide vmap batches, not for three trajectories.
        uk_solver=ukjax.Regularized(kernels=ukjax.LapackKernels()),
    )
    z = jnp.zeros((3, n, 6))
    clean = ukjax.predict(true, ukjax.TrajectoryData(ts, Q0, QD0, q=z, constraint_forces=z), **sim)
    rng = np.random.default_rng(1)
    F_rms = float(jnp.sqrt(jnp.mean(clean["constraint_forces"] ** 2)))
    data = ukjax.TrajectoryData(
        ts,
        Q0,
        QD0,
        q=clean["q"] + 1e-3 * rng.standard_normal(z.shape),
        constraint_forces=clean["constraint_forces"] + 0.01 * F_rms * rng.standard_normal(z.shape),
    )
    start = PlanarChain(
        masses=jnp.array([1.4, 0.5, 0.7]), lengths=lengths, damping=jnp.array([0.2, 0.3, 0.05])
    )
    res = ukjax.fit(
        start,
        data,
        params=["masses", "damping"],
        max_steps=2 if args.quick else 200,
        progress=10,
        **sim,
    )
    print(res)
    worst = 0.0
    print(f"{'param':<12}{'true':>8}{'start':>8}{'fitted':>11}{'error %':>9}")
    for name in ("masses", "damping"):
        for i in range(3):
            t = float(getattr(true, name)[i])
            s = float(getattr(start, name)[i])
            f = float(res.params[name][i])
            worst = max(worst, abs(f / t - 1))
            print(f"{name}[{i}]{'':<3}{t:>8.3f}{s:>8.3f}{f:>11.5f}{100 * (f / t - 1):>9.3f}")
    print(f"largest relative error: {100 * worst:.3f} % after {res.steps} L-BFGS steps")

    pred = ukjax.predict(res.system, data, **sim)
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.3))
    axes[0].semilogy(res.losses)
    axes[0].set(xlabel="L-BFGS step", ylabel="loss", title="loss")
    for b in range(3):
        axes[1].plot(data.q[0, :, 2 * b], data.q[0, :, 2 * b + 1], ".", ms=2)
        axes[1].plot(
            pred["q"][0, :, 2 * b], pred["q"][0, :, 2 * b + 1], "-", lw=1, label=f"bob {b + 1}"
        )
    axes[1].set(
        title="run 1: measured (dots) vs fitted paths",
        xlabel="x (m)",
        ylabel="y (m)",
        aspect="equal",
    )
    axes[1].legend(fontsize=7)
    tsn = np.asarray(ts)
    for k in (1, 3, 5):
        axes[2].plot(tsn, data.constraint_forces[0, :, k], ".", ms=2)
        axes[2].plot(tsn, pred["constraint_forces"][0, :, k], "-", lw=1, label=f"Qc[{k}]")
    axes[2].set(title="run 1: constraint forces (y components)", xlabel="t (s)", ylabel="N")
    axes[2].legend(fontsize=7)
    save_figure(fig, args, "fit_chain.png")


if __name__ == "__main__":
    main()

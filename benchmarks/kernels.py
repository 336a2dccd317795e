"""UK right-hand side kernels: ukjax's solve methods (svd, cholesky, lapack, unrolled, auto),
batched with vmap
under jit, against the seeds' MATLAB-style workflow in NumPy (a loop of M^{-1/2} by eigh and
`pinv`, one state at a time) and against NumPy's stacked (batched) `pinv`.

    python benchmarks/kernels.py [--quick] [--json benchmarks/out/kernels.json]

Each row: the time per state (microseconds) of each method at one (n, m, batch); compile time
is reported separately. All methods are checked to agree (max relative difference printed).
"""

import argparse

import jax


jax.config.update("jax_enable_x64", True)
import numpy as np

import ukjax
from _common import (
    best_time,
    machine_info,
    out_path,
    seed_workflow_uk,
    time_compile_and_run,
    write_json,
)


def problem(rng, B, n, m):
    X = rng.standard_normal((B, n, n))
    M = X @ np.swapaxes(X, 1, 2) + n * np.eye(n)
    Q = rng.standard_normal((B, n))
    A = rng.standard_normal((B, m, n))
    b = rng.standard_normal((B, m))
    return M, Q, A, b


def numpy_loop(M, Q, A, b):
    return np.stack([seed_workflow_uk(M[i], Q[i], A[i], b[i]) for i in range(len(Q))])


def numpy_stacked(M, Q, A, b):
    w, V = np.linalg.eigh(M)
    Mih = (V / np.sqrt(w)[:, None, :]) @ np.swapaxes(V, 1, 2)
    a = np.linalg.solve(M, Q[..., None])[..., 0]
    P = np.linalg.pinv(A @ Mih)
    return a + (Mih @ (P @ (b - (A @ a[..., None])[..., 0])[..., None]))[..., 0]


SOLVERS = {
    "svd": ukjax.SVD(),
    "cholesky": ukjax.Cholesky(kernels=ukjax.LapackKernels()),
    "lapack": ukjax.CholeskyWithFallback(kernels=ukjax.LapackKernels()),
    "unrolled": ukjax.CholeskyWithFallback(kernels=ukjax.UnrolledKernels()),
    "auto": ukjax.CholeskyWithFallback(),
}


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json", default=out_path("kernels.json"))
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    sizes = [
        (2, 1),
        (3, 2),
        (4, 2),
        (6, 3),
        (8, 4),
        (8, 7),
        (10, 5),
        (12, 6),
        (24, 12),
        (48, 24),
        (48, 47),
    ]
    batches = [1, 1024, 16384]
    if args.quick:
        sizes, batches = [(3, 2), (12, 6)], [1, 256]
    rows = []
    print(machine_info())
    print(
        f"{'n':>3} {'m':>3} {'batch':>6} | {'svd':>9} {'cholesky':>9} {'lapack':>9} "
        f"{'unrolled':>9} "
        f"{'auto':>9} | {'np loop':>9} {'np stack':>9} | us/state; compile s (lapack, unrolled) "
        "| agree"
    )
    for n, m in sizes:
        for B in batches:
            if B * n * n > 16384 * 24 * 24:
                continue
            M, Q, A, b = problem(rng, B, n, m)
            row = {"n": n, "m": m, "batch": B}
            outs = {}
            for method in ("svd", "cholesky", "lapack", "unrolled", "auto"):
                if method == "unrolled" and n > 12:  # compile time grows like n^3 (90 s at n = 24)
                    row[method] = row[f"compile_{method}"] = float("nan")
                    continue
                fn = jax.vmap(
                    lambda M, Q, A, b, s=SOLVERS[method]: ukjax.udwadia_kalaba(
                        M, Q, A, b, uk_solver=s, check=False
                    )
                )
                tc, tr, out = time_compile_and_run(fn, M, Q, A, b)
                row[method] = tr / B * 1e6
                row[f"compile_{method}"] = tc
                outs[method] = np.asarray(out)
            nb = min(B, 256)
            tl, ref = best_time(numpy_loop, M[:nb], Q[:nb], A[:nb], b[:nb], repeats=1)
            row["numpy_loop"] = tl / nb * 1e6
            ts_, outs["stack"] = best_time(numpy_stacked, M, Q, A, b)
            row["numpy_stacked"] = ts_ / B * 1e6
            scale = np.abs(ref).max()
            row["max_rel_diff"] = float(
                max(np.abs(o[:nb] - ref).max() for o in outs.values()) / scale
            )
            rows.append(row)
            print(
                f"{n:>3} {m:>3} {B:>6} | {row['svd']:9.2f} {row['cholesky']:9.2f} "
                f"{row['lapack']:9.2f} "
                f"{row['unrolled']:9.2f} {row['auto']:9.2f} | {row['numpy_loop']:9.2f} "
                f"{row['numpy_stacked']:9.2f} | {row['compile_lapack']:.2f} "
                f"{row['compile_unrolled']:.2f} | {row['max_rel_diff']:.1e}",
                flush=True,
            )
    write_json(args.json, {"machine": machine_info(), "rows": rows})


if __name__ == "__main__":
    main()

"""Where a hybrid batch's compile goes: JAX's trace and lowering, XLA's HLO passes, its
kernel emission and LLVM's code generation, and the compiled program's kernels by the
part of the run that issued them (issue 44 item 3).

Each case is one `jax.jit(jax.vmap(simulate))` program at every default of `simulate`
(`throw=True` included), compiled once in a fresh Python process (no cache) whose XLA
logs its compiler's phases (`TF_CPP_VMODULE=cpu_compiler=3`; the log lines are XLA:CPU's
own, of jaxlib 0.10: a phase whose line is missing is reported as n/a). The phases:

- **trace**, **lower**: `jax.jit(f).trace(...)` and `.lower()`;
- **HLO passes**: XLA's optimisation of the module (`Running HLO passes`);
- **emit**: from the start of the backend to the kernels handed to the JIT compiler
  (IR emission of every fusion and custom call, the thunk sequence);
- **LLVM**: the kernels' machine code (split into parts, on XLA's threads);
- **kernels**: how many kernels XLA compiled, and, from the compiled module, the
  kernel launches of each part of the run by kind (fusions; custom calls: LAPACK and
  callbacks; copies: layout changes; conditionals): the
  stages' vector field (`_field_call`), the event values (`event_values`), diffrax's
  root find (`root_find`), the checks (`_failures_call`), the event code (the segment's
  `cond` branch: switches, impacts, friction), the rest of diffrax's step loop, and the
  driver around it (the initial mode, the segments' bookkeeping).

Cases (`--cases`): `balls` (1024 `BouncingBall`s, `Impact(0.8)`, heights uniform in
[0.5, 2] m, 201 saves on [0, 2] s: the 1024-ball batch of item 3) and `friction` (1024
`BallsOnTable(count=1)` sliding and spinning, `Coulomb()`, 11 saves on [0, 0.8] s: the
frictional batch), as in `revisions.py` but with `throw=True`, the default.

    python benchmarks/compile_phases.py [--cases balls,friction] [--quick] [--json FILE]

`--quick`: the ball batch only.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import re
import subprocess
import sys
import tempfile
import time

from _common import ball_batch, friction_batch, machine_info, out_path, write_json


CASES = ("balls", "friction")
PARTS = (
    ("root find", "root_find"),
    ("event values", "event_values"),
    ("vector field", "_field_call"),
    ("checks", "_failures_call"),
    ("diffrax step loop", "diffeqsolve"),
    ("event code", "cond/branch_1_fun"),
)
"""(part, marker in the op_name): the first part whose marker an instruction's op_name
holds; the rest is the driver (the initial mode, the segment loop's bookkeeping)."""
LAUNCH = re.compile(r"= \S+ (fusion|custom-call|copy|while|conditional|sort|scatter|gather)\(")


def build(name: str):
    """(one member's run, the batch's arguments) of a case, at `simulate`'s defaults."""
    import ukjax

    if name == "balls":
        return ball_batch(ukjax)
    if name == "friction":
        return friction_batch(ukjax)
    raise ValueError(f"unknown case {name!r}: one of {', '.join(CASES)}.")


def part_of(op_name: str) -> str:
    """The part of the run an instruction's `op_name` (its nest of jits) belongs to."""
    for part, marker in PARTS:
        if marker in op_name:
            return part
    return "driver"


def kernels_by_part(hlo: str) -> dict[str, dict[str, int]]:
    """Kernel launches of the compiled module's non-fused computations, by part and by
    kind (fusion, custom-call: LAPACK and callbacks, copy: layout changes, conditional)."""
    counts: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for computation in re.split(r"\n\n", hlo):
        head = computation.lstrip().split("\n", 1)[0]
        if "fused_computation" in head or head.startswith("%wrapped"):
            continue
        for line in computation.splitlines()[1:]:
            launch = LAUNCH.search(line)
            if launch:
                m = re.search(r'op_name="([^"]*)"', line)
                counts[part_of(m.group(1) if m else "")][launch.group(1)] += 1
    ranked = sorted(counts.items(), key=lambda kv: -sum(kv[1].values()))
    return {part: dict(kinds.most_common()) for part, kinds in ranked}


def child(name: str, out: str) -> None:
    """Compile one case in this process (whose XLA logs its phases) and write its JAX
    phases and kernel counts to `out`."""
    import jax

    jax.config.update("jax_enable_x64", True)
    jax.jit(lambda x: x + 1.0)(1.0)  # the compiler's one-off start-up, not the case's
    fn, args = build(name)

    def batch(*a):
        return jax.vmap(fn)(*a)

    f = jax.jit(batch)
    t0 = time.perf_counter()
    traced = f.trace(*args)
    t1 = time.perf_counter()
    lowered = traced.lower()
    t2 = time.perf_counter()
    compiled = lowered.compile()
    t3 = time.perf_counter()
    result = {"trace": t1 - t0, "lower": t2 - t1, "xla": t3 - t2}
    result["parts"] = kernels_by_part(compiled.as_text())
    with open(out, "w") as fh:
        json.dump(result, fh)


def _stamp(line: str) -> float | None:
    m = re.match(r"[IWE]\d{4} (\d+):(\d+):([\d.]+)", line)
    return None if m is None else int(m.group(1)) * 3600 + int(m.group(2)) * 60 + float(m[3])


def xla_phases(log: str, module: str = "jit_batch") -> dict[str, float | int | None]:
    """HLO passes, emission and LLVM seconds and the kernel count of `module` from XLA's
    log (None where a line is missing)."""
    lines = log.splitlines()
    first = next((i for i, x in enumerate(lines) if f"Compiling: {module}" in x), len(lines))
    after = lines[first:]
    added = next((x for x in after if "kernels to the JIT compiler" in x), None)
    done = next((x for x in after if f"Compiling [{module}] for CPU using JIT" in x), None)
    passes = next((x for x in lines if f"Running HLO passes on [{module}]" in x), None)
    start = after[0] if after else None
    t_start, t_added, t_done = (_stamp(x) if x else None for x in (start, added, done))
    count = re.search(r"Adding (\d+) kernels", added) if added else None
    return {
        "hlo_passes": _logged_seconds(passes),
        "emit": _between(t_start, t_added),
        "llvm": _between(t_added, t_done),
        "kernels": None if count is None else int(count[1]),
    }


def _logged_seconds(line: str | None) -> float | None:
    """The duration XLA logged on `line` ("... (123456 us) ...")."""
    m = re.search(r"\((\d+) us\)", line) if line else None
    return None if m is None else float(m[1]) / 1e6


def _between(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else b - a


def run(name: str) -> dict:
    """One case in a fresh process: its phases and kernels."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "case.json")
        env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="0", TF_CPP_VMODULE="cpu_compiler=3")
        here = os.path.abspath(__file__)
        proc = subprocess.run(
            [sys.executable, here, "--child", name, "--out", out],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"case {name} failed:\n{proc.stderr[-3000:]}")
        with open(out) as fh:
            result = json.load(fh)
    result.update(xla_phases(proc.stderr))
    return result


def fmt(x) -> str:
    return "n/a" if x is None else f"{x:.2f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--quick", action="store_true", help="the ball batch only")
    ap.add_argument("--json", default=None)
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--out", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child is not None:
        child(args.child, args.out)
        return
    names = ["balls"] if args.quick else args.cases.split(",")
    rows = {name: run(name) for name in names}
    print(f"JAX {machine_info()['jax']} ({os.cpu_count()} CPUs), seconds; one compile each")
    head = "case        trace  lower  xla (HLO passes / emit / LLVM)        total  kernels"
    print(head)
    for name, r in rows.items():
        total = r["trace"] + r["lower"] + r["xla"]
        split = f"{fmt(r['hlo_passes'])} / {fmt(r['emit'])} / {fmt(r['llvm'])}"
        print(
            f"{name:<10} {r['trace']:6.2f} {r['lower']:6.2f} {r['xla']:6.2f} ({split:<22})"
            f" {total:6.2f}  {r['kernels']}"
        )
    for name, r in rows.items():
        print(f"{name}: kernel launches by part (by kind)")
        for part, kinds in r["parts"].items():
            detail = ", ".join(f"{kind} {count}" for kind, count in kinds.items())
            print(f"  {part:<18} {sum(kinds.values()):5d}  ({detail})")
    path = args.json or out_path("compile_phases.json")
    write_json(path, {"machine": machine_info(), "cases": rows})


if __name__ == "__main__":
    main()

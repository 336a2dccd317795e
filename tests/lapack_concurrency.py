"""How many of jaxlib's batched LAPACK calls a compiled CPU program lets run at once.

jaxlib 0.10 (its CPU LAPACK kernels, `jaxlib/cpu/lapack_kernels.cc`,
`GetLapackBatchChunkSize` and `ParallelBatchMap`) splits a batched LAPACK call whose batch
costs at least 2e5 FLOP by its own estimate into chunks on XLA's intra-op thread pool, and
the calling thread blocks until they finish. When P + 1 such calls run at the same time on
a pool of P threads (the caller of the program's executor and every pool thread each
blocked in one), nobody is left to run the chunks: the program hangs. On the 2-core box
three independent batched 32 x 32 Cholesky factorisations in one loop hang every time and
two never do (`benchmarks/RESULTS.md`, stop 89). The parallel path was taken out of
open-source builds upstream ("Don't try to parallelize LAPACK kernels in opensource
builds", jax commit 859992407d, 2026-07-21), but the registry here has jaxlib 0.10.2.

:func:`concurrent_lapack` bounds, from the compiled HLO alone, how many splitting calls
can be in flight together: the largest antichain of the dataflow graph of each computation
(instructions no path connects can run concurrently; XLA:CPU's executor adds ordering for
shared buffers, never removes it), where a loop, a conditional or a call counts with the
bound of the computations it runs. A program whose bound is at most 2 cannot deadlock this
way on any pool (one thread: jaxlib does not split; P >= 2 threads: P + 1 are needed).
"""

from __future__ import annotations

import functools
import re


# jaxlib's FLOP estimate per matrix (rows r, columns c of the call's first output) and its
# threshold for splitting a batch (`kMinWorkPerTask`).
_COST = {
    "potrf": lambda r, c: r * r * r // 3,
    "trsm": lambda r, c: r * c * r,
    "gesdd": lambda r, c: 10 * r * c * min(r, c),
    "gesvd": lambda r, c: 10 * r * c * min(r, c),
    "getrf": lambda r, c: r * c * min(r, c),
    "geqrf": lambda r, c: 2 * r * c * min(r, c),
    "syevd": lambda r, c: 4 * r * r * r,
}
_MIN_WORK = 200_000
_CALLED = ("calls", "body", "condition", "to_apply", "true_computation", "false_computation")


def _splits(instruction: str) -> bool:
    """Whether an HLO instruction is a batched LAPACK call that jaxlib splits."""
    target = re.search(r'custom_call_target="lapack_[sdcz](\w+?)_ffi"', instruction)
    shape = re.search(r"(?:f32|f64|c64|c128)\[([\d,]*)\]", instruction)
    if target is None or shape is None:
        return False
    dims = [int(d) for d in shape.group(1).split(",") if d]
    if len(dims) < 3:
        return False
    batch = 1
    for d in dims[:-2]:
        batch *= d
    cost = _COST.get(target.group(1), lambda r, c: r * c * min(r, c))
    return batch * cost(dims[-2], dims[-1]) >= _MIN_WORK


def _parse(hlo: str):
    """{computation: [(name, operands, called computations, splits)]} and the entry's name."""
    computations, current, entry = {}, None, None
    for line in hlo.splitlines():
        head = re.match(r"^(ENTRY )?%?([\w.\-]+) .*\{\s*$", line)
        if head and not line.startswith(" "):
            current = head.group(2)
            computations[current] = []
            entry = current if head.group(1) else entry
            continue
        if line.startswith("}"):
            current = None
            continue
        inst = re.match(r"\s*(?:ROOT )?%?([\w.\-]+) = (.*)$", line)
        if current is None or inst is None:
            continue
        name, rest = inst.groups()
        operands = re.findall(r"%([\w.\-]+)", rest.split("), ")[0])
        called = [c for key in _CALLED for c in re.findall(key + r"=%?([\w.\-]+)", rest)]
        branches = re.search(r"branch_computations=\{([^}]*)\}", rest)
        if branches:
            called += re.findall(r"%?([\w.\-]+)", branches.group(1))
        computations[current].append((name, operands, called, _splits(rest)))
    return computations, entry


def _max_antichain(weights: list[int], before) -> int:
    """Largest total weight of pairwise unordered nodes (Dilworth: the number of node
    copies less a maximum matching of the order's bipartite graph)."""
    copies = [i for i, w in enumerate(weights) for _ in range(w)]
    later = [[y for y, j in enumerate(copies) if before(i, j)] for i in copies]
    match = [-1] * len(copies)

    def augment(u, seen):
        for v in later[u]:
            if not seen[v]:
                seen[v] = True
                if match[v] < 0 or augment(match[v], seen):
                    match[v] = u
                    return True
        return False

    matched = sum(augment(u, [False] * len(copies)) for u in range(len(copies)))
    return len(copies) - matched


def concurrent_lapack(hlo: str) -> int:
    """An upper bound on the number of splitting batched LAPACK calls that the compiled
    program `hlo` (`jax.jit(f).lower(...).compile().as_text()`) can run at once."""
    computations, entry = _parse(hlo)

    @functools.cache
    def bound(name: str) -> int:
        instructions = computations.get(name, [])
        index = {inst[0]: i for i, inst in enumerate(instructions)}
        ancestors, weights = [], []
        for _, operands, called, splits in instructions:
            mask = 0
            for o in operands:
                if (j := index.get(o)) is not None:
                    mask |= ancestors[j] | (1 << j)
            ancestors.append(mask)
            inner = max((bound(c) for c in called if c in computations), default=0)
            weights.append(1 if splits else inner)
        nodes = [i for i, w in enumerate(weights) if w]
        order = lambda a, b: bool((ancestors[nodes[b]] >> nodes[a]) & 1)
        return _max_antichain([weights[i] for i in nodes], order) if nodes else 0

    return bound(entry)

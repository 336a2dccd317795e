"""Shared plumbing of the example scripts: float64, a headless matplotlib, ``--quick`` and
``--out``, saving figures, and access to the independent references in
``tests/references.py``. (Not an example itself.)"""

import argparse
import os
import sys

import jax
import matplotlib


jax.config.update("jax_enable_x64", True)
matplotlib.use("Agg")

# The independent references (hand-derived minimal equations, closed forms) live once, in
# tests/references.py; the examples compare against the same ones.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))


def example_args(
    doc: str, extra=None, quick_help="short run (CI smoke test)"
) -> argparse.Namespace:
    """Parse ``--quick`` (short runs for CI smoke tests) and ``--out DIR`` (default
    ``examples/out``), create the folder, and return the arguments. ``extra(parser)`` may add
    script-specific options."""
    ap = argparse.ArgumentParser(
        description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--quick", action="store_true", help=quick_help)
    ap.add_argument("--out", default="examples/out", help="folder for the figures")
    if extra is not None:
        extra(ap)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    return args


def save_figure(fig, args, name: str) -> str:
    """Lay out, save ``args.out/name`` at 110 dpi, and say where."""
    fig.tight_layout()
    path = os.path.join(args.out, name)
    fig.savefig(path, dpi=110)
    print(f"wrote {path}")
    return path

"""Every example script runs with --quick (smoke test) and writes its figures."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


EXAMPLES = sorted(
    p
    for p in (Path(__file__).parent.parent / "examples").glob("*.py")
    if not p.name.startswith("_")
)


# CI runs one (a constrained pendulum) to check the scripts' plumbing; the physics of the
# others is in CI through their modules' tests (servo constraints in test_servo.py, stick-slip in
# test_friction.py, fitting in test_fit.py, the rocking block in test_complementarity.py),
# and the scripts themselves are `extended` (CI's 30-minute budget).
IN_CI = {"pendulum_cartesian_uk"}


def _example(p: Path):
    mark = pytest.mark.slow if p.stem in IN_CI else pytest.mark.extended
    return pytest.param(p, id=p.stem, marks=mark)


@pytest.mark.parametrize("script", [_example(p) for p in EXAMPLES])
def test_example_runs_quick(script, tmp_path):
    env = dict(os.environ, MPLBACKEND="Agg")
    out = subprocess.run(
        [sys.executable, str(script), "--quick", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert list(tmp_path.glob("*.png")), "no figure written"


@pytest.mark.slow
def test_the_demo_command_writes_its_summary_and_figure(tmp_path):
    """README's first command: `ukjax demo` (a small batch here) prints its summary and
    writes the figure and the JSON summary, with invariants at the solver's tolerance."""
    out = subprocess.run(
        [sys.executable, "-m", "ukjax", "demo", "--batch", "8", "--t1", "1.0"]
        + ["--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
        env=dict(os.environ, MPLBACKEND="Agg"),
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert (tmp_path / "demo.png").stat().st_size > 10_000
    summary = json.loads((tmp_path / "demo_summary.json").read_text())
    assert summary["batch"] == 8 and summary["t1"] == 1.0
    # Dopri8 at rtol = atol = 1e-12 with the projection: residuals and energy error small
    assert summary["max_constraint_residual"] < 1e-8
    assert summary["max_relative_energy_error"] < 1e-8  # |E - E0| / (|E0| + T0)
    assert summary["max_|x+z-1|"] < 1e-12  # the case's invariant (Pamplona 2021, §3.4)


def test_examples_are_listed_in_the_readme():
    assert IN_CI <= {p.stem for p in EXAMPLES}
    readme = (Path(__file__).parent.parent / "examples" / "README.md").read_text()
    for script in EXAMPLES:
        assert script.name in readme, f"{script.name} missing from examples/README.md"


SEED_CASES = [  # issue 3's thirteen cases: each has examples/<case>.py
    "mp_inverse_identities",
    "constraint_ab_examples",
    "duffing_rheonomic",
    "double_rod_pendulum_3d",
    "simple_pendulum_lagrange_hamilton",
    "pendulum_cartesian_uk",
    "projectile_polar",
    "log_spiral_particle",
    "nonideal_constraint_properties",
    "cone_surface_particle",
    "nonholonomic_particle_alpha",
    "appell_hamel",
    "ellipse_spring_particle",
]


def test_every_seed_case_has_an_example():
    names = {p.stem for p in EXAMPLES}
    assert not [c for c in SEED_CASES if c not in names]

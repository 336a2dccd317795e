"""Every example script runs with --quick (smoke test) and writes its figures."""

import os
import subprocess
import sys
from pathlib import Path

import pytest


EXAMPLES = sorted((Path(__file__).parent.parent / "examples").glob("*.py"))


@pytest.mark.slow
@pytest.mark.parametrize("script", EXAMPLES, ids=lambda p: p.stem)
def test_example_runs_quick(script, tmp_path):
    env = dict(os.environ, MPLBACKEND="Agg")
    out = subprocess.run([sys.executable, str(script), "--quick", "--out", str(tmp_path)],
                         capture_output=True, text=True, timeout=600, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    assert list(tmp_path.glob("*.png")), "no figure written"


def test_examples_are_listed_in_the_readme():
    readme = (Path(__file__).parent.parent / "examples" / "README.md").read_text()
    for script in EXAMPLES:
        assert script.name in readme, f"{script.name} missing from examples/README.md"

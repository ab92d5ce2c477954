"""The package type-checks: the hints are part of how the code explains itself, and a
hint that lies (None where a Sampler lives, an action shadowing Textual's own) is a bug
waiting; mypy over nettop/ must stay clean (configuration in pyproject.toml)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_mypy_finds_no_errors_in_the_package():
    pytest.importorskip("mypy")
    run = subprocess.run([sys.executable, "-m", "mypy", "--no-error-summary", "nettop"], cwd=ROOT,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr

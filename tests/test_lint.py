"""The codebase stays ruff-clean (configuration in pyproject.toml)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_clean():
    ruff = shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff is not installed (it comes with the 'test' extra)")
    result = subprocess.run([ruff, "check", "--no-cache", str(ROOT)], capture_output=True,
                            text=True, cwd=ROOT)
    assert result.returncode == 0, result.stdout + result.stderr

"""The layering is a test: the ``import-linter`` contracts of ``pyproject.toml`` hold for the
package as it is, and catch an import from a lower layer to a higher one (shown on a copy of
the package with one such import added)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "src" / "ddflow"
LINT = [
    sys.executable,
    "-c",
    "from importlinter.cli import lint_imports_command; lint_imports_command()",
]


def _lint(src: Path, config: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(src)}
    return subprocess.run(
        [*LINT, str(config), "--no-cache"],
        capture_output=True,
        text=True,
        env=env,
        cwd=src,
        timeout=300,
    )


def _copy(tmp_path: Path) -> tuple[Path, Path]:
    src = tmp_path / "src"
    shutil.copytree(PACKAGE, src / "ddflow", ignore=shutil.ignore_patterns("__pycache__"))
    config = tmp_path / "pyproject.toml"
    shutil.copy(ROOT / "pyproject.toml", config)
    return src, config


def test_the_package_keeps_every_contract(tmp_path):
    src, config = _copy(tmp_path)
    done = _lint(src, config)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 kept, 0 broken" in done.stdout, done.stdout


def test_an_import_from_a_lower_layer_to_a_higher_one_is_caught(tmp_path):
    src, config = _copy(tmp_path)
    lattice = src / "ddflow" / "timely" / "lattice.py"
    lattice.write_text(lattice.read_text() + "\nfrom ddflow.api import dataflow  # noqa\n")
    done = _lint(src, config)
    assert done.returncode != 0
    assert "ddflow.timely is not allowed to import ddflow.api" in done.stdout, done.stdout
    assert "ddflow.timely.lattice -> ddflow.api.dataflow" in done.stdout, done.stdout


def test_pyspark_outside_the_spark_modules_is_caught(tmp_path):
    src, config = _copy(tmp_path)
    kernels = src / "ddflow" / "runtime" / "local" / "kernels.py"
    kernels.write_text(kernels.read_text() + "\nimport pyspark  # noqa\n")
    done = _lint(src, config)
    assert done.returncode != 0
    assert "ddflow.runtime.local.kernels -> pyspark" in done.stdout, done.stdout

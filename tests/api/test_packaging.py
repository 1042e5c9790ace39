"""The installed package tells type checkers it is typed (PEP 561): a ``py.typed`` marker
ships beside ``ddflow/__init__.py``, and the project's packaging configuration ships it in the
wheel (maturin ships every file of the Python package, from ``python-source``), with the native
core's declared surface, ``_native.pyi``."""

from __future__ import annotations

import tomllib
from pathlib import Path

import ddflow

ROOT = Path(__file__).resolve().parents[2]


def test_the_package_has_a_py_typed_marker() -> None:
    assert (Path(ddflow.__file__).parent / "py.typed").is_file()


def test_the_project_ships_the_py_typed_marker() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert config["build-system"]["build-backend"] == "maturin"
    package = ROOT / config["tool"]["maturin"]["python-source"] / "ddflow"
    assert (package / "py.typed").is_file()
    assert (package / "_native.pyi").is_file()
    assert config["tool"]["maturin"]["module-name"] == "ddflow._native"

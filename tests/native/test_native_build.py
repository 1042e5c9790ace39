"""The native core is built, current and clean: the installed extension is a release build of
the Rust sources in ``native/`` as they are now, and the workspace passes ``cargo fmt
--check``, ``cargo clippy -D warnings`` and ``cargo test`` (its proptest suites).

The cargo commands run in the workspace's own ``target/``, beside the release build that the
package's install made; each is bounded by a timeout, so a hung build fails the test."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from ddflow.runtime.native import build_info, source_fingerprint

WORKSPACE = Path(__file__).resolve().parents[2] / "native"
#: a cold build of the workspace's tests and lints on two cores takes about two minutes
CARGO_TIMEOUT = 900


def _cargo(*args: str) -> subprocess.CompletedProcess[str]:
    cargo = shutil.which("cargo")
    if cargo is None:
        pytest.fail("cargo is not on PATH: the native tests need the Rust toolchain")
    env = {**os.environ, "CARGO_TERM_COLOR": "never"}
    return subprocess.run(
        [cargo, *args],
        cwd=WORKSPACE,
        env=env,
        capture_output=True,
        text=True,
        timeout=CARGO_TIMEOUT,
        check=False,
    )


def test_the_extension_is_built_from_the_current_rust_sources() -> None:
    info = build_info()
    assert info.sources is not None, "the tests run from a source checkout with native/"
    assert info.fingerprint == info.sources, (
        f"ddflow._native was built from other Rust sources ({info.fingerprint}) than those in "
        f"native/ ({info.sources}): rebuild it with python3 -m pip install -e ."
    )
    assert info.current


def test_the_extension_is_a_release_build() -> None:
    assert build_info().profile == "release"


def test_a_changed_source_changes_the_fingerprint(tmp_path: Path) -> None:
    shutil.copytree(WORKSPACE, tmp_path / "native", ignore=shutil.ignore_patterns("target"))
    copy = tmp_path / "native"
    assert source_fingerprint(copy) == source_fingerprint(WORKSPACE)
    lib = copy / "core" / "src" / "lib.rs"
    lib.write_text(lib.read_text() + "\n")
    assert source_fingerprint(copy) != source_fingerprint(WORKSPACE)
    (copy / "target").mkdir()
    (copy / "target" / "stray.rs").write_text("// a build product, not a source")
    lib.write_text(lib.read_text()[:-1])
    assert source_fingerprint(copy) == source_fingerprint(WORKSPACE)


def test_a_checkout_without_a_workspace_has_no_source_fingerprint(tmp_path: Path) -> None:
    assert source_fingerprint(tmp_path) is None


def test_cargo_fmt_finds_nothing_to_change() -> None:
    done = _cargo("fmt", "--all", "--check")
    assert done.returncode == 0, f"cargo fmt --check:\n{done.stdout}{done.stderr}"


def test_cargo_clippy_finds_no_warning() -> None:
    done = _cargo("clippy", "--workspace", "--all-targets", "--locked", "--", "-D", "warnings")
    assert done.returncode == 0, f"cargo clippy:\n{done.stderr[-6000:]}"


def test_the_rust_tests_pass() -> None:
    done = _cargo("test", "--workspace", "--locked")
    assert done.returncode == 0, f"cargo test:\n{done.stdout[-6000:]}{done.stderr[-3000:]}"
    assert "test result: ok" in done.stdout

"""Which native build is loaded, and whether it is the build of the sources beside it.

The binding crate's build script stamps the extension with a fingerprint of the Rust sources
it was compiled from (``ddflow._native.SOURCE_FINGERPRINT``): FNV-1a, 64 bits, over every
``*.rs``, ``Cargo.toml`` and ``Cargo.lock`` of the workspace (``target/`` and hidden folders
left out), in the order of their paths relative to the workspace, each fed as its path, a zero
byte, its bytes and a zero byte. :func:`source_fingerprint` computes the same from the files on
disk, so a checkout whose Rust sources changed after the last install can tell
(:attr:`BuildInfo.current`).

>>> info = build_info()
>>> info.profile
'release'
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from ddflow.errors import DDFlowError

__all__ = ["BuildInfo", "build_info", "native", "source_fingerprint"]

_FNV_OFFSET = 0xCBF29CE484222325
_FNV_PRIME = 0x100000001B3
_MASK = (1 << 64) - 1

#: the Rust workspace of a source checkout (absent from an installed wheel)
WORKSPACE = Path(__file__).resolve().parents[4] / "native"


def native() -> ModuleType:
    """The extension module ``ddflow._native``; a :class:`~ddflow.errors.DDFlowError` that
    says how to build it when it is missing."""
    try:
        return importlib.import_module("ddflow._native")
    except ImportError as e:
        raise DDFlowError(
            "ddflow's native core (ddflow._native) is not built: install ddflow with "
            "'python3 -m pip install -e .' from the source folder (this needs a Rust toolchain, "
            f"cargo) or from a wheel ({e})"
        ) from e


def _fnv(hash_: int, data: bytes) -> int:
    for byte in data:
        hash_ = ((hash_ ^ byte) * _FNV_PRIME) & _MASK
    return hash_


def _sources(folder: Path) -> list[Path]:
    found = []
    for path in folder.iterdir():
        if path.is_dir():
            if path.name != "target" and not path.name.startswith("."):
                found.extend(_sources(path))
        elif path.suffix == ".rs" or path.name in ("Cargo.toml", "Cargo.lock"):
            found.append(path)
    return found


def source_fingerprint(workspace: Path = WORKSPACE) -> str | None:
    """The fingerprint of the Rust sources in ``workspace`` (see the module), as 16 hex
    digits; ``None`` where there is no workspace (an installed wheel)."""
    if not (workspace / "Cargo.toml").is_file():
        return None
    hash_ = _FNV_OFFSET
    named = sorted((p.relative_to(workspace).as_posix(), p) for p in _sources(workspace))
    for rel, path in named:
        hash_ = _fnv(hash_, rel.encode() + b"\0")
        hash_ = _fnv(hash_, path.read_bytes() + b"\0")
    return f"{hash_:016x}"


@dataclass(frozen=True)
class BuildInfo:
    """The loaded extension: its version, cargo profile and source fingerprint, and the
    fingerprint of the sources on disk (``None`` in an installed wheel)."""

    version: str
    profile: str
    fingerprint: str
    sources: str | None

    @property
    def current(self) -> bool:
        """Whether the extension was built from the sources on disk (true for a wheel)."""
        return self.sources is None or self.sources == self.fingerprint


def build_info() -> BuildInfo:
    """What :mod:`ddflow._native` was built from (see :class:`BuildInfo`)."""
    n = native()
    return BuildInfo(n.VERSION, n.BUILD_PROFILE, n.SOURCE_FINGERPRINT, source_fingerprint())

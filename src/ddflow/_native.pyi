"""The native core's Python surface (the extension module built from ``native/bindings``)."""

#: the version of the core crate
VERSION: str
#: the fingerprint of the Rust sources the extension was built from (ddflow.runtime.native)
SOURCE_FINGERPRINT: str
#: the cargo profile of the build (``"release"`` for an installed package)
BUILD_PROFILE: str

def time_less_equal(coordinates: list[str], s: list[int], t: list[int]) -> bool: ...
def time_join_meet(
    coordinates: list[str], s: list[int], t: list[int]
) -> tuple[list[int], list[int]]: ...
def time_advance_by(
    coordinates: list[str], t: list[int], frontier: list[list[int]]
) -> list[int]: ...

"""The native core's Python surface (the extension module built from ``native/bindings``)."""

from typing import Any

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
def int64_column(column: Any) -> list[int | None]: ...
def time_advance_by(
    coordinates: list[str], t: list[int], frontier: list[list[int]]
) -> list[int]: ...

class Reducer:
    """A reduce's two arrangements and its step in the core (ddflow.runtime.local.native_reducer).

    Columns cross as Arrow ``int64`` arrays (``__arrow_c_array__``); rows as tuples."""

    def __init__(
        self,
        coordinates: list[str],
        kind: str,
        aggs: list[tuple[str, int | None]],
        keys: int,
        values: int,
        booleans: list[bool],
    ) -> None: ...
    @property
    def evaluated(self) -> int: ...
    def take_columns(
        self, keys: list[Any], values: list[Any], times: list[Any], diffs: Any
    ) -> int: ...
    def take_rows(
        self,
        rows: list[tuple[Any, ...]],
        keys: list[int],
        values: list[int],
        times: list[int],
        diff: int,
    ) -> int: ...
    def pending(self) -> list[list[int]]: ...
    def evaluate(
        self, frontier: list[list[int]], small_rows: int
    ) -> tuple[list[Any], list[Any]] | None: ...
    def set_since(self, frontier: list[list[int]], fuel: int) -> None: ...
    def sizes(self) -> tuple[int, int]: ...
    def contents(self) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]: ...
    def load(self, input: tuple[Any, ...], output: tuple[Any, ...]) -> None: ...

class Tracker:
    """Progress tracking in the core (ddflow.runtime.native.progress): the methods of
    ddflow.timely.progress.Tracker that a scheduler calls."""

    def __init__(
        self,
        inputs: list[list[list[str]]],
        outputs: list[list[list[str]]],
        internal: list[list[tuple[int, int, int, list[int], list[int], list[str]]]],
        edges: list[tuple[int, int, int, int]],
        watched: list[int] | None,
        on_demand: list[int],
        merged: list[int],
    ) -> None: ...
    def update_source(self, node: int, port: int, time: tuple[int, ...], delta: int) -> None: ...
    def update_target(self, node: int, port: int, time: tuple[int, ...], delta: int) -> None: ...
    def count_pending(self) -> None: ...
    def pending_changes(self) -> int: ...
    def uncounted_changes(self) -> int: ...
    def propagate(self) -> set[int]: ...
    def frontier(self, node: int, port: int) -> list[tuple[int, ...]]: ...
    def all_complete(self) -> bool: ...

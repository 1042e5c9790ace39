"""A time window over recorded data that moves forward and backward.

:class:`ReplayWindow` holds a table of timestamped records (a day of mentions, a log) and keeps
an input equal to the records of one window ``start <= time < end``. Moving the window sends
only the difference: the records that enter are inserted and the records that leave are
removed, whatever the direction or the distance of the move. Which records those are is found
by binary search on the sorted times, so a move costs in proportion to the records that change,
not to the table.

For an unbounded stream whose records arrive once, in event-time order, see
:class:`ddflow.io.spark.EventTimeWindow` (it only moves forward, and keeps only live records).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl

from ddflow.errors import InputError, SchemaError, call_site

if TYPE_CHECKING:
    from ddflow.api.inputs import InputCollection

__all__ = ["ReplayWindow"]


def _minus(a: tuple[int, int], b: tuple[int, int]) -> list[tuple[int, int]]:
    """The row ranges of ``a`` not in ``b`` (half-open ranges of positions)."""
    parts = [(a[0], min(a[1], b[0])), (max(a[0], b[1]), a[1])]
    return [(lo, hi) for lo, hi in parts if lo < hi]


class ReplayWindow:
    """Keeps ``input`` equal to the records of ``data`` with ``start <= time < end``, where
    ``end - start == size``; :meth:`move_to` moves the window (in the input's current epoch:
    advance the dataflow and run it to see the result).

    ``data`` is any frame ``insert_frame`` accepts, with the input's columns (others are
    ignored); it is converted, checked against the input's schema and sorted by ``time_column``
    once, here.

    >>> import ddflow as dd
    >>> flow = dd.Dataflow()
    >>> events = flow.input("events", schema={"time": "int64", "user": "str"})
    >>> window = dd.io.ReplayWindow(events, {"time": [5, 1, 9, 3], "user": list("abcd")}, size=4)
    >>> out = events.output()
    >>> window.move_to(6); flow.advance_to(1); flow.run()
    (2, 0)
    >>> sorted(out.snapshot()["user"])
    ['a', 'd']
    >>> window.move_to(4); flow.advance_to(2); flow.run()  # back: 5 leaves, 1 enters
    (1, 1)
    >>> sorted(out.snapshot()["user"])
    ['b', 'd']
    """

    def __init__(
        self, input: InputCollection, data: Any, time_column: str = "time", *, size: int
    ) -> None:
        site = call_site()
        schema = input.schema
        if time_column not in schema.names:
            raise SchemaError(f"no time column {time_column!r} in the input's schema", site=site)
        if schema[time_column].kind != "int" or schema[time_column].nullable:
            raise SchemaError(
                f"the time column {time_column!r} must be a non-nullable integer column, "
                f"not {schema[time_column]}",
                site=site,
            )
        if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
            raise InputError(f"size must be a positive integer, got {size!r}", site=site)
        frame = pl.DataFrame(data) if isinstance(data, dict) else data
        if isinstance(frame, pl.DataFrame):
            frame = frame.select([c for c in schema.names if c in frame.columns])
        try:
            table = schema.frame_to_frame(frame)
        except SchemaError as e:
            raise SchemaError(f"the window's data: {e.message}", site=site) from e
        self.input = input
        self.column = time_column
        self.size = size
        self.table = table.sort(time_column, maintain_order=True)
        self.times = self.table.get_column(time_column).to_numpy()
        self.start: int | None = None
        self.end: int | None = None
        self._rows = (0, 0)  # the positions of the current window's records

    @property
    def first(self) -> int | None:
        """The earliest time in the data (None when there is no data)."""
        return int(self.times[0]) if len(self.times) else None

    @property
    def last(self) -> int | None:
        """The latest time in the data (None when there is no data)."""
        return int(self.times[-1]) if len(self.times) else None

    def rows(self) -> pl.DataFrame:
        """The records in the window now."""
        lo, hi = self._rows
        return self.table.slice(lo, hi - lo)

    def move_to(self, end: int) -> tuple[int, int]:
        """Make the window ``end - size <= time < end``: insert the records that enter and
        remove those that leave. Returns how many entered and how many left."""
        if isinstance(end, bool) or not isinstance(end, (int, np.integer)):
            raise InputError(f"the window's end must be an integer, got {end!r}", site=call_site())
        end = int(end)
        start = end - self.size
        lo, hi = np.searchsorted(self.times, [start, end], side="left").tolist()
        new, old = (lo, hi), self._rows
        entering = _minus(new, old)
        leaving = _minus(old, new)
        if leaving:
            self.input.remove_frame(pl.concat([self.table.slice(a, b - a) for a, b in leaving]))
        if entering:
            self.input.insert_frame(pl.concat([self.table.slice(a, b - a) for a, b in entering]))
        self._rows, self.start, self.end = new, start, end
        return sum(b - a for a, b in entering), sum(b - a for a, b in leaving)

"""An output's log of changes, as the local runtime keeps it.

An output receives each complete epoch's consolidated changes once. Small epochs' changes come
as the runtime holds them (rows, :mod:`ddflow.runtime.local.rows`) and are kept so: making a
frame of each epoch of small updates would cost more than the steps that computed them. They
are made frames when the log is read, a run of them (of one column layout) at a time, or once
``held_epochs`` of them are held.

Invariant: :meth:`ChangeLog.frames` returns, in epoch order, entries ``(first epoch, last
epoch, changes)`` whose changes are exactly those appended for the epochs ``first .. last``, as
Polars frames with the columns, ``__t0`` and ``__diff``.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from ddflow.runtime.local.rows import Rows

__all__ = ["ChangeLog"]


class ChangeLog:
    """The log of an output's changes (see the module)."""

    def __init__(self, held_epochs: int) -> None:
        self.held_epochs = held_epochs
        #: entries (first epoch, last epoch, changes: a Polars frame or rows)
        self.entries: list[tuple[int, int, Any]] = []
        #: entries still held as rows
        self._held = 0

    def __len__(self) -> int:
        return len(self.entries)

    def append(self, epoch: int, changes: Any) -> None:
        """Add an epoch's (non-empty) changes, as the runtime's ``to_log`` gave them."""
        self.entries.append((epoch, epoch, changes))
        if type(changes) is Rows:
            self._held += 1
            if self._held >= self.held_epochs:
                self.frames()

    @staticmethod
    def frame(changes: Any) -> pl.DataFrame:
        """One epoch's changes as a Polars frame."""
        return changes.to_frame() if type(changes) is Rows else changes

    def frames(self) -> list[tuple[int, int, pl.DataFrame]]:
        """The log, each run of entries held as rows (in one column order) made one frame."""
        if self._held:
            log: list[tuple[int, int, Any]] = []
            run: list[Any] = []  # (first epoch, last epoch, the run's first batch, its rows)

            def close() -> None:
                if run:
                    log.append((run[0], run[1], run[2].like(run[3]).to_frame()))
                    run.clear()

            for first, last, c in self.entries:
                if type(c) is not Rows:
                    close()
                    log.append((first, last, c))
                elif run and c.names == run[2].names and c.schema == run[2].schema:
                    run[1] = last
                    run[3].extend(c.rows)
                else:
                    close()
                    run.extend((first, last, c, list(c.rows)))
            close()
            self.entries = log
            self._held = 0
        return self.entries

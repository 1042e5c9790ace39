"""Small steps: the size below which a reduce kernel works row by row in Python.

Given at most ``reduce.small_rows`` updates (:class:`~ddflow.runtime.local.settings.LocalSettings`;
never where ``small_batch_rows`` is ``0``) a kernel of this package takes its row path, which
gives the same result as its columnar path without the fixed cost of a few dozen Polars calls
(a small update typically touches a handful of keys); its small results are then held as rows
(:class:`~ddflow.runtime.local.rows.Rows`, up to ``small_batch_rows`` of them), unless the row
paths are off.

>>> from ddflow.runtime.local.settings import ReduceSettings
>>> _limit(LocalSettings(reduce=ReduceSettings(small_rows=10)))
10
>>> _limit(LocalSettings(small_batch_rows=0))
-1
"""

from __future__ import annotations

from typing import Any

import polars as pl

from ddflow.runtime.local.rows import as_rows
from ddflow.runtime.local.settings import LocalSettings

__all__: list[str] = []


def _limit(settings: LocalSettings) -> int:
    """The most updates a kernel takes its row path for (-1: the row paths are off)."""
    return settings.reduce.small_rows if settings.small_batch_rows > 0 else -1


def _hold(data: pl.DataFrame, settings: LocalSettings) -> Any:
    """A result as rows when small, unless the row paths are off (``small_batch_rows`` 0)."""
    rows = settings.small_batch_rows
    return as_rows(data, rows if rows > 0 else -1)

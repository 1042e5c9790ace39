"""The embedded runtime: what a :class:`~ddflow.api.dataflow.Dataflow` runs on by default."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ddflow.runtime.local.kernels import LocalKernels
from ddflow.runtime.local.settings import LocalSettings

__all__ = ["LocalRuntime"]


class LocalRuntime:
    """The embedded runtime (the default): Polars batches in this process.

    ``settings``: the kernels' thresholds (:class:`~ddflow.runtime.local.settings.LocalSettings`);
    ``small_batch_rows`` overrides its field of that name: a batch of at most this many rows
    (a small step of an update) is held as Python tuples and processed without Polars; ``0``
    keeps every batch in Polars. Results do not depend on either.

    >>> import ddflow as dd
    >>> flow = dd.Dataflow(runtime=dd.LocalRuntime(small_batch_rows=0))
    >>> flow.runtime.name
    'local'
    """

    name = "local"

    def __init__(
        self, settings: LocalSettings | None = None, *, small_batch_rows: int | None = None
    ) -> None:
        settings = LocalSettings() if settings is None else settings
        if small_batch_rows is not None:
            settings = replace(settings, small_batch_rows=small_batch_rows)
        self.settings = settings
        self.kernels = LocalKernels(settings)

    def to_polars(self, data: Any) -> Any:
        """A batch of this runtime as a Polars frame (rows made a frame)."""
        return data

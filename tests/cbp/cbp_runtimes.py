"""The runtimes every CBP test runs on: embedded, three workers in this process, and two
worker processes."""

from __future__ import annotations

from typing import Any

import ddflow as dd

RUNTIMES: list[Any] = ["embedded", (3, False), (2, True)]


def new_flow(runtime: Any, **kw: Any) -> dd.Dataflow:
    """An empty dataflow on ``runtime`` (one of :data:`RUNTIMES`), with ``kw`` passed on."""
    if runtime == "embedded":
        return dd.Dataflow(**kw)
    workers, processes = runtime
    return dd.Dataflow(workers=workers, processes=processes, **kw)

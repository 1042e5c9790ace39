"""Shared fixtures: one Spark session per test process (pytest-xdist worker), from
:func:`ddflow.kernels.spark.local_session` (``local[2]``, 4 shuffle partitions, no UI). Every
Spark test, of the runtime, the pipeline and the semantics subset, uses this one session."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    pytest.importorskip("pyspark")
    from ddflow.kernels.spark import SparkUnavailableError, local_session

    try:
        session = local_session(app="ddflow-tests", partitions=4)
    except SparkUnavailableError as e:
        pytest.skip(str(e))
    yield session
    session.stop()

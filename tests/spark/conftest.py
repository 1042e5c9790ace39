"""The one Spark session of the Spark tests (per pytest process: per xdist worker).

``local[2]`` with 4 shuffle partitions and no UI, from
:func:`ddflow.kernels.spark.local_session`; the tests are skipped where Java is missing.
"""

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

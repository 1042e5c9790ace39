"""Fixtures of the semantics suite: every test runs on the local runtime four times (as
configured by default, small batches held as rows; ``"local-columnar"``, every batch in Polars;
``"local-w2"`` and ``"local-w3"``, two and three workers in this process), the tests in
``harness.PROCESS_SUBSET`` on two worker processes (``"workers"``), and the tests in
``harness.SPARK_SUBSET`` on the Spark runtime too, two workers hosted by a barrier stage
(``runtime`` is the runtime's
name; build flows with ``harness.make_flow(runtime)``, which runs both local variants with
``harness.LARGE_DATA_PATHS``). The Spark params are marked ``spark``:
``-m "not spark"`` deselects them, and where Spark cannot run they fail, unless skipped on
purpose (see ``tests/conftest.py``)."""

from __future__ import annotations

import pytest
from harness import PROCESS_SUBSET, RUNTIMES, SPARK_SUBSET


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "runtime" not in metafunc.fixturenames:
        return
    name = metafunc.function.__name__
    runtimes = [
        r
        for r in RUNTIMES
        if (not r.startswith("spark") or name in SPARK_SUBSET)
        and (r != "workers" or name in PROCESS_SUBSET)
    ]
    params = [
        pytest.param(r, marks=[pytest.mark.spark] if r.startswith("spark") else [], id=r)
        for r in runtimes
    ]
    metafunc.parametrize("runtime", params, scope="session")

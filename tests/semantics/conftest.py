"""Fixtures of the semantics suite: every test runs on the local runtime twice (as configured
by default, small batches held as rows, and ``"local-columnar"``, every batch in Polars), and
the tests in ``harness.SPARK_SUBSET`` on the Spark runtime too (``runtime`` is the runtime's name; build
flows with ``harness.make_flow(runtime)``)."""

from __future__ import annotations

import importlib.util

import pytest
from harness import RUNTIMES, SPARK_SUBSET


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "runtime" not in metafunc.fixturenames:
        return
    runtimes = [r for r in RUNTIMES
                if r != "spark" or metafunc.function.__name__ in SPARK_SUBSET]
    params = []
    for r in runtimes:
        marks = []
        if r == "spark":
            marks.append(pytest.mark.skipif(importlib.util.find_spec("pyspark") is None,
                                            reason="pyspark is not installed"))
        params.append(pytest.param(r, marks=marks, id=r))
    metafunc.parametrize("runtime", params, scope="session")


@pytest.fixture(autouse=True)
def _packed_sums_at_any_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """The local kernels sum integer frames of 50k rows or more by packed codes
    (``kernels.local.grouped_sums``); the suite's frames are small, so here every size takes
    that path, and the group-by only what cannot be packed (floats, strings, nulls)."""
    import ddflow.kernels.local as local

    monkeypatch.setattr(local, "PACKED_SUM_ROWS", 1)

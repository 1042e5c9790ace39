"""Fixtures of the semantics suite: every test runs on the local runtime twice (as configured
by default, small batches held as rows, and ``"local-columnar"``, every batch in Polars), and
the tests in ``harness.SPARK_SUBSET`` on the Spark runtime too (``runtime`` is the runtime's
name; build flows with ``harness.make_flow(runtime)``). The Spark params are marked ``spark``:
``-m "not spark"`` deselects them, and where Spark cannot run they fail, unless skipped on
purpose (see ``tests/conftest.py``)."""

from __future__ import annotations

import pytest
from harness import RUNTIMES, SPARK_SUBSET


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "runtime" not in metafunc.fixturenames:
        return
    runtimes = [r for r in RUNTIMES if r != "spark" or metafunc.function.__name__ in SPARK_SUBSET]
    params = [
        pytest.param(r, marks=[pytest.mark.spark] if r == "spark" else [], id=r) for r in runtimes
    ]
    metafunc.parametrize("runtime", params, scope="session")


@pytest.fixture(autouse=True)
def _large_data_paths_at_any_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """Paths the local kernels take only on large data, taken here at every size: integer
    frames of 50k rows or more are summed by packed codes (``kernels.local.grouped_sums``;
    here the group-by sums only what cannot be packed: floats, strings, nulls), and a reduce
    evaluation over more than 2M history rows goes in slices of keys
    (``kernels.local_reduce.EVALUATE_SLICE_ROWS``; here more than 16), and a lookup of many
    keys in a batch of 64k rows or more scans it (``kernels.local.LOOKUP_SCAN_ROWS``; a join
    then reads the batch whole, other keys' updates too)."""
    import ddflow.kernels.local as local
    import ddflow.kernels.local_reduce as local_reduce

    monkeypatch.setattr(local, "PACKED_SUM_ROWS", 1)
    monkeypatch.setattr(local_reduce, "EVALUATE_SLICE_ROWS", 16)
    monkeypatch.setattr(local, "LOOKUP_SCAN_ROWS", 1)

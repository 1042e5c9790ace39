"""Shared fixtures: one Spark session per test process (pytest-xdist worker), from
:func:`ddflow.runtime.spark.session.local_session` (``local[2]``, 4 shuffle partitions, no
UI). Every Spark test, of the runtime, the pipeline and the semantics subset, uses this one
session.

A *Spark test* is one marked ``spark``: by hand (a module's ``pytestmark``), or here, for every
test that uses the ``spark`` fixture or runs on the semantics suite's ``"spark"`` runtime, so
that ``pytest -m "not spark"`` deselects every one of them. A Spark test never passes by not
running: where pyspark or a Java runtime (Java 17) is missing it fails, naming what is missing.
It is skipped only on purpose, with ``DDFLOW_SKIP_SPARK=1`` in the environment (or deselected
with ``-m "not spark"``).
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings

from ddflow.runtime.native.progress import native_tracker
from ddflow.timely.progress import Tracker

#: the environment variable that skips the Spark tests on purpose (any value but "" and "0")
SKIP_SPARK = "DDFLOW_SKIP_SPARK"
SKIP_REASON = f"Spark tests skipped on purpose ({SKIP_SPARK} is set)"


def spark_opted_out() -> bool:
    """Whether the Spark tests are to be skipped on purpose (:data:`SKIP_SPARK` is set)."""
    return os.environ.get(SKIP_SPARK, "").strip() not in ("", "0")


@functools.cache
def spark_missing() -> str | None:
    """What Spark needs and this machine lacks (pyspark, or a Java runtime), or None."""
    try:
        import pyspark  # noqa: F401
    except ImportError as e:
        return (
            f"pyspark is not installed or cannot be imported ({e}); install it with "
            "pip install 'pyspark>=4,<5'"
        )
    from ddflow.runtime.spark.session import SparkUnavailableError, require_java

    try:
        require_java()
    except SparkUnavailableError as e:
        return e.message
    return None


def require_spark() -> None:
    """Skip the current test if the Spark tests are skipped on purpose; fail it, naming what is
    missing, if Spark cannot run here."""
    if spark_opted_out():
        pytest.skip(SKIP_REASON)
    missing = spark_missing()
    if missing is not None:
        pytest.fail(
            f"Spark tests need pyspark and a Java runtime (Java 17): {missing}. To skip the "
            f"Spark tests on purpose, set {SKIP_SPARK}=1 or run pytest -m 'not spark'.",
            pytrace=False,
        )


def uses_spark(item: pytest.Item) -> bool:
    """Whether ``item`` uses the ``spark`` fixture (maybe through another fixture) or runs on
    the ``"spark"`` runtime of the semantics suite. (A test's own parameter named ``spark``,
    such as a Spark type name, is no fixture.)"""
    callspec = getattr(item, "callspec", None)
    params = callspec.params if callspec is not None else {}
    if "spark" in getattr(item, "fixturenames", ()) and "spark" not in params:
        return True
    return params.get("runtime") == "spark"


@pytest.hookimpl(tryfirst=True)  # before ``-m`` deselects by marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("spark") is None and uses_spark(item):
            item.add_marker(pytest.mark.spark)


def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("spark") is not None:
        require_spark()


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    require_spark()
    from ddflow.runtime.spark.session import local_session

    session = local_session(app="ddflow-tests", partitions=4)
    yield session
    session.stop()


# ---------------------------------------------------------------------- Hypothesis profiles
#
# Chosen by DDFLOW_HYPOTHESIS_PROFILE (a --hypothesis-profile given to pytest wins):
#
# * ``ci`` (the default): the example counts each test sets, drawn from a fixed seed per test
#   (derandomized), so that a run's result depends on the code, not on luck: a failure found
#   once is found again, and what the suite passes today it passes tomorrow;
# * ``explore``: the same counts, new examples on every run, to look further;
# * ``long``: new examples, ten times as many, and longer streams
#   (tests/property/test_random_plans.py reads the variable for its sizes), for a run of an
#   hour or so before a release.
#
# All print a reproduction blob with each failure (@reproduce_failure). For example::
#
#     DDFLOW_HYPOTHESIS_PROFILE=long python -m pytest tests/property/test_random_plans.py

HYPOTHESIS_PROFILES = ("ci", "explore", "long")
HYPOTHESIS_PROFILE = os.environ.get("DDFLOW_HYPOTHESIS_PROFILE", "ci")
if HYPOTHESIS_PROFILE not in HYPOTHESIS_PROFILES:
    raise ValueError(
        f"DDFLOW_HYPOTHESIS_PROFILE={HYPOTHESIS_PROFILE!r}: the profiles are {HYPOTHESIS_PROFILES}"
    )
_COMMON: dict[str, Any] = dict(
    deadline=None,  # the first run of a flow compiles its expressions
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
hypothesis_settings.register_profile("ci", derandomize=True, **_COMMON)
hypothesis_settings.register_profile("explore", derandomize=False, **_COMMON)
# tests without an example count of their own get ten times Hypothesis' default
hypothesis_settings.register_profile("long", max_examples=1000, derandomize=False, **_COMMON)


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("hypothesis_profile", None) is None:
        hypothesis_settings.load_profile(HYPOTHESIS_PROFILE)


@pytest.fixture(scope="session", autouse=True)
def _reused_worker_processes() -> Iterator[None]:
    """The suite builds hundreds of small dataflows with ``workers=2`` and ``3``: their worker
    processes serve one after another (:func:`ddflow.runtime.workers.reuse_processes`) instead
    of each costing a second to start; they are stopped when the session ends.
    (tests/workers/test_processes.py turns this off where it checks that processes stop.)"""
    from ddflow.runtime.workers import reuse_processes

    reuse_processes(True)
    yield
    reuse_processes(False)


@pytest.fixture(name="make_tracker", scope="session", params=["python", "native"])
def _make_tracker(request: pytest.FixtureRequest) -> Any:
    """The two implementations of progress tracking, made as
    :class:`~ddflow.timely.progress.Tracker` is: a test that takes ``make_tracker`` checks
    both."""
    if request.param == "python":
        return Tracker
    return native_tracker

"""The test suite's guards on its Spark tests (``tests/conftest.py``), run on a small suite of
their own with pytest's ``pytester``.

Every test that uses the ``spark`` fixture or the ``"spark"`` runtime is marked ``spark``, so
``-m "not spark"`` deselects it. Where Java or pyspark is missing, a Spark test fails, naming
what is missing and how to skip on purpose; with ``DDFLOW_SKIP_SPARK=1`` it is skipped with
that reason. Tests that do not need Spark run either way.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

CONFTEST = Path(__file__).resolve().parents[1] / "conftest.py"

#: three Spark tests (by fixture, by hand, by runtime) and two that are not
SUITE = """
import pytest

def test_uses_the_session(spark):
    pass

@pytest.mark.spark
def test_marked_by_hand():
    pass

@pytest.mark.parametrize("runtime", ["local", "spark"])
def test_on_a_runtime(runtime):
    pass

@pytest.mark.parametrize("spark", ["bigint"])  # a parameter, not the fixture
def test_local_only(spark):
    pass
"""

#: a plugin that makes ``import pyspark`` fail, as where it is not installed
HIDE_PYSPARK = "import sys\n\nsys.modules['pyspark'] = None\n"


@pytest.fixture
def suite(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """The suite beside a copy of tests/conftest.py, with Spark available unless a test takes
    it away and not skipped on purpose unless a test says so."""
    monkeypatch.delenv("DDFLOW_SKIP_SPARK", raising=False)
    pytester.makeini("[pytest]\nmarkers =\n    spark: needs a Spark session\n")
    pytester.makeconftest(CONFTEST.read_text())
    pytester.makepyfile(test_suite=SUITE)
    return pytester


def run(suite: pytest.Pytester, *args: str) -> pytest.RunResult:
    # in a subprocess: taking pyspark or Java away must not touch this process
    return suite.runpytest_subprocess("-p", "no:cacheprovider", "-rs", *args)


def without_java(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))  # a JAVA_HOME with no bin/java


def test_not_spark_deselects_every_spark_test(suite: pytest.Pytester) -> None:
    result = run(suite, "-m", "not spark")
    result.assert_outcomes(passed=2, deselected=3)
    result.stdout.no_fnmatch_line("*test_uses_the_session*")


def test_a_missing_java_fails_the_spark_tests_naming_it(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    without_java(monkeypatch, tmp_path)
    result = run(suite)
    result.assert_outcomes(passed=2, errors=3)
    for name in ("test_uses_the_session", "test_marked_by_hand", "test_on_a_runtime[[]spark[]]"):
        result.stdout.fnmatch_lines(
            [
                f"*ERROR at setup of {name} *",
                "Spark tests need pyspark and a Java runtime (Java 17): JAVA_HOME is *not an "
                "executable*. To skip the Spark tests on purpose, set DDFLOW_SKIP_SPARK=1 or run "
                "pytest -m 'not spark'.",
            ],
            consecutive=True,
        )


def test_a_missing_pyspark_fails_the_spark_tests_naming_it(suite: pytest.Pytester) -> None:
    suite.makepyfile(hide_pyspark=HIDE_PYSPARK)
    result = run(suite, "-p", "hide_pyspark")
    result.assert_outcomes(passed=2, errors=3)
    result.stdout.fnmatch_lines(
        [
            "Spark tests need pyspark and a Java runtime (Java 17): pyspark "
            "is not installed*set DDFLOW_SKIP_SPARK=1*"
        ]
    )


def test_spark_tests_are_skipped_on_purpose_with_the_reason(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    without_java(monkeypatch, tmp_path)
    monkeypatch.setenv("DDFLOW_SKIP_SPARK", "1")
    result = run(suite)
    result.assert_outcomes(passed=2, skipped=3)
    result.stdout.fnmatch_lines(
        ["SKIPPED [[]3[]] *Spark tests skipped on purpose (DDFLOW_SKIP_SPARK is set)"]
    )

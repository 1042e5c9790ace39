"""Spark executors whose Python lacks ddflow are refused before the workers' barrier stage,
with an error that says what is missing, which Python the executors run and how to ship
ddflow (the cause no longer sits only in the executors' log).

The executors' Python is a virtual environment without ddflow (``PYSPARK_PYTHON``; Spark puts
its own pyspark on the workers' path), in a program of its own: a Spark session's Python is
fixed when the session starts, and the suite's shared session must keep its own.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import venv
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark

PROGRAM = textwrap.dedent(
    """
    from ddflow.runtime.spark.session import local_session
    import ddflow as dd

    spark = local_session("executor-check")
    try:
        flow = dd.Dataflow(runtime=dd.SparkRuntime(spark, workers=2))
        xs = flow.input("xs", schema={"x": "int64"})
        out = xs.output()
        xs.insert([1])
        flow.advance_to(1)
        try:
            flow.run()
            print("RAN")
        except dd.WorkerError as e:
            print(f"REFUSED {e}")
    finally:
        spark.stop()
    """
)


def test_executors_without_ddflow_are_refused_naming_their_python(tmp_path: Path) -> None:
    env_dir = tmp_path / "executor-env"
    venv.create(env_dir, with_pip=False)
    python = env_dir / "bin" / "python"
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM],
        env={**os.environ, "PYSPARK_PYTHON": str(python)},
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    assert "REFUSED" in out, out
    assert "cannot import ddflow" in out and "No module named 'ddflow'" in out
    assert str(python) in out  # the executors' Python
    assert "spark.archives" in out and "wheel" in out  # how to ship ddflow

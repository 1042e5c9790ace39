"""Spark on this machine: :func:`local_session` starts (or returns, ``getOrCreate``) a session
on this machine, after :func:`require_java` has checked that Spark can start at all: without a
Java runtime, pyspark fails obscurely, so :class:`SparkUnavailableError` names what to install
instead.

A runtime takes any session (``dd.SparkRuntime(spark)``); this one is for a single machine.
"""

from __future__ import annotations

import os
import shutil

from pyspark.sql import SparkSession

from ddflow.errors import DDFlowError

__all__ = ["SparkUnavailableError", "local_session", "require_java"]


class SparkUnavailableError(DDFlowError, RuntimeError):
    """Spark cannot start here (no Java runtime).

    >>> issubclass(SparkUnavailableError, DDFlowError)
    True
    """


def require_java() -> str:
    """The ``java`` executable Spark will use, or :class:`SparkUnavailableError` naming what
    to install (checked before a session is started: without Java, pyspark fails obscurely).

    >>> import os
    >>> os.path.basename(require_java())  # doctest: +SKIP
    'java'
    """
    home = os.environ.get("JAVA_HOME")
    if home:
        java = os.path.join(home, "bin", "java")
        if os.path.isfile(java) and os.access(java, os.X_OK):
            return java
        raise SparkUnavailableError(
            f"JAVA_HOME is {home!r}, but {java} is not an executable: the Spark runtime needs "
            "a Java runtime (JDK 17 or 21); fix JAVA_HOME or unset it to use java from PATH"
        )
    found = shutil.which("java")
    if found is None:
        raise SparkUnavailableError(
            "the Spark runtime needs a Java runtime (JDK 17 or 21), and there is no JAVA_HOME "
            "and no java on PATH; install one (e.g. apt-get install openjdk-17-jre-headless) "
            "or use the local runtime (dd.Dataflow() without runtime=)"
        )
    return found


def local_session(
    app: str = "ddflow", partitions: int = 4, driver_memory: str | None = None
) -> SparkSession:
    """A Spark session on this machine (``local[2]``) with ``partitions`` shuffle partitions,
    no UI, no progress bars and no packages to download; checks for Java first.
    ``driver_memory`` (e.g. ``"8g"``) sizes the JVM's heap when this call starts it (Spark's
    default, 1g, runs out on graphs of tens of thousands of edges in a long loop).

    Adaptive query execution is off: a differential step is a small query, and AQE's
    re-planning after each shuffle (a job per stage) costs more than it saves there.

    >>> spark = local_session()  # doctest: +SKIP
    >>> spark.conf.get("spark.sql.shuffle.partitions")  # doctest: +SKIP
    '4'
    """
    require_java()
    builder = SparkSession.builder
    if driver_memory is not None:
        builder = builder.config("spark.driver.memory", driver_memory)
    return (
        builder.master("local[2]")
        .appName(app)
        .config("spark.sql.shuffle.partitions", str(partitions))
        .config("spark.default.parallelism", str(partitions))
        .config("spark.sql.adaptive.enabled", "false")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.log.level", "ERROR")
        .getOrCreate()
    )

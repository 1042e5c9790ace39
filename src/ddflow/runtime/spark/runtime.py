"""The Spark runtime: what ``dd.Dataflow(runtime=dd.SparkRuntime(spark, workers=N))`` runs on.

The dataflow's workers are hosted by Spark (:mod:`~ddflow.runtime.spark.hosted`): worker 0 in
the driver, which coordinates, and the others as the tasks of one barrier stage that lives as
long as the dataflow. Every worker runs the embedded kernels
(:class:`~ddflow.runtime.local.kernels.LocalKernels`) on its share of the keys, with the
runtime's settings.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import uuid
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from ddflow.errors import CallSite, ConfigurationError, call_site
from ddflow.runtime.local.kernels import LocalKernels
from ddflow.runtime.local.settings import LocalSettings
from ddflow.runtime.spark.hosted import HostedWorkers, check_session, task_slots

__all__ = ["SparkRuntime", "stage_dataframe"]


class SparkRuntime:
    """Run a dataflow on Spark: ``dd.Dataflow(runtime=dd.SparkRuntime(spark, workers=N))``.

    >>> import ddflow as dd
    >>> from ddflow.runtime.spark.session import local_session
    >>> flow = dd.Dataflow(runtime=dd.SparkRuntime(local_session(), workers=2))  # doctest: +SKIP
    >>> words = flow.input("words", schema={"word": "str"})  # doctest: +SKIP
    >>> counts = words.group_by("word").agg(n=dd.count()).output()  # doctest: +SKIP
    >>> words.insert(["a", "b", "a"]); flow.advance_to(1); flow.run()  # doctest: +SKIP
    >>> counts.snapshot().sort_values("word").to_dict("list")  # doctest: +SKIP
    {'word': ['a', 'b'], 'n': [2, 1], 'count': [1, 1]}

    ``workers``: how many workers (default: the session's task slots, ``local[2]``'s 2); the
    barrier stage takes ``workers - 1`` slots and leaves one free. ``settings``: the
    embedded kernels' thresholds (:class:`~ddflow.runtime.local.settings.LocalSettings`), as
    for ``dd.LocalRuntime``. Results depend on neither. ``staging``: a directory the driver
    and every executor reach, where a DataFrame the executors compute, given to an input made
    with ``signed=True``, is written by Spark for the workers to read (see :meth:`stage`);
    default: a temporary directory in local mode, none on a cluster (such DataFrames then pass
    through the driver).
    """

    name = "spark"

    def __init__(
        self,
        spark: SparkSession,
        settings: LocalSettings | None = None,
        *,
        workers: int | None = None,
        staging: str | None = None,
    ) -> None:
        if settings is None:
            settings = LocalSettings()
        elif not isinstance(settings, LocalSettings):
            raise TypeError(
                f"SparkRuntime's second argument is the workers' LocalSettings, not {settings!r}"
            )
        self.spark = spark
        #: the user's line that made it (where a setting the session cannot run is reported)
        self.site = call_site()
        #: how many workers a dataflow runs: worker 0 in the driver, the others hosted by a
        #: Spark barrier stage
        self.workers = _check_workers(
            task_slots(spark.sparkContext) if workers is None else workers, self.site
        )
        if spark.sparkContext.master.startswith("local"):
            # (a local session's task slots are fixed: refused here; a cluster's executors
            # may still be joining, so it is checked when the workers start)
            check_session(spark, self.workers, self.site)
        self.settings = settings
        #: the settings of the workers' embedded kernels
        self.worker_settings = settings
        self.kernels: Any = LocalKernels(settings)
        #: where DataFrames are staged for the workers (see :meth:`stage`)
        self.staging = staging if staging is not None else _default_staging(spark)

    def stage(self, df: DataFrame) -> str | None:
        """Have Spark write ``df`` as Parquet under :attr:`staging`, its partitions in
        parallel, and return the path (for the workers to read and then remove); None for a
        DataFrame whose rows are at the driver already (made from local data), or without a
        staging directory."""
        if self.staging is None or df.isLocal():
            return None
        return stage_dataframe(df, self.staging)

    def host_workers(self, workers: int) -> HostedWorkers:
        """What starts and stops workers 1 .. ``workers``-1 of a dataflow: the tasks of a
        barrier stage."""
        return HostedWorkers(self.spark, workers, self.site)

    def to_polars(self, data: Any) -> Any:
        """A batch of this runtime as a Polars frame."""
        return self.kernels.to_polars(data)


def _check_workers(workers: Any, site: CallSite | None) -> int:
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ConfigurationError(
            f"SparkRuntime(spark, workers=...) takes a number of workers >= 1, got {workers!r}",
            site=site,
        )
    return workers


def stage_dataframe(df: DataFrame, directory: str) -> str:
    """Write ``df`` as Parquet in a new folder of ``directory`` (Spark, in parallel); the
    folder's path."""
    path = os.path.join(directory, f"ddflow-staged-{uuid.uuid4().hex}")
    try:
        df.write.parquet(path)
    except BaseException:
        shutil.rmtree(path, ignore_errors=True)
        raise
    return path


def _default_staging(spark: SparkSession) -> str | None:
    """A temporary directory in local mode (the driver is the executors' machine), removed at
    exit; None on a cluster, where only the user knows a directory every executor reaches."""
    if not str(spark.sparkContext.master).startswith("local"):
        return None
    path = tempfile.mkdtemp(prefix="ddflow-staging-")
    atexit.register(shutil.rmtree, path, True)
    return path

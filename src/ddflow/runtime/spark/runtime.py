"""The Spark runtime: what ``dd.Dataflow(runtime=dd.SparkRuntime(spark))`` runs on.

It holds the session, sets the settings' SQL settings on it once, and builds the kernels
(:mod:`~ddflow.runtime.spark.kernels`) with its settings
(:class:`~ddflow.runtime.spark.settings.SparkSettings`); the operators do the rest.
"""

from __future__ import annotations

from dataclasses import fields, replace
from typing import Any

from pyspark.sql import SparkSession

from ddflow.runtime.local.kernels import LocalKernels
from ddflow.runtime.spark.hosted import HostedWorkers
from ddflow.runtime.spark.kernels import SparkKernels
from ddflow.runtime.spark.settings import SparkSettings

__all__ = ["SparkRuntime"]


class SparkRuntime:
    """Run a dataflow on Spark: ``dd.Dataflow(runtime=dd.SparkRuntime(spark))``.

    >>> import ddflow as dd
    >>> from ddflow.runtime.spark.session import local_session
    >>> flow = dd.Dataflow(runtime=dd.SparkRuntime(local_session()))  # doctest: +SKIP
    >>> words = flow.input("words", schema={"word": "str"})  # doctest: +SKIP
    >>> counts = words.group_by("word").agg(n=dd.count()).output()  # doctest: +SKIP
    >>> words.insert(["a", "b", "a"]); flow.advance_to(1); flow.run()  # doctest: +SKIP
    >>> counts.snapshot().sort_values("word").to_dict("list")  # doctest: +SKIP
    {'word': ['a', 'b'], 'n': [2, 1], 'count': [1, 1]}

    ``settings``: the runtime's knobs (:class:`~ddflow.runtime.spark.settings.SparkSettings`,
    whose defaults are documented there); a keyword named after one of its fields overrides
    that field, as in ``dd.SparkRuntime(spark, partitions=2)``. Results do not depend on
    either. The runtime sets the settings' ``session`` SQL settings on the session; its
    ``settings`` are the ones in use, ``partitions`` resolved.

    Most of a step's cost is per Spark task, so ``partitions`` near the number of cores is
    fastest until partitions grow large; see ``docs/performance.md``.
    """

    name = "spark"

    def __init__(
        self,
        spark: SparkSession,
        settings: SparkSettings | None = None,
        *,
        workers: int | None = None,
        **overrides: Any,
    ) -> None:
        if settings is None:
            settings = SparkSettings()
        elif not isinstance(settings, SparkSettings):
            raise TypeError(
                f"SparkRuntime's second argument is its SparkSettings, not {settings!r}; "
                "give a single setting by keyword, e.g. SparkRuntime(spark, partitions=2)"
            )
        names = [f.name for f in fields(SparkSettings)]
        unknown = sorted(set(overrides) - set(names))
        if unknown:
            raise TypeError(
                f"SparkRuntime has no setting {', '.join(map(repr, unknown))}; "
                f"the settings are {', '.join(names)}"
            )
        if overrides:
            settings = replace(settings, **overrides)
        self.spark = spark
        #: with ``workers``: how many workers the dataflow runs, worker 0 at the driver and
        #: the others hosted by a Spark barrier stage (:mod:`~ddflow.runtime.spark.hosted`)
        self.workers = _check_workers(workers)
        #: the settings of the workers' embedded kernels
        self.worker_settings = settings.local
        if self.workers is not None:  # (the embedded kernels, in the driver and the tasks)
            self.settings = settings
            self.kernels: Any = LocalKernels(settings.local)
            return
        for key, value in settings.session.items():
            spark.conf.set(key, value)
        self.kernels = SparkKernels(spark, settings)
        self.settings = self.kernels.settings

    def host_workers(self, workers: int) -> HostedWorkers:
        """What starts and stops workers 1 .. ``workers``-1 of a dataflow: the tasks of a
        barrier stage."""
        return HostedWorkers(self.spark, workers)

    def to_polars(self, data: Any) -> Any:
        """A batch of this runtime as a Polars frame (collected)."""
        return self.kernels.to_polars(data)

    def release(self) -> None:
        """Unpersist every DataFrame this runtime persisted (the flow is done)."""
        if self.workers is None:
            self.kernels.release()


def _check_workers(workers: Any) -> int | None:
    if workers is None:
        return None
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(
            f"SparkRuntime(spark, workers=...) takes a number of workers >= 1, got {workers!r}"
        )
    return workers

"""The Spark runtime's settings: every tuning knob of its kernels, in one object.

Settings change how the work is done (how arrangements are partitioned, when a trace's merge
runs a Spark job, which plans Spark chooses), never the results: a dataflow's outputs are the
same under any settings, and the same as the local runtime's. A runtime takes them as
``dd.SparkRuntime(spark, settings=...)``, or field by field as keywords
(``dd.SparkRuntime(spark, partitions=2)``); the defaults are the ones documented below, and
``docs/performance.md`` says why each is what it is. This module does not import ``pyspark``.

>>> settings = SparkSettings(partitions=2, merge_parts=8)
>>> settings.merge_rows, settings.session["spark.sql.optimizer.runtime.bloomFilter.enabled"]
(100000, 'false')
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ddflow.differential.trace import TraceSettings
from ddflow.runtime.local.settings import LocalSettings

__all__ = ["SparkSettings"]


def _session_defaults() -> dict[str, str]:
    return {
        # Runtime bloom filters: Spark adds one to a join whose other side is a cached scan it
        # cannot size, which every trace lookup is; each is a subquery job and a filter shipped
        # with every task of the step, which never pays on key-partitioned batches.
        "spark.sql.optimizer.runtime.bloomFilter.enabled": "false",
    }


@dataclass(frozen=True)
class SparkSettings:
    """The Spark runtime's knobs (sizes are in updates, that is rows).

    * ``partitions``: the number of key partitions of every arrangement (and of a group
      function's groups); ``None``, the default, takes the session's
      ``spark.sql.shuffle.partitions`` when the runtime starts;
    * ``checkpoint_every``: a trace's merge cuts the lineage of what it made (a
      ``localCheckpoint``) every this many merges, and persists it otherwise; ``1`` cuts it at
      every merge;
    * ``merge_parts``, ``merge_rows``: a trace's merge that would hold fewer than
      ``merge_parts`` deferred batches and ``merge_rows`` rows is deferred (a union with the
      times advanced, no Spark job) instead of done (consolidated, partitioned, materialized);
      ``merge_parts=2``, the default, defers none;
    * ``session``: Spark SQL settings the runtime sets on its session (a copy of the mapping
      given); by default, runtime bloom filters off;
    * ``trace``: how traces merge (:class:`~ddflow.differential.trace.TraceSettings`; the
      Spark kernels declare neither a small tail nor stepped merges, so ``merge_factor``
      alone applies);
    * ``local``: the settings of the local kernels the runtime runs on the driver (an output's
      change log) and in its partitions (``map_rows``)
      (:class:`~ddflow.runtime.local.settings.LocalSettings`).

    >>> SparkSettings(checkpoint_every=0)
    Traceback (most recent call last):
        ...
    ValueError: checkpoint_every must be at least 1, got 0
    """

    partitions: int | None = None
    checkpoint_every: int = 1
    merge_parts: int = 2
    merge_rows: int = 100_000
    # hash=False: a dict does not hash, and equal settings stay equal without it
    session: Mapping[str, str] = field(default_factory=_session_defaults, hash=False)
    trace: TraceSettings = field(default_factory=TraceSettings)
    local: LocalSettings = field(default_factory=LocalSettings)

    def __post_init__(self) -> None:
        at_least_one = {
            "partitions": self.partitions,
            "checkpoint_every": self.checkpoint_every,
            "merge_parts": self.merge_parts,
        }
        for name, value in at_least_one.items():
            if value is not None and value < 1:
                raise ValueError(f"{name} must be at least 1, got {value}")
        if self.merge_rows < 0:
            raise ValueError(f"merge_rows must be >= 0, got {self.merge_rows}")
        object.__setattr__(self, "session", dict(self.session))

"""Sources and sinks: :class:`ReplayWindow` (a window over recorded data, moved forward and
backward); the Spark data pipeline in :mod:`ddflow.io.spark` (imported on its own: it needs
pyspark)."""

from ddflow.io.window import ReplayWindow

__all__ = ["ReplayWindow"]

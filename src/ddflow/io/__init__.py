"""Sources and sinks. The data pipeline is Spark's: see :mod:`ddflow.io.spark`."""

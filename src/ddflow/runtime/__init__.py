"""The data planes: one package per runtime, each implementing the kernel contract
(:class:`ddflow.differential.kernel.Kernels`) with its settings.

* :mod:`ddflow.runtime.local`: Polars DataFrames and Python rows, in this process (the default);
* :mod:`ddflow.runtime.spark`: Spark DataFrames; it runs the local kernels in its partitions.
"""

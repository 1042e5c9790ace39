"""The data planes and where they run.

* :mod:`ddflow.runtime.local`: the kernel contract (:class:`ddflow.differential.kernel.Kernels`)
  on Polars DataFrames and Python rows, in this process (the default);
* :mod:`ddflow.runtime.workers`: several workers, each with the local kernels, exchanging
  batches by key (worker processes on this machine);
* :mod:`ddflow.runtime.spark`: the same workers hosted by Spark;
* :mod:`ddflow.runtime.native`: the Rust core (``ddflow._native``), which the runtimes call.
"""

"""The local runtime: batches as Polars DataFrames, small ones as Python rows, in this process.

* :mod:`~ddflow.runtime.local.kernels`: the kernel contract on Polars frames and rows;
* :mod:`~ddflow.runtime.local.settings`: every tuning threshold of the kernels, in one object;
* :mod:`~ddflow.runtime.local.rows`: the row representation of small batches;
* :mod:`~ddflow.runtime.local.index`: direct indexes of arranged batches;
* :mod:`~ddflow.runtime.local.reduce`: the reduce family's kernels;
* :mod:`~ddflow.runtime.local.exprs`: expressions evaluated on rows;
* :mod:`~ddflow.runtime.local.allocator`: the memory allocator set-up for Polars.
"""

"""The data plane: one module per runtime, each supplying the same bulk kernels.

Operators (:mod:`ddflow.operators`) are written once against these kernels; a runtime chooses
its kernels once, when the dataflow is built. The kernels work on *batches*: the data columns of
a collection, one integer column per time coordinate and a ``__diff`` column.

* :mod:`ddflow.kernels.local`: Polars DataFrames, in process (the default).
"""

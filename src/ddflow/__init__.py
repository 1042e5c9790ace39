"""ddflow: differential dataflow for Python.

Queries over collections (map, filter, join, group-by aggregates, distinct, loops nested to any
depth) whose outputs stay correct as the inputs change, with work proportional to the change.
Runs embedded in one process (the default) or on Apache Spark.

>>> import ddflow as dd
>>> flow = dd.Dataflow()
>>> edges = flow.input("edges", schema={"src": "int64", "dst": "int64"})
>>> degrees = edges.group_by("src").agg(out_degree=dd.count()).output()
>>> edges.insert([(1, 2), (1, 3), (2, 3)]); flow.advance_to(1); flow.run()
>>> degrees.snapshot().to_dict("list")
{'src': [1, 2], 'out_degree': [2, 1], 'count': [1, 1]}
"""

from ddflow import (
    _allocator,  # noqa: F401  (first: before Polars loads; see the module)
    graph,
)
from ddflow.collection import Agg, Arranged, Collection, GroupBy, count, max, mean, min, sum
from ddflow.dataflow import Dataflow, InputCollection, LocalRuntime, Output, Probe, RunProgress
from ddflow.errors import (
    ClosedInputError,
    DataflowFailedError,
    DDFlowError,
    ExpressionError,
    GraphError,
    InputError,
    SchemaError,
    TimeError,
    TimelyError,
    UserFunctionError,
)
from ddflow.expr import Expr, coalesce, col, concat_str, greatest, least, lit, when
from ddflow.schema import Schema
from ddflow.timely import Vertex

__version__ = "0.1.0"


def __getattr__(name: str) -> object:
    # the Spark runtime imports pyspark; load it only when it is asked for
    if name == "SparkRuntime":
        from ddflow.kernels.spark import SparkRuntime

        return SparkRuntime
    raise AttributeError(f"module 'ddflow' has no attribute {name!r}")


__all__ = [
    "Agg",
    "Arranged",
    "ClosedInputError",
    "Collection",
    "DDFlowError",
    "DataflowFailedError",
    "Dataflow",
    "Expr",
    "ExpressionError",
    "GraphError",
    "GroupBy",
    "InputCollection",
    "InputError",
    "LocalRuntime",
    "Output",
    "Probe",
    "RunProgress",
    "Schema",
    "SchemaError",
    "SparkRuntime",
    "TimeError",
    "TimelyError",
    "UserFunctionError",
    "Vertex",
    "coalesce",
    "col",
    "concat_str",
    "count",
    "graph",
    "greatest",
    "least",
    "lit",
    "max",
    "mean",
    "min",
    "sum",
    "when",
]

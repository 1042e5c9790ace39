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

# isort: off
# (first: the allocator's options are set before Polars is imported; see the module)
from ddflow.runtime.local import allocator as _allocator  # noqa: F401
# isort: on

from ddflow import graph, io
from ddflow.api.aggregates import Agg, arg_max, count, max, mean, min, sum, top_k
from ddflow.api.collection import Arranged, Collection, GroupBy
from ddflow.api.dataflow import Dataflow, RunProgress
from ddflow.api.inputs import InputCollection
from ddflow.api.outputs import Output, Probe
from ddflow.errors import (
    CBPError,
    CheckpointError,
    ClosedInputError,
    ConfigurationError,
    DataflowFailedError,
    DDFlowError,
    ExpressionError,
    GraphError,
    InputError,
    SchemaError,
    TimeError,
    TimelyError,
    UserFunctionError,
    WorkerError,
)
from ddflow.expr.nodes import Expr, coalesce, col, concat_str, greatest, least, lit, when
from ddflow.runtime.local.runtime import LocalRuntime
from ddflow.schema import Schema
from ddflow.timely.operator import Vertex

__version__ = "0.1.0"


def __getattr__(name: str) -> object:
    # the Spark runtime imports pyspark; load it only when it is asked for
    if name == "SparkRuntime":
        from ddflow.runtime.spark.runtime import SparkRuntime

        return SparkRuntime
    raise AttributeError(f"module 'ddflow' has no attribute {name!r}")


__all__ = [
    "Agg",
    "Arranged",
    "CBPError",
    "CheckpointError",
    "ClosedInputError",
    "Collection",
    "ConfigurationError",
    "DDFlowError",
    "Dataflow",
    "DataflowFailedError",
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
    "WorkerError",
    "arg_max",
    "coalesce",
    "col",
    "concat_str",
    "count",
    "graph",
    "greatest",
    "io",
    "least",
    "lit",
    "max",
    "mean",
    "min",
    "sum",
    "top_k",
    "when",
]

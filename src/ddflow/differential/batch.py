"""The batch contract: how a runtime lays out a batch of updates.

A *batch* holds updates ``(data, time, diff)`` of one collection as columns:

* the collection's data columns, by name, in its schema's order;
* one ``int64`` column per integer of the time, ``__t0 .. __t{w-1}`` (:data:`TIME_PREFIX`;
  :meth:`~ddflow.timely.lattice.TimeType.columns` names them for a time type of width ``w``);
* :data:`DIFF`, the signed ``int64`` multiplicity change;
* in an *arranged* batch, :data:`KEY` too: an ``int64`` code of the arrangement's key columns,
  equal for equal keys (:data:`NULL_CODE` stands for a null key), by which the batch is sorted
  (locally) or partitioned (on Spark).

The reduce family adds, on its internal batches, query times ``__q0 ..`` (:data:`QUERY_PREFIX`)
and pre-multiplied weights ``__w_<column>`` (:func:`weight_column`): a ``sum(c)`` keeps
``c * diff`` so that accumulating is adding.

A batch is *consolidated* when no two updates share ``(data, time)`` and no diff is zero. The
accumulation of a batch at time ``t`` is, for each record, the sum of the diffs of its updates
at times ``<= t``. These names are the contract between the operators and every runtime:
defined here once, used by all.

>>> from ddflow.timely.lattice import TimeType
>>> time_columns(TimeType(("product", "product")), QUERY_PREFIX)
['__q0', '__q1']
>>> weight_column("price")
'__w_price'
"""

from __future__ import annotations

from ddflow.timely.lattice import TIME_PREFIX, TimeType

__all__ = [
    "DIFF",
    "KEY",
    "NULL_CODE",
    "QUERY_PREFIX",
    "TIME_PREFIX",
    "WEIGHT_PREFIX",
    "time_columns",
    "weight_column",
]

#: the multiplicity change of an update
DIFF = "__diff"
#: the key code of an arranged batch
KEY = "__key"
#: the key code of a null key
NULL_CODE = -(2**63)
#: the prefix of the query-time columns of a reduce's internal batches
QUERY_PREFIX = "__q"
#: the prefix of a pre-multiplied weight column
WEIGHT_PREFIX = "__w_"


def time_columns(tt: TimeType, prefix: str = TIME_PREFIX) -> list[str]:
    """The names of ``tt``'s time columns, with ``prefix`` (``__t0 ..`` by default)."""
    return [f"{prefix}{i}" for i in range(tt.width)]


def weight_column(column: str) -> str:
    """The name of the pre-multiplied weight column of ``column``."""
    return f"{WEIGHT_PREFIX}{column}"

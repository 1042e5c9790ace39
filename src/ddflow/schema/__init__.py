"""The typed schema of a collection, and the conversion of user data into batches that fit it.

A :class:`Schema` is an immutable, ordered mapping from column name to :class:`DType`. Every
batch of a collection is a Polars DataFrame whose data columns are exactly the schema's columns,
in the schema's order, with the schema's Polars dtypes; ddflow appends its own bookkeeping
columns (``__t0``, ``__t1``, ..., ``__diff``) after them, which is why user column names may not
start with ``"__"``.

The type system is small on purpose, so that every runtime (Polars locally, Spark on a
cluster) represents each type exactly:

============  ==================  =================  =====================================
ddflow type   Polars dtype        Spark type         Python values accepted in rows
============  ==================  =================  =====================================
``int64``     ``Int64``           ``bigint``         ``int`` and NumPy integers (not bool)
``int32``     ``Int32``           ``int``            ``int`` and NumPy integers (not bool)
``float64``   ``Float64``         ``double``         ``float``, ``int`` (converted)
``float32``   ``Float32``         ``float``          ``float``, ``int`` (converted)
``bool``      ``Boolean``         ``boolean``        ``bool``
``str``       ``String``          ``string``         ``str``
``date``      ``Date``            ``date``           ``datetime.date`` (not a datetime)
``datetime``  ``Datetime("us")``  ``timestamp_ntz``  naive ``datetime.datetime``
``list[T]``   ``List(T)``         ``array<T>``       a ``list`` or ``tuple`` of ``T`` values
============  ==================  =================  =====================================

``T`` in ``list[T]`` is one of the types above (``list[str]``); the elements are never null.
Lists are values, not keys: a list column can be carried, compared and output (``dd.top_k``
gives one), but not joined or grouped on.

Invariants:

* a column admits nulls iff its type was declared with a trailing ``"?"`` (``"str?"``);
* a conversion either returns a frame whose columns are exactly ``schema.names`` with exactly
  ``schema.polars_schema()`` and no null in a non-nullable column, or raises
  :class:`~ddflow.errors.SchemaError` naming the column, the row (0-based position) and the
  value; it never returns a partially converted frame;
* a conversion is lossless: a value that would change (``1.5`` into ``int64``, an overflowing
  integer, a datetime with a time of day into ``date``) is an error, never silently rounded,
  except that numbers are rounded into float columns: a Python ``int`` row value becomes the
  nearest ``float64`` (``2**53 + 1`` is ``2**53``; beyond ``float64``'s range it is an error),
  and a ``float32`` column then rounds that ``float64`` to the nearest ``float32`` (so an
  ``int`` is rounded twice; a finite value beyond ``float32``'s range is an error, ``inf``
  stays). :func:`ddflow.testing.values.conform` states these row rules in plain Python.

NaN is a float value, not a null, except in pandas input, where NaN is pandas' marker of a
missing value and therefore becomes null.

>>> s = Schema({"src": "int64", "name": "str?", "w": float})
>>> s
Schema({'src': 'int64', 'name': 'str?', 'w': 'float64'})
>>> s.rows_to_frame([(1, "a", 0.5), (2, None, 1)]).rows()
[(1, 'a', 0.5), (2, None, 1.0)]
"""

from ddflow.schema.types import DType, Schema, TypeSpec

__all__ = ["DType", "Schema", "TypeSpec"]

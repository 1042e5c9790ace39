"""What travels between the coordinator and the worker processes.

A message is one length-prefixed frame on a pipe (:class:`multiprocessing.connection.Connection`,
a Unix socket pair). Its envelope (commands, pointstamp changes, times) is pickled; the batches
it carries are Arrow IPC streams, written with pyarrow from the batch's columns and read back
without copying, never pickled frames. A batch of the local runtime's row form
(:class:`~ddflow.runtime.local.rows.Rows`) comes back as rows, a frame as a frame. A split (a
share of an input's files that the worker reads itself, see
:class:`~ddflow.differential.operators.io.Split`) and a sink's part written (see
:class:`~ddflow.differential.operators.io.PartSinkOp`) are no batches: they are small
descriptions, pickled.

>>> import polars as pl
>>> frame = pl.DataFrame({"k": [1, 2], "__t0": [0, 0], "__diff": [1, -1]})
>>> decode_batch(encode_batch(frame)).equals(frame)
True
"""

from __future__ import annotations

import pickle
from typing import Any

import polars as pl
import pyarrow as pa

from ddflow.runtime.local.rows import Rows

__all__ = ["decode", "decode_batch", "encode", "encode_batch"]

_FRAME, _ROWS, _OBJECT = 0, 1, 2


def encode_batch(batch: Any) -> tuple[int, bytes]:
    """A batch as Arrow IPC bytes, with its form."""
    if type(batch) is Rows:  # (through Polars: Arrow's own conversion of Python values
        # imports pandas, a second's start in every process)
        rows = pl.DataFrame(batch.rows, schema=batch.schema, orient="row", strict=False)
        table: Any = rows.to_arrow()
        form = _ROWS
    else:
        if not isinstance(batch, pl.DataFrame):  # (a split, a part: see the module)
            return _OBJECT, pickle.dumps(batch, protocol=pickle.HIGHEST_PROTOCOL)
        table, form = batch.to_arrow(), _FRAME
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write(table)
    return form, sink.getvalue().to_pybytes()


def decode_batch(data: tuple[int, bytes]) -> Any:
    """The batch :func:`encode_batch` encoded."""
    form, payload = data
    if form == _OBJECT:
        return pickle.loads(payload)
    table = pa.ipc.open_stream(payload).read_all()
    if form == _ROWS:
        schema = _polars_schema(table.schema)
        columns = [c.to_pylist() for c in table.columns]
        return Rows(schema, list(zip(*columns, strict=True)) if table.num_rows else [])
    frame = pl.from_arrow(table)
    assert isinstance(frame, pl.DataFrame)
    return frame


#: the Polars schema of an Arrow schema (a few schemas, asked for at every message)
_TO_POLARS: dict[pa.Schema, dict[str, Any]] = {}


def _polars_schema(schema: pa.Schema) -> dict[str, Any]:
    got = _TO_POLARS.get(schema)
    if got is None:
        # (an empty table built from no batches: ``schema.empty_table()`` imports pandas)
        empty = pa.Table.from_batches([], schema=schema)
        got = dict(pl.from_arrow(empty).schema)  # type: ignore[union-attr]
        _TO_POLARS[schema] = got
    return got


def encode(kind: str, *fields: Any, batches: list[tuple[Any, ...]] = ()) -> bytes:  # type: ignore[assignment]
    """A message: its kind, its fields and the messages it carries, each
    ``(*where, batch)``, the batch last."""
    carried = [(*m[:-1], encode_batch(m[-1])) for m in batches]
    return pickle.dumps((kind, fields, carried), protocol=pickle.HIGHEST_PROTOCOL)


def decode(data: bytes) -> tuple[str, tuple[Any, ...], list[tuple[Any, ...]]]:
    """``(kind, fields, carried messages)`` of a message :func:`encode` made."""
    kind, fields, carried = pickle.loads(data)
    return kind, fields, [(*m[:-1], decode_batch(m[-1])) for m in carried]

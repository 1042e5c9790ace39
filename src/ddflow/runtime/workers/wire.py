"""What travels between the coordinator and the worker processes.

A message is one length-prefixed frame on a pipe (:class:`multiprocessing.connection.Connection`,
a Unix socket pair). Its envelope (commands, pointstamp changes, times) is pickled; the batches
it carries are Arrow IPC streams, written with pyarrow from the batch's columns and read back
without copying, never pickled frames. A batch of the local runtime's row form
(:class:`~ddflow.runtime.local.rows.Rows`) comes back as rows, a frame as a frame.

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

_FRAME, _ROWS = 0, 1


def encode_batch(batch: Any) -> tuple[int, bytes]:
    """A batch as Arrow IPC bytes, with its form."""
    form = _ROWS if type(batch) is Rows else _FRAME
    table = (batch.to_frame() if form == _ROWS else batch).to_arrow()
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return form, sink.getvalue().to_pybytes()


def decode_batch(data: tuple[int, bytes]) -> Any:
    """The batch :func:`encode_batch` encoded."""
    form, payload = data
    frame = pl.from_arrow(pa.ipc.open_stream(payload).read_all())
    assert isinstance(frame, pl.DataFrame)
    if form == _ROWS:
        return Rows(dict(frame.schema), frame.rows())
    return frame


def encode(kind: str, *fields: Any, batches: list[tuple[Any, ...]] = ()) -> bytes:  # type: ignore[assignment]
    """A message: its kind, its fields and the messages it carries, each
    ``(*where, batch)``, the batch last."""
    carried = [(*m[:-1], encode_batch(m[-1])) for m in batches]
    return pickle.dumps((kind, fields, carried), protocol=pickle.HIGHEST_PROTOCOL)


def decode(data: bytes) -> tuple[str, tuple[Any, ...], list[tuple[Any, ...]]]:
    """``(kind, fields, carried messages)`` of a message :func:`encode` made."""
    kind, fields, carried = pickle.loads(data)
    return kind, fields, [(*m[:-1], decode_batch(m[-1])) for m in carried]

"""Parquet files read by the workers: an input's data that never passes through the process
that owns the dataflow.

:meth:`~ddflow.api.inputs.InputCollection.read_parquet` cuts the files into *splits* (a few
row groups of one file each) after reading only their footers here: a file that is not
Parquet, lacks a column of the input's schema, holds a column of another type, or holds nulls
(by its statistics) in a column that allows none is refused at the user's line, before anything
is accepted. Each split goes to one worker, which reads its row groups with Arrow when its
copy of the input runs (:class:`~ddflow.differential.operators.io.InputOp`); the updates then
go to their keys' owners as any input's do. With one worker, that worker reads them all.

Invariant: the splits of a call cover each row group of each file exactly once.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from ddflow.differential.batch import DIFF
from ddflow.errors import CallSite, DDFlowError, InputError, SchemaError
from ddflow.schema import Schema
from ddflow.timely.lattice import EPOCHS

__all__ = ["ParquetSplit", "parquet_files", "parquet_splits"]

(TIME,) = EPOCHS.columns()

#: the bytes (uncompressed) of row groups one split holds at most, unless a row group alone
#: is larger
SPLIT_BYTES = 32 << 20


@dataclass(frozen=True)
class ParquetSplit:
    """Some row groups of one Parquet file, as updates of an input (see the module)."""

    path: str
    row_groups: tuple[int, ...]
    schema: Schema
    #: the column holding each row's diff (None: each row is an insertion)
    diff: str | None
    #: the row groups' uncompressed bytes (what balances the workers' shares)
    size: int

    def read(self, epoch: int) -> pl.DataFrame:
        names = list(self.schema.names)
        columns = names if self.diff is None else [*names, self.diff]
        table = pq.ParquetFile(self.path).read_row_groups(list(self.row_groups), columns=columns)
        data = self.schema.frame_to_frame(table.select(names))
        if self.diff is None:
            diff = pl.lit(1, dtype=pl.Int64)
        else:
            diff = pl.Series(DIFF, table.column(self.diff)).cast(pl.Int64)  # type: ignore[assignment]
        return data.with_columns(
            pl.lit(epoch, dtype=pl.Int64).alias(TIME), diff.alias(DIFF)
        ).select([*names, TIME, DIFF])


def parquet_files(paths: str | Iterable[str]) -> list[str]:
    """The Parquet files of ``paths`` (files, or folders read whole), in name order; names
    starting with ``_`` or ``.`` (writers' temporary files, markers) are skipped."""
    out: list[str] = []
    for path in [paths] if isinstance(paths, str) else list(paths):
        path = os.fspath(path)
        if os.path.isdir(path):
            for root, dirs, files in os.walk(path):
                dirs[:] = sorted(d for d in dirs if not d.startswith(("_", ".")))
                out.extend(
                    os.path.join(root, f) for f in sorted(files) if not f.startswith(("_", "."))
                )
        else:
            out.append(path)
    return out


def parquet_splits(
    paths: str | Iterable[str], schema: Schema, diff: str | None, site: CallSite | None
) -> list[ParquetSplit]:
    """The splits of the files of ``paths`` (see the module), their footers checked against
    ``schema``: errors name the file and point at ``site``."""
    splits: list[ParquetSplit] = []
    for path in parquet_files(paths):
        try:
            meta = pq.ParquetFile(path).metadata
        except (OSError, pa.ArrowException) as e:
            raise InputError(f"cannot read {path} as Parquet: {e}", site=site) from None
        arrow = meta.schema.to_arrow_schema()
        _check_columns(path, arrow, schema, diff, site)
        _check_nulls(path, meta, schema, diff, site)
        group: list[int] = []
        size = 0
        for i in range(meta.num_row_groups):
            rg = meta.row_group(i)
            if group and size + rg.total_byte_size > SPLIT_BYTES:
                splits.append(ParquetSplit(path, tuple(group), schema, diff, size))
                group, size = [], 0
            group.append(i)
            size += rg.total_byte_size
        if group:
            splits.append(ParquetSplit(path, tuple(group), schema, diff, size))
    return splits


def _check_columns(
    path: str, arrow: pa.Schema, schema: Schema, diff: str | None, site: CallSite | None
) -> None:
    names = list(schema.names)
    missing = [n for n in names if n not in arrow.names]
    if missing:
        raise SchemaError(
            f"{path} does not fit the input's schema: it has no column {', '.join(missing)} "
            f"(it has {', '.join(arrow.names)})",
            site=site,
        )
    try:  # (the columns' types, on no rows)
        schema.frame_to_frame(pa.Table.from_batches([], schema=arrow).select(names))
    except DDFlowError as e:
        raise SchemaError(
            f"{path} does not fit the input's schema: {e.message}", site=site
        ) from None
    if diff is not None:
        if diff not in arrow.names:
            raise InputError(f"{path} has no diff column {diff!r}", site=site)
        if not pa.types.is_integer(arrow.field(diff).type):
            raise InputError(
                f"the diff column {diff!r} of {path} holds {arrow.field(diff).type}, not integers",
                site=site,
            )


def _check_nulls(
    path: str, meta: Any, schema: Schema, diff: str | None, site: CallSite | None
) -> None:
    """Nulls in a column that allows none (or in the diff column), by the row groups'
    statistics (a file written without them is checked when read)."""
    strict = [n for n, dt in schema.items() if not dt.nullable]
    if diff is not None:
        strict.append(diff)
    leaves = {meta.schema.column(i).path: i for i in range(meta.num_columns)}
    for name in strict:
        col = leaves.get(name)
        if col is None:  # (a nested column: checked when read)
            continue
        for g in range(meta.num_row_groups):
            stats = meta.row_group(g).column(col).statistics
            if stats is not None and stats.has_null_count and stats.null_count:
                raise InputError(
                    f"{path} holds {stats.null_count} null(s) in column {name!r} (row group "
                    f"{g}), which allows none",
                    site=site,
                )

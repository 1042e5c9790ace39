"""``InputCollection.read_parquet``: Parquet files read by the workers, a share each, checked
against a plain-Python count at every epoch; the footers checked before anything is accepted."""

from __future__ import annotations

import collections
import os
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ddflow as dd
from ddflow.api import files

SCHEMA = {"k": "int64", "v": "str"}


def new_flow(runtime):
    if runtime == "embedded":
        return dd.Dataflow()
    workers, processes = runtime
    return dd.Dataflow(workers=workers, processes=processes)


def write(path, rows, diffs=None, row_group_size=None):
    frame = pl.DataFrame(rows, schema={"k": pl.Int64, "v": pl.Utf8}, orient="row")
    if diffs is not None:
        frame = frame.with_columns(d=pl.Series(diffs, dtype=pl.Int64))
    os.makedirs(os.path.dirname(path), exist_ok=True)
    frame.write_parquet(path, row_group_size=row_group_size)


def counts_by_key(live):
    out = collections.Counter()
    for (k, _), n in live.items():
        out[k] += n
    return {k: n for k, n in out.items() if n}


def snapshot_counts(out, epoch):
    snap = out.snapshot_polars(epoch)
    return dict(zip(snap["k"].to_list(), snap["n"].to_list(), strict=True))


# an epoch: files of (key, value, diff) rows; every diff keeps each record at or above zero
# (the stream below removes only what it inserted before)
ROW = st.tuples(st.integers(0, 7), st.sampled_from(["a", "b", "c"]))


@st.composite
def streams(draw):
    live: collections.Counter = collections.Counter()
    epochs = []
    for _ in range(draw(st.integers(1, 4))):
        files_ = []
        for _ in range(draw(st.integers(1, 3))):
            rows, diffs = [], []
            for row in draw(st.lists(ROW, max_size=12)):
                removable = live[row] > 0
                if removable and draw(st.booleans()):
                    live[row] -= 1
                    rows.append(row)
                    diffs.append(-1)
                else:
                    live[row] += 1
                    rows.append(row)
                    diffs.append(1)
            files_.append((rows, diffs))
        epochs.append(files_)
    return epochs


@pytest.mark.parametrize("runtime", ["embedded", (3, False), (2, True)])
@settings(max_examples=12, deadline=None)
@given(stream=streams())
def test_workers_read_a_share_each_and_the_results_match_a_count(runtime, stream, tmp_path_factory):
    root = tmp_path_factory.mktemp("files")
    flow = new_flow(runtime)
    xs = flow.input("xs", schema=SCHEMA, signed=True)
    out = xs.group_by("k").agg(n=dd.count()).output()
    live: collections.Counter = collections.Counter()
    expected = []
    for e, files_ in enumerate(stream):
        for i, (rows, diffs) in enumerate(files_):
            write(str(root / f"e{e}" / f"part-{i}.parquet"), rows, diffs, row_group_size=3)
            for r, d in zip(rows, diffs, strict=True):
                live[r] += d
        xs.read_parquet(str(root / f"e{e}"), diff="d")
        expected.append(counts_by_key(live))
        flow.advance_to(e + 1)
    flow.run()
    for e, want in enumerate(expected):
        assert snapshot_counts(out, e) == want
    flow.close()


def test_the_splits_are_spread_over_the_workers(tmp_path):
    for i in range(6):
        rows = [(j, "a") for j in range(i * 100, i * 100 + 100)]
        write(str(tmp_path / f"part-{i}.parquet"), rows)
    flow = dd.Dataflow(workers=3, processes=False)
    xs = flow.input("xs", schema=SCHEMA, signed=True)
    out = xs.group_by("k").agg(n=dd.count()).output()
    xs.read_parquet(str(tmp_path))
    flow.advance_to(1)
    flow.run()
    read = [
        next(op.rows_read for op in shard.operators if op.name == "input")
        for shard in flow.worker.shards
    ]
    assert read == [200, 200, 200]
    assert out.snapshot_polars(0).height == 600


def test_row_groups_of_one_file_become_several_splits(tmp_path, monkeypatch):
    path = str(tmp_path / "one.parquet")
    write(path, [(j, "a") for j in range(1000)], row_group_size=100)
    monkeypatch.setattr(files, "SPLIT_BYTES", 1)  # (one row group a split)
    splits = files.parquet_splits(path, dd.Schema(SCHEMA), None, None)
    assert [s.row_groups for s in splits] == [(g,) for g in range(10)]
    frames = [s.read(3) for s in splits]
    assert sum(f.height for f in frames) == 1000
    assert sorted(pl.concat(frames)["k"].to_list()) == list(range(1000))
    assert set(pl.concat(frames)["__t0"].to_list()) == {3}


def test_a_checked_input_reads_here_and_checks_multiplicities(tmp_path):
    write(str(tmp_path / "add.parquet"), [(1, "a")], [1])
    write(str(tmp_path / "drop.parquet"), [(1, "a")], [-2])
    flow = dd.Dataflow(workers=2, processes=False)
    xs = flow.input("xs", schema=SCHEMA)
    out = xs.output()
    xs.read_parquet(str(tmp_path / "add.parquet"), diff="d")
    with pytest.raises(dd.InputError, match=r"below zero") as info:
        xs.read_parquet(str(tmp_path / "drop.parquet"), diff="d")
    assert info.value.site.filename == __file__
    flow.advance_to(1)
    flow.run()
    assert out.snapshot_polars(0)["count"].to_list() == [1]


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (
            lambda p: Path(p).write_bytes(b"not parquet at all"),
            r"cannot read .*bad\.parquet as Parquet",
        ),
        (
            lambda p: pl.DataFrame({"k": [1]}).write_parquet(p),
            r"bad\.parquet does not fit the input's schema: it has no column v",
        ),
        (
            lambda p: pl.DataFrame({"k": ["x"], "v": ["a"]}).write_parquet(p),
            r"bad\.parquet does not fit the input's schema",
        ),
        (
            lambda p: pl.DataFrame({"k": [1, None], "v": ["a", "b"]}).write_parquet(p),
            r"bad\.parquet holds 1 null\(s\) in column 'k'",
        ),
    ],
)
def test_a_bad_file_is_named_at_the_callers_line_and_nothing_is_accepted(tmp_path, make, message):
    write(str(tmp_path / "in" / "good.parquet"), [(1, "a")])
    make(str(tmp_path / "in" / "bad.parquet"))
    flow = dd.Dataflow(workers=2, processes=False)
    xs = flow.input("xs", schema=SCHEMA, signed=True)
    out = xs.output()
    xs.insert([(9, "z")])
    with pytest.raises(dd.DDFlowError, match=message) as info:
        xs.read_parquet(str(tmp_path / "in"))
    assert info.value.site.filename == __file__
    flow.advance_to(1)
    flow.run()
    assert out.snapshot_polars(0)["k"].to_list() == [9]


def test_a_diff_column_of_the_schema_is_refused(tmp_path):
    write(str(tmp_path / "x.parquet"), [(1, "a")])
    flow = dd.Dataflow()
    xs = flow.input("xs", schema=SCHEMA, signed=True)
    with pytest.raises(dd.InputError, match="the diff column 'k' is in the schema"):
        xs.read_parquet(str(tmp_path / "x.parquet"), diff="k")
    xs.close()
    with pytest.raises(dd.ClosedInputError):
        xs.read_parquet(str(tmp_path / "x.parquet"))

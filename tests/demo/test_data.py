"""The demo's data and judge: the generated mention stream (seeded, shaped as documented, with
community-sized strongly connected components), :func:`ddflow.demo.data.read_mentions` on good
and bad files, and :func:`ddflow.demo.oracle.recompute` on small graphs whose components and
top tags are known, and against a brute-force recomputation on random ones.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from ddflow.demo.data import SCHEMA, mention_stream, read_mentions
from ddflow.demo.oracle import recompute, window_edges
from ddflow.errors import InputError

DAY = 86_400


@pytest.fixture(scope="module")
def stream() -> pl.DataFrame:
    """The default stream (48 hours), generated once for the module."""
    return mention_stream()


@pytest.fixture(scope="module")
def day(stream: pl.DataFrame) -> pl.DataFrame:
    """A 24-hour window in the middle of the default stream."""
    return window_edges(stream, DAY // 2, DAY // 2 + DAY)


# ---------------------------------------------------------------------- the generator


def test_the_same_seed_gives_the_same_frame_and_another_seed_another(
    stream: pl.DataFrame,
) -> None:
    assert_frame_equal(mention_stream(), stream)
    small = mention_stream(seed=3, hours=2)
    assert_frame_equal(mention_stream(seed=3, hours=2), small)
    other = mention_stream(seed=4, hours=2)
    assert not other.equals(small)
    assert other.select("src", "dst").rows() != small.select("src", "dst").rows()[: other.height]


def test_the_frame_has_the_documented_columns_and_order(stream: pl.DataFrame) -> None:
    assert stream.schema == pl.Schema(SCHEMA)
    assert stream.columns == ["time", "src", "dst", "tag"]
    assert stream["time"].is_sorted()
    assert stream["time"].min() >= 0 and stream["time"].max() < 48 * 3600
    assert stream.select("time", "src", "dst").null_count().row(0) == (0, 0, 0)
    assert (stream["src"] != stream["dst"]).all()  # nobody mentions themselves


def test_every_day_long_window_holds_over_200_000_mentions(stream: pl.DataFrame) -> None:
    times = stream["time"].to_numpy()
    starts = np.arange(0, DAY + 1, 600)  # every 24-hour window starting on a ten minutes
    counts = np.searchsorted(times, starts + DAY) - np.searchsorted(times, starts)
    assert counts.min() >= 200_000, f"the window from {starts[counts.argmin()]} s is short"


def test_components_are_many_and_community_sized(day: pl.DataFrame) -> None:
    graph = nx.DiGraph()
    graph.add_edges_from(zip(day["src"].to_list(), day["dst"].to_list(), strict=True))
    sizes = sorted(
        (len(c) for c in nx.strongly_connected_components(graph) if len(c) >= 2), reverse=True
    )
    assert len(sizes) >= 1_000
    assert sizes[0] < 0.05 * graph.number_of_nodes()  # no giant component
    assert sizes[0] >= 50  # (but communities, not just pairs)


def test_mentions_are_often_answered_and_silent_accounts_much_mentioned(day: pl.DataFrame) -> None:
    pairs = set(day.select("src", "dst").unique().iter_rows())
    answered = sum((d, s) in pairs for s, d in pairs)
    assert answered > 0.2 * len(pairs)
    # the broadcasters: the ten most mentioned accounts that never write draw many mentions
    writers = set(day["src"].to_list())
    silent = Counter(d for d in day["dst"].to_list() if d not in writers)
    assert sum(n for _, n in silent.most_common(10)) > 0.03 * day.height


def test_tags_are_shared_within_communities_and_often_null(stream: pl.DataFrame) -> None:
    tags = stream["tag"]
    assert 0.3 < tags.null_count() / stream.height < 0.5
    assert tags.n_unique() > 1_000  # every community has tags of its own
    top = tags.drop_nulls().value_counts(sort=True)["tag"].head(3).to_list()
    assert top == ["news", "music", "football"]  # the global tags are the most used


@pytest.mark.parametrize(
    ("knobs", "message"),
    [
        ({"rate": 0}, "rate must be positive"),
        ({"inside": 1.5}, "inside is a probability"),
        ({"inside": 0.9, "broadcast": 0.2}, "inside \\+ broadcast must be at most 1"),
        ({"users": 4}, "users must be at least 6"),
    ],
)
def test_knobs_out_of_range_are_named(knobs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        mention_stream(hours=1, **knobs)


# ---------------------------------------------------------------------- reading a file


def small_frame() -> pl.DataFrame:
    """Mentions out of time order, a null tag, and a column the reader ignores."""
    return pl.DataFrame(
        {
            "time": [30, 10, 20, 10],
            "src": [1, 2, 3, 4],
            "dst": [2, 3, 1, 1],
            "tag": ["a", None, "b", "a"],
            "lang": ["en", "fr", "en", "de"],
        }
    )


def expected(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.select(list(SCHEMA)).cast(SCHEMA).sort("time", maintain_order=True)


def test_a_parquet_file_reads_back_sorted_by_time(tmp_path: Path) -> None:
    frame = small_frame()
    frame.write_parquet(tmp_path / "m.parquet")
    got = read_mentions(str(tmp_path / "m.parquet"))
    assert_frame_equal(got, expected(frame))
    assert got["time"].to_list() == [10, 10, 20, 30]


def test_a_csv_file_reads_back_with_its_null_tags(tmp_path: Path) -> None:
    frame = small_frame()
    frame.write_csv(tmp_path / "m.csv")
    assert_frame_equal(read_mentions(str(tmp_path / "m.csv")), expected(frame))


def test_a_directory_of_parquet_files_is_read_whole(tmp_path: Path) -> None:
    frame = small_frame()
    (tmp_path / "d").mkdir()
    frame.head(2).write_parquet(tmp_path / "d" / "part-0.parquet")
    frame.tail(2).write_parquet(tmp_path / "d" / "part-1.parquet")
    (tmp_path / "d" / "_SUCCESS").write_text("")
    assert_frame_equal(read_mentions(str(tmp_path / "d")), expected(frame))


def test_a_generated_stream_round_trips_through_parquet(tmp_path: Path) -> None:
    frame = mention_stream(seed=5, hours=1, rate=2_000, users=1_000)
    frame.write_parquet(tmp_path / "s.parquet")
    assert_frame_equal(read_mentions(tmp_path / "s.parquet"), frame)


def test_without_a_tag_column_every_tag_is_null(tmp_path: Path) -> None:
    frame = pl.DataFrame(
        {"time": [2, 1], "src": [1, 2], "dst": [2, 1]},
        schema={"time": pl.Int32, "src": pl.UInt16, "dst": pl.Int64},
    )
    frame.write_parquet(tmp_path / "m.parquet")
    frame.write_csv(tmp_path / "m.csv")
    for name in ("m.parquet", "m.csv"):
        got = read_mentions(str(tmp_path / name))
        assert got.schema == pl.Schema(SCHEMA)
        assert got.rows() == [(1, 2, 1, None), (2, 1, 2, None)]


def write(path: Path, text: str) -> str:
    path.write_text(text)
    return str(path)


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("m.json", "{}", r"m\.json' has '\.json': expected a \.parquet or \.csv file"),
        (
            "m.csv",
            "time,src,tag\n1,2,a\n",
            r"no column 'dst' \(columns found: time, src, tag\)",
        ),
        ("m.csv", "time,src,dst\n1.5,2,3\n", "column 'time' must hold integers, it holds Float64"),
        ("m.csv", "time,src,dst\n1,bob,3\n", "column 'src' must hold integers, it holds String"),
        (
            "m.csv",
            "time,src,dst\n1,2,3\n2,3,4\n3,,5\n4,,6\n",
            r"column 'src' is null at row 2 \(counting from 0, line 4 of the file\) and in 1 more",
        ),
        ("m.csv", 'time,src,dst\n1,2,3\n"4,5,6\n', r"cannot read mentions file .*m\.csv': "),
        ("m.parquet", "not parquet at all", r"cannot read mentions file .*m\.parquet': .+"),
    ],
)
def test_a_bad_file_is_refused_naming_it_and_the_problem(
    tmp_path: Path, name: str, text: str, message: str
) -> None:
    path = write(tmp_path / name, text)
    with pytest.raises(InputError, match=message) as info:
        read_mentions(path)
    assert path in str(info.value)
    assert "\n" not in str(info.value)  # (the root cause on one line)


def test_a_missing_file_or_an_empty_directory_is_refused(tmp_path: Path) -> None:
    missing = str(tmp_path / "nowhere.parquet")
    with pytest.raises(InputError, match=f"{re.escape(repr(missing))} does not exist"):
        read_mentions(missing)
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match=r"holds no \.parquet or \.csv files"):
        read_mentions(str(tmp_path / "empty"))


def test_a_time_beyond_int64_is_refused(tmp_path: Path) -> None:
    pl.DataFrame(
        {"time": [2**63 + 1], "src": [1], "dst": [2]},
        schema={"time": pl.UInt64, "src": pl.Int64, "dst": pl.Int64},
    ).write_parquet(tmp_path / "m.parquet")
    with pytest.raises(InputError, match=r"m\.parquet'.*9223372036854775809"):
        read_mentions(str(tmp_path / "m.parquet"))


@pytest.mark.spark
def test_spark_reads_the_same_frames(spark: Any, tmp_path: Path) -> None:
    frame = small_frame()
    frame.write_parquet(tmp_path / "m.parquet")
    frame.write_csv(tmp_path / "m.csv")
    for name in ("m.parquet", "m.csv"):
        got = read_mentions(str(tmp_path / name), spark=spark)
        assert_frame_equal(got, expected(frame))
    bad = write(tmp_path / "bad.parquet", "not parquet at all")
    # (the innermost Java exception says what is wrong, the outer ones which call failed)
    with pytest.raises(InputError, match=r"bad\.parquet': .*bad\.parquet is not a Parquet file"):
        read_mentions(bad, spark=spark)


# ---------------------------------------------------------------------- the judge


def edges(rows: list[tuple[int, int, str | None]]) -> pl.DataFrame:
    return pl.DataFrame(
        rows, schema={"src": pl.Int64, "dst": pl.Int64, "tag": pl.String}, orient="row"
    )


def test_window_edges_keeps_start_and_leaves_out_end() -> None:
    m = pl.DataFrame({"time": [9, 10, 11, 19, 20], "src": [1, 2, 3, 4, 5], "dst": [0] * 5})
    assert window_edges(m, 10, 20)["src"].to_list() == [2, 3, 4]


def test_components_are_largest_first_then_by_smallest_node() -> None:
    cycle = [(10, 11, None), (11, 12, None), (12, 10, None)]  # size 3
    pair_a = [(7, 8, None), (8, 7, None)]  # size 2, smallest node 7
    pair_b = [(20, 5, None), (5, 20, None)]  # size 2, smallest node 5
    noise = [(1, 2, None), (2, 3, None), (3, 3, None), (8, 10, None), (12, 5, None)]
    got = recompute(edges(cycle + pair_a + pair_b + noise))
    assert [(c["size"], c["nodes"]) for c in got] == [(3, [10, 11, 12]), (2, [5, 20]), (2, [7, 8])]
    assert all(c["top_tags"] == [] for c in got)


def test_no_cycle_no_component() -> None:
    assert recompute(edges([(1, 2, "a"), (2, 3, "a"), (4, 4, "a")])) == []
    assert recompute(edges([])) == []


def test_top_tags_count_inner_mentions_most_first_ties_by_tag_at_most_three() -> None:
    inner = [
        (1, 2, "zed"),
        (2, 1, "zed"),
        (1, 2, "zed"),  # a mention repeated counts again: zed 3
        (2, 3, "mid"),
        (3, 1, "mid"),  # mid 2
        (1, 3, "beta"),
        (3, 2, "alpha"),  # beta 1, alpha 1: a tie, by tag
        (2, 1, "gamma"),  # gamma 1: fourth, left out
        (1, 2, None),
        (2, 3, None),  # untagged: not counted
    ]
    leaving = [(1, 9, "out")] * 5 + [(8, 2, "in")] * 5  # 8 and 9 are outside the component
    across = [(3, 4, "x")] * 5 + [(4, 5, "x"), (5, 4, "y")]  # to another component {4, 5}
    got = recompute(edges(inner + leaving + across))
    assert got == [
        {"size": 3, "nodes": [1, 2, 3], "top_tags": ["zed", "mid", "alpha"]},
        {"size": 2, "nodes": [4, 5], "top_tags": ["x", "y"]},
    ]


def brute_force(rows: list[tuple[int, int, str | None]]) -> list[dict[str, Any]]:
    """The components and top tags by reachability sets and counting, in plain Python."""
    nodes = sorted({n for s, d, _ in rows for n in (s, d)})
    succ: dict[int, set[int]] = {n: set() for n in nodes}
    for s, d, _ in rows:
        succ[s].add(d)
    reach = {}
    for n in nodes:
        seen, todo = {n}, [n]
        while todo:
            for m in succ[todo.pop()] - seen:
                seen.add(m)
                todo.append(m)
        reach[n] = seen
    components = {frozenset(m for m in reach[n] if n in reach[m]) for n in nodes}
    result = []
    for c in components:
        if len(c) < 2:
            continue
        counts = Counter(t for s, d, t in rows if s in c and d in c and t is not None)
        top = sorted(counts, key=lambda t: (-counts[t], t))[:3]
        result.append({"size": len(c), "nodes": sorted(c), "top_tags": top})
    return sorted(result, key=lambda c: (-c["size"], c["nodes"][0]))


@pytest.mark.parametrize("seed", range(6))
def test_recompute_equals_brute_force_on_random_graphs(seed: int) -> None:
    rng = random.Random(seed)
    n = rng.randrange(5, 40)
    rows = [
        (rng.randrange(n), rng.randrange(n), rng.choice(["a", "b", "c", "d", "e", None]))
        for _ in range(rng.randrange(n, 3 * n))
    ]
    want = brute_force(rows)
    assert want, "the random graph has no component: choose another seed"
    assert recompute(edges(rows)) == want

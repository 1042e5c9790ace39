"""The benchmarks (``python -m benchmarks run NAME --quick``) on their small inputs.

Each benchmark checks its own results against its baseline: the labels of connected components
against SciPy's and NetworkX's, a join and group-by against Polars recomputing it, reachability
against NetworkX, Spark SQL and Spark DataFrames, the Table 2 rows and the real-data windows
against NetworkX, the URL counts of the three CBP designs against Polars. Run whole here,
those checks run too. The figures of the JSON are checked against what
``benchmarks/README.md`` says they are: ratios against the medians they come from, series
against their totals, and Figure 1's records in difference against label propagation computed
in plain Python.

Not run whole here: ``pathway_cc``, which installs Pathway into a virtual environment of its
own on first use (a download of minutes, and Pathway is no dependency of ddflow).
``spark_cc``'s baseline, components by plain Spark DataFrames, is also checked against NetworkX
on the tests' Spark session.
"""

from __future__ import annotations

import json
import statistics
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # (the benchmarks are a package beside src/, not installed)
    sys.path.insert(0, str(ROOT))

from benchmarks import __main__ as entry  # noqa: E402
from benchmarks import figure1  # noqa: E402
from benchmarks.cc import _remove_once, nx_components  # noqa: E402
from benchmarks.graphs import random_changes, rmat  # noqa: E402

pytestmark = pytest.mark.slow


def run_benchmark(name: str, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    """``python -m benchmarks run NAME --quick``, in this process: its JSON."""
    capsys.readouterr()
    assert entry.main(["run", name, "--quick"]) == 0
    result: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert result["benchmark"] == name
    assert result["machine"]["cpus"] >= 1
    return result


def check_summary(s: dict[str, Any], runs: int | None = None) -> None:
    """A latency summary: a positive median no larger than the maximum, over ``runs``."""
    assert 0 < s["median_ms"] <= s["max_ms"]
    if runs is not None:
        assert s["runs"] == runs


def check_ratio(
    ratio: float, numerator: float, denominator: float, decimals: int = 2, rel: float = 0.0
) -> None:
    """A ratio as the JSON rounds it (to ``decimals``; and within ``rel`` more of the ratio
    when the numbers it is given are rounded more than those it was computed from: the two
    roundings add up)."""
    expected = numerator / denominator
    assert ratio == pytest.approx(expected, abs=0.6 * 10**-decimals + rel * abs(expected), rel=0)


def test_list_names_every_benchmark_with_its_summary(capsys: pytest.CaptureFixture[str]) -> None:
    assert entry.main(["list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == sorted(entry.BENCHMARKS)
    assert all(len(line.split()) > 2 for line in lines)


def test_an_unknown_benchmark_is_refused_by_name(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        entry.main(["run", "no_such_benchmark"])
    assert "no_such_benchmark" in capsys.readouterr().err


def test_cc(capsys: pytest.CaptureFixture[str]) -> None:
    (r,) = run_benchmark("cc", capsys)["results"]  # (labels checked by SciPy and NetworkX)
    assert r["edges"] == 20_000 and r["first_result_s"] > 0 and r["peak_rss_mb_after_load"] > 0
    assert sorted(r["updates"], key=int) == ["1", "10", "100", "1000"]
    for u in r["updates"].values():
        check_summary(u, runs=3)
        check_ratio(u["speedup_vs_scipy"], r["scipy_recompute"]["median_ms"], u["median_ms"])
        check_ratio(
            u["speedup_vs_networkx"],
            r["networkx_recompute"]["median_ms"],
            u["median_ms"],
            decimals=1,
        )


def test_demo(capsys: pytest.CaptureFixture[str]) -> None:
    """The demo's benchmark: every step checked against NetworkX (it raises otherwise)."""
    r = run_benchmark("demo", capsys)
    assert r["quick"] and r["result_checked"] is True
    assert r["first_window"]["components"] > 0 and len(r["steps"]) == 5
    for s in r["steps"]:
        assert s["entered"] + s["left"] > 0 and s["step_ms"] > 0 and s["recompute_ms"] > 0
    check_summary(r["ddflow_step"], runs=5)
    check_summary(r["networkx_recompute"], runs=5)
    check_ratio(
        r["recompute_over_step"],
        r["networkx_recompute"]["median_ms"],
        r["ddflow_step"]["median_ms"],
    )


def test_updates(capsys: pytest.CaptureFixture[str]) -> None:
    sizes = run_benchmark("updates", capsys)["sizes"]
    assert [s["records"] for s in sizes] == [10_000, 100_000]
    for s in sizes:
        check_summary(s["ddflow_update"])
        check_summary(s["recompute_polars"])
        check_ratio(
            s["speedup_vs_recompute"],
            s["recompute_polars"]["median_ms"],
            s["ddflow_update"]["median_ms"],
        )
        check_ratio(
            s["latency_ratio_vs_smallest"],
            s["ddflow_update"]["median_ms"],
            sizes[0]["ddflow_update"]["median_ms"],
        )


def label_propagation(edges: pl.DataFrame) -> list[dict[int, int]]:
    """Each iteration's labels of min-label propagation over the undirected ``edges``, from
    every node labelled with itself to the fixed point (the last iteration changes one)."""
    neighbours: dict[int, set[int]] = {}
    for a, b in edges.select("src", "dst").iter_rows():
        neighbours.setdefault(a, set()).add(b)
        neighbours.setdefault(b, set()).add(a)
    labels = {v: v for v in neighbours}
    out = [labels]
    while True:
        new = {v: min(labels[v], *(labels[u] for u in near)) for v, near in neighbours.items()}
        if new == labels:
            return out
        out.append(labels := new)


def differences(iterations: list[dict[int, int]], i: int) -> Counter[tuple[int, int]]:
    """The records in difference of iteration ``i``: its labels less the iteration before's."""
    d = Counter(iterations[i].items())
    if i:
        d.subtract(Counter(iterations[i - 1].items()))
    return d


def test_figure1_counts_the_differences_of_label_propagation() -> None:
    """The incremental series is the records in difference between successive iterations of a
    fresh run; the differential one what one more change adds to those differences."""
    result = figure1.run(quick=True, make_plot=False)
    edges = rmat(20_000, 1)
    before = label_propagation(edges)
    n_nodes = int(edges.select(pl.max_horizontal("src", "dst").max()).item()) + 1
    gone, new = random_changes(edges, n_nodes, 2, np.random.default_rng(1))
    after = label_propagation(pl.concat([_remove_once(edges, gone), new]))
    n = len(result["incremental"])
    assert n == len(before) == len(result["stateless"])
    assert result["labels"] == len(before[0])
    assert result["incremental"] == [
        sum(map(abs, differences(before, i).values())) for i in range(n)
    ]
    before += [before[-1]] * (len(after) - n)  # (a shorter run's labels stay as they end)
    after += [after[-1]] * (n - len(after))
    expected = []
    for i in range(n):
        d = differences(after, i)
        d.subtract(differences(before, i))
        expected.append(sum(1 for v in d.values() if v))
    assert result["differential_one_change"] == expected
    for name in ("stateless", "incremental", "prioritized", "differential_one_change"):
        assert result["totals"][name] == sum(result[name])
    assert result["stateless"] == [result["labels"]] * n
    assert result["totals"]["prioritized"] < result["totals"]["incremental"]


def test_small_batches(capsys: pytest.CaptureFixture[str]) -> None:
    r = run_benchmark("small_batches", capsys)
    assert sorted(r["updates"], key=int) == ["1", "10", "100", "1000"]
    for u in r["updates"].values():
        check_summary(u["rows"], runs=5)
        check_summary(u["polars_only"], runs=5)
        check_ratio(u["speedup"], u["polars_only"]["median_ms"], u["rows"]["median_ms"])


def test_throughput(capsys: pytest.CaptureFixture[str]) -> None:
    """(ddflow's output is checked against Polars recomputing it, after every sampled batch
    and at the end.)"""
    r = run_benchmark("throughput", capsys)
    assert r["updates"] == 20_000 and 0.15 < r["deletions"] / r["updates"] < 0.25
    assert [b["batch"] for b in r["batches"]] == [100, 1_000, 10_000]
    for b in r["batches"]:
        assert b["epochs"] * b["batch"] == r["updates"]
        total = b["ddflow_total_s"]  # (rounded to 1 ms; the rate is not)
        assert r["updates"] / (total + 5e-4) <= b["ddflow_updates_per_s"] + 1
        assert b["ddflow_updates_per_s"] - 1 <= r["updates"] / (total - 5e-4)
        check_summary(b["ddflow_epoch"], runs=b["epochs"])
        check_ratio(
            b["speedup_vs_polars"],
            b["ddflow_updates_per_s"],
            b["polars_updates_per_s_extrapolated"],
        )


def test_table2_rows_equal_networkx(capsys: pytest.CaptureFixture[str]) -> None:
    r = run_benchmark("table2", capsys)
    assert r["quick"] and r["scale"] == 0.01
    rows = {row["row"]: row for row in r["rows"]}
    assert sorted(rows) == ["cc-3.4m", "scc-200k", "scc-2m", "sssp-10m", "sssp-1m"]
    for row in rows.values():
        assert row["status"] == "ok", row["row"]
        assert row["check"]["equal"] and row["check"]["differences"] == 0, row["row"]
        assert row["check"]["nodes"] > 0
        updates = row["ddflow"]["updates"]
        check_summary(updates["all"], runs=6)
        assert updates["removal"]["runs"] + updates["insertion"]["runs"] == 6
        check_ratio(
            row["vs_paper"]["update_median_over_naiad"],
            updates["all"]["median_ms"],
            row["paper"]["naiad_update_ms"],
            decimals=1,
        )


def test_realdata(capsys: pytest.CaptureFixture[str]) -> None:
    """(Every window's components and every road change's distances are checked against
    NetworkX's.)"""
    r = run_benchmark("realdata", capsys)
    costar = r["costar_windows"]
    assert costar["checked_equal_steps"] == len(costar["steps"]) > 0
    check_summary(costar["window_step"], runs=len(costar["steps"]))
    assert costar["pairs_all_years"]["rows"] >= costar["pairs_all_years"]["distinct"] > 0
    roads = r["highway_shortest_paths"]
    assert roads["nodes_reached"] > 0 and roads["world_roads"] > roads["roads"]
    assert len(roads["changes"]) == 6
    assert [c["removed"] for c in roads["changes"]] == [True] * 3 + [False] * 3
    for kind, removed in (("remove_road", True), ("restore_road", False)):
        changes = [c for c in roads["changes"] if c["removed"] == removed]
        check_summary(roads[kind]["ddflow"], runs=3)
        assert roads[kind]["ddflow"]["median_ms"] == pytest.approx(
            statistics.median(c["ddflow_ms"] for c in changes), abs=0.06
        )
        # (the median of the ratios of the changes, each paired with NetworkX's)
        for c in changes:
            check_ratio(
                c["speedup_vs_networkx"], c["networkx_dijkstra_ms"], c["ddflow_ms"], rel=0.02
            )
        assert roads[kind]["speedup_vs_networkx_median"] == pytest.approx(
            statistics.median(c["speedup_vs_networkx"] for c in changes), abs=0.006
        )


def test_steps(capsys: pytest.CaptureFixture[str]) -> None:
    """(Every change's distances are checked against Dijkstra's.) A step's time is the sum
    of its three parts; the reduces take a share of it. With the reduces in the native core,
    the same changes take the same operator steps."""
    full = run_benchmark("steps", capsys)
    r = full["this"]
    n = full["native_reducer"]
    assert [c["steps"] for c in n["per_change"]] == [c["steps"] for c in r["per_change"]]
    check_ratio(full["speedup_per_change_of_native_reducer"], r["median"]["ms"], n["median"]["ms"])
    assert r["changes"] == 6 and r["roads"] > 0
    m = r["median"]
    assert m["steps"] > 0 and m["ms"] > 0
    assert 0 < r["reduce_share"] < 1
    parts = ("reduce_us_per_step", "other_operators_us_per_step", "scheduler_us_per_step")
    assert [c["removed"] for c in r["per_change"]] == [True] * 3 + [False] * 3
    for c in r["per_change"]:
        assert c["reduce_us_per_step"] > 0 and c["other_operators_us_per_step"] > 0
        assert sum(c[p] for p in parts) == pytest.approx(c["us_per_step"], abs=0.02)
        check_ratio(c["us_per_step"], c["ms"] * 1e3, c["steps"], rel=0.01)
    assert m["ms"] == pytest.approx(statistics.median(c["ms"] for c in r["per_change"]), abs=0.01)


@pytest.fixture
def restored(spark: Any) -> Iterator[Any]:
    """The tests' Spark session, with the settings and views a benchmark changes put back."""
    keys = [
        "spark.sql.shuffle.partitions",
        "spark.sql.cteRecursionLevelLimit",
        "spark.sql.cteRecursionRowLimit",
    ]
    saved = {k: spark.conf.get(k, None) for k in keys}
    yield spark
    for k, v in saved.items():
        if v is None:
            spark.conf.unset(k)
        else:
            spark.conf.set(k, v)
    for view in ("edges", "root"):
        spark.catalog.dropTempView(view)


@pytest.mark.spark
def test_spark_reach(restored: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """(ddflow's distances, Spark SQL's ``WITH RECURSIVE`` and Spark DataFrames' are each
    checked against NetworkX's.)"""
    r = run_benchmark("spark_reach", capsys)
    assert r["graph"]["nodes"] == 2_000 and r["graph"]["reached_from_root"] > 1
    check_summary(r["ddflow_update_single_edge"], runs=5)
    sql, frames = r["spark_sql_with_recursive"]["seconds"], r["spark_dataframes_bfs"]["seconds"]
    assert len(sql) == len(frames) == 2 and min(sql) > 0 and min(frames) > 0
    assert r["spark_dataframes_bfs"]["rounds"] >= r["graph"]["root_eccentricity"]
    # (the seconds are rounded to 10 ms, the ratio is not)
    assert r["speedup_update_vs_spark_sql"] == pytest.approx(
        min(sql) * 1e3 / r["ddflow_update_single_edge"]["median_ms"], rel=0.01
    )


@pytest.mark.spark
def test_spark_cc_baseline_equals_networkx(spark: Any) -> None:
    from benchmarks.spark_cc import spark_components

    edges = rmat(2_000, 3)
    labels, rounds = spark_components(spark, edges)
    got = dict(labels.toPandas().itertuples(index=False, name=None))
    assert got == nx_components(edges)
    assert rounds > 1


@pytest.mark.spark
def test_spark_cc_on_hosted_workers(restored: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """(ddflow's labels are checked equal to the Spark DataFrames' after the changes.)"""
    r = run_benchmark("spark_cc", capsys)
    assert r["runtime"] == "SparkRuntime(spark, workers=2)"
    (size,) = r["sizes"]
    assert size["edges"] == 20_000 and size["changed_edges"] == 20
    check_summary(size["update_0_1_percent"], runs=1)
    recompute = size["spark_dataframes_recompute"]
    check_summary(recompute, runs=1)
    assert recompute["rounds"] > 1 and size["single_change_ms"] > 0
    check_ratio(
        size["first_result_over_recompute"],
        size["first_result_s"],
        recompute["median_ms"] / 1e3,
        rel=0.01,
    )
    check_ratio(
        size["speedup_update_vs_recompute"],
        recompute["median_ms"],
        size["update_0_1_percent"]["median_ms"],
        rel=0.01,
    )
    assert r["small_graph_single_change_ms"] > 0


def test_checkpoint(capsys: pytest.CaptureFixture[str]) -> None:
    # (the restored, the rebuilt and the uninterrupted flows' labels are checked equal in it)
    r = run_benchmark("checkpoint", capsys)
    assert r["edges"] == 20_000 and r["checkpoint_bytes"] > 0
    for part in ("write", "restore", "rebuild_from_input"):
        check_summary(r[part], runs=3)
    check_ratio(
        r["restore_speedup_vs_rebuild"],
        r["rebuild_from_input"]["median_ms"],
        r["restore"]["median_ms"],
    )


def test_crash(capsys: pytest.CaptureFixture[str]) -> None:
    r = run_benchmark("crash", capsys)  # (each trial's outcome is checked in it)
    assert r["trials"] == r["passed"] == 2
    assert sum(c["trials"] for c in r["configurations"].values()) == 2


CBP_SETTINGS = ("CBP_INCREMENTS", "CBP_RECORDS", "CBP_URLS", "CBP_ZIPF", "CBP_RUNS")


def test_cbp(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The URL count over increments: recomputed, black box and CBP inner grouping end with
    Polars' counts of the stream (checked in it); the stage's state reads are the increment's
    known URLs, its state the URLs before it; the summary is computed from the series."""
    for var in CBP_SETTINGS:
        monkeypatch.delenv(var, raising=False)
    r = run_benchmark("cbp", capsys)
    s = r["settings"]
    assert (s["increments"], s["records"], s["urls"], s["runs"]) == (5, 2_000, 20_000, 2)
    assert r["counts_equal"] is True
    designs = ("recompute", "black_box", "cbp_inner")
    incs = r["increments"]
    assert [i["increment"] for i in incs] == list(range(5))
    before = 0
    for i in incs:
        assert i["records"] == 2_000 and 0 < i["distinct_urls"] <= 2_000
        assert i["hit_rate"] == pytest.approx(i["known_urls"] / i["distinct_urls"], abs=1e-4)
        assert i["state_read"] == i["known_urls"] and i["state_size"] == before
        assert i["calls"] == i["distinct_urls"] and i["black_box_calls"] == i["urls_after"]
        assert i["urls_after"] == before + i["distinct_urls"] - i["known_urls"]
        before = i["urls_after"]
    assert incs[0]["hit_rate"] == 0 and all(0 < i["hit_rate"] < 1 for i in incs[1:])
    summary = r["summary"]
    assert summary["final_state_size"] == before and summary["records"] == 10_000
    for d in designs:
        runs = r["runs_ms"][d]
        assert len(runs) == 2 and all(len(run) == 5 and min(run) > 0 for run in runs)
        series = [i[f"{d}_ms"] for i in incs]
        for k, ms in enumerate(series):
            assert ms == pytest.approx(statistics.median(run[k] for run in runs), abs=2e-3)
        assert summary["total_s"][d] == pytest.approx(sum(series) / 1e3, abs=1e-3)
        check_ratio(summary["last_over_first"][d], series[-1], series[0], rel=1e-4)
        check_ratio(summary["last_over_second"][d], series[-1], series[1], rel=1e-4)
    for d in ("recompute", "black_box"):
        check_ratio(
            summary[f"{d}_over_cbp_inner_last"],
            incs[-1][f"{d}_ms"],
            incs[-1]["cbp_inner_ms"],
            rel=1e-4,
        )


def test_cbp_fails_when_a_design_counts_wrong(monkeypatch: pytest.MonkeyPatch) -> None:
    """The benchmark's check: a design whose final counts differ from the stream's stops it,
    naming the design and a URL."""
    from benchmarks import cbp

    def miscount(url: str, state: list[Any], flows: Any, out: Any) -> None:
        previous = flows["counts"]
        count = len(flows["urls"]) + (previous[0][1] if previous else 0)
        out.write("counts", (url, min(count, 2)))  # a count stuck at 2
        if flows["urls"]:
            out.write("updates", (url, min(count, 2)))

    for var, value in zip(CBP_SETTINGS, ("3", "500", "2000", "1.0", "1"), strict=True):
        monkeypatch.setenv(var, value)
    monkeypatch.setattr(cbp, "url_count_black_box", miscount)
    with pytest.raises(AssertionError, match=r"black_box: \d+ URLs differ, e\.g\. 'http"):
        cbp.run(quick=True)


def test_priorities(capsys: pytest.CaptureFixture[str]) -> None:
    """Both loops of each label propagation, on both graphs, their labels checked equal to
    each other's and NetworkX's (the benchmark raises otherwise)."""
    r = run_benchmark("priorities", capsys)
    assert r["edges"] == 20_000 and r["single_edge_updates"] == 6 and r["batches_of_100"] == 2
    assert sorted(r["results"]) == ["connected_components", "reachability_labels"]
    for graphs in r["results"].values():
        assert sorted(graphs) == ["rmat", "sparse"]
        for row in graphs.values():
            for loop in ("plain", "prioritized"):
                assert row[loop]["first_result_s"] > 0
                check_summary(row[loop]["single_edge"], runs=6)
                check_summary(row[loop]["batch_of_100"], runs=2)
            ratios, p, q = row["plain_over_prioritized"], row["plain"], row["prioritized"]
            check_ratio(ratios["first_result"], p["first_result_s"], q["first_result_s"], rel=0.01)
            for kind in ("single_edge", "batch_of_100"):
                check_ratio(ratios[kind], p[kind]["median_ms"], q[kind]["median_ms"])


def test_small_scc(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The five configurations and NetworkX on the same changes, each flow's components
    checked equal to NetworkX's after every change (the benchmark raises otherwise); a flow
    that gets one change wrong fails the run."""
    r = run_benchmark("small_scc", capsys)
    assert r["graph"] == {"nodes": 40, "edges": 100} and r["changes"] == 8
    assert r["result_checked"] is True
    configurations = ("python", "native_progress", "native_reduce", "native", "regions")
    for name in (*configurations, "networkx"):
        check_summary(r[name], runs=8)
    for name in configurations:
        assert r[name]["median_steps"] > 0
        check_ratio(
            r["ratios"][f"{name}_vs_python"], r["python"]["median_ms"], r[name]["median_ms"]
        )
        check_ratio(
            r["ratios"][f"{name}_vs_networkx"],
            r["networkx"]["median_ms"],
            r[name]["median_ms"],
            decimals=3,
        )
    from benchmarks import small_scc

    real = small_scc.networkx_components
    monkeypatch.setattr(small_scc, "networkx_components", lambda live: {**real(live), -1: -1})
    with pytest.raises(small_scc.ResultMismatch, match="after change 0"):
        small_scc.run(quick=True)


def test_cc_with_loop_regions(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``BENCH_REGIONS=1``: the label propagation runs whole in the core, its labels checked
    by SciPy and NetworkX after every batch of changes (the benchmark raises otherwise)."""
    monkeypatch.setenv("BENCH_REGIONS", "1")
    monkeypatch.setenv("BENCH_REDUCER", "native")
    r = run_benchmark("cc", capsys)
    assert r["regions"] is True and r["reducer"] == "native"
    (row,) = r["results"]
    assert sorted(row["updates"], key=int) == ["1", "10", "100", "1000"]
    for u in row["updates"].values():
        check_summary(u, runs=3)

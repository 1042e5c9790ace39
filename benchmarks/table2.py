"""The Naiad tech report's Table 2 (SSSP, SCC, CC, single-threaded) with ddflow, vs NetworkX.

Each row of the paper's table is one row here, run in a fresh subprocess
(``python3 -m benchmarks.table2 ROW [--quick]``) so that its peak RSS is its own:

* ``sssp-1m`` / ``sssp-10m``: ``dd.graph.shortest_paths`` (Bellman-Ford, Figure 19) from one
  source on a uniform random directed graph of 1M nodes and 1M / 10M edges, integer weights;
* ``scc-200k`` / ``scc-2m``: ``dd.graph.strongly_connected_components`` (Figure 8) on a uniform
  random directed graph of 1M nodes and 200K / 2M edges;
* ``cc-3.4m``: ``dd.graph.connected_components`` (Figure 3) on an Amazon-like graph (the size
  of SNAP's amazon0601, 403,394 nodes and 3,387,388 edges, one component; see
  :func:`benchmarks.table2_graphs.amazon_like`: the real graph is not downloaded).

For each row: the time from inserting the graph to the first complete result, the peak RSS of
the process after the first result and after the updates, the latency of single-record updates
(one edge removed or added per epoch, alternately), and NetworkX recomputing the same algorithm
from scratch (graph construction included) on the final graph, whose output must equal
ddflow's. The paper's figures sit in each row beside ours, with the ratios.

Environment variables (all optional):

* ``TABLE2_ROWS``: comma-separated rows to run (default: all five);
* ``TABLE2_BUDGET_S``: wall-clock budget per row in seconds (default 300 with ``--quick``,
  3600 without); a row over budget is killed and reported as ``"status": "timeout"`` with
  what it had done so far;
* ``TABLE2_MAX_RSS_GB``: a row whose RSS goes over this is killed (``"status": "memory"``;
  default 21: scc-2m peaks at about 19.3 GB, so it needs a machine of 24 GB or more);
* ``TABLE2_UPDATES``: single-edge updates per row (default 6 with ``--quick``, 10 without);
* ``TABLE2_SCALE``: sizes as a fraction of the paper's (default 0.01 with ``--quick``, 1);
* ``TABLE2_CC_PRIORITIZED``: ``0`` runs CC with the plain loop instead of the prioritized one
  (Figure 10, the default, as the paper's Table 2 used ``Prioritize``);
* ``TABLE2_THREADS``: ``POLARS_MAX_THREADS`` for the rows (default 1: the paper's table is
  single-threaded; empty for Polars' default).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Any

import networkx as nx
import polars as pl

import ddflow as dd
from benchmarks.common import dataflow, loop_regions, machine, native_reducer, peak_rss_mb, summary
from benchmarks.table2_graphs import (
    AMAZON_EDGES,
    AMAZON_NODES,
    amazon_like,
    most_out_edges,
    random_digraph,
    single_edge_changes,
)

QUICK_SCALE = 0.01
SSSP_WEIGHTS = (1, 10)
PROGRESS = "TABLE2-PROGRESS "
ROOT = Path(__file__).resolve().parent.parent


# ---------------------------------------------------------------------- the rows


@dataclass(frozen=True)
class Paper:
    """One line of the paper's Table 2 (Intel Core i7 2.67 GHz, one thread)."""

    edges: str
    linq_s: float
    naiad_s: float
    linq_mb: float
    naiad_mb: float
    naiad_update_ms: float


@dataclass(frozen=True)
class Row:
    """A row to measure: an algorithm on a generated graph of ``nodes`` and ``edges``."""

    name: str
    algorithm: str  # "sssp", "scc" or "cc"
    nodes: int
    edges: int
    seed: int
    paper: Paper


ROWS: dict[str, Row] = {
    r.name: r
    for r in [
        Row("sssp-1m", "sssp", 1_000_000, 1_000_000, 11, Paper("1M", 11.88, 4.71, 386, 309, 0.25)),
        Row(
            "sssp-10m",
            "sssp",
            1_000_000,
            10_000_000,
            12,
            Paper("10M", 200.23, 57.73, 1259, 2694, 0.15),
        ),
        Row("scc-200k", "scc", 1_000_000, 200_000, 13, Paper("200K", 30.56, 4.36, 99, 480, 1.12)),
        Row("scc-2m", "scc", 1_000_000, 2_000_000, 14, Paper("2M", 594.44, 51.84, 514, 3427, 8.79)),
        Row(
            "cc-3.4m",
            "cc",
            AMAZON_NODES,
            AMAZON_EDGES,
            15,
            Paper("3.4M", 66.81, 9.90, 1124, 985, 0.49),
        ),
    ]
}


def scaled(row: Row, scale: float) -> tuple[int, int]:
    """The row's node and edge counts times ``scale`` (1/100 with ``--quick``)."""
    if scale == 1.0:
        return row.nodes, row.edges
    return max(int(row.nodes * scale), 10), max(int(row.edges * scale), 10)


# ---------------------------------------------------------------------- workloads


@dataclass
class Workload:
    """What differs between the algorithms: the graph, the ddflow query, the NetworkX
    baseline and how to read a result as a ``node -> value`` map."""

    graph: pl.DataFrame
    description: dict[str, Any]
    weights: tuple[int, int] | None
    build: Callable[[dd.Dataflow, dd.InputCollection], dd.Output]
    value_column: str
    nx_graph: Callable[[pl.DataFrame], Any]
    nx_solve: Callable[[Any], dict[int, int]]


def _least_member_labels(components: Any) -> dict[int, int]:
    """Each node of each component (an iterable of node sets) mapped to its component's least
    node id."""
    labels: dict[int, int] = {}
    for members in components:
        labels.update(dict.fromkeys(members, min(members)))
    return labels


def sssp_workload(row: Row, nodes: int, edges: int) -> Workload:
    graph = random_digraph(nodes, edges, row.seed, SSSP_WEIGHTS)
    source = most_out_edges(graph)

    def build(flow: dd.Dataflow, inp: dd.InputCollection) -> dd.Output:
        sources = flow.input("sources", schema={"node": "int64"})
        sources.insert([source])
        return dd.graph.shortest_paths(inp, sources).output()

    def nx_graph(live: pl.DataFrame) -> nx.DiGraph:
        g = nx.DiGraph()
        g.add_weighted_edges_from(live.select("src", "dst", "weight").iter_rows())
        g.add_node(source)
        return g

    def nx_solve(g: nx.DiGraph) -> dict[int, int]:
        return dict(nx.single_source_dijkstra_path_length(g, source))

    description = {
        "generator": "uniform random directed graph G(n, m): distinct edges, no self-loops",
        "weights": f"integers uniform in [{SSSP_WEIGHTS[0]}, {SSSP_WEIGHTS[1]}] (the paper "
        "does not give its weights)",
        "source": source,
        "source_rule": "the node with the most out-edges",
        "ddflow": "dd.graph.shortest_paths (Bellman-Ford iterate, one source: the "
        "prioritized variant would be the same loop)",
        "networkx": "nx.single_source_dijkstra_path_length",
    }
    return Workload(graph, description, SSSP_WEIGHTS, build, "distance", nx_graph, nx_solve)


def scc_workload(row: Row, nodes: int, edges: int) -> Workload:
    graph = random_digraph(nodes, edges, row.seed)

    def build(flow: dd.Dataflow, inp: dd.InputCollection) -> dd.Output:
        return dd.graph.strongly_connected_components(inp).output()

    def nx_graph(live: pl.DataFrame) -> nx.DiGraph:
        g = nx.DiGraph()
        g.add_edges_from(live.iter_rows())
        return g

    def nx_solve(g: nx.DiGraph) -> dict[int, int]:
        return _least_member_labels(nx.strongly_connected_components(g))

    description = {
        "generator": "uniform random directed graph G(n, m): distinct edges, no self-loops",
        "weights": None,
        "ddflow": "dd.graph.strongly_connected_components (nested iterate, Figure 8)",
        "networkx": "nx.strongly_connected_components, each node labelled with its SCC's "
        "least node",
    }
    return Workload(graph, description, None, build, "component", nx_graph, nx_solve)


def cc_workload(row: Row, nodes: int, edges: int, prioritized: bool) -> Workload:
    graph = amazon_like(nodes, edges, row.seed)

    def build(flow: dd.Dataflow, inp: dd.InputCollection) -> dd.Output:
        return dd.graph.connected_components(inp, prioritized=prioritized).output()

    def nx_graph(live: pl.DataFrame) -> nx.Graph:
        g = nx.Graph()
        g.add_edges_from(live.iter_rows())
        return g

    def nx_solve(g: nx.Graph) -> dict[int, int]:
        return _least_member_labels(nx.connected_components(g))

    description = {
        "generator": "Amazon-like (the real amazon0601 is not downloaded): a random "
        "recursive tree (one weakly connected component) plus Chung-Lu edges "
        "from uniform sources to Pareto-weighted targets (tail exponent 2.3, "
        "expected in-degree capped at 2,500: heavy-tailed in-degrees, out-degrees "
        "Poisson around the mean 8.4), ids permuted",
        "weights": None,
        "prioritized": prioritized,
        "ddflow": f"dd.graph.connected_components(prioritized={prioritized}) (Figure 3"
        f"{' with Figure 10 priorities' if prioritized else ''})",
        "networkx": "nx.connected_components on the undirected graph, each node labelled "
        "with its component's least node",
    }
    return Workload(graph, description, None, build, "label", nx_graph, nx_solve)


def make_workload(row: Row, scale: float, prioritized: bool) -> Workload:
    nodes, edges = scaled(row, scale)
    if row.algorithm == "sssp":
        return sssp_workload(row, nodes, edges)
    if row.algorithm == "scc":
        return scc_workload(row, nodes, edges)
    return cc_workload(row, nodes, edges, prioritized)


# ---------------------------------------------------------------------- one row, in-process


def progress(partial: dict[str, Any], **fields: Any) -> None:
    """Record ``fields`` in ``partial`` and report them on stderr, so that a parent that kills
    this process over budget still knows how far it got."""
    partial.update(fields)
    print(PROGRESS + json.dumps(fields), file=sys.stderr, flush=True)


def load(flow: dd.Dataflow, inp: dd.InputCollection, graph: pl.DataFrame) -> float:
    """Insert the whole graph as the first epoch and run it: seconds to the first result."""
    t0 = time.perf_counter()
    inp.insert_frame(graph)
    flow.advance_to(1)
    flow.run()
    return time.perf_counter() - t0


def apply_change(
    flow: dd.Dataflow, inp: dd.InputCollection, kind: str, edge: pl.DataFrame
) -> float:
    """Remove or insert one edge as one epoch and run it: the seconds it took."""
    t0 = time.perf_counter()
    if kind == "removal":
        inp.remove_frame(edge)
    else:
        inp.insert_frame(edge)
    flow.advance_to(flow.epoch + 1)
    flow.run()
    return time.perf_counter() - t0


def snapshot_map(out: dd.Output, value: str) -> dict[int, int]:
    """The current ``node -> value`` map of an output."""
    snap = out.snapshot_polars()
    return dict(zip(snap["node"].to_list(), snap[value].to_list(), strict=True))


def compare(got: dict[int, int], expected: dict[int, int]) -> dict[str, Any]:
    """Whether two ``node -> value`` maps are equal, with a few differences if not."""
    keys = got.keys() | expected.keys()
    diff = sorted(k for k in keys if got.get(k) != expected.get(k))
    return {
        "equal": not diff,
        "nodes": len(expected),
        "differences": len(diff),
        "examples": [
            {"node": k, "ddflow": got.get(k), "networkx": expected.get(k)} for k in diff[:5]
        ],
    }


def time_networkx(
    work: Workload, live: pl.DataFrame, runs: int
) -> tuple[list[float], list[float], dict[int, int]]:
    """``runs`` from-scratch NetworkX recomputes on ``live``: the seconds each took in all
    (building the graph from the edge list, then the algorithm), the seconds of the algorithm
    alone, and the result."""
    total: list[float] = []
    solve: list[float] = []
    result: dict[int, int] = {}
    for _ in range(runs):
        t0 = time.perf_counter()
        g = work.nx_graph(live)
        t1 = time.perf_counter()
        result = work.nx_solve(g)
        t2 = time.perf_counter()
        total.append(t2 - t0)
        solve.append(t2 - t1)
        del g
    return total, solve, result


def update_summaries(latencies: list[tuple[str, float]]) -> dict[str, Any]:
    """Median and max latency over all single-edge updates, and per kind."""
    rows: dict[str, Any] = {"all": summary([s for _, s in latencies])}
    for kind in ("removal", "insertion"):
        kind_s = [s for k, s in latencies if k == kind]
        if kind_s:
            rows[kind] = summary(kind_s)
    return rows


def vs_paper(
    paper: Paper, first_s: float, footprint_mb: float, update_ms: float
) -> dict[str, float]:
    """ddflow's figures divided by the paper's (above 1: ddflow is slower / larger)."""
    return {
        "first_result_over_naiad": round(first_s / paper.naiad_s, 2),
        "first_result_over_linq": round(first_s / paper.linq_s, 2),
        "footprint_over_naiad": round(footprint_mb / paper.naiad_mb, 2),
        "update_median_over_naiad": round(update_ms / paper.naiad_update_ms, 1),
    }


def measure_row(row: Row, scale: float, updates: int, prioritized: bool) -> dict[str, Any]:
    """Measure one row in this process (see the module docstring), its graph ``scale`` times
    the paper's."""
    partial: dict[str, Any] = {}
    t0 = time.perf_counter()
    work = make_workload(row, scale, prioritized)
    n_nodes, _ = scaled(row, scale)
    progress(
        partial, generate_s=round(time.perf_counter() - t0, 3), rss_before_flow_mb=peak_rss_mb()
    )
    flow = dataflow()
    schema = {"src": "int64", "dst": "int64"} | ({"weight": "int64"} if work.weights else {})
    inp = flow.input("edges", schema=schema)
    out = work.build(flow, inp)
    first = load(flow, inp, work.graph)
    progress(
        partial,
        first_result_s=round(first, 3),
        rss_after_first_result_mb=peak_rss_mb(),
        loop_steps_first_result=flow.worker.steps,
    )
    latencies: list[tuple[str, float]] = []
    live = work.graph
    for change, after in single_edge_changes(
        work.graph, n_nodes, updates, row.seed + 100, work.weights
    ):
        latencies.append((change.kind, apply_change(flow, inp, change.kind, change.edge)))
        live = after
        progress(
            partial,
            updates_done=len(latencies),
            update_ms=[round(s * 1e3, 3) for _, s in latencies],
        )
    footprint = peak_rss_mb()
    progress(partial, peak_rss_mb=footprint)
    got = snapshot_map(out, work.value_column)
    nx_seconds, nx_solve_seconds, expected = time_networkx(work, live, 2)
    upd = update_summaries(latencies)
    nx_sum = summary(nx_seconds)
    nx_solve = summary(nx_solve_seconds)
    check = compare(got, expected)
    return {
        "row": row.name,
        "status": "ok" if check["equal"] else "mismatch",
        "algorithm": row.algorithm,
        "graph": {
            "nodes": n_nodes,
            "edges": work.graph.height,
            "nodes_touched": int(pl.concat([work.graph["src"], work.graph["dst"]]).n_unique()),
            "seed": row.seed,
            **work.description,
        },
        "ddflow": {
            "first_result_s": round(first, 3),
            "rss_before_flow_mb": partial["rss_before_flow_mb"],
            "rss_after_first_result_mb": partial["rss_after_first_result_mb"],
            "peak_rss_mb": footprint,
            "updates": upd,
            "loop_steps": flow.worker.steps,
            "polars_threads": pl.thread_pool_size(),
        },
        "networkx_recompute": nx_sum,
        "networkx_algorithm_only": nx_solve,
        "check": check,
        "ratios": {
            "update_speedup_vs_networkx": round(nx_sum["median_ms"] / upd["all"]["median_ms"], 1),
            "update_speedup_vs_networkx_algorithm_only": round(
                nx_solve["median_ms"] / upd["all"]["median_ms"], 2
            ),
            "first_result_over_networkx_recompute": round(first * 1e3 / nx_sum["median_ms"], 2),
        },
        "paper": asdict(row.paper),
        "vs_paper": vs_paper(row.paper, first, footprint, upd["all"]["median_ms"]),
        "scale": scale,
        "generate_s": partial["generate_s"],
    }


# ---------------------------------------------------------------------- rows in subprocesses


def _rss_mb(pid: int) -> float | None:
    """The current resident memory of process ``pid`` in MB (Linux), or None."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def _watch(proc: subprocess.Popen[bytes], budget_s: float, max_rss_mb: float) -> tuple[str, float]:
    """Wait for ``proc``, killing it when it runs over ``budget_s`` seconds or
    ``max_rss_mb``: ``done``, ``timeout`` or ``memory``, and the highest RSS seen (MB)."""
    start = time.monotonic()
    seen = 0.0
    while True:
        try:
            proc.wait(timeout=0.5)
            return "done", seen
        except subprocess.TimeoutExpired:
            pass
        seen = max(seen, _rss_mb(proc.pid) or 0.0)
        if time.monotonic() - start > budget_s:
            verdict = "timeout"
        elif seen > max_rss_mb:
            verdict = "memory"
        else:
            continue
        proc.kill()
        proc.wait()
        return verdict, seen


def _read(f: IO[bytes]) -> str:
    f.seek(0)
    return f.read().decode(errors="replace")


def _progress_of(stderr: str) -> tuple[dict[str, Any], list[str]]:
    """The progress fields reported on ``stderr``, and its other lines."""
    partial: dict[str, Any] = {}
    other: list[str] = []
    for line in stderr.splitlines():
        if line.startswith(PROGRESS):
            partial.update(json.loads(line[len(PROGRESS) :]))
        else:
            other.append(line)
    return partial, other


def child_env() -> dict[str, str]:
    """The environment of a row's subprocess: Polars' thread count from ``TABLE2_THREADS``."""
    env = dict(os.environ)
    threads = os.environ.get("TABLE2_THREADS", "1")
    if threads:
        env["POLARS_MAX_THREADS"] = threads
    return env


def run_row(
    name: str, scale: float, budget_s: float, max_rss_mb: float, updates: int, prioritized: bool
) -> dict[str, Any]:
    """Run row ``name`` in a fresh subprocess and return its JSON, or what is known of it when
    it fails, runs over budget or over memory."""
    cmd = [
        sys.executable,
        "-m",
        "benchmarks.table2",
        name,
        "--updates",
        str(updates),
        "--scale",
        repr(scale),
    ]
    if not prioritized:
        cmd.append("--unprioritized")
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, cwd=ROOT, env=child_env())
        verdict, seen_mb = _watch(proc, budget_s, max_rss_mb)
        stdout, stderr = _read(out), _read(err)
    wall = round(time.perf_counter() - t0, 1)
    if verdict == "done" and proc.returncode == 0:
        return {**json.loads(stdout), "wall_s": wall}
    partial, other = _progress_of(stderr)
    return {
        "row": name,
        "status": "error" if verdict == "done" else verdict,
        "returncode": proc.returncode,
        "wall_s": wall,
        "budget_s": budget_s,
        "max_rss_seen_mb": round(seen_mb, 1),
        "partial": partial,
        "stderr_tail": other[-15:],
        "paper": asdict(ROWS[name].paper),
    }


def selected_rows() -> list[str]:
    """The rows named in ``TABLE2_ROWS`` (default: all), checked."""
    names = [n.strip() for n in os.environ.get("TABLE2_ROWS", "").split(",") if n.strip()]
    for n in names:
        if n not in ROWS:
            raise SystemExit(f"TABLE2_ROWS: unknown row {n!r}; rows are {', '.join(ROWS)}")
    return names or list(ROWS)


def run(quick: bool = False) -> dict[str, Any]:
    budget = float(os.environ.get("TABLE2_BUDGET_S", 300 if quick else 3600))
    max_rss_mb = float(os.environ.get("TABLE2_MAX_RSS_GB", 21)) * 1024
    updates = int(os.environ.get("TABLE2_UPDATES", 6 if quick else 10))
    scale = float(os.environ.get("TABLE2_SCALE", QUICK_SCALE if quick else 1.0))
    prioritized = os.environ.get("TABLE2_CC_PRIORITIZED", "1") != "0"
    rows = [run_row(n, scale, budget, max_rss_mb, updates, prioritized) for n in selected_rows()]
    return {
        "benchmark": "table2",
        "machine": machine(),
        "reducer": "native" if native_reducer() else "python",
        "regions": loop_regions(),
        "quick": quick,
        "scale": scale,
        "polars_threads": child_env().get("POLARS_MAX_THREADS", "default"),
        "notes": [
            "paper: naiad-tech-report Table 2, Intel Core i7 2.67 GHz, one thread; "
            "*_over_naiad ratios above 1 mean ddflow is slower or larger",
            "each row runs in its own subprocess; peak_rss_mb is that process's ru_maxrss "
            "after the updates (graph generation included: see rss_before_flow_mb)",
            "updates alternate removing a random live edge and adding a new random edge, one "
            "per epoch; networkx_recompute builds the graph from the edge list and runs the "
            "algorithm on the final graph; networkx_algorithm_only is the algorithm alone",
            "timings are from a shared 2-core machine and are noisy",
        ]
        + (
            [f"sizes are {scale} of the paper's, so vs_paper ratios are not comparable"]
            if scale != 1.0
            else []
        ),
        "rows": rows,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.table2", description="measure one row of Table 2 in-process"
    )
    parser.add_argument("row", choices=sorted(ROWS))
    parser.add_argument("--quick", action="store_true", help="sizes 1/100 of the paper's")
    parser.add_argument(
        "--scale",
        type=float,
        default=None,
        help="sizes this fraction of the paper's (overrides --quick)",
    )
    parser.add_argument("--updates", type=int, default=10)
    parser.add_argument(
        "--unprioritized",
        action="store_true",
        help="cc: plain iterate instead of the prioritized loop",
    )
    args = parser.parse_args(argv)
    scale = args.scale if args.scale is not None else (QUICK_SCALE if args.quick else 1.0)
    result = measure_row(ROWS[args.row], scale, args.updates, not args.unprioritized)
    json.dump(result, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())

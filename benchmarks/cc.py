"""Connected components on an R-MAT graph: first result, then update batches, vs NetworkX.

ddflow maintains ``dd.graph.connected_components``; after the first complete result it applies
batches of 1, 10, 100 and 1,000 edge changes (half deletions, half insertions), each as one
epoch, and reports the median and max latency per batch size. The baseline recomputes connected
components from scratch with NetworkX on the same graph after the same changes, in the same
run. The final labels of both agree (checked).
"""

from __future__ import annotations

import os
import time
from typing import Any

import networkx as nx
import numpy as np
import polars as pl
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components as scipy_connected_components

import ddflow as dd
from benchmarks.common import (
    dataflow,
    loop_regions,
    machine,
    native_reducer,
    peak_rss_mb,
    summary,
)
from benchmarks.graphs import random_changes, rmat


def nx_components(edges: pl.DataFrame) -> dict[int, int]:
    """NetworkX's components of ``edges(src, dst)``, each node labelled with the least node id
    of its component."""
    g = nx.Graph()
    g.add_edges_from(edges.iter_rows())
    labels: dict[int, int] = {}
    for c in nx.connected_components(g):
        least = min(c)
        labels.update(dict.fromkeys(c, least))
    return labels


def scipy_components(edges: pl.DataFrame, n_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """SciPy's components of ``edges(src, dst)`` (compiled; node ids below ``n_nodes``): the
    nodes of the edges, and for each the least node id of its component."""
    src, dst = edges["src"].to_numpy(), edges["dst"].to_numpy()
    graph = coo_matrix((np.ones(len(src), dtype=np.int8), (src, dst)), shape=(n_nodes, n_nodes))
    _, comp = scipy_connected_components(graph, directed=False)
    nodes = np.unique(np.concatenate([src, dst]))
    least = np.full(comp.max() + 1, n_nodes, dtype=np.int64)
    np.minimum.at(least, comp[nodes], nodes)
    return nodes, least[comp[nodes]]


def measure(
    n_edges: int, runs: dict[int, int], seed: int = 1, prioritized: bool = False
) -> dict[str, Any]:
    """One graph of ``n_edges``: the first result, then ``runs[b]`` batches of ``b`` changes
    for each batch size ``b`` (in increasing size), checked against SciPy and NetworkX."""
    batches = sorted(runs)
    edges = rmat(n_edges, seed)
    n_nodes = int(max(edges["src"].max(), edges["dst"].max())) + 1  # type: ignore[arg-type]
    flow, inp, out = build_cc(prioritized)
    first = load_edges(flow, inp, edges)
    rss_after_load = peak_rss_mb()
    rng = np.random.default_rng(seed + 7)
    live = edges
    lat: dict[int, list[float]] = {b: [] for b in batches}
    for b in batches:
        for _ in range(runs[b]):
            seconds, live = change_edges(flow, inp, live, n_nodes, b, rng)
            lat[b].append(seconds)
    # SciPy (compiled) recomputes from scratch on the final graph, and checks the labels
    base = []
    for _ in range(3):
        t0 = time.perf_counter()
        nodes, least = scipy_components(live, n_nodes)
        base.append(time.perf_counter() - t0)
    labels = snapshot_labels(out)
    assert labels == dict(zip(nodes.tolist(), least.tolist(), strict=True)), (
        "ddflow and SciPy disagree"
    )
    scipy_ms = summary(base)
    rows: dict[str, Any] = {
        str(b): {
            **summary(lat[b]),
            "speedup_vs_scipy": round(scipy_ms["median_ms"] / summary(lat[b])["median_ms"], 2),
        }
        for b in batches
    }
    result = {
        "edges": n_edges,
        "nodes": n_nodes,
        "prioritized": prioritized,
        "first_result_s": round(first, 3),
        "peak_rss_mb_after_load": rss_after_load,
        "updates": rows,
        "scipy_recompute": scipy_ms,
        "loop_steps": flow.worker.steps,
    }
    limit = int(os.environ.get("CC_NETWORKX_MAX_EDGES", "3000000"))
    if n_edges > limit:
        result["networkx_recompute"] = (
            f"not run: {n_edges} edges is above CC_NETWORKX_MAX_EDGES={limit} (NetworkX's "
            "graph would have to fit in memory beside ddflow's); the labels were checked "
            "against SciPy's"
        )
        return result
    # NetworkX recomputes from scratch on the final graph
    base = []
    for _ in range(3):
        t0 = time.perf_counter()
        expected = nx_components(live)
        base.append(time.perf_counter() - t0)
    assert labels == expected, "ddflow and NetworkX disagree"
    nx_ms = summary(base)
    for s in rows.values():
        s["speedup_vs_networkx"] = round(nx_ms["median_ms"] / s["median_ms"], 1)
    result["networkx_recompute"] = nx_ms
    return result


def change_edges(
    flow: dd.Dataflow,
    inp: dd.InputCollection,
    live: pl.DataFrame,
    n_nodes: int,
    changes: int,
    rng: np.random.Generator,
) -> tuple[float, pl.DataFrame]:
    """Apply ``changes`` random edge changes as one epoch and run it: the seconds it took, and
    the live edges after it."""
    gone, new = random_changes(live, n_nodes, changes, rng)
    seconds = apply_changes(flow, inp, gone, new)
    return seconds, pl.concat([_remove_once(live, gone), new])


def build_cc(
    prioritized: bool = False, workers: int = 1
) -> tuple[dd.Dataflow, dd.InputCollection, dd.Output]:
    """A flow maintaining connected components of an ``edges(src, dst)`` input: the flow, the
    input and the output of the labels (``node, label``)."""
    flow = dataflow(workers)
    inp = flow.input("edges", schema={"src": "int64", "dst": "int64"})
    out = dd.graph.connected_components(inp, prioritized=prioritized).output()
    return flow, inp, out


def load_edges(flow: dd.Dataflow, inp: dd.InputCollection, edges: pl.DataFrame) -> float:
    """Insert the whole graph as the first epoch and run it: seconds to the first complete
    result."""
    t0 = time.perf_counter()
    inp.insert_frame(edges)
    flow.advance_to(1)
    flow.run()
    return time.perf_counter() - t0


def apply_changes(
    flow: dd.Dataflow, inp: dd.InputCollection, gone: pl.DataFrame, new: pl.DataFrame
) -> float:
    """Remove ``gone`` and insert ``new`` (both ``src, dst``) as one epoch and run it: the
    seconds it took."""
    t0 = time.perf_counter()
    if gone.height:
        inp.remove_frame(gone)
    inp.insert_frame(new)
    flow.advance_to(flow.epoch + 1)
    flow.run()
    return time.perf_counter() - t0


def snapshot_labels(out: dd.Output) -> dict[int, int]:
    """The current ``node -> label`` map of a connected-components output."""
    snap = out.snapshot_polars()
    return dict(zip(snap["node"].to_list(), snap["label"].to_list(), strict=True))


def _remove_once(live: pl.DataFrame, gone: pl.DataFrame) -> pl.DataFrame:
    """``live`` minus one copy of each row of ``gone`` (multiset difference)."""
    if gone.height == 0:
        return live
    idx = live.with_row_index("__i")
    nth = pl.int_range(pl.len()).over(["src", "dst"]).alias("__n")  # the copy's number
    g = gone.with_columns(nth)
    # number the copies of only the live rows that some removal names (a window over every
    # live row costs seconds on a large graph)
    named = idx.join(gone.unique(), on=["src", "dst"], how="semi").with_columns(nth)
    drop = named.join(g, on=["src", "dst", "__n"], how="semi").get_column("__i")
    return idx.filter(~pl.col("__i").is_in(drop.implode())).drop("__i")


#: batches measured of each size: a single change's latency depends on what it does (a new
#: edge inside a component changes no label; one joining two components relabels one of
#: them), and one graph's changes measured 1.0 to 4.4 ms, so the medians of the small batches
#: are taken over more runs (a median of five moved by 1.5 times between runs)
RUNS = {1: 25, 10: 15, 100: 9, 1000: 5}


def run(quick: bool = False) -> dict[str, Any]:
    """R-MAT sizes: 20k with ``quick``; else 1M, or the comma-separated edge counts of the
    ``CC_SIZES`` environment variable (e.g. ``CC_SIZES=100000,1000000,10000000``). With several
    sizes, ``latency_ratio_vs_smallest`` says whether update latency grows with the graph.
    NetworkX's baseline (and the check of the labels against it) runs on graphs of at most
    ``CC_NETWORKX_MAX_EDGES`` edges (default 3M)."""
    if quick:
        sizes, runs = [20_000], dict.fromkeys(RUNS, 3)
    else:
        sizes = [int(x) for x in os.environ.get("CC_SIZES", "1000000").split(",")]
        runs = RUNS
    results = [measure(n, runs) for n in sizes]
    out: dict[str, Any] = {
        "benchmark": "cc",
        "machine": machine(),
        "reducer": "native" if native_reducer() else "python",
        "regions": loop_regions(),
        "results": results,
    }
    if len(results) > 1:
        base = results[0]["updates"]
        out["latency_ratio_vs_smallest"] = {
            str(r["edges"]): {
                b: round(r["updates"][b]["median_ms"] / base[b]["median_ms"], 2) for b in base
            }
            for r in results[1:]
        }
    return out

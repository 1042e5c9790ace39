"""The local runtime's row data plane for small steps against Polars alone, side by side.

One flow maintains connected components on an R-MAT graph; update batches of 1, 10, 100 and
1,000 edge changes are applied alternately with small batches held as Python rows (the
default, ``LocalRuntime(small_batch_rows=256)``) and with every batch in Polars
(``small_batch_rows=0``), so both see the same graph, the same kind of changes and the same
machine load. Reports the medians per batch size and their ratio (Polars only / rows).

After each batch size's runs, the maintained labels must equal SciPy's connected components
recomputed from scratch on the live edges (each node labelled with the least node of its
component), or the run fails (:class:`ResultMismatch`); the JSON says ``"result_checked": true``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import polars as pl

import ddflow as dd
from benchmarks.cc import change_edges, scipy_components, snapshot_labels
from benchmarks.common import machine, summary
from benchmarks.graphs import rmat


class ResultMismatch(AssertionError):
    """ddflow's maintained labels differ from the components recomputed from scratch."""


def check_labels(out: dd.Output, live: pl.DataFrame, n_nodes: int, after: str) -> None:
    """Raise :class:`ResultMismatch` unless ``out`` labels the nodes of ``live`` as SciPy's
    connected components recomputed from scratch do."""
    labels = snapshot_labels(out)
    nodes, least = scipy_components(live, n_nodes)
    want = dict(zip(nodes.tolist(), least.tolist(), strict=True))
    if labels != want:
        wrong = sorted(set(labels.items()) ^ set(want.items()))
        raise ResultMismatch(
            f"after {after}: ddflow and SciPy disagree on {len(wrong)} "
            f"(node, label) pairs, e.g. {wrong[:5]}"
        )


def run(quick: bool = False) -> dict[str, Any]:
    n_edges, runs = (20_000, 5) if quick else (1_000_000, 7)
    edges = rmat(n_edges, seed=1)
    n_nodes = int(max(edges["src"].max(), edges["dst"].max())) + 1  # type: ignore[arg-type]
    flow = dd.Dataflow()
    small_rows = flow.kernels.settings.small_batch_rows  # (the default settings')
    inp = flow.input("edges", schema={"src": "int64", "dst": "int64"})
    out = dd.graph.connected_components(inp).output()
    inp.insert_frame(edges)
    flow.advance_to(1)
    flow.run()
    check_labels(out, edges, n_nodes, "the first result")
    rng = np.random.default_rng(11)
    live = edges
    modes = {"rows": small_rows, "polars_only": 0}
    lat: dict[str, dict[int, list[float]]] = {m: {} for m in modes}
    try:
        for b in (1, 10, 100, 1000):
            for _ in range(runs):
                for mode, small in modes.items():
                    flow.kernels.set_small_rows(small)
                    seconds, live = change_edges(flow, inp, live, n_nodes, b, rng)
                    lat[mode].setdefault(b, []).append(seconds)
            check_labels(out, live, n_nodes, f"the batches of {b} changes")
    finally:
        flow.kernels.set_small_rows(small_rows)
    rows = {}
    for b in lat["rows"]:
        r, c = summary(lat["rows"][b]), summary(lat["polars_only"][b])
        rows[str(b)] = {
            "rows": r,
            "polars_only": c,
            "speedup": round(c["median_ms"] / r["median_ms"], 2),
        }
    return {
        "benchmark": "small_batches",
        "machine": machine(),
        "edges": n_edges,
        "small_batch_rows": small_rows,
        "updates": rows,
        "result_checked": True,
    }

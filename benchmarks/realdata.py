"""Real data: sliding-window components of a film co-star graph; highway shortest paths.

Both data sets come from PyPI packages of the ``bench`` extra; nothing is downloaded at run time.

(a) ``bokeh-sampledata``'s ``movies.db`` (17,472 Wikidata films, 1940–2014, with their casts):
the co-star graph has an edge between two actors who appeared in the same film (1.7M actor
pairs in all). ddflow maintains ``dd.graph.connected_components`` over the films of a window of
release years, advanced one year per epoch: the pairs of the films leaving the window are
retracted, those of the films entering it inserted (a pair that two films of the window share is
present twice and leaves only with the second). Reported: the first result (the first window
loaded as one epoch), the latency of every window step, and NetworkX recomputing the components
of the window's graph from scratch at every step (building the graph included), checked equal
at every step.

(b) ``scgraph-data``'s world highway network (560k nodes, 826k roads with lengths in km, three
decimals). The lengths are turned into integer metres (``round(km * 1000)``, exact for these
data) so that distances are exact integers in both systems. ddflow maintains
``dd.graph.shortest_paths`` (Bellman-Ford in a loop) from one source, each road an edge in both
directions; then single-road updates: a road of the shortest-path tree is removed (both
directions, one epoch) and later put back (one epoch). Reported: the first result, the latency of
each removal and re-insertion, and NetworkX's Dijkstra from the same source on the same graph
(``first``: building the graph and Dijkstra; after an update: Dijkstra only, the graph being
edited in place outside the timing), checked equal after every epoch.
"""

from __future__ import annotations

import gc
import importlib.resources
import json
import re
import sqlite3
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import networkx as nx
import numpy as np
import polars as pl

import ddflow as dd
from benchmarks.common import machine, peak_rss_mb, summary

T = TypeVar("T")

#: cast entries that continue the previous name ("Sammy Davis, Jr.")
NAME_SUFFIXES = frozenset({"Jr.", "Jr", "Sr.", "Sr", "II", "III", "IV"})

#: (south, north, west, east) in degrees
Box = tuple[float, float, float, float]
PARIS = (48.8566, 2.3522)
QUICK_BOX: Box = (47.5, 50.0, 0.0, 4.5)  # around Paris
FULL_BOX: Box = (42.0, 51.5, -5.0, 8.5)  # metropolitan France and its borders


def timed_call(fn: Callable[[], T]) -> tuple[float, T]:
    """Seconds taken by ``fn()``, and its result."""
    t0 = time.perf_counter()
    result = fn()
    return time.perf_counter() - t0, result


def advance(flow: dd.Dataflow) -> None:
    """Close the current epoch and run the flow until it is complete."""
    flow.advance_to(flow.epoch + 1)
    flow.run()


# ---------------------------------------------------------------------- (a) co-star graph


def split_cast(cast: str) -> list[str]:
    """The actors of a ``Cast`` field (comma-separated names; a suffix such as ``Jr.`` after a
    comma belongs to the name before it)."""
    names: list[str] = []
    for part in (p.strip() for p in cast.split(",")):
        if part in NAME_SUFFIXES and names:
            names[-1] = f"{names[-1]}, {part}"
        elif part:
            names.append(part)
    return names


def load_casts() -> pl.DataFrame:
    """``(film, year, actor)`` for every credited actor of every film of ``movies.db``, actors
    numbered by the order of their names."""
    from bokeh_sampledata.movies_data import movie_path

    with sqlite3.connect(movie_path) as db:
        rows = db.execute('SELECT ID, Year, "Cast" FROM omdb').fetchall()
    credits = [
        (film, year, name) for film, year, cast in rows for name in set(split_cast(cast or ""))
    ]
    casts = pl.DataFrame(
        credits, schema={"film": pl.Int64, "year": pl.Int64, "name": pl.String}, orient="row"
    )
    actors = (
        casts.select("name")
        .unique()
        .sort("name")
        .with_row_index("actor")
        .with_columns(pl.col("actor").cast(pl.Int64))
    )
    return casts.join(actors, on="name").select("film", "year", "actor")


def costar_pairs(casts: pl.DataFrame) -> pl.DataFrame:
    """``(year, src, dst)``: one row per film and pair of its actors, ``src < dst``."""
    other = casts.select("film", co="actor")
    return (
        casts.join(other, on="film")
        .filter(pl.col("actor") < pl.col("co"))
        .select("year", src="actor", dst="co")
    )


def in_years(pairs: pl.DataFrame, first: int, last: int) -> pl.DataFrame:
    """The ``(src, dst)`` rows of the films released in ``first..last``."""
    return pairs.filter(pl.col("year").is_between(first, last)).select("src", "dst")


def nx_component_labels(edges: pl.DataFrame) -> dict[int, int]:
    """NetworkX's connected components of ``edges(src, dst)``: each node labelled with the
    least node of its component."""
    graph = nx.Graph()
    graph.add_edges_from(edges.iter_rows())
    labels: dict[int, int] = {}
    for component in nx.connected_components(graph):
        labels.update(dict.fromkeys(component, min(component)))
    return labels


def as_dict(out: dd.Output, key: str, value: str) -> dict[int, int]:
    """The output's latest complete result as a ``key -> value`` map."""
    snap = out.snapshot_polars()
    return dict(zip(snap[key].to_list(), snap[value].to_list(), strict=True))


def measure_costar(
    pairs: pl.DataFrame, first_year: int, last_year: int, width: int
) -> dict[str, Any]:
    """Slide a ``width``-year window from ``first_year`` until it ends at ``last_year``, one
    year per epoch, timing ddflow's components and NetworkX's recompute at every step."""
    flow = dd.Dataflow()
    edges = flow.input("edges", schema={"src": "int64", "dst": "int64"})
    out = dd.graph.connected_components(edges).output()
    window = in_years(pairs, first_year, first_year + width - 1)

    def load() -> None:
        edges.insert_frame(window)
        advance(flow)

    first_s, _ = timed_call(load)
    nx_first_s, expected = timed_call(lambda: nx_component_labels(window))
    assert as_dict(out, "node", "label") == expected, "first window: ddflow and NetworkX disagree"
    rss_after_first = peak_rss_mb()
    steps = [
        slide(flow, edges, out, pairs, start, width)
        for start in range(first_year + 1, last_year - width + 2)
    ]
    dd_s = [s["ddflow_ms"] / 1e3 for s in steps]
    nx_s = [s["networkx_ms"] / 1e3 for s in steps]
    result = {
        "window_years": width,
        "years": [first_year, last_year],
        "first_window": {
            "years": [first_year, first_year + width - 1],
            "edge_rows": window.height,
            "nodes": len(expected),
            "ddflow_first_result_s": round(first_s, 3),
            "networkx_s": round(nx_first_s, 3),
        },
        "peak_rss_mb_after_first": rss_after_first,
        "window_step": summary(dd_s),
        "networkx_recompute": summary(nx_s),
        "speedup_vs_networkx_median_of_steps": round(
            statistics.median([s["speedup_vs_networkx"] for s in steps]), 2
        ),
        "ddflow_total_s": round(sum(dd_s), 3),
        "networkx_total_s": round(sum(nx_s), 3),
        "checked_equal_steps": len(steps),
        "steps": steps,
        "peak_rss_mb": peak_rss_mb(),
    }
    return result


def slide(
    flow: dd.Dataflow,
    edges: dd.InputCollection,
    out: dd.Output,
    pairs: pl.DataFrame,
    start: int,
    width: int,
) -> dict[str, Any]:
    """Move the window to start at ``start``: retract the films of ``start - 1``, insert those of
    ``start + width - 1``, as one epoch; then recompute with NetworkX and compare."""
    gone = in_years(pairs, start - 1, start - 1)
    new = in_years(pairs, start + width - 1, start + width - 1)

    def step() -> None:
        edges.remove_frame(gone)
        edges.insert_frame(new)
        advance(flow)

    steps_before = flow.worker.steps
    dd_s, _ = timed_call(step)
    worker_steps = flow.worker.steps - steps_before
    window = in_years(pairs, start, start + width - 1)
    nx_s, expected = timed_call(lambda: nx_component_labels(window))
    assert as_dict(out, "node", "label") == expected, f"window at {start}: results disagree"
    return {
        "window": [start, start + width - 1],
        "rows_changed": gone.height + new.height,
        "edge_rows": window.height,
        "worker_steps": worker_steps,
        "ddflow_ms": round(dd_s * 1e3, 1),
        "networkx_ms": round(nx_s * 1e3, 1),
        "speedup_vs_networkx": round(nx_s / dd_s, 2),
    }


# ---------------------------------------------------------------------- (b) highways


@dataclass(frozen=True)
class RoadNetwork:
    """A road network: ``roads(src, dst, weight)`` once per road (``src < dst``, weight in
    integer metres) and each node's ``(latitude, longitude)`` (row = node id)."""

    roads: pl.DataFrame
    coords: np.ndarray

    def within(self, box: Box) -> RoadNetwork:
        """The roads with both ends inside ``box``."""
        south, north, west, east = box
        lat, lon = self.coords[:, 0], self.coords[:, 1]
        inside = pl.Series((lat >= south) & (lat <= north) & (lon >= west) & (lon <= east))
        keep = inside.gather(self.roads["src"]) & inside.gather(self.roads["dst"])
        return RoadNetwork(self.roads.filter(keep), self.coords)

    def nearest(self, lat: float, lon: float) -> int:
        """The node at the end of a road nearest to ``(lat, lon)``."""
        ends = np.unique(
            np.concatenate([self.roads["src"].to_numpy(), self.roads["dst"].to_numpy()])
        )
        d2 = (self.coords[ends, 0] - lat) ** 2 + (self.coords[ends, 1] - lon) ** 2
        return int(ends[np.argmin(d2)])


def _literal(text: str, name: str) -> str:
    """The right-hand side of the line ``name=...`` of a generated module."""
    prefix = f"{name}="
    for line in text.splitlines():
        if line.startswith(prefix):
            return line[len(prefix) :]
    raise ValueError(f"no line {prefix!r}")


def load_world_highways() -> RoadNetwork:
    """The world highway network of ``scgraph-data``, read as data.

    The package's module ``world_highways`` is generated Python: ``graph=[{neighbour: km, ...},
    ...]`` (one dict per node) and ``nodes=[[lat, lon], ...]``. Importing it needs
    ``scgraph.core``, which scgraph 3 no longer has, and executes 36 MB of source, so its two
    literals are parsed as JSON instead (the integer dict keys quoted first)."""
    text = (importlib.resources.files("scgraph_data") / "world_highways.py").read_text()
    coords = np.asarray(json.loads(_literal(text, "nodes")), dtype=np.float64)
    adjacency: list[dict[str, float]] = json.loads(
        re.sub(r"(\d+):", r'"\1":', _literal(text, "graph"))
    )
    del text
    src = np.repeat(np.arange(len(adjacency), dtype=np.int64), [len(a) for a in adjacency])
    dst = np.fromiter((int(v) for a in adjacency for v in a), dtype=np.int64, count=len(src))
    km = np.fromiter((w for a in adjacency for w in a.values()), dtype=np.float64, count=len(src))
    metres = np.rint(km * 1000).astype(np.int64)
    assert np.allclose(km * 1000, metres, rtol=0, atol=1e-6), "lengths are not whole metres"
    roads = pl.DataFrame({"src": src, "dst": dst, "weight": metres}).filter(
        pl.col("src") < pl.col("dst")
    )  # each road is listed from both ends; self-loops dropped
    return RoadNetwork(roads, coords)


def both_directions(roads: pl.DataFrame) -> pl.DataFrame:
    """The directed edges of undirected roads."""
    return pl.concat([roads, roads.select(src="dst", dst="src", weight="weight")])


def tree_roads(roads: pl.DataFrame, dist: dict[int, int]) -> pl.DataFrame:
    """The roads on a shortest path from the source (one end's distance is the other's plus the
    road's length)."""
    d = pl.DataFrame(
        {"node": list(dist), "d": list(dist.values())}, schema={"node": pl.Int64, "d": pl.Int64}
    )
    ends = roads.join(d.rename({"node": "src", "d": "ds"}), on="src").join(
        d.rename({"node": "dst", "d": "dd"}), on="dst"
    )
    on_path = (pl.col("ds") + pl.col("weight") == pl.col("dd")) | (
        pl.col("dd") + pl.col("weight") == pl.col("ds")
    )
    return ends.filter(on_path).select("src", "dst", "weight")


def dijkstra(graph: nx.Graph, source: int) -> dict[int, int]:
    """NetworkX's shortest distances from ``source``."""
    return dict(nx.single_source_dijkstra_path_length(graph, source, weight="weight"))


def measure_highways(net: RoadNetwork, source: int, changes: int, seed: int = 1) -> dict[str, Any]:
    """ddflow's shortest paths from ``source``: first result, then ``changes`` roads of the
    shortest-path tree removed and put back, one epoch each, against NetworkX's Dijkstra."""
    flow = dd.Dataflow()
    edges = flow.input("edges", schema={"src": "int64", "dst": "int64", "weight": "int64"})
    sources = flow.input("sources", schema={"node": "int64"})
    out = dd.graph.shortest_paths(edges, sources).output()

    def load() -> None:
        edges.insert_frame(both_directions(net.roads))
        sources.insert([source])
        advance(flow)

    first_s, _ = timed_call(load)
    rss_after_first = peak_rss_mb()
    steps_first = flow.worker.steps
    graph = nx.Graph()

    def nx_first() -> dict[int, int]:
        graph.add_weighted_edges_from(net.roads.iter_rows())
        return dijkstra(graph, source)

    nx_first_s, dist = timed_call(nx_first)
    assert as_dict(out, "node", "distance") == dist, "first result: ddflow and NetworkX disagree"
    tree = tree_roads(net.roads, dist)
    rng = np.random.default_rng(seed)
    picks = rng.choice(tree.height, size=min(changes, tree.height), replace=False)
    removals: list[dict[str, Any]] = []
    additions: list[dict[str, Any]] = []
    for road in tree[np.sort(picks)].iter_rows():
        removals.append(change_road(flow, edges, out, graph, source, road, remove=True))
    for road in tree[np.sort(picks)].iter_rows():
        additions.append(change_road(flow, edges, out, graph, source, road, remove=False))
    result = {
        "roads": net.roads.height,
        "directed_edges": 2 * net.roads.height,
        "source": source,
        "nodes_reached": len(dist),
        "ddflow_first_result_s": round(first_s, 3),
        "networkx_first_s": round(nx_first_s, 3),
        "peak_rss_mb_after_first": rss_after_first,
        "worker_steps_first_result": steps_first,
        "remove_road": summarize_changes(removals),
        "restore_road": summarize_changes(additions),
        "changes": removals + additions,
        "peak_rss_mb": peak_rss_mb(),
    }
    return result


def change_road(
    flow: dd.Dataflow,
    edges: dd.InputCollection,
    out: dd.Output,
    graph: nx.Graph,
    source: int,
    road: tuple[int, int, int],
    remove: bool,
) -> dict[str, Any]:
    """Remove (or put back) one road as one epoch, then recompute with Dijkstra and compare."""
    a, b, w = road
    rows = [(a, b, w), (b, a, w)]

    def step() -> None:
        if remove:
            edges.remove(rows)
        else:
            edges.insert(rows)
        advance(flow)

    before = as_dict(out, "node", "distance")
    steps_before = flow.worker.steps
    dd_s, _ = timed_call(step)
    worker_steps = flow.worker.steps - steps_before
    if remove:
        graph.remove_edge(a, b)
    else:
        graph.add_edge(a, b, weight=w)
    nx_s, dist = timed_call(lambda: dijkstra(graph, source))
    got = as_dict(out, "node", "distance")
    assert got == dist, f"after {'removing' if remove else 'restoring'} {road}: results disagree"
    changed = sum(1 for node in before.keys() | got.keys() if before.get(node) != got.get(node))
    return {
        "road": [a, b, w],
        "removed": remove,
        "distances_changed": changed,
        "worker_steps": worker_steps,
        "ddflow_ms": round(dd_s * 1e3, 1),
        "networkx_dijkstra_ms": round(nx_s * 1e3, 1),
        "speedup_vs_networkx": round(nx_s / dd_s, 2),
    }


def summarize_changes(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Latency summaries of single-road changes, ddflow and NetworkX paired per change."""
    return {
        "ddflow": summary([r["ddflow_ms"] / 1e3 for r in rows]),
        "networkx_dijkstra": summary([r["networkx_dijkstra_ms"] / 1e3 for r in rows]),
        "speedup_vs_networkx_median": round(
            statistics.median(r["speedup_vs_networkx"] for r in rows), 2
        ),
    }


# ---------------------------------------------------------------------- entry point


def run(quick: bool = False) -> dict[str, Any]:
    if quick:
        years, width, box, changes = (1940, 1946), 3, QUICK_BOX, 3
    else:
        years, width, box, changes = (1940, 2014), 10, FULL_BOX, 5
    load_s, pairs = timed_call(lambda: costar_pairs(load_casts()))
    costar = measure_costar(pairs, years[0], years[1], width)
    costar["load_s"] = round(load_s, 3)
    costar["pairs_all_years"] = {
        "rows": pairs.height,
        "distinct": pairs.select("src", "dst").unique().height,
    }
    del pairs
    gc.collect()  # the flow of (a) is garbage now
    load_s, world = timed_call(load_world_highways)
    region = world.within(box)
    source = region.nearest(*PARIS)
    highways = measure_highways(region, source, changes)
    highways["load_s"] = round(load_s, 3)
    highways["box_south_north_west_east"] = list(box)
    highways["world_roads"] = world.roads.height
    highways["weights"] = "road length rounded to integer metres (exact: km with 3 decimals)"
    return {
        "benchmark": "realdata",
        "machine": machine(),
        "costar_windows": costar,
        "highway_shortest_paths": highways,
        "note": "peak_rss_mb values are the process's maximum so far",
    }

"""Pathway side of the ``pathway_cc`` benchmark; runs inside ``benchmarks/.venv-pathway``.

This script imports only Pathway and PyArrow (both in that virtual environment), never ddflow
nor the ``benchmarks`` package. It has two modes:

``python pathway_worker.py measure DIR [--check-each]``
    Reads the graph (``DIR/initial.parquet``: ``eid, src, dst``) and the update batches
    (``DIR/changes.parquet``: ``batch, diff, eid, src, dst``) that the parent wrote, maintains
    connected components with ``pw.iterate`` (min-label propagation), feeds the graph and then
    each batch through one Python connector with an explicit commit per batch, and writes the
    timings to ``DIR/pathway_result.json`` and the final labels to ``DIR/pathway_labels.parquet``.
    With ``--check-each`` it also writes the labels as they were when each commit completed
    (``DIR/pathway_snapshots.parquet``: ``batch, node, label``; batch 0 is the initial graph).

``python pathway_worker.py nested OUT.json``
    Runs a plain ``pw.iterate`` and then an ``pw.iterate`` nested inside another on a tiny
    table, and writes what each did (result or error) to ``OUT.json``.

How completion is detected: every batch (and the initial graph) carries one extra *marker* row
(negative ``eid``, ``src = dst = -1``) in the same commit. The markers are filtered out of the
edges and concatenated to the labels, and that union is what ``pw.io.subscribe`` watches.
Pathway's subscribe sink arranges its input and hands over the changes of a time only once the
input frontier has passed that time, then calls ``on_time_end(time)``; it does so only for
times that have changes, hence the marker, which guarantees one. When ``on_time_end`` sees the
marker's time, every label change of that commit, which flows through the same union, has been
delivered: the batch is complete. A commit is waited for before the next one is sent, and the
worker checks that no output time other than the markers' ever closes (each commit is exactly
one Pathway time).
"""

from __future__ import annotations

import json
import os
import queue
import resource
import sys
import time
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

# No license key and no monitoring endpoint: Pathway's engine then disables telemetry and
# monitoring altogether (it has nowhere to send them). Unset before ``import pathway`` reads them.
for _var in ("PATHWAY_LICENSE_KEY", "PATHWAY_MONITORING_SERVER", "PATHWAY_DETAILED_METRICS_DIR"):
    os.environ.pop(_var, None)

import pathway as pw  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
from pathway.internals.parse_graph import G  # noqa: E402

WAIT_LIMIT_S = 6 * 3600.0
"""Longest wait for one commit to complete before the worker gives up."""

MARKER_SRC = -1
"""``src`` (and ``dst``) of a marker row; real node ids are never negative."""


def quiet_pathway() -> None:
    """Turn off everything in Pathway that could reach the network: no license key (so no
    telemetry), no monitoring server, no detailed metrics."""
    pw.set_license_key(None)
    pw.set_monitoring_config(server_endpoint=None, detailed_metrics_dir=None)


def peak_rss_mb() -> float:
    """Peak resident memory of this process so far, in MB."""
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


class EdgeSchema(pw.Schema):
    """One edge, or a marker row (``src = dst = -1``); ``eid`` identifies it for deletion."""

    eid: int = pw.column_definition(primary_key=True)
    src: int
    dst: int


def propagate(labels: pw.Table, edges: pw.Table) -> dict[str, pw.Table]:
    """One round of min-label propagation: every node takes the least label offered to it along
    ``edges`` (``src -> dst`` with ``src_ptr`` the id of ``src``'s label row; both directions
    and a self-loop per node are present, so a node's own label is among its offers)."""
    offers = edges.select(node=edges.dst, label=labels.ix(edges.src_ptr).label)
    least = offers.groupby(offers.node).reduce(
        node=offers.node, label=pw.reducers.min(offers.label)
    )
    return {"labels": least}


def connected_components(edges: pw.Table) -> pw.Table:
    """``node, label`` for every node of ``edges(src, dst)``: the label is the least node id of
    its component, computed by ``pw.iterate`` of :func:`propagate` to a fixed point."""
    both = pw.Table.concat_reindex(
        edges.select(src=edges.src, dst=edges.dst),
        edges.select(src=edges.dst, dst=edges.src),
    )
    # Grouping by node gives each node the id ``pointer_from(node)``, in every round too.
    nodes = both.groupby(both.src).reduce(node=both.src, label=both.src)
    loops = nodes.select(src=nodes.node, dst=nodes.node)
    offers = pw.Table.concat_reindex(both, loops)
    offers = offers.with_columns(src_ptr=nodes.pointer_from(offers.src))
    # Each round rebuilds the label table by a group-by, so its universe is declared variable.
    result = pw.iterate(propagate, labels=pw.iterate_universe(nodes), edges=offers)
    return result["labels"]


class Completion:
    """Watches the subscribed union of labels and markers: keeps the live labels, and reports
    each marker once its Pathway time has closed."""

    def __init__(self, keep_snapshots: bool = False) -> None:
        self.keep_snapshots = keep_snapshots
        self.done: queue.Queue[tuple[int, float, int, dict[int, int] | None]] = queue.Queue()
        self.label_rows: Counter[tuple[int, int]] = Counter()
        self._marker_at: dict[int, int] = {}
        self._changes_at: Counter[int] = Counter()
        self.unmarked_times = 0

    def on_change(self, key: Any, row: dict[str, Any], time: int, is_addition: bool) -> None:
        """Record one output change (called by Pathway for every row of a closed time)."""
        node, label = row["node"], row["label"]
        if node < 0:
            if is_addition:
                self._marker_at[time] = node
            return
        self.label_rows[(node, label)] += 1 if is_addition else -1
        self._changes_at[time] += 1

    def on_time_end(self, time: int) -> None:
        """Pathway has delivered every change of ``time``: report its marker as complete."""
        now = time_now()
        changes = self._changes_at.pop(time, 0)
        marker = self._marker_at.pop(time, None)
        if marker is None:
            self.unmarked_times += 1
            return
        # The snapshot is taken after the clock was read, so it does not count as latency.
        snapshot = self.labels() if self.keep_snapshots else None
        self.done.put((marker, now, changes, snapshot))

    def wait(self, marker: int) -> tuple[float, int, dict[int, int] | None]:
        """Block until ``marker``'s time is complete: when it completed (``perf_counter``), how
        many label changes that time had, and the labels then (if snapshots are kept)."""
        got, when, changes, snapshot = self.done.get(timeout=WAIT_LIMIT_S)
        if got != marker:
            raise RuntimeError(f"expected marker {marker}, Pathway completed {got}")
        return when, changes, snapshot

    def labels(self) -> dict[int, int]:
        """The live ``node -> label`` map."""
        live = [pair for pair, count in self.label_rows.items() if count != 0]
        if any(self.label_rows[pair] != 1 for pair in live):
            raise RuntimeError("a label row has a multiplicity other than 1")
        result = dict(live)
        if len(result) != len(live):
            raise RuntimeError("a node has more than one label")
        return result


def time_now() -> float:
    """``time.perf_counter()``. Pathway passes the callbacks a parameter that must be named
    ``time``, which hides the module there; they read the clock through this."""
    return time.perf_counter()


Rows = list[tuple[int, int, int]]
Batch = tuple[Rows, Rows]


class Feeder(pw.io.python.ConnectorSubject):
    """Sends the graph, then each batch, one commit each, waiting for each to complete."""

    def __init__(self, initial: Rows, batches: list[Batch], completion: Completion) -> None:
        super().__init__(datasource_name="edges")
        self.initial = initial
        self.batches = batches
        self.completion = completion
        self.timings: dict[str, Any] = {}
        self.snapshots: list[dict[int, int] | None] = []

    def run(self) -> None:
        """Feed everything and record the timings (runs in Pathway's connector thread)."""
        t0 = time_now()
        for eid, src, dst in self.initial:
            self.next(eid=eid, src=src, dst=dst)
        fed = time_now()
        done, _ = self._commit_and_wait(0)
        self.timings["first_result_s"] = done - t0
        self.timings["feed_initial_s"] = fed - t0
        self.timings["peak_rss_mb_after_load"] = peak_rss_mb()
        updates = []
        for number, (gone, new) in enumerate(self.batches, start=1):
            t0 = time_now()
            for eid, src, dst in gone:
                self.delete(eid=eid, src=src, dst=dst)
            for eid, src, dst in new:
                self.next(eid=eid, src=src, dst=dst)
            done, changes = self._commit_and_wait(number)
            updates.append(
                {"changes": len(gone) + len(new), "seconds": done - t0, "label_changes": changes}
            )
        self.timings["updates"] = updates

    def _commit_and_wait(self, number: int) -> tuple[float, int]:
        """Add marker ``number``, commit, and wait until Pathway has completed that time: when,
        and how many label changes it had."""
        marker = -1 - number
        self.next(eid=marker, src=MARKER_SRC, dst=MARKER_SRC)
        self.commit()
        done, changes, snapshot = self.completion.wait(marker)
        self.snapshots.append(snapshot)
        return done, changes


def read_rows(path: Path) -> dict[str, list[int]]:
    """The columns of a Parquet file as Python lists."""
    return pq.read_table(path).to_pydict()


def load_inputs(data: Path) -> tuple[Rows, list[Batch]]:
    """The initial edges and the batches, as ``(eid, src, dst)`` rows; a batch is
    ``(deletions, insertions)``."""
    init = read_rows(data / "initial.parquet")
    initial = list(zip(init["eid"], init["src"], init["dst"], strict=True))
    ch = read_rows(data / "changes.parquet")
    n_batches = max(ch["batch"], default=-1) + 1
    batches: list[Batch] = [([], []) for _ in range(n_batches)]
    columns = (ch["batch"], ch["diff"], ch["eid"], ch["src"], ch["dst"])
    for b, diff, eid, src, dst in zip(*columns, strict=True):
        batches[b][0 if diff < 0 else 1].append((eid, src, dst))
    return initial, batches


def labels_table(labels: dict[int, int]) -> pa.Table:
    """A ``node, label`` table."""
    return pa.table({"node": list(labels), "label": list(labels.values())})


def write_snapshots(path: Path, snapshots: list[dict[int, int] | None]) -> None:
    """The labels after each commit, as ``batch, node, label`` rows."""
    parts = []
    for batch, labels in enumerate(snapshots):
        assert labels is not None
        table = labels_table(labels)
        parts.append(table.add_column(0, "batch", pa.array([batch] * len(labels), pa.int64())))
    pq.write_table(pa.concat_tables(parts), path)


def measure(data: Path, check_each: bool) -> None:
    """The ``measure`` mode (see the module docstring)."""
    initial, batches = load_inputs(data)
    quiet_pathway()
    completion = Completion(keep_snapshots=check_each)
    feeder = Feeder(initial, batches, completion)
    inp = pw.io.python.read(feeder, schema=EdgeSchema, autocommit_duration_ms=None)
    edges = inp.filter(inp.src != MARKER_SRC)
    markers = inp.filter(inp.src == MARKER_SRC).select(node=pw.this.eid, label=pw.this.eid)
    watched = pw.Table.concat_reindex(connected_components(edges), markers)
    pw.io.subscribe(watched, completion.on_change, on_time_end=completion.on_time_end)
    pw.run(monitoring_level=pw.MonitoringLevel.NONE)
    if completion.unmarked_times:
        raise RuntimeError(f"{completion.unmarked_times} output times had no marker")
    pq.write_table(labels_table(completion.labels()), data / "pathway_labels.parquet")
    if check_each:
        write_snapshots(data / "pathway_snapshots.parquet", feeder.snapshots)
    result = {
        **feeder.timings,
        "peak_rss_mb": peak_rss_mb(),
        "pathway_version": pw.__version__,
        "threads": int(os.environ.get("PATHWAY_THREADS", "1")),
    }
    (data / "pathway_result.json").write_text(json.dumps(result))


def tiny_table() -> pw.Table:
    """A three-row table of small integers."""
    return pw.debug.table_from_rows(pw.schema_from_types(val=int), [(1,), (2,), (5,)])


def bump(rows: pw.Table) -> dict[str, pw.Table]:
    """Raise every value below 4 by one (a fixed point is reached at 4)."""
    return {"rows": rows.select(val=pw.if_else(rows.val < 4, rows.val + 1, rows.val))}


def bump_nested(rows: pw.Table) -> dict[str, pw.Table]:
    """The body of the outer loop: runs :func:`bump` to its fixed point in an inner loop."""
    return {"rows": pw.iterate(bump, rows=rows)["rows"]}


def try_iterate(body: Any) -> dict[str, Any]:
    """Run ``pw.iterate(body)`` on :func:`tiny_table`: its values, or the error it raised."""
    G.clear()
    try:
        out = pw.iterate(body, rows=tiny_table())["rows"]
        values = sorted(pw.debug.table_to_pandas(out)["val"].tolist())
        return {"ok": True, "values": values}
    except Exception as e:  # Pathway raises its engine error as a plain exception
        return {
            "ok": False,
            "error_type": type(e).__name__,
            "error": str(e).strip(),
            "raised_at": traceback.extract_tb(e.__traceback__)[-1].name,
        }


def nested(out: Path) -> None:
    """The ``nested`` mode (see the module docstring)."""
    quiet_pathway()
    result = {"plain_iterate": try_iterate(bump), "nested_iterate": try_iterate(bump_nested)}
    out.write_text(json.dumps(result))


def main(argv: list[str]) -> int:
    """Dispatch on the mode."""
    check_each = argv[2:] == ["--check-each"]
    if argv[:1] == ["measure"] and len(argv) == 2 + check_each:
        measure(Path(argv[1]), check_each)
    elif argv[:1] == ["nested"] and len(argv) == 2:
        nested(Path(argv[1]))
    else:
        print(
            "usage: pathway_worker.py measure DIR [--check-each] | nested OUT.json", file=sys.stderr
        )
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Connected components, ddflow against Pathway 0.33 (``pw.iterate``) on the same graph and updates.

The parent generates a seeded R-MAT graph and a schedule of update batches (1, 10, 100 and
1,000 edge changes, half deletions and half insertions, several runs each), runs ddflow's
``dd.graph.connected_components`` on it in this process, and then Pathway in a worker process
(``benchmarks/pathway_worker.py``) inside its own virtual environment,
``benchmarks/.venv-pathway``, created and filled with ``pip install pathway==0.33.*`` on first
use (Pathway is not a dependency of ddflow). Both get the same edges and the same batches (the
worker reads them from Parquet files the parent wrote); both final label maps are checked
against NetworkX. The worker also tries a ``pw.iterate`` nested in another on a tiny table and
reports the error Pathway raises (strongly connected components need nested iteration).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from benchmarks.cc import apply_changes, build_cc, load_edges, nx_components, snapshot_labels
from benchmarks.common import machine, peak_rss_mb, summary
from benchmarks.graphs import random_changes, rmat

HERE = Path(__file__).resolve().parent
VENV = HERE / ".venv-pathway"
WORKER = HERE / "pathway_worker.py"
PATHWAY_REQUIREMENT = "pathway==0.33.*"
PATHWAY_SERIES = "0.33."
WORKER_THREADS = 1
"""Pathway worker threads (``PATHWAY_THREADS``); ddflow runs one dataflow worker too."""

QUIET_ENV_DROP = (
    "PATHWAY_LICENSE_KEY",
    "PATHWAY_MONITORING_SERVER",
    "PATHWAY_DETAILED_METRICS_DIR",
    "PYTHONPATH",
    "PYTHONHOME",
    "VIRTUAL_ENV",
)
"""Variables the worker must not inherit: Pathway's license and monitoring settings (without
them telemetry and monitoring are off) and anything that would mix this environment's packages
into the worker's."""


def log(message: str) -> None:
    """Progress on stderr (stdout carries the JSON document)."""
    print(f"[pathway_cc] {message}", file=sys.stderr, flush=True)


# --- the virtual environment -------------------------------------------------------------------


def venv_python() -> Path:
    """The interpreter of the Pathway virtual environment."""
    return VENV / "bin" / "python"


def installed_pathway() -> str | None:
    """The Pathway version importable in the virtual environment, or None."""
    if not venv_python().exists():
        return None
    probe = subprocess.run(
        [str(venv_python()), "-c", "import pathway, pyarrow; print(pathway.__version__)"],
        capture_output=True,
        text=True,
        env=worker_env(),
    )
    return probe.stdout.strip() if probe.returncode == 0 else None


def ensure_venv() -> Path:
    """The virtual environment's interpreter, after creating the environment and installing
    Pathway 0.33 into it unless it already has it."""
    version = installed_pathway()
    if version and version.startswith(PATHWAY_SERIES):
        return venv_python()
    log(f"creating {VENV} and installing {PATHWAY_REQUIREMENT} (a few minutes, once)")
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(VENV)], check=True)
    pip = [str(venv_python()), "-m", "pip", "install", "--disable-pip-version-check"]
    # pip's progress goes to our stderr; our stdout is kept for the JSON document.
    subprocess.run([*pip, PATHWAY_REQUIREMENT], check=True, stdout=sys.stderr, env=worker_env())
    version = installed_pathway()
    if not (version and version.startswith(PATHWAY_SERIES)):
        raise RuntimeError(f"installing {PATHWAY_REQUIREMENT} left version {version!r}")
    log(f"installed pathway {version}")
    return venv_python()


def worker_env() -> dict[str, str]:
    """The environment of every process run inside the virtual environment."""
    env = {k: v for k, v in os.environ.items() if k not in QUIET_ENV_DROP}
    env["PATHWAY_THREADS"] = str(WORKER_THREADS)
    env["PYTHONNOUSERSITE"] = "1"
    return env


# --- the shared data ---------------------------------------------------------------------------


@dataclass
class Batch:
    """One update: ``gone`` and ``new`` edges as ``eid, src, dst``."""

    size: int
    gone: pl.DataFrame
    new: pl.DataFrame


@dataclass
class Plan:
    """The graph (``eid, src, dst``), the batches in order, and the edges live after each
    (``lives[0]`` is the graph itself, ``lives[-1]`` the final edges; only the final ones are
    kept unless asked)."""

    edges: pl.DataFrame
    n_nodes: int
    batches: list[Batch]
    lives: list[pl.DataFrame]
    every_step: bool
    """Whether the edges after every batch are kept (to check every intermediate result)."""


def make_plan(
    n_edges: int, runs: int, sizes: list[int], seed: int = 1, keep_every_step: bool = False
) -> Plan:
    """An R-MAT graph and ``runs`` batches of each size, with the same generators and seeds as
    the ``cc`` benchmark. Every edge gets an id so that a deletion names one copy of it."""
    edges = rmat(n_edges, seed).with_row_index("eid").with_columns(pl.col("eid").cast(pl.Int64))
    edges = edges.select("eid", "src", "dst")
    n_nodes = int(edges.select(pl.max_horizontal("src", "dst").max()).item()) + 1
    rng = np.random.default_rng(seed + 7)
    live, next_eid, batches, lives = edges, edges.height, [], [edges]
    for size in sizes:
        for _ in range(runs):
            gone, new = random_changes(live, n_nodes, size, rng)
            new = new.select(
                pl.int_range(next_eid, next_eid + new.height, dtype=pl.Int64).alias("eid"),
                "src",
                "dst",
            )
            next_eid += new.height
            live = pl.concat([live.filter(~pl.col("eid").is_in(gone["eid"].implode())), new])
            batches.append(Batch(size, gone, new))
            lives.append(live)
    return Plan(edges, n_nodes, batches, lives if keep_every_step else [live], keep_every_step)


def write_plan(plan: Plan, data: Path) -> None:
    """The files the worker reads: ``initial.parquet`` and ``changes.parquet``."""
    plan.edges.write_parquet(data / "initial.parquet")
    parts = []
    for number, batch in enumerate(plan.batches):
        for frame, diff in ((batch.gone, -1), (batch.new, 1)):
            parts.append(
                frame.select(
                    pl.lit(number, pl.Int64).alias("batch"),
                    pl.lit(diff, pl.Int64).alias("diff"),
                    "eid",
                    "src",
                    "dst",
                )
            )
    pl.concat(parts).write_parquet(data / "changes.parquet")


def edge_pairs(frame: pl.DataFrame) -> pl.DataFrame:
    """``src, dst`` only: what ddflow and NetworkX take."""
    return frame.select("src", "dst")


# --- the two systems ---------------------------------------------------------------------------


def run_ddflow(plan: Plan) -> dict[str, Any]:
    """ddflow on the plan: first result, one latency per batch, memory, final labels."""
    flow, inp, out = build_cc()
    first = load_edges(flow, inp, edge_pairs(plan.edges))
    rss_after_load = peak_rss_mb()
    seconds = [
        apply_changes(flow, inp, edge_pairs(b.gone), edge_pairs(b.new)) for b in plan.batches
    ]
    return {
        "first_result_s": first,
        "seconds": seconds,
        "peak_rss_mb_after_load": rss_after_load,
        "peak_rss_mb": peak_rss_mb(),
        "labels": snapshot_labels(out),
    }


def run_worker(python: Path, args: list[str], data: Path) -> None:
    """Run the worker in the virtual environment; its log goes to ``data/worker.log``, whose
    tail is shown if it fails."""
    log_path = data / "worker.log"
    with log_path.open("w") as log_file:
        done = subprocess.run(
            [str(python), str(WORKER), *args],
            stdout=log_file,
            stderr=subprocess.STDOUT,
            env=worker_env(),
            cwd=data,
        )
    if done.returncode != 0:
        tail = log_path.read_text().splitlines()[-40:]
        print("\n".join(tail), file=sys.stderr)
        raise RuntimeError(f"pathway worker {args[0]} exited with {done.returncode}")


def run_pathway(python: Path, plan: Plan, data: Path) -> dict[str, Any]:
    """Pathway on the plan (in the worker): its timings, memory and final labels."""
    write_plan(plan, data)
    run_worker(python, ["measure", str(data), *(["--check-each"] if plan.every_step else [])], data)
    result = json.loads((data / "pathway_result.json").read_text())
    updates = result.pop("updates")
    expected = [len(b.gone) + len(b.new) for b in plan.batches]
    if [u["changes"] for u in updates] != expected:
        raise RuntimeError("the worker applied different batches")
    if plan.every_step:
        check_every_step(plan, pl.read_parquet(data / "pathway_snapshots.parquet"))
    return {
        **result,
        "seconds": [u["seconds"] for u in updates],
        "label_changes": [u["label_changes"] for u in updates],
        "labels": frame_labels(pl.read_parquet(data / "pathway_labels.parquet")),
    }


def frame_labels(frame: pl.DataFrame) -> dict[int, int]:
    """A ``node, label`` frame as a map."""
    return dict(zip(frame["node"].to_list(), frame["label"].to_list(), strict=True))


def check_every_step(plan: Plan, snapshots: pl.DataFrame) -> None:
    """Pathway's labels as they were when each commit was seen complete must be NetworkX's
    labels of the edges live then: a check that completion is detected neither early nor
    late."""
    for step, live in enumerate(plan.lives):
        got = frame_labels(snapshots.filter(pl.col("batch") == step))
        if got != nx_components(edge_pairs(live)):
            raise AssertionError(f"Pathway's labels at completion of commit {step} are wrong")


def check_nested(python: Path, data: Path) -> dict[str, Any]:
    """What Pathway does with a plain and with a nested ``pw.iterate`` (run, not assumed)."""
    out = data / "nested.json"
    run_worker(python, ["nested", str(out)], data)
    found: dict[str, Any] = json.loads(out.read_text())
    nested_fails = not found["nested_iterate"]["ok"] and found["plain_iterate"]["ok"]
    found["pathway_can_nest_iterate"] = not nested_fails
    return found


# --- the report --------------------------------------------------------------------------------


def ratio(a: float, b: float) -> float | None:
    """``a / b`` rounded, or None when ``b`` is zero."""
    return round(a / b, 2) if b else None


def by_size(plan: Plan, seconds: list[float]) -> dict[int, list[float]]:
    """The latencies grouped by batch size."""
    grouped: dict[int, list[float]] = {}
    for batch, s in zip(plan.batches, seconds, strict=True):
        grouped.setdefault(batch.size, []).append(s)
    return grouped


def compare_updates(plan: Plan, dd_s: list[float], pw_s: list[float]) -> dict[str, Any]:
    """Per batch size: both summaries and the Pathway / ddflow ratios of median and max."""
    rows = {}
    pw_by = by_size(plan, pw_s)
    for size, seconds in by_size(plan, dd_s).items():
        d, p = summary(seconds), summary(pw_by[size])
        rows[str(size)] = {
            "ddflow": d,
            "pathway": p,
            "pathway_over_ddflow_median": ratio(p["median_ms"], d["median_ms"]),
            "pathway_over_ddflow_max": ratio(p["max_ms"], d["max_ms"]),
        }
    return rows


def labels_check(
    plan: Plan, dd_labels: dict[int, int], pw_labels: dict[int, int]
) -> tuple[dict[str, bool], float]:
    """Whether each system's final labels equal NetworkX's, and NetworkX's time."""
    t0 = time.perf_counter()
    expected = nx_components(edge_pairs(final_edges(plan)))
    seconds = time.perf_counter() - t0
    return {"ddflow": dd_labels == expected, "pathway": pw_labels == expected}, seconds


def final_edges(plan: Plan) -> pl.DataFrame:
    """The edges live after the last batch."""
    return plan.lives[-1]


def measure(n_edges: int, runs: int, sizes: list[int], check_every_step: bool) -> dict[str, Any]:
    """Both systems on one graph size, side by side."""
    python = ensure_venv()
    plan = make_plan(n_edges, runs, sizes, keep_every_step=check_every_step)
    log(f"{n_edges} edges, {len(plan.batches)} batches: ddflow")
    dd_res = run_ddflow(plan)
    with tempfile.TemporaryDirectory(prefix="pathway_cc-") as tmp:
        log("pathway: nested iterate check")
        nested = check_nested(python, Path(tmp))
        log("pathway: measuring (worker process)")
        pw_res = run_pathway(python, plan, Path(tmp))
    log("networkx: checking labels")
    match, nx_seconds = labels_check(plan, dd_res.pop("labels"), pw_res.pop("labels"))
    if not all(match.values()):
        raise AssertionError(f"labels differ from NetworkX: {match}")
    return {
        "edges": n_edges,
        "nodes": plan.n_nodes,
        "runs_per_size": runs,
        "first_result_s": {
            "ddflow": round(dd_res["first_result_s"], 3),
            "pathway": round(pw_res["first_result_s"], 3),
            "pathway_over_ddflow": ratio(pw_res["first_result_s"], dd_res["first_result_s"]),
            "pathway_feeding_rows_s": round(pw_res["feed_initial_s"], 3),
        },
        "updates": compare_updates(plan, dd_res["seconds"], pw_res["seconds"]),
        "pathway_label_changes_per_batch": pw_res["label_changes"],
        "peak_rss_mb": {
            "ddflow_after_load": dd_res["peak_rss_mb_after_load"],
            "pathway_after_load": pw_res["peak_rss_mb_after_load"],
            "ddflow_end": dd_res["peak_rss_mb"],
            "pathway_end": pw_res["peak_rss_mb"],
            "pathway_over_ddflow_end": ratio(pw_res["peak_rss_mb"], dd_res["peak_rss_mb"]),
        },
        "labels_equal_networkx": match,
        "pathway_labels_checked_at_every_completion": plan.every_step,
        "networkx_recompute_s": round(nx_seconds, 3),
        "pathway": {
            "version": pw_res["pathway_version"],
            "threads": pw_res["threads"],
            "telemetry": "off: no license key, no monitoring server, monitoring_level=NONE",
        },
        "nested_iterate": nested,
    }


def run(quick: bool = False) -> dict[str, Any]:
    """The benchmark: 20k edges with ``quick``, else 1M (as ``cc``)."""
    n_edges, runs = (20_000, 3) if quick else (1_000_000, 5)
    # Checking Pathway's labels after every batch costs a NetworkX run per batch: quick only.
    result = measure(n_edges, runs, [1, 10, 100, 1000], check_every_step=quick)
    return {"benchmark": "pathway_cc", "machine": machine(), "results": [result]}

"""``examples/windowed_scc.py`` under ``spark-submit``: a folder of Parquet files of edges,
windowed, strongly connected components on two workers hosted by Spark, a Parquet change log
and snapshot. Checked against NetworkX on the last window, and the change log replayed against
the snapshot."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

import networkx as nx
import polars as pl
import pyspark
import pytest

from ddflow.io.spark import read_change_log

pytestmark = pytest.mark.spark

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "windowed_scc.py"
WINDOW = 150


def write_batches(folder: Path) -> list[list[tuple[int, int, int]]]:
    rng = random.Random(3)
    folder.mkdir()
    batches = []
    for i in range(4):
        rows = [(rng.randrange(12), rng.randrange(12), 100 * i + j) for j in range(15)]
        frame = pl.DataFrame(
            rows, schema={"src": pl.Int64, "dst": pl.Int64, "ts": pl.Int64}, orient="row"
        )
        frame.write_parquet(folder / f"part-{i:03d}.parquet")
        batches.append(rows)
    return batches


def nx_components(edges: list[tuple[int, int]]) -> dict[int, int]:
    g = nx.DiGraph(edges)
    return {n: min(c) for c in nx.strongly_connected_components(g) for n in c}


def test_windowed_scc_example_under_spark_submit(tmp_path):
    batches = write_batches(tmp_path / "in")
    submit = os.path.join(os.path.dirname(pyspark.__file__), "bin", "spark-submit")
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    folders = [str(tmp_path / "in"), str(tmp_path / "out")]
    done = subprocess.run(
        [submit, "--master", "local[2]", str(EXAMPLE), *folders, "--window", str(WINDOW)],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.strip().splitlines()
    assert [ln.split(":")[0] for ln in lines] == [f"epoch {i}" for i in range(4)]
    newest = max(ts for rows in batches for _, _, ts in rows)
    live = [(s, d) for rows in batches for s, d, ts in rows if ts > newest - WINDOW]
    assert f"{len(live)} live edges" in lines[-1]
    snapshot = pl.read_parquet(tmp_path / "out" / "snapshot" / "*.parquet")
    got = dict(zip(snapshot["node"], snapshot["component"], strict=True))
    assert got == nx_components(live)
    log = read_change_log(str(tmp_path / "out" / "changes"), polars=True)
    replayed = (
        log.group_by("node", "component").agg(pl.col("diff").sum()).filter(pl.col("diff") != 0)
    )
    assert dict(zip(replayed["node"], replayed["component"], strict=True)) == got

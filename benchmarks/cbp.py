"""Stateful bulk processing: the URL count over increments, recomputed, as a black box and as a
CBP stage with inner grouping (cbp-socc2010, Figures 11 and 12).

The input is a seeded stream of URLs drawn Zipf-like from a large URL space (``CBP_URLS``,
2M; exponent ``CBP_ZIPF``, 1.0), cut into ``CBP_INCREMENTS`` increments (10) of
``CBP_RECORDS`` records (50,000): each increment holds URLs seen before and new ones, and the
set of URLs grows with every increment (to about 150,000 at the default sizes). The URL count
of the paper's Figure 3 is computed three ways, each timed per increment (``advance_to`` and
``run()`` of the epoch that brings it):

* ``recompute``: counting everything so far, from scratch: the CBP stage of ``cbp_inner`` in a
  fresh dataflow, fed all the increments so far as one epoch;
* ``black_box``: the emulation of §4.4, state as just another flow: a stage without ``state=``
  whose counts travel as a loopback flow, outer grouping, every URL's count read and written
  again each epoch;
* ``cbp_inner``: the CBP stage with its state kept in the stage and inner grouping (Figure 3
  as written): translate is called for the URLs of the increment, whose state is read by key.

For ``cbp_inner`` the stage's ``metrics`` give the state records read in each increment, next
to the increment's hit rate (the fraction of its distinct URLs already counted), and the state's
size. Every design's final counts are checked against Polars counting the whole stream, and
``cbp_inner``'s state records read against the increment's known URLs (one state record per
URL). Times are medians over ``CBP_RUNS`` runs (3), each run a fresh series of the three
designs, one increment of each after the other (after a ``gc.collect()``, so that no step is
charged for collecting the garbage of the increment before).
"""

from __future__ import annotations

import gc
import os
import statistics
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import polars as pl

import ddflow as dd
from benchmarks.common import machine, peak_rss_mb
from ddflow import cbp

DESIGNS = ("recompute", "black_box", "cbp_inner")
URLS = {"url": "str"}
COUNTS = {"url": "str", "count": "int64"}


@dataclass(frozen=True)
class Settings:
    """The sizes of a run (see the module)."""

    increments: int
    records: int
    urls: int
    zipf: float
    runs: int
    seed: int = 11


def settings(quick: bool) -> Settings:
    """The sizes from the environment, with the defaults of a full or a ``--quick`` run."""
    env = os.environ.get
    s = Settings(
        increments=int(env("CBP_INCREMENTS", "5" if quick else "10")),
        records=int(env("CBP_RECORDS", "2000" if quick else "50000")),
        urls=int(env("CBP_URLS", "20000" if quick else "2000000")),
        zipf=float(env("CBP_ZIPF", "1.0")),
        runs=int(env("CBP_RUNS", "2" if quick else "3")),
    )
    if s.increments < 2 or s.records < 1 or s.urls < 1 or s.runs < 1 or s.zipf < 0:
        raise ValueError(
            f"cbp: CBP_INCREMENTS must be at least 2 and CBP_RECORDS, CBP_URLS, CBP_RUNS at "
            f"least 1, CBP_ZIPF not negative; got {s}"
        )
    return s


def url_stream(s: Settings) -> list[pl.DataFrame]:
    """The increments: ``s.records`` URLs each, drawn with probability proportional to
    ``1 / rank ** s.zipf`` over ``s.urls`` URLs (ranks scattered over the URL names)."""
    rng = np.random.default_rng(s.seed)
    weights = 1.0 / np.arange(1, s.urls + 1, dtype=np.float64) ** s.zipf
    cdf = np.cumsum(weights)
    cdf /= cdf[-1]
    names = rng.permutation(s.urls)
    out = []
    for _ in range(s.increments):
        ranks = np.minimum(np.searchsorted(cdf, rng.random(s.records)), s.urls - 1)
        ids = pl.Series("id", names[ranks], dtype=pl.Int64)
        url = pl.lit("http://example.org/page/") + pl.col("id").cast(pl.Utf8)
        out.append(pl.DataFrame([ids]).select(url.alias("url")))
    return out


def url_count(url: str, state: list[tuple[Any, ...]], flows: Any, out: Any) -> None:
    """Figure 3: the URL's count so far, to the state and to the updates."""
    count = len(flows["urls"]) + (state[0][1] if state else 0)
    out.state((url, count))
    out.write("updates", (url, count))


def url_count_black_box(url: str, state: list[tuple[Any, ...]], flows: Any, out: Any) -> None:
    """Figure 3 with its state as the loopback flow ``counts``: every count is written again
    (it is dropped otherwise), the updates only for the URLs of the increment."""
    previous = flows["counts"]
    count = len(flows["urls"]) + (previous[0][1] if previous else 0)
    out.write("counts", (url, count))
    if flows["urls"]:
        out.write("updates", (url, count))


def when_urls_come(
    framing_keys: Mapping[str, list[int]], state: Any
) -> tuple[list[str], list[str], Any]:
    """Runnable: run when URLs came (not on the counts alone, which come back every epoch),
    reading and removing an increment of each flow that has one."""
    if not framing_keys["urls"]:
        return [], [], state
    names = [n for n, keys in framing_keys.items() if keys]
    return names, names, state


@dataclass
class Counting:
    """A dataflow counting URLs with one of the designs, its outputs and inputs."""

    flow: dd.Dataflow
    urls: Any
    updates: Any
    metrics: Any


def counting(design: str) -> Counting:
    """A new dataflow for ``design`` (``recompute`` builds ``cbp_inner``'s), built by a first
    ``run()`` so that no increment's time includes building it."""
    flow = dd.Dataflow()
    urls = flow.input("urls", schema=URLS, signed=True)
    if design == "black_box":
        stage = cbp.stage(
            "url_count_black_box",
            url_count_black_box,
            key=URLS,
            inputs={"urls": urls},
            outputs={"updates": COUNTS},
            loopbacks={"counts": cbp.Loopback(COUNTS)},
            grouping="outer",
            runnable=when_urls_come,
        )
    else:
        stage = cbp.stage(
            "url_count",
            url_count,
            key=URLS,
            inputs={"urls": urls},
            outputs={"updates": COUNTS},
            state=COUNTS,
            grouping="inner",
        )
    updates = stage["updates"].output(count="multiplicity")  # (its records hold a count)
    c = Counting(flow, urls, updates, stage.metrics.output())
    flow.run()
    return c


def feed(c: Counting, frame: pl.DataFrame) -> float:
    """Insert ``frame`` at the flow's epoch and run that epoch: the seconds of ``advance_to``
    and ``run()``."""
    c.urls.insert_frame(frame)
    t0 = time.perf_counter()
    c.flow.advance_to(c.flow.epoch + 1)
    c.flow.run()
    return time.perf_counter() - t0


def latest_counts(c: Counting) -> pl.DataFrame:
    """Each URL's count last written to ``updates`` (columns url, count, sorted by url)."""
    changes = pl.from_pandas(c.updates.changes())
    return (
        changes.sort("time", maintain_order=True)
        .group_by("url")
        .agg(pl.col("count").last())
        .sort("url")
    )


def per_epoch_metrics(c: Counting) -> dict[int, dict[str, int]]:
    """The stage's metrics summed over the workers, by epoch."""
    m = pl.from_pandas(c.metrics.changes())
    by = m.group_by("time").agg(pl.col("calls", "state_read", "state_size").sum())
    return {row["time"]: row for row in by.iter_rows(named=True)}


def first_difference(expected: pl.DataFrame, got: pl.DataFrame) -> str:
    """Where ``got`` (url, count) first differs from ``expected``: a sentence."""
    both = expected.join(got, on="url", how="full", suffix="_got", coalesce=True)
    bad = both.filter(pl.col("count").ne_missing(pl.col("count_got"))).sort("url")
    if not bad.height:
        return "none"
    url, want, have = bad.row(0)
    return (
        f"{bad.height} URLs differ, e.g. {url!r}: {want} in the stream, {have} here "
        f"({got.height} URLs here, {expected.height} in the stream)"
    )


@dataclass
class Increment:
    """What an increment holds against the URLs before it."""

    records: int
    distinct_urls: int
    known_urls: int
    urls_after: int

    @property
    def hit_rate(self) -> float:
        """The fraction of the increment's distinct URLs seen before it."""
        return self.known_urls / self.distinct_urls

    @property
    def urls_before(self) -> int:
        """The URLs seen before the increment: the state it meets."""
        return self.urls_after - (self.distinct_urls - self.known_urls)


def describe(stream: Sequence[pl.DataFrame]) -> list[Increment]:
    """Each increment's records, distinct URLs, those already seen, and the URLs after it."""
    seen = pl.DataFrame(schema={"url": pl.Utf8})
    out = []
    for frame in stream:
        distinct = frame.unique("url")
        known = distinct.join(seen, on="url", how="semi").height
        seen = pl.concat([seen, distinct]).unique("url")
        out.append(Increment(frame.height, distinct.height, known, seen.height))
    return out


def one_run(
    stream: Sequence[pl.DataFrame], reference: pl.DataFrame, label: str
) -> tuple[dict[str, list[float]], dict[int, dict[str, int]], dict[int, dict[str, int]]]:
    """The three designs over the stream, an increment of each after the other: their seconds
    per increment, and the metrics of ``cbp_inner`` and ``black_box`` by epoch. Raises if a
    design's final counts differ from ``reference``."""
    inner, black_box = counting("cbp_inner"), counting("black_box")
    times: dict[str, list[float]] = {d: [] for d in DESIGNS}
    recomputed = None
    for i, frame in enumerate(stream):
        recomputed = None  # (the dataflow that recomputed the last increment is garbage now)
        gc.collect()  # (so that no step is charged for collecting the last increment's garbage)
        times["cbp_inner"].append(feed(inner, frame))
        times["black_box"].append(feed(black_box, frame))
        recomputed = counting("recompute")
        times["recompute"].append(feed(recomputed, pl.concat(stream[: i + 1])))
        print(
            f"cbp: {label}, increment {i + 1}/{len(stream)}: "
            + ", ".join(f"{d} {times[d][-1] * 1e3:.0f} ms" for d in DESIGNS),
            file=sys.stderr,
        )
    assert recomputed is not None
    got = {
        "recompute": latest_counts(recomputed),
        "black_box": latest_counts(black_box),
        "cbp_inner": latest_counts(inner),
    }
    wrong = {d: first_difference(reference, g) for d, g in got.items() if not g.equals(reference)}
    assert not wrong, (
        "the three designs do not give the same counts at the end: "
        + "; ".join(f"{d}: {why}" for d, why in wrong.items())
        + f" (designs equal to Polars' count of the stream: "
        f"{sorted(set(DESIGNS) - set(wrong)) or 'none'})"
    )
    return times, per_epoch_metrics(inner), per_epoch_metrics(black_box)


def ms(seconds: float) -> float:
    """Seconds as milliseconds, rounded to the microsecond."""
    return round(seconds * 1e3, 3)


def ratio(a: float, b: float) -> float:
    """``a / b``, rounded to two decimals."""
    return round(a / b, 2)


def run(quick: bool = False) -> dict[str, Any]:
    """The benchmark (see the module): its JSON document."""
    s = settings(quick)
    stream = url_stream(s)
    incs = describe(stream)
    reference = (
        pl.concat(stream).group_by("url").agg(pl.len().cast(pl.Int64).alias("count")).sort("url")
    )
    runs = []
    inner_metrics: dict[int, dict[str, int]] = {}
    bb_metrics: dict[int, dict[str, int]] = {}
    for r in range(s.runs):
        times, inner_metrics, bb_metrics = one_run(stream, reference, f"run {r + 1}/{s.runs}")
        runs.append(times)
    medians = {
        d: [statistics.median(run[d][i] for run in runs) for i in range(s.increments)]
        for d in DESIGNS
    }
    increments = []
    for i, inc in enumerate(incs):
        m, b = inner_metrics.get(i, {}), bb_metrics.get(i, {})
        state_read, state_size = m.get("state_read", 0), m.get("state_size", 0)
        # inner grouping reads the state of the increment's known URLs alone, one record each
        assert state_read == inc.known_urls and state_size == inc.urls_before, (
            f"cbp_inner at increment {i}: the stage read {state_read} state records of a state "
            f"of {state_size}; the increment has {inc.known_urls} known URLs (one state record "
            f"each) and the state should hold the {inc.urls_before} URLs seen before it"
        )
        increments.append(
            {
                "increment": i,
                "records": inc.records,
                "distinct_urls": inc.distinct_urls,
                "known_urls": inc.known_urls,
                "hit_rate": round(inc.hit_rate, 4),
                "state_size": state_size,
                "state_read": state_read,
                "calls": m.get("calls", 0),
                "black_box_calls": b.get("calls", 0),
                "urls_after": inc.urls_after,
                **{f"{d}_ms": ms(medians[d][i]) for d in DESIGNS},
            }
        )
    last = s.increments - 1
    return {
        "benchmark": "cbp",
        "machine": machine(),
        "settings": asdict(s),
        "increments": increments,
        "runs_ms": {d: [[ms(x) for x in run[d]] for run in runs] for d in DESIGNS},
        "summary": {
            "last_over_first": {d: ratio(medians[d][last], medians[d][0]) for d in DESIGNS},
            "last_over_second": {d: ratio(medians[d][last], medians[d][1]) for d in DESIGNS},
            "recompute_over_cbp_inner_last": ratio(
                medians["recompute"][last], medians["cbp_inner"][last]
            ),
            "black_box_over_cbp_inner_last": ratio(
                medians["black_box"][last], medians["cbp_inner"][last]
            ),
            "total_s": {d: round(sum(medians[d]), 3) for d in DESIGNS},
            "final_state_size": incs[-1].urls_after,
            "records": sum(inc.records for inc in incs),
        },
        "counts_equal": True,
        "peak_rss_mb": peak_rss_mb(),
    }

"""``python -m ddflow demo`` as a user runs it: the server started from the command line, its
page driven in a real browser (Debian's ``chromium``, through Playwright), and the command's
errors.

The browser test moves the window with the page's own buttons and its slider, and after each
move reads the components the page shows (their sizes, nodes and top tags) and compares them
with NetworkX recomputing the same window from scratch (:func:`ddflow.demo.oracle.recompute`)
on the same generated stream. A screenshot of the page is saved under ``$DDFLOW_ARTIFACTS``
(or the test's temporary directory), and its path printed. Without ``chromium`` the test
fails, saying what to install: a browser test that does not run has not passed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from ddflow.demo import oracle
from ddflow.demo.app import ROWS
from ddflow.demo.data import mention_stream

SEED, HOURS, WINDOW, STEP = 5, 2, 1_800, 60
#: every wait of the browser test, in milliseconds (a hang is a failure, not a stuck run)
WAIT_MS = 60_000
#: the server's start: generating the stream and building the first window
START_S = 180
BOUNDS = re.compile(r"\((-?\d+) s ≤ time < (-?\d+) s\)")
ADDRESS = re.compile(r"http://127\.0\.0\.1:(\d+)")


def demo_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "ddflow", "demo", "--no-browser", *args]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[str]:
    """The demo served by ``python -m ddflow demo`` on a free port (``--port 0``; the address
    is read from what the command prints); stopped with Ctrl-C (SIGINT) after the test, killed
    if it does not stop, and its exit checked."""
    log_path = tmp_path / "server.log"
    command = demo_command(
        "--port", "0", "--seed", str(SEED), "--hours", str(HOURS),
        "--window", str(WINDOW), "--step", str(STEP),
    )  # fmt: skip
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    with log_path.open("w") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        deadline = time.monotonic() + START_S
        while (found := ADDRESS.search(log_path.read_text())) is None:
            if process.poll() is not None:
                pytest.fail(f"the demo exited ({process.returncode}):\n{log_path.read_text()}")
            if time.monotonic() > deadline:
                pytest.fail(f"no address printed in {START_S} s:\n{log_path.read_text()}")
            time.sleep(0.2)
        yield f"http://127.0.0.1:{found.group(1)}"
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=30)
                pytest.fail(f"the demo did not stop on Ctrl-C:\n{log_path.read_text()}")
    output = log_path.read_text()
    assert process.returncode == 0, output
    assert "building the first window" in output and "stopped" in output, output


@contextmanager
def browser_page() -> Iterator[Any]:
    """A page of Debian's chromium, headless, driven by Playwright (no browser download); the
    test fails, saying what to install, where there is no chromium."""
    chromium = shutil.which("chromium")
    if chromium is None:
        pytest.fail(
            "no chromium on PATH: the demo's browser test drives Debian's chromium; install it "
            "with: apt-get install chromium"
        )
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, headless=True, timeout=WAIT_MS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            page.set_default_timeout(WAIT_MS)
            yield page
        finally:
            browser.close()


def clock(t: int) -> str:
    """The page's time of day for ``t`` (the generated stream starts at day 1 00:00)."""
    day, rest = divmod(t, 86_400)
    hours, rest = divmod(rest, 3_600)
    minutes, seconds = divmod(rest, 60)
    return f"day {day + 1} {hours:02d}:{minutes:02d}" + (f":{seconds:02d}" if seconds else "")


def shown_bounds(page: Any) -> tuple[int, int]:
    text = page.inner_text("#window-bounds")
    found = BOUNDS.search(text)
    assert found is not None, f"no bounds in {text!r}"
    return int(found.group(1)), int(found.group(2))


def wait_for_end(page: Any, end: int) -> None:
    page.wait_for_function(
        "t => (document.querySelector('#window-bounds')?.textContent || '').includes(t)",
        arg=f"< {end} s)",
        timeout=WAIT_MS,
    )


#: how many steps the latency chart shows (plotly keeps the figure's data on its element)
LATENCY_POINTS_JS = (
    "(g => g && g.data && g.data.length ? g.data[0].x.length : -1)"
    "(document.querySelector('#latency-chart .js-plotly-plot'))"
)


def api_window(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"{url}/api/window", timeout=WAIT_MS / 1000) as response:
        return json.load(response)


def check_page(page: Any, url: str, mentions: pl.DataFrame, end: int) -> None:
    """The page shows the window ending at ``end``: its bounds, its components as NetworkX
    finds them (largest first; the largest :data:`ROWS` when there are more), their top tags,
    and the step's latencies as the model measured them."""
    start = end - WINDOW
    bounds = page.inner_text("#window-bounds")
    assert shown_bounds(page) == (start, end), bounds
    assert bounds.startswith(f"{clock(start)} → {clock(end)}"), bounds

    expected = oracle.recompute(oracle.window_edges(mentions, start, end))
    count = page.inner_text("#component-count")
    assert count.startswith(f"{len(expected)} strongly connected"), (end, count)
    rows = page.eval_on_selector_all(
        "#components-body tr",
        "rows => rows.map(r => ({...r.dataset, cells: [...r.cells].map(c => c.innerText)}))",
    )
    assert len(rows) == min(len(expected), ROWS), (end, len(rows), len(expected))
    shown = []
    for rank, row in enumerate(rows, start=1):
        nodes, tags = json.loads(row["nodes"]), json.loads(row["tags"])
        assert (int(row["rank"]), int(row["size"])) == (rank, len(nodes)), row
        assert row["cells"][:3] == [str(rank), str(len(nodes)), " ".join(tags) or "—"], row
        assert row["cells"][3].startswith(", ".join(map(str, nodes[:8]))), row
        shown.append((len(nodes), tuple(nodes), tuple(tags)))
    sizes = [s for s, _, _ in shown]
    assert sizes == sorted(sizes, reverse=True), f"not largest first at {end}: {sizes}"
    every = Counter((c["size"], tuple(c["nodes"]), tuple(c["top_tags"])) for c in expected)
    assert not Counter(shown) - every, f"components NetworkX does not find at {end}"
    smallest = sizes[-1] if len(shown) == ROWS else 0
    larger = Counter({c: n for c, n in every.items() if c[0] > smallest})
    assert not larger - Counter(shown), f"a larger component is left out at {end}"

    doc = api_window(url)
    assert doc["end"] == end
    step_ms = float(page.inner_text("#step-ms"))
    recompute_ms = float(page.inner_text("#recompute-ms"))
    assert step_ms == pytest.approx(doc["step_ms"], abs=0.051)
    assert recompute_ms == pytest.approx(doc["recompute_ms"], abs=0.051)
    speedup = page.inner_text("#speedup")
    ratio = doc["recompute_ms"] / doc["step_ms"]
    assert speedup.endswith("×"), speedup
    assert float(speedup[:-1]) == pytest.approx(ratio, rel=0.05, abs=0.051), (speedup, ratio)


def test_the_page_follows_the_window_as_networkx_recomputes_it(server: str, tmp_path: Path) -> None:
    with browser_page() as page:
        follow_the_window(page, server, tmp_path)


def follow_the_window(page: Any, server: str, tmp_path: Path) -> None:
    """Move the window with the page's buttons and its slider; check the page after each move."""
    mentions = mention_stream(seed=SEED, hours=HOURS)
    first, last = int(mentions["time"].min()), int(mentions["time"].max())
    lo, hi = first + WINDOW, last + 1
    artifacts = Path(os.environ.get("DDFLOW_ARTIFACTS") or tmp_path)
    artifacts.mkdir(parents=True, exist_ok=True)
    screenshot = artifacts / "demo_page.png"
    elsewhere: list[str] = []  # requests the page makes to other servers (a CDN): none
    page.on(
        "request",
        lambda r: None if r.url.startswith((server, "data:", "blob:")) else elsewhere.append(r.url),
    )
    try:
        page.goto(server, timeout=WAIT_MS)
        page.wait_for_selector("#components-body tr", timeout=WAIT_MS)
        end = shown_bounds(page)[1]
        check_page(page, server, mentions, end)
        page.wait_for_function(f"() => ({LATENCY_POINTS_JS}) >= 1", timeout=WAIT_MS)
        points = page.evaluate(f"() => {LATENCY_POINTS_JS}")
        moves = [
            ("step-forward", 1),
            ("step-forward", 1),
            ("step-forward-10", 10),
            ("step-back", -1),
            ("step-back-10", -10),
            ("step-back", -1),
            ("step-forward", 1),
        ]
        for button, steps in moves:
            before, end = end, min(max(end + steps * STEP, lo), hi)
            page.click(f"#{button}", timeout=WAIT_MS)
            wait_for_end(page, end)
            check_page(page, server, mentions, end)
            points += end != before  # a step that does not move the window is not a step
            page.wait_for_function(f"n => ({LATENCY_POINTS_JS}) === n", arg=points)

        # the slider, from the keyboard: End moves the window to the stream's end, Home back
        thumb = page.locator("#slider [role=slider]")
        for key, end in (("End", hi), ("Home", lo)):
            thumb.focus(timeout=WAIT_MS)
            page.keyboard.press(key)
            wait_for_end(page, end)
            check_page(page, server, mentions, end)

        bars = page.evaluate(
            "() => document.querySelector('#iterations-chart .js-plotly-plot').data"
            ".map(t => ({name: t.name, x: t.x, y: t.y}))"
        )
        assert bars and all(len(t["x"]) == len(t["y"]) > 0 for t in bars), bars
        assert all(isinstance(y, int) and y >= 0 for t in bars for y in t["y"]), bars
        assert not elsewhere, f"the page fetched from other servers: {elsewhere}"
    finally:
        page.screenshot(path=str(screenshot), full_page=True, timeout=WAIT_MS)
        print(f"screenshot of the demo page: {screenshot}")


def run_demo(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(demo_command(*args), capture_output=True, text=True, timeout=120)


def test_a_missing_data_file_is_one_line_and_exit_2(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.csv"
    result = run_demo("--data", str(missing))
    assert result.returncode == 2, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ddflow demo: error:"), result.stderr
    assert "nowhere.csv" in lines[0]


def test_a_data_file_without_its_columns_is_one_line_and_exit_2(tmp_path: Path) -> None:
    path = tmp_path / "edges.csv"
    path.write_text("time,from,to\n0,1,2\n")
    result = run_demo("--data", str(path))
    assert result.returncode == 2, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ddflow demo: error:"), result.stderr


@pytest.mark.parametrize(
    "args, says",
    [
        (["--spark"], "--spark reads --data FILE"),
        (["--window", "0"], "argument --window"),
        (["--step", "ten"], "argument --step"),
        (["--port", "70000"], "argument --port"),
        (["--data", "m.csv", "--seed", "3"], "--seed and --hours"),
    ],
)
def test_bad_arguments_are_argparse_errors(args: list[str], says: str) -> None:
    result = run_demo(*args)
    assert result.returncode == 2, result
    assert result.stderr.startswith("usage: ddflow demo"), result.stderr
    assert says in result.stderr, result.stderr


def test_a_taken_port_is_one_line_and_exit_2() -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        result = run_demo("--hours", "1", "--window", "600", "--port", str(port))
    assert result.returncode == 2, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ddflow demo: error:"), result.stderr
    assert f"127.0.0.1:{port}" in lines[0], lines[0]

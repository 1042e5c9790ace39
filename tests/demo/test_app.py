"""The demo's JSON API (``/api/window`` of :func:`ddflow.demo.app.create_app`), through Flask's
test client: the state document, moves of the window checked against NetworkX recomputing the
same window from scratch (:func:`ddflow.demo.oracle.recompute`), on a generated stream and on a
CSV file read back with :func:`ddflow.demo.data.read_mentions`; and every kind of bad request
answered 400 with a message naming the problem, the window left where it was.
"""

from __future__ import annotations

import json
import random
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from ddflow.demo import oracle
from ddflow.demo.app import create_app
from ddflow.demo.data import mention_stream, read_mentions
from ddflow.demo.model import WindowModel

WINDOW = 1_800
STEP = 60


@pytest.fixture(scope="module")
def mentions() -> pl.DataFrame:
    """Three hours of the generated stream: a window of 1800 s holds a few thousand mentions."""
    return mention_stream(seed=3, hours=3)


@pytest.fixture(scope="module")
def model(mentions: pl.DataFrame) -> Iterator[WindowModel]:
    """One model for the module's tests (building one is the slow part): each test checks
    the windows it moves to, wherever the one before left the model."""
    m = WindowModel(mentions, window=WINDOW, step=STEP)
    try:
        yield m
    finally:
        m.close()


@pytest.fixture(scope="module")
def client(model: WindowModel) -> Any:
    return create_app(model).server.test_client()


def normal(components: list[dict[str, Any]]) -> list[tuple[int, tuple[int, ...], tuple[str, ...]]]:
    """Components as comparable tuples, in one order (ties of size are ordered by their nodes)."""
    return sorted((c["size"], tuple(c["nodes"]), tuple(c["top_tags"])) for c in components)


def check_document(doc: dict[str, Any], mentions: pl.DataFrame, end: int) -> None:
    """``doc`` is the window ending at ``end``: its bounds, and its components as NetworkX
    finds them from scratch, largest first."""
    assert (doc["start"], doc["end"]) == (end - WINDOW, end)
    expected = oracle.recompute(oracle.window_edges(mentions, end - WINDOW, end))
    assert normal(doc["components"]) == normal(expected), f"the window ending at {end}"
    sizes = [c["size"] for c in doc["components"]]
    assert sizes == sorted(sizes, reverse=True), "components are not largest first"
    assert all(c["size"] == len(c["nodes"]) >= 2 for c in doc["components"])
    assert isinstance(doc["step_ms"], float) and doc["step_ms"] >= 0
    assert isinstance(doc["recompute_ms"], float) and doc["recompute_ms"] > 0


def ends(model: WindowModel, n: int, seed: int, jumps: bool = True) -> list[int]:
    """``n`` ends of windows, seeded: single steps forward and back (the incremental case),
    and with ``jumps``, jumps of many steps and ends anywhere in the data (a window partly
    before the stream)."""
    rng = random.Random(seed)
    lo, hi = model.first, model.last + 1
    out, end = [], model.end
    for _ in range(n):
        kind = rng.random() if jumps else 0.0
        if kind < 0.5:
            end += rng.choice((-1, 1, 1, 2)) * model.step
        elif kind < 0.8:
            end += rng.randint(-20, 20) * model.step
        else:
            end = rng.randint(lo, hi)
        end = min(max(end, lo), hi)
        out.append(end)
    return out


def neighbour(model: WindowModel, end: int) -> int:
    """The end one step after ``end``, or one step before at the end of the data."""
    return end + model.step if end + model.step <= model.last + 1 else end - model.step


def test_get_returns_the_models_state(client: Any, model: WindowModel, mentions) -> None:
    response = client.get("/api/window")
    assert response.status_code == 200
    doc = response.get_json()
    assert doc == json.loads(json.dumps(model.state()))
    check_document(doc, mentions, model.end)


def test_post_moves_the_window(client: Any, model: WindowModel, mentions) -> None:
    before = client.get("/api/window").get_json()
    end = before["end"] + 7 * STEP if before["end"] + 7 * STEP <= model.last + 1 else model.first
    response = client.post("/api/window", json={"end": end})
    assert response.status_code == 200
    doc = response.get_json()
    check_document(doc, mentions, end)
    assert model.end == end and model.start == end - WINDOW
    assert client.get("/api/window").get_json() == doc
    assert model.latencies()[-1]["end"] == end
    assert doc["components"] != before["components"]


def test_random_windows_match_networkx(client: Any, model: WindowModel, mentions) -> None:
    for end in ends(model, 8, seed=11):
        response = client.post("/api/window", json={"end": end})
        assert response.status_code == 200, response.get_json()
        check_document(response.get_json(), mentions, end)


def test_windows_of_a_csv_file_match_networkx(tmp_path: Path) -> None:
    """A user's CSV file (untagged mentions as empty fields), read back with ``read_mentions``:
    the windows are those of the stream that was written."""
    stream = mention_stream(seed=5, hours=1)
    path = tmp_path / "mentions.csv"
    stream.write_csv(path)
    read = read_mentions(str(path))
    m = WindowModel(read, window=WINDOW, step=STEP)
    try:
        client = create_app(m).server.test_client()
        check_document(client.get("/api/window").get_json(), stream, m.end)
        for end in ends(m, 5, seed=12):
            response = client.post("/api/window", json={"end": end})
            assert response.status_code == 200, response.get_json()
            check_document(response.get_json(), stream, end)
    finally:
        m.close()


BAD_REQUESTS = {
    "not JSON": (b"{end: 5}", "not JSON"),
    "empty body": (b"", "not JSON"),
    "not an object": (b"[5400]", "object"),
    "a bare number": (b"5400", "object"),
    "no end": (b'{"start": 5400}', '"end"'),
    "end a string": (b'{"end": "5400"}', "integer"),
    "end a bool": (b'{"end": true}', "integer"),
    "end a float": (b'{"end": 5400.5}', "integer"),
    "end a float without fraction": (b'{"end": 5400.0}', "integer"),
    "end null": (b'{"end": null}', "integer"),
}


@pytest.mark.parametrize("body, names", BAD_REQUESTS.values(), ids=BAD_REQUESTS.keys())
def test_a_bad_request_is_400_with_a_message(
    client: Any, model: WindowModel, mentions, body: bytes, names: str
) -> None:
    before = client.get("/api/window").get_json()
    response = client.post("/api/window", data=body, content_type="application/json")
    assert response.status_code == 400
    error = response.get_json()["error"]
    assert names in error, error
    after = client.get("/api/window")
    assert after.status_code == 200 and after.get_json() == before
    good = client.post("/api/window", json={"end": before["end"]})
    assert good.status_code == 200
    check_document(good.get_json(), mentions, before["end"])


@pytest.mark.parametrize("where", ["before the first mention", "after last + 1"])
def test_an_end_outside_the_data_is_400(
    client: Any, model: WindowModel, mentions, where: str
) -> None:
    before = client.get("/api/window").get_json()
    end = model.first - 1 if where.startswith("before") else model.last + 2
    response = client.post("/api/window", json={"end": end})
    assert response.status_code == 400
    error = response.get_json()["error"]
    assert str(end) in error, error
    assert client.get("/api/window").get_json() == before
    end = neighbour(model, before["end"])
    good = client.post("/api/window", json={"end": end})
    assert good.status_code == 200
    check_document(good.get_json(), mentions, end)


def test_concurrent_moves_are_one_at_a_time(client: Any, model: WindowModel, mentions) -> None:
    """Requests on several threads: every answer is a whole window (the model's calls are
    serialized), and the last window is the model's."""
    answers: list[tuple[int, dict[str, Any]]] = []
    failures: list[BaseException] = []

    def mover(seed: int) -> None:
        try:
            for end in ends(model, 2, seed, jumps=False):
                response = client.post("/api/window", json={"end": end})
                answers.append((end, response.get_json()))
        except BaseException as e:  # (reported below, on the test's thread)
            failures.append(e)

    threads = [threading.Thread(target=mover, args=(s,)) for s in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a request hung"
    assert not failures, failures
    assert len(answers) == 6
    for end, doc in answers:
        check_document(doc, mentions, end)
    final = client.get("/api/window").get_json()
    check_document(final, mentions, model.end)


def test_the_page_is_served(client: Any) -> None:
    """The page and its layout come from the app itself (no CDN)."""
    page = client.get("/")
    assert page.status_code == 200
    text = page.get_data(as_text=True)
    assert "<title>ddflow: a sliding window" in text
    assert "cdn" not in text.lower() and "unpkg" not in text.lower()
    layout = client.get("/_dash-layout")
    assert layout.status_code == 200
    ids = json.dumps(layout.get_json())
    for name in ("window-bounds", "slider", "step-forward", "step-back", "step-ms", "components"):
        assert f'"{name}"' in ids, name

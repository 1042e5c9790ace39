"""The demo's page and JSON API: a sliding window over a stream of mentions, its strongly
connected components maintained incrementally, beside NetworkX recomputing them from scratch.

One :class:`~ddflow.demo.model.WindowModel` holds the dataflow; this module only shows it and
moves it. :func:`create_app` builds a Dash app around a model, and :func:`serve` runs it:

* the page (``/``) shows the window's bounds, the components with two nodes or more (largest
  first, with their top tags), the last step's latency beside NetworkX's recomputation of the
  same window, the latencies of every step so far, and the last step's records in difference
  per loop iteration; buttons and a slider move the window by ``model.step`` seconds;
* ``GET /api/window`` returns the model's state document (``model.state()``), and
  ``POST /api/window`` with the JSON body ``{"end": t}`` moves the window to end at ``t`` and
  returns the new document. A request the model cannot follow (not JSON, not an object, no
  integer ``end``, an ``end`` outside the data) is answered ``400`` with
  ``{"error": message}``, and the window stays where it was.

Invariants: the model is reached only under one lock per app (it is not thread-safe, and Flask
serves each request on a thread of its own), so every document is the state after a whole step;
the page's slider ranges over the ends ``lo, lo + step, ..., hi`` with ``hi = last + 1`` (the
window holding the whole stream's end) and ``lo = first + window`` (or ``first + step`` when the
stream is shorter than the window); the buttons move within ``[lo, hi]``. Everything the page
needs is served by the app itself (``serve_locally``): no CDN, nothing built or downloaded.
"""

from __future__ import annotations

import json
import logging
import socket
import threading
import webbrowser
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import dash
import flask
from dash import Input, Output, dcc, html

from ddflow.errors import InputError

if TYPE_CHECKING:
    from ddflow.demo.model import WindowModel

__all__ = ["clock", "create_app", "end_range", "parse_move", "serve"]

#: a day in seconds: the page shows times as "day N hh:mm" from the first day's midnight
DAY = 86_400
#: the buttons' moves, in steps
MOVES = {"step-back-10": -10, "step-back": -1, "step-forward": 1, "step-forward-10": 10}
#: the table shows the largest components only, and says how many it leaves out
ROWS = 200
#: the nodes shown in a row (all of them are in its ``data-nodes``)
NODES_SHOWN = 8
#: the latency chart shows the most recent steps only
LATENCY_POINTS = 1_000

_STYLE = {"fontFamily": "system-ui, sans-serif", "maxWidth": "1100px", "margin": "0 auto"}
_CELL = {"padding": "2px 10px", "textAlign": "left", "borderBottom": "1px solid #ddd"}


def clock(t: int, origin: int = 0) -> str:
    """Time ``t`` (seconds) as "day N hh:mm", counting days from ``origin`` (day 1 starts there);
    the seconds are shown when they are not zero.

    >>> clock(21_600), clock(108_000), clock(86_400 + 61)
    ('day 1 06:00', 'day 2 06:00', 'day 2 00:01:01')
    >>> clock(-3_600)
    'day 0 23:00'
    """
    day, rest = divmod(t - origin, DAY)
    hours, rest = divmod(rest, 3_600)
    minutes, seconds = divmod(rest, 60)
    text = f"day {day + 1} {hours:02d}:{minutes:02d}"
    return f"{text}:{seconds:02d}" if seconds else text


def end_range(first: int, last: int, window: int, step: int) -> tuple[int, int]:
    """The ends the page offers, ``(lo, hi)``: from the first window that is full (``first +
    window``; ``first + step`` when the stream is shorter than the window) to the window that
    holds the stream's last mention (``last + 1``).

    >>> end_range(0, 172_799, 86_400, 60)
    (86400, 172800)
    >>> end_range(0, 3_599, 86_400, 60)
    (60, 3600)
    """
    hi = last + 1
    lo = first + window if first + window <= hi else first + step
    return min(lo, hi), hi


def parse_move(body: bytes) -> int:
    """The end a ``POST /api/window`` body asks for, or :class:`~ddflow.InputError` naming what
    is wrong with it. The body must be a JSON object with an integer ``end`` (seconds; a bool or
    a float such as ``60.0`` is not an integer). Whether that end is inside the data is checked
    against the model, by the route.

    >>> parse_move(b'{"end": 86400}')
    86400
    >>> parse_move(b'{"end": true}')
    Traceback (most recent call last):
    ...
    ddflow.errors.InputError: "end" must be an integer number of seconds, got true (a bool)
    """
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError) as e:
        raise InputError(
            f'the body is not JSON ({e}); send an object like {{"end": 86400}}'
        ) from None
    if not isinstance(doc, dict):
        raise InputError(
            f'the body must be a JSON object like {{"end": 86400}}, got {type(doc).__name__} '
            f"{json.dumps(doc)[:60]}"
        )
    if "end" not in doc:
        keys = ", ".join(sorted(doc)) or "none"
        raise InputError(f'the body has no "end" (the new end of the window); its keys: {keys}')
    end = doc["end"]
    if isinstance(end, bool) or not isinstance(end, int):
        raise InputError(
            f'"end" must be an integer number of seconds, got {json.dumps(end)[:60]} '
            f"(a {type(end).__name__})"
        )
    return end


def _ms(value: float | None) -> str:
    """A latency for the page: "12.3", "0.421", or "off" when it was not measured."""
    if value is None:
        return "off"
    return f"{value:.1f}" if value >= 1 else f"{value:.3f}"


def _speedup(step_ms: float, recompute_ms: float | None) -> str:
    """How many times faster the step was than the recomputation: "12×", "3.4×", "0.52×".

    >>> _speedup(2.0, 250.0), _speedup(2.0, 6.8), _speedup(100.0, 52.0), _speedup(1.0, None)
    ('125×', '3.4×', '0.52×', '—')
    """
    if recompute_ms is None or step_ms <= 0:
        return "—"
    ratio = recompute_ms / step_ms
    return f"{ratio:.0f}×" if ratio >= 10 else f"{ratio:.1f}×" if ratio >= 1 else f"{ratio:.2g}×"


def _bounds(doc: dict[str, Any], origin: int) -> str:
    start, end = doc["start"], doc["end"]
    return f"{clock(start, origin)} → {clock(end, origin)} ({start} s ≤ time < {end} s)"


def _count(components: list[dict[str, Any]]) -> str:
    n = len(components)
    shown = f" (the largest {ROWS} shown)" if n > ROWS else ""
    noun = "component" if n == 1 else "components"
    return f"{n} strongly connected {noun} with 2 nodes or more{shown}"


def _rows(components: list[dict[str, Any]]) -> list[html.Tr]:
    """One row per component, largest first. Each row carries the whole component in its
    ``data-*`` attributes (``data-nodes`` and ``data-tags`` as JSON lists), so that a reader
    of the page gets exactly what the model said."""
    rows = []
    for rank, c in enumerate(components[:ROWS], start=1):
        nodes, tags = c["nodes"], c["top_tags"]
        shown = ", ".join(map(str, nodes[:NODES_SHOWN]))
        if len(nodes) > NODES_SHOWN:
            shown += f", … ({len(nodes) - NODES_SHOWN} more)"
        attributes: dict[str, Any] = {
            "data-rank": str(rank),
            "data-size": str(c["size"]),
            "data-nodes": json.dumps(nodes),
            "data-tags": json.dumps(tags),
        }
        rows.append(
            html.Tr(
                [
                    html.Td(rank, style=_CELL),
                    html.Td(c["size"], className="size", style=_CELL),
                    html.Td(" ".join(tags) or "—", className="tags", style=_CELL),
                    html.Td(shown, className="nodes", style=_CELL),
                ],
                id=f"component-{rank}",
                className="component",
                **attributes,
            )
        )
    return rows


def _chart_layout(title: str, xaxis: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {
        "title": {"text": title, "font": {"size": 15}},
        "xaxis": xaxis,
        "height": 330,
        "margin": {"l": 50, "r": 10, "t": 40, "b": 40},
        "legend": {"orientation": "h", "y": -0.25},
        **more,
    }


def _latency_figure(latencies: list[dict[str, Any]], origin: int) -> dict[str, Any]:
    """Every step's latency (the most recent :data:`LATENCY_POINTS`): ddflow's incremental
    step, and NetworkX recomputing the window, on a log scale (they differ by orders)."""
    recent = latencies[-LATENCY_POINTS:]
    first = len(latencies) - len(recent) + 1
    x = list(range(first, first + len(recent)))
    common = {
        "x": x,
        "type": "scatter",
        "mode": "lines+markers",
        "text": [clock(r["end"], origin) for r in recent],
        "hovertemplate": "step %{x}, window ending %{text}: %{y:.2f} ms<extra></extra>",
    }
    data = [{**common, "y": [r["step_ms"] for r in recent], "name": "ddflow (incremental step)"}]
    if any(r["recompute_ms"] is not None for r in recent):
        recompute = [r["recompute_ms"] for r in recent]
        data.append({**common, "y": recompute, "name": "NetworkX (recompute the window)"})
    xaxis = {"title": {"text": "step"}, "tickformat": "d", "dtick": max(1, -(-len(x) // 10))}
    return {
        "data": data,
        "layout": _chart_layout(
            "latency of each step (ms, log scale)", xaxis, yaxis={"type": "log"}
        ),
    }


def _iterations_figure(records: list[dict[str, Any]]) -> dict[str, Any]:
    """The last step's records in difference per loop iteration: bars, one series per loop."""
    loops: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        loops.setdefault(r["loop"], []).append(r)
    data = [
        {
            "type": "bar",
            "x": [r["iteration"] for r in rs],
            "y": [r["differences"] for r in rs],
            "name": loop,
            "hovertemplate": "iteration %{x}: %{y} records<extra>" + loop + "</extra>",
        }
        for loop, rs in loops.items()
    ]
    xaxis = {"title": {"text": "iteration"}, "tickformat": "d"}
    title = "last step: records in difference per loop iteration"
    return {"data": data, "layout": _chart_layout(title, xaxis, barmode="group")}


def _marks(lo: int, hi: int, origin: int) -> dict[int, str]:
    """Slider marks: both ends, and every 6 hours (every hour for a stream under a day)."""
    every = 3_600 if hi - lo < DAY else 6 * 3_600
    marks = {t: clock(t, origin) for t in range(lo - (lo - origin) % every + every, hi, every)}
    if len(marks) > 12:
        marks = {}
    marks[lo] = clock(lo, origin)
    marks[hi] = clock(hi, origin)
    return marks


def create_app(model: WindowModel) -> dash.Dash:
    """A Dash app showing ``model`` and moving it: the page at ``/``, the JSON API at
    ``/api/window`` (on ``app.server``, a Flask app). Give each model one app: the app's lock
    is what keeps the model's calls one at a time.

    >>> import polars as pl
    >>> from ddflow.demo.model import WindowModel
    >>> mentions = pl.DataFrame(
    ...     {"time": [0, 10, 20, 30], "src": [1, 2, 3, 4], "dst": [2, 1, 4, 3],
    ...      "tag": ["#a", "#a", None, "#b"]}
    ... )
    >>> model = WindowModel(mentions, window=20, step=10, end=20)
    >>> client = create_app(model).server.test_client()
    >>> [c["nodes"] for c in client.get("/api/window").get_json()["components"]]
    [[1, 2]]
    >>> [c["nodes"] for c in client.post("/api/window", json={"end": 31}).get_json()["components"]]
    [[3, 4]]
    >>> client.post("/api/window", json={"end": "31"}).status_code
    400
    >>> model.close()
    """
    lock = threading.Lock()
    step = model.step
    lo, hi = end_range(model.first, model.last, model.window, step)
    origin = model.first - model.first % DAY
    app = dash.Dash(
        __name__,
        title="ddflow: a sliding window's strongly connected components",
        serve_locally=True,
        update_title="",
    )

    def snapshot(move: Callable[[], dict[str, Any]] | None = None) -> tuple[Any, ...]:
        with lock:
            doc = move() if move is not None else model.state()
            return doc, model.latencies(), model.iterations()

    def render(
        doc: dict[str, Any], latencies: list[dict[str, Any]], its: list[dict[str, Any]]
    ) -> tuple[Any, ...]:
        return (
            doc["end"],
            _bounds(doc, origin),
            _count(doc["components"]),
            _rows(doc["components"]),
            _ms(doc["step_ms"]),
            _ms(doc["recompute_ms"]),
            _speedup(doc["step_ms"], doc["recompute_ms"]),
            _latency_figure(latencies, origin),
            _iterations_figure(its),
        )

    def layout() -> html.Div:
        (end, bounds, count, rows, step_ms, recompute_ms, speedup, latency, its) = render(
            *snapshot()
        )
        button = {"margin": "0 4px", "padding": "4px 10px"}
        return html.Div(
            [
                html.H1("Strongly connected components of a sliding window"),
                html.P(
                    f"A window of {model.window} s slides over a stream of mentions (edges "
                    "src → dst, some with a hashtag); ddflow keeps the window's strongly "
                    "connected components up to date by processing only the mentions that enter "
                    "and leave it, while NetworkX recomputes them from scratch for comparison.",
                    id="explanation",
                ),
                html.Div(
                    ["window: ", html.Span(bounds, id="window-bounds")],
                    style={"fontSize": "1.2em", "margin": "8px 0"},
                ),
                html.Div(
                    [
                        html.Button("◀◀ 10 steps back", id="step-back-10", style=button),
                        html.Button("◀ step back", id="step-back", style=button),
                        html.Button("step forward ▶", id="step-forward", style=button),
                        html.Button("10 steps forward ▶▶", id="step-forward-10", style=button),
                        html.Span(f"  (a step is {step} s)"),
                    ],
                    style={"margin": "8px 0"},
                ),
                dcc.Slider(
                    id="slider",
                    min=lo,
                    max=hi,
                    step=step,
                    value=end,
                    marks=_marks(lo, hi, origin),
                    updatemode="mouseup",
                ),
                html.Div(
                    [
                        html.Div(
                            [
                                "last step: ",
                                html.B(step_ms, id="step-ms"),
                                " ms (ddflow, incremental)",
                            ]
                        ),
                        html.Div(
                            [
                                "NetworkX recompute of the same window: ",
                                html.B(recompute_ms, id="recompute-ms"),
                                " ms",
                            ]
                        ),
                        html.Div(["speed-up: ", html.B(speedup, id="speedup")]),
                    ],
                    id="latency",
                    style={"display": "flex", "gap": "32px", "margin": "12px 0"},
                ),
                html.Div(
                    [
                        dcc.Graph(id="latency-chart", figure=latency, style={"flex": "1"}),
                        dcc.Graph(id="iterations-chart", figure=its, style={"flex": "1"}),
                    ],
                    style={"display": "flex", "gap": "8px"},
                ),
                html.H2(count, id="component-count", style={"fontSize": "1.1em"}),
                html.Table(
                    [
                        html.Thead(
                            html.Tr(
                                [
                                    html.Th(h, style=_CELL)
                                    for h in ("rank", "size", "top tags", "nodes")
                                ]
                            )
                        ),
                        html.Tbody(rows, id="components-body"),
                    ],
                    id="components",
                    style={"borderCollapse": "collapse"},
                ),
            ],
            style=_STYLE,
        )

    app.layout = layout

    @app.callback(
        Output("slider", "value"),
        Output("window-bounds", "children"),
        Output("component-count", "children"),
        Output("components-body", "children"),
        Output("step-ms", "children"),
        Output("recompute-ms", "children"),
        Output("speedup", "children"),
        Output("latency-chart", "figure"),
        Output("iterations-chart", "figure"),
        *(Input(name, "n_clicks") for name in MOVES),
        Input("slider", "value"),
        prevent_initial_call=True,
    )
    def move(*inputs: Any) -> tuple[Any, ...]:
        trigger = dash.ctx.triggered_id
        slider: float | None = inputs[-1]

        def target() -> int | None:
            if trigger in MOVES:
                return min(max(model.end + MOVES[trigger] * step, lo), hi)
            if trigger == "slider" and slider is not None:
                return min(max(round(slider), lo), hi)
            return None

        def step_to() -> dict[str, Any]:
            end = target()
            return model.state() if end is None or end == model.end else model.move_to(end)

        return render(*snapshot(step_to))

    server: flask.Flask = app.server

    @server.route("/api/window", methods=["GET", "POST"])
    def api_window() -> flask.Response | tuple[flask.Response, int]:
        if flask.request.method == "GET":
            return flask.jsonify(snapshot()[0])
        try:
            end = parse_move(flask.request.get_data())
            if not model.first <= end <= model.last + 1:
                raise InputError(
                    f'"end" is {end}, outside the data: a window ends from {model.first} (the '
                    f"first mention) to {model.last + 1} (just after the last one)"
                )
            doc = snapshot(lambda: model.move_to(end))[0]
        except InputError as e:
            return flask.jsonify({"error": e.message}), 400
        return flask.jsonify(doc)

    return app


def serve(
    model: WindowModel,
    host: str = "127.0.0.1",
    port: int = 8050,
    open_browser: bool = False,
) -> None:
    """Serve :func:`create_app` of ``model`` at ``http://host:port``, and return when
    interrupted (Ctrl-C). The address is printed once the port is bound (``port=0`` takes a free
    port, and the address says which); ``open_browser`` then opens it in the default browser.
    Requests are served on threads, and the model's calls one at a time; requests are not
    logged, only errors. An address that cannot be served (taken, or not this machine's) raises
    :class:`OSError`.
    """
    from werkzeug.serving import make_server

    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    app = create_app(model)
    # bound here, so that an address that cannot be served is an OSError to the caller
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.create_server((host, port), family=family, backlog=128) as bound:
        port = bound.getsockname()[1]
        server = make_server(host, port, app.server, threaded=True, fd=bound.fileno())
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{port}"
    print(f"serving the demo at {url}  (Ctrl-C to stop)", flush=True)
    if open_browser:
        threading.Thread(target=webbrowser.open, args=(url,), daemon=True).start()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()

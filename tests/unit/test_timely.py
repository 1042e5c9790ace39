"""The public timely vertex API: on_recv / on_notify / send_by / notify_at."""

from __future__ import annotations

import pytest

import ddflow as dd


class DistinctCount(dd.Vertex):
    """The papers' example: distinct records at once, counts when the time is complete."""

    def __init__(self) -> None:
        self.counts: dict[tuple[int, ...], dict[tuple[object, ...], int]] = {}
        self.received: list[tuple[int, tuple[int, ...]]] = []
        self.notified: list[tuple[int, ...]] = []

    def on_recv(self, edge, batch, time):
        self.received.append((edge, time))
        counts = self.counts.setdefault(time, {})
        fresh = []
        for *record, diff in batch.iter_rows():
            key = tuple(record)
            if key not in counts:
                fresh.append(key)
            counts[key] = counts.get(key, 0) + diff
        if fresh:
            self.send_by(0, fresh, time)
        self.notify_at(time)

    def on_notify(self, time):
        self.notified.append(time)
        self.send_by(1, [(*r, c) for r, c in sorted(self.counts.pop(time).items())], time)


def build():
    flow = dd.Dataflow()
    words = flow.input("words", schema={"word": "str"})
    v = DistinctCount()
    distinct, counts = flow.vertex(
        v, inputs=[words], outputs=[words.schema, {"word": "str", "n": "int64"}]
    )
    return flow, words, v, distinct.output(), counts.output()


def test_distinct_count_vertex_sends_distinct_at_once_and_counts_on_notification():
    flow, words, v, distinct, counts = build()
    words.insert(["a", "b", "a"])
    flow.advance_to(1)
    words.insert(["b", "c"])
    flow.advance_to(2)
    flow.run()
    d = distinct.changes()
    assert sorted(zip(d["word"], d["time"], d["diff"], strict=True)) == [
        ("a", 0, 1),
        ("b", 0, 1),
        ("b", 1, 1),
        ("c", 1, 1),
    ]
    c = counts.changes()
    assert sorted(zip(c.word, c.n, c.time, strict=True)) == [
        ("a", 2, 0),
        ("b", 1, 0),
        ("b", 1, 1),
        ("c", 1, 1),
    ]
    assert v.notified == [(0,), (1,)]


def test_notification_waits_for_the_time_to_complete():
    flow, words, v, distinct, counts = build()
    words.insert(["a"])
    flow.run()  # epoch 0 still open: records pass, counts wait
    assert v.received and not v.notified
    assert len(distinct.changes()) == 0  # the output holds epoch 0 until it completes
    flow.advance_to(1)
    flow.run()
    assert v.notified == [(0,)]
    assert counts.snapshot().to_dict("list") == {"word": ["a"], "n": [1], "count": [1]}


class Backwards(dd.Vertex):
    def __init__(self, what):
        self.what = what
        self.error = None

    def on_recv(self, edge, batch, time):
        earlier = (time[0] - 1,)
        try:
            if self.what == "send":
                self.send_by(0, batch.drop("diff"), earlier)
            else:
                self.notify_at(earlier)
        except dd.TimelyError as e:
            self.error = e


@pytest.mark.parametrize("what", ["send", "notify"])
def test_sending_or_notifying_before_the_current_event_is_an_error(what):
    flow = dd.Dataflow()
    xs = flow.input("xs", schema={"x": "int64"})
    v = Backwards(what)
    (out,) = flow.vertex(v, inputs=[xs], outputs=[xs.schema])
    out.output()
    flow.advance_to(3)
    xs.insert([1])
    flow.advance_to(4)
    flow.run()
    assert isinstance(v.error, dd.TimelyError)
    assert "earlier than the event" in str(v.error)


def test_send_outside_a_callback_is_an_error():
    flow, words, v, distinct, _ = build()
    words.insert(["a"])
    flow.advance_to(1)
    flow.run()
    with pytest.raises(dd.TimelyError, match=r"send_by called outside on_recv/on_notify"):
        v.send_by(0, [("b",)], (1,))
    with pytest.raises(dd.TimelyError, match=r"notify_at called outside on_recv/on_notify"):
        v.notify_at((1,))
    flow.advance_to(2)
    flow.run()
    d = distinct.changes()
    assert sorted(zip(d["word"], d["time"], d["diff"], strict=True)) == [("a", 0, 1)]  # no "b"


def test_send_by_a_vertex_outside_any_dataflow_is_an_error():
    with pytest.raises(dd.TimelyError, match="not part of a running dataflow"):
        DistinctCount().send_by(0, [("a",)], (0,))
    with pytest.raises(dd.TimelyError, match="not part of a running dataflow"):
        DistinctCount().notify_at((0,))

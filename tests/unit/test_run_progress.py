"""``Dataflow.run(progress=...)``: reports on a long run, and changes nothing else."""

from __future__ import annotations

from itertools import pairwise

import pytest

import ddflow as dd


def cc_flow() -> tuple[dd.Dataflow, dd.InputCollection, dd.Output]:
    flow = dd.Dataflow()
    edges = flow.input("edges", schema={"src": "int64", "dst": "int64"})
    out = dd.graph.connected_components(edges).output()
    edges.insert([(i, i + 1) for i in range(30)])
    flow.advance_to(1)
    return flow, edges, out


def test_a_callable_sees_every_step_and_the_end():
    flow, _, out = cc_flow()
    seen: list[dd.RunProgress] = []
    flow.run(progress=seen.append, every=0)
    steps = flow.worker.steps
    assert steps > 10
    assert [p.steps for p in seen[:-1]] == list(range(1, steps + 1))
    assert seen[-1].done and seen[-1].steps == steps
    assert not any(p.done for p in seen[:-1])
    assert all(a.seconds <= b.seconds for a, b in pairwise(seen))
    assert {p.operator for p in seen} >= {"reduce", "join"}
    assert out.snapshot()["label"].tolist() == [0] * 31  # the run itself is unchanged


def test_a_long_interval_reports_only_the_end():
    flow, _, _ = cc_flow()
    seen: list[dd.RunProgress] = []
    flow.run(progress=seen.append, every=3600)
    assert [p.done for p in seen] == [True]
    assert seen[0].steps == flow.worker.steps


def test_progress_true_prints_to_stderr(capsys):
    flow, edges, _ = cc_flow()
    flow.run(progress=True, every=0)
    err = capsys.readouterr().err.splitlines()
    assert len(err) == flow.worker.steps + 1
    assert err[0].startswith("ddflow: 1 operator steps, ")
    assert err[-1].endswith("(done)")
    # a short run with the default interval prints nothing
    edges.insert([(40, 41)])
    flow.advance_to(2)
    flow.run(progress=True)
    assert capsys.readouterr().err == ""


def test_the_hook_is_removed_after_the_run():
    flow, edges, _ = cc_flow()
    seen: list[dd.RunProgress] = []
    flow.run(progress=seen.append, every=0)
    n = len(seen)
    edges.insert([(50, 51)])
    flow.advance_to(2)
    flow.run()
    assert len(seen) == n


@pytest.mark.parametrize(
    ("kwargs", "error", "text"),
    [
        ({"progress": "yes"}, TypeError, "progress"),
        ({"progress": True, "every": -1}, ValueError, "every"),
        ({"progress": True, "every": float("nan")}, ValueError, "every"),
    ],
)
def test_bad_arguments_are_named(kwargs, error, text):
    flow, _, out = cc_flow()
    with pytest.raises(error, match=text):
        flow.run(**kwargs)
    flow.run()  # nothing was lost
    assert out.snapshot()["label"].tolist() == [0] * 31

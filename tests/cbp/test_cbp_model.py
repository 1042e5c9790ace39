"""The CBP model's rules (cbp-socc2010 §2), on every runtime: a stage against a plain-Python
simulation of the model at every epoch (state as a loopback read in the next epoch, state not
written again dropped, inner and outer groupings, loopback messages, broadcasts), and the rules
one by one: writes visible in the next epoch only, inner grouping reading only the keys in its
inputs, ``ALL``/``ALL_STATE``/multicast reaching exactly their groups, FrameBy and Runnable,
flows to and from differential operators, and the errors."""

from __future__ import annotations

import collections
import sys

import pytest
from cbp_runtimes import RUNTIMES, new_flow
from hypothesis import given, settings
from hypothesis import strategies as st

import ddflow as dd
from ddflow import cbp

N = 5  # keys 0..N-1


# ---------------------------------------------------------------------- a stage and its model


def tally(key, state, flows, out):
    """Keeps a running total per key, drops it past 12 (state pruned by not writing it), and
    passes each value on to the next key, one less, as a message read in the next epoch."""
    total = state[0][1] if state else 0
    got = [v for _, v in flows["xs"]] + [v for _, v in flows["msg"]]
    extra = sum(v for (v,) in flows["bonus"])
    total += sum(got) + extra
    if total <= 12:
        out.state((key, total))
    out.write("seen", (key, total, len(flows["xs"]), len(flows["msg"]), len(flows["bonus"])))
    for v in got:
        if v > 1:
            out.write("msg", ((key + 1) % N, v - 1))


def tally_stage(xs, bonus, grouping):
    """The :func:`tally` stage reading ``xs`` (a collection or a ``cbp.Flow``) and ``bonus``
    (broadcast to the groups called)."""
    return cbp.stage(
        "tally",
        tally,
        key={"k": "int64"},
        inputs={"xs": xs, "bonus": cbp.Flow(bonus, route_by=cbp.ALL)},
        loopbacks={"msg": cbp.Loopback({"k": "int64", "v": "int64"})},
        outputs={
            "seen": {
                "k": "int64",
                "total": "int64",
                "n_xs": "int64",
                "n_msg": "int64",
                "n_b": "int64",
            }
        },
        state={"k": "int64", "total": "int64"},
        grouping=grouping,
        runnable=cbp.RunnableANY,
    )


class Out:
    """What translate writes, for the simulation."""

    def __init__(self):
        self.rows = collections.defaultdict(list)
        self.states = []

    def write(self, flow, record):
        self.rows[flow].append(record)

    def state(self, record):
        self.states.append(record)


def simulate(epochs, grouping):
    """The model, one epoch after another: the records each epoch writes to ``seen`` and the
    state after each epoch's run."""
    state: dict[int, list] = {}
    msgs: dict[int, list] = collections.defaultdict(list)
    seen: dict[int, list] = {}
    states: dict[int, dict] = {}
    e = 0
    while e < len(epochs) or any(msgs[x] for x in list(msgs) if x >= e):
        xs, bonus = epochs[e] if e < len(epochs) else ([], [])
        incoming = msgs.pop(e, [])
        if xs or incoming or bonus:  # (RunnableANY: any flow with an increment)
            groups: dict[int, dict[str, list]] = collections.defaultdict(
                lambda: {"xs": [], "msg": [], "bonus": []}
            )
            for r in xs:
                groups[r[0]]["xs"].append(r)
            for r in incoming:
                groups[r[0]]["msg"].append(r)
            if grouping == "outer":
                for k in state:  # (called for every key with state)
                    groups.setdefault(k, {"xs": [], "msg": [], "bonus": []})
            out = Out()
            for k, flows in groups.items():
                flows["bonus"] = [(b,) for b in bonus]
                tally(k, state.get(k, []), flows, out)
            for k in groups:
                state.pop(k, None)
            for r in out.states:
                state.setdefault(r[0], []).append(r)
            msgs[e + 1].extend(out.rows["msg"])
            seen[e] = out.rows["seen"]
        states[e] = {r for rs in state.values() for r in rs}
        e += 1
    return seen, states


EPOCH = st.tuples(
    st.lists(st.tuples(st.integers(0, N - 1), st.integers(1, 4)), max_size=6),
    st.lists(st.integers(1, 2), max_size=1),
)


@pytest.mark.parametrize(
    ("runtime", "grouping"),
    # (one grouping with processes: the routes are the same)
    [(r, g) for r in RUNTIMES for g in ("inner", "outer") if (r, g) != ((2, True), "outer")],
)
@settings(max_examples=8, deadline=None)
@given(epochs=st.lists(EPOCH, min_size=1, max_size=5), runs=st.lists(st.booleans(), max_size=5))
def test_a_stage_matches_the_model_at_every_epoch(runtime, grouping, epochs, runs):
    """Several epochs in flight (run() only now and then), messages going on after the input
    closes, state pruned, broadcasts to the groups called."""
    flow = new_flow(runtime)
    xs = flow.input("xs", schema={"k": "int64", "v": "int64"})
    bonus = flow.input("bonus", schema={"b": "int64"})
    stage = tally_stage(xs, bonus, grouping)
    seen = stage["seen"].output()
    kept = stage.state.output()
    with flow:
        for e, (rows, bs) in enumerate(epochs):
            xs.insert(rows)
            bonus.insert([(b,) for b in bs])
            xs.advance_to(e + 1)
            bonus.advance_to(e + 1)
            if e < len(runs) and runs[e]:
                flow.run()
        xs.close()
        bonus.close()
        flow.run()
        want_seen, want_state = simulate([(r, b) for r, b in epochs], grouping)
        got = collections.defaultdict(collections.Counter)
        for row in seen.changes().itertuples(index=False):
            assert row.diff > 0, "an output flow only inserts"
            got[row.time][tuple(row[:5])] += row.diff
        assert dict(got) == {e: collections.Counter(rows) for e, rows in want_seen.items() if rows}
        last = max(want_state)
        assert seen.complete_through >= last
        for e, want in want_state.items():
            snap = kept.snapshot(e)
            assert set(zip(snap["k"], snap["total"], strict=True)) == want, f"state at {e}"
            assert (snap["count"] == 1).all()


# ---------------------------------------------------------------------- the rules one by one


def test_writes_are_visible_in_the_next_epoch_only_and_state_not_written_is_gone():
    """A group's state in epoch e is what it wrote in e - 1: not its writes of e, nor another
    group's; a group called that writes nothing loses its state; one not called keeps it."""
    log = []

    def keep_once(key, state, flows, out):
        log.append((out.epoch, key, sorted(state)))
        for _, what in flows["xs"]:
            if what == "keep":
                out.state((key, f"e{out.epoch}"))
                out.state((key, f"e{out.epoch}"))  # (a state may hold several records)
                out.state(((key + 1) % 3, f"from{key}"))  # (or another group's)
            # "drop": writes nothing: its state is gone

    flow = dd.Dataflow()
    xs = flow.input("xs", schema={"k": "int64", "what": "str"})
    stage = cbp.stage(
        "keep_once",
        keep_once,
        key={"k": "int64"},
        inputs={"xs": xs},
        state={"k": "int64", "s": "str"},
        grouping="inner",
    )
    kept = stage.state.output()
    with flow:
        xs.insert([(0, "keep")])
        xs.advance_to(1)
        xs.insert([(0, "keep"), (2, "drop")])
        xs.advance_to(2)
        xs.insert([(1, "drop"), (0, "drop")])
        xs.advance_to(3)
        xs.insert([(2, "keep")])
        xs.close()
        flow.run()
        assert log == [
            (0, 0, []),
            (1, 0, [(0, "e0"), (0, "e0")]),
            (1, 2, []),
            (2, 1, [(1, "from0"), (1, "from0")]),
            (2, 0, [(0, "e1"), (0, "e1")]),
            (3, 2, []),
        ]
        # the state after each epoch: group 2 kept nothing it was not given
        assert sorted(map(tuple, kept.snapshot(2)[["k", "s"]].values.tolist())) == []
        assert sorted(map(tuple, kept.snapshot(3)[["k", "s"]].values.tolist())) == [
            (0, "from2"),
            (2, "e3"),
        ]


def counting_stage(xs, grouping, called):
    """A stage counting each key's records, noting each call (epoch, key) in ``called``."""

    def count(key, state, flows, out):
        called.append((out.epoch, key))
        out.state((key, (state[0][1] if state else 0) + len(flows["xs"])))

    return cbp.stage(
        "count",
        count,
        key={"k": "int64"},
        inputs={"xs": xs},
        state={"k": "int64", "n": "int64"},
        grouping=grouping,
    )


@pytest.mark.parametrize("runtime", ["embedded", (3, False)])
def test_inner_grouping_reads_only_the_keys_in_its_inputs(runtime):
    """Translate is called for the keys of the increment alone, and the state records read
    (the stage's ``metrics``) are those keys' records, whatever the state's size."""
    called = []
    flow = new_flow(runtime)
    xs = flow.input("xs", schema={"k": "int64"})
    stage = counting_stage(xs, "inner", called)
    metrics = stage.metrics.output()
    with flow:
        xs.insert([(k,) for k in range(1000)])
        xs.advance_to(1)
        xs.insert([(5,), (7,), (7,), (5000,)])
        xs.advance_to(2)
        flow.run()
        m = metrics.changes()
        by_epoch = m.groupby("time")[["calls", "state_read", "state_size"]].sum()
        assert by_epoch.loc[1].tolist() == [3, 2, 1000]  # keys 5, 7 and 5000; 5 and 7 known
        assert by_epoch.loc[0].tolist() == [1000, 0, 0]
        if runtime == "embedded":
            assert sorted(k for e, k in called if e == 1) == [5, 7, 5000]


def test_outer_grouping_calls_every_key_with_state():
    called = []
    flow = dd.Dataflow()
    xs = flow.input("xs", schema={"k": "int64"})
    stage = counting_stage(xs, "outer", called)
    metrics = stage.metrics.output()
    with flow:
        xs.insert([(k,) for k in range(50)])
        xs.advance_to(1)
        xs.insert([(3,), (60,)])
        xs.close()
        flow.run()
        assert collections.Counter(e for e, _ in called) == {0: 50, 1: 51}
        assert metrics.changes().set_index("time").loc[1, "state_read"] == 50


@pytest.mark.parametrize("runtime", ["embedded", (3, False), (2, True)])
def test_all_all_state_and_multicast_reach_exactly_their_groups(runtime):
    """``ALL`` reaches the groups called in the epoch; ``ALL_STATE`` the groups with state
    (which it calls); a multicast address the groups associated with it in the epoch that
    wrote the record."""
    got = collections.defaultdict(set)

    def fan(key, state, flows, out):
        for (tag,) in flows["everyone"]:
            out.write("log", (out.epoch, key, "all", tag))
        for (tag,) in flows["stateful"]:
            out.write("log", (out.epoch, key, "state", tag))
        for _, tag in flows["mc"]:
            out.write("log", (out.epoch, key, "mc", tag))
        for _, what in flows["xs"]:
            out.state((key,))
            if what.startswith("mc:"):
                members = [int(x) for x in what[3:].split(",")]
                for m in members:
                    out.associate(m, f"group-of-{key}")
                out.write("mc", (f"group-of-{key}", f"from{key}"))

    flow = new_flow(runtime)
    xs = flow.input("xs", schema={"k": "int64", "what": "str"})
    everyone = flow.input("everyone", schema={"tag": "str"})
    stateful = flow.input("stateful", schema={"tag": "str"})
    stage = cbp.stage(
        "fan",
        fan,
        key={"k": "int64"},
        inputs={
            "xs": xs,
            "everyone": cbp.Flow(everyone, route_by=cbp.ALL),
            "stateful": cbp.Flow(stateful, route_by=cbp.ALL_STATE),
        },
        loopbacks={
            "mc": cbp.Loopback({"addr": "str", "tag": "str"}, route_by=cbp.Multicast("addr"))
        },
        outputs={"log": {"epoch": "int64", "k": "int64", "kind": "str", "tag": "str"}},
        state={"k": "int64"},
        grouping="inner",
        runnable=cbp.RunnableANY,
    )
    log = stage["log"].output()
    with flow:
        # epoch 0: groups 1, 2, 3 get state; 1 multicasts to 10 and 2 (read in epoch 1)
        xs.insert([(1, "mc:10,2"), (2, "x"), (3, "x")])
        for i in (xs, everyone, stateful):
            i.advance_to(1)
        # epoch 1: group 4 called by its input, with a broadcast to all called groups
        xs.insert([(4, "x")])
        everyone.insert([("hello",)])
        for i in (xs, everyone, stateful):
            i.advance_to(2)
        # epoch 2: a broadcast to the groups with state only
        stateful.insert([("ping",)])
        for i in (xs, everyone, stateful):
            i.close()
        flow.run()
        for row in log.changes().itertuples(index=False):
            got[(row.epoch, row.kind)].add((row.k, row.tag))
    assert dict(got) == {
        (1, "mc"): {(10, "from1"), (2, "from1")},
        # the groups called in epoch 1: 4 (its input), 10 and 2 (the multicast)
        (1, "all"): {(4, "hello"), (10, "hello"), (2, "hello")},
        # the groups with state at epoch 2: 1 and 3 (epoch 0), 4 (epoch 1); 10 has none, and 2,
        # called in epoch 1 by the multicast, did not write its state again
        (2, "state"): {(1, "ping"), (3, "ping"), (4, "ping")},
    }


def test_several_keys_order_by_and_routes_by_function():
    """A RouteBy giving a list of keys sends the record to each group; OrderBy orders a group's
    records."""
    seen = []

    def both(key, state, flows, out):
        seen.append((key, [r for r in flows["edges"]]))

    flow = dd.Dataflow()
    edges = flow.input("edges", schema={"a": "int64", "b": "int64", "w": "int64"})
    cbp.stage(
        "both",
        both,
        key={"node": "int64"},
        inputs={"edges": cbp.Flow(edges, route_by=lambda r: [r[0], r[1]], order_by="w")},
        outputs={"none": {"x": "int64"}},
    )
    with flow:
        edges.insert([(1, 2, 5), (2, 3, 1), (1, 3, 3)])
        edges.close()
        flow.run()
    assert sorted(seen) == [
        (1, [(1, 3, 3), (1, 2, 5)]),
        (2, [(2, 3, 1), (1, 2, 5)]),
        (3, [(2, 3, 1), (1, 3, 3)]),
    ]


def test_frame_by_and_runnable_keep_two_flows_aligned():
    """Two flows framed by hour; Runnable reads both when their hours agree and the earlier one
    otherwise, so that an hour one flow skips does not shift the other."""
    pairs = []

    def join_hours(key, state, flows, out):
        pairs.append((out.epoch, sorted(flows["a"]), sorted(flows["b"])))

    def aligned(keys, state):
        a, b = keys["a"], keys["b"]
        if not a or not b:
            return [], [], state
        if a[0] == b[0]:
            return ["a", "b"], ["a", "b"], state
        first = "a" if a[0] < b[0] else "b"
        return [first], [first], state

    def hour(record, state):
        return record[1], state

    flow = dd.Dataflow()
    a = flow.input("a", schema={"x": "str", "hour": "int64"})
    b = flow.input("b", schema={"x": "str", "hour": "int64"})
    cbp.stage(
        "hours",
        join_hours,
        key={"k": "int64"},
        inputs={
            "a": cbp.Flow(a, route_by=lambda r: 0, frame_by=hour),
            "b": cbp.Flow(b, route_by=lambda r: 0, frame_by=hour),
        },
        runnable=aligned,
    )
    with flow:
        a.insert([("a1", 1), ("a2", 2), ("a3", 3)])
        b.insert([("b1", 1), ("b3", 3)])  # b skips hour 2
        a.advance_to(1)
        b.advance_to(1)
        a.insert([("a4", 4)])
        b.insert([("b4", 4)])
        a.close()
        b.close()
        flow.run()
    hours = [([h for _, h in ra] or [h for _, h in rb])[0] for _, ra, rb in pairs]
    assert hours == [1, 2, 3, 4]
    assert [(len(ra), len(rb)) for _, ra, rb in pairs] == [(1, 1), (1, 0), (1, 1), (1, 1)]


def test_flows_connect_to_differential_collections():
    """A stage reads a differential operator's result and its output feeds another."""

    def firsts(key, state, flows, out):
        if not state:
            out.write("new", (key,))
        out.state((key,))

    flow = dd.Dataflow()
    words = flow.input("words", schema={"w": "str"})
    lengths = words.map(lambda r: (len(r[0]),), schema={"n": "int64"})
    stage = cbp.stage(
        "firsts",
        firsts,
        key={"n": "int64"},
        inputs={"lengths": lengths},
        outputs={"new": {"n": "int64"}},
        state={"n": "int64"},
        grouping="inner",
    )
    total = stage["new"].group_by().agg(k=dd.count()).output()
    with flow:
        words.insert([("a",), ("bb",), ("cc",)])
        words.advance_to(1)
        words.insert([("ddd",), ("e",)])
        words.advance_to(2)
        flow.run()
        assert total.snapshot(0)["k"].tolist() == [2]
        assert total.snapshot(1)["k"].tolist() == [3]


# ---------------------------------------------------------------------- errors


def erring_flow(translate, runnable=cbp.RunnableALL, checkpoint=None):
    flow = dd.Dataflow(checkpoint=checkpoint) if checkpoint else dd.Dataflow()
    xs = flow.input("xs", schema={"k": "int64"})
    stage = cbp.stage(
        "bad",
        translate,
        key={"k": "int64"},
        inputs={"xs": xs},
        outputs={"out": {"k": "int64", "n": "int64"}},
        state={"k": "int64"},
        runnable=runnable,
    )
    return flow, xs, stage["out"].output()


def test_a_record_that_does_not_fit_names_the_stage_flow_record_and_line():
    def translate(key, state, flows, out):
        out.write("out", (key, "many"))  # the offending line

    flow, xs, _ = erring_flow(translate)
    with flow:
        xs.insert([(1,)])
        xs.advance_to(1)
        with pytest.raises(dd.CBPError) as e:
            flow.run()
    msg = str(e.value)
    assert "stage 'bad'" in msg and "'out'" in msg and "(1, 'many')" in msg
    assert "column 'n' is int64, got str" in msg
    site = e.value.site
    assert site is not None and site.function == "translate"
    with open(site.filename) as f:
        assert "the offending line" in f.read().splitlines()[site.lineno - 1]


def test_writing_to_a_flow_that_does_not_exist_is_named():
    def translate(key, state, flows, out):
        out.write("nowhere", (key, 1))

    flow, xs, _ = erring_flow(translate)
    with flow:
        xs.insert([(1,)])
        xs.advance_to(1)
        with pytest.raises(dd.CBPError, match=r"flow 'nowhere', which the stage does not have"):
            flow.run()


def test_runnable_naming_an_increment_that_does_not_exist_is_named():
    def translate(key, state, flows, out):
        pass

    def runnable(keys, state):
        return ["xs", "ys"], [], state

    flow, xs, _ = erring_flow(translate, runnable)
    with flow:
        xs.insert([(1,)])
        xs.advance_to(1)
        with pytest.raises(dd.CBPError, match=r"increment of flow 'ys'.*no such flow"):
            flow.run()


def test_a_retraction_on_a_flow_is_refused_at_the_remove_that_sent_it():
    """An input a stage reads as a flow: a remove that retracts a record of an earlier epoch
    is refused at its line, and nothing of it is accepted; a record inserted and removed in
    one epoch cancels."""

    def translate(key, state, flows, out):
        out.write("out", (key, len(flows["xs"])))

    flow, xs, out = erring_flow(translate)
    with flow:
        xs.insert([(1,)])
        xs.advance_to(1)
        flow.run()
        line = sys._getframe().f_lineno + 2
        with pytest.raises(dd.CBPError, match=r"remove on input 'xs' retracts \(1,\)") as info:
            xs.remove([(1,)])
        assert "in epoch 1" in str(info.value) and info.value.site.lineno == line
        xs.insert([(2,), (3,)])
        xs.remove([(3,)])  # (cancels the insertion of this epoch)
        xs.advance_to(2)
        flow.run()
        assert sorted(map(tuple, out.snapshot(epoch=1)[["k", "n"]].values.tolist())) == [
            (1, 1),
            (2, 1),
        ]


def test_a_retraction_on_a_derived_flow_is_refused_at_the_stage():
    """A flow that is not an input (here a selection of one) is checked as its increments
    arrive: the retraction is reported at the stage's line, naming the flow and epoch."""

    def translate(key, state, flows, out):
        pass

    flow = dd.Dataflow()
    xs = flow.input("xs", schema={"k": "int64"})
    line = sys._getframe().f_lineno + 1
    cbp.stage("bad", translate, key={"k": "int64"}, inputs={"xs": xs.select("k")})
    with flow:
        xs.insert([(1,)])
        xs.advance_to(1)
        flow.run()
        xs.remove([(1,)])
        xs.advance_to(2)
        with pytest.raises(dd.CBPError, match=r"retracted \(1,\) in epoch 1") as info:
            flow.run()
    assert f"test_cbp_model.py:{line}" in str(info.value)


def test_a_failing_translate_loses_nothing_accepted(tmp_path):
    """A translate that raises stops the dataflow naming it; the epochs complete before stay
    readable, and a flow restored from the last checkpoint completes the rest exactly once."""
    fail = {"at": 3}

    def translate(key, state, flows, out):
        if key == fail["at"]:
            raise ValueError("no threes")
        n = (state[0][0] if state else 0) + len(flows["xs"])
        out.write("out", (key, n))

    def make():
        return erring_flow(translate, checkpoint=str(tmp_path))

    flow, xs, out = make()
    with flow:
        xs.insert([(1,), (2,)])
        xs.advance_to(1)
        flow.run()
        flow.checkpoint()
        xs.insert([(3,), (1,)])
        xs.advance_to(2)
        with pytest.raises(dd.UserFunctionError, match=r"CBP stage 'bad'.*translate.*no threes"):
            flow.run()
        with pytest.raises(dd.DataflowFailedError):
            xs.insert([(4,)])
        assert out.snapshot(0)[["k", "n"]].values.tolist() == [[1, 1], [2, 1]]
    fail["at"] = None
    flow, xs, out = make()
    with flow:
        assert flow.restore() == 0
        xs.insert([(3,), (1,)])
        xs.advance_to(2)
        flow.run()
        changes = out.changes()
        assert sorted(changes[["k", "n", "time"]].values.tolist()) == [
            [1, 1, 0],
            [1, 1, 1],
            [2, 1, 0],
            [3, 1, 1],
        ]


def test_bad_stage_definitions_are_named_at_the_users_line():
    flow = dd.Dataflow()
    xs = flow.input("xs", schema={"k": "int64", "s": "str"})
    with pytest.raises(dd.GraphError, match=r"flow 'xs' routes by 's'.*its column 's' is str"):
        cbp.stage("s", print, key={"k": "int64"}, inputs={"xs": cbp.Flow(xs, route_by="s")})
    with pytest.raises(dd.GraphError, match=r"no column 'z'"):
        cbp.stage("s", print, key={"k": "int64"}, inputs={"xs": cbp.Flow(xs, route_by="z")})
    with pytest.raises(dd.GraphError, match=r"grouping is 'outer' or 'inner'"):
        cbp.stage("s", print, key={"k": "int64"}, inputs={"xs": xs}, grouping="left")
    with pytest.raises(dd.GraphError, match=r"two flows are named 'xs'"):
        cbp.stage(
            "s",
            print,
            key={"k": "int64"},
            inputs={"xs": xs},
            outputs={"xs": {"k": "int64"}},
        )
    with pytest.raises(dd.GraphError, match=r"a state record belongs to one group"):
        cbp.stage(
            "s",
            print,
            key={"k": "int64"},
            inputs={"xs": xs},
            state=cbp.State({"k": "int64"}, route_by=cbp.ALL),
        )
    with pytest.raises(dd.GraphError, match=r"not inside a loop"):
        xs.iterate(lambda v: cbp.stage("s", print, key={"k": "int64"}, inputs={"xs": v})["o"])


# ---------------------------------------------------------------------- checkpoints


@pytest.mark.parametrize("runtime", ["embedded", (2, True)])
def test_a_stage_restored_mid_work_gives_what_an_uninterrupted_run_gives(runtime, tmp_path):
    """A checkpoint taken while messages are on their way to the next epoch and a framed
    increment is still open; the restored flow goes on exactly as the first would have."""

    def hour(record, state):
        return record[1] // 10, state

    def build(directory):
        flow = new_flow(runtime, checkpoint=str(directory))
        xs = flow.input("xs", schema={"k": "int64", "v": "int64"})
        bonus = flow.input("bonus", schema={"b": "int64"})
        stage = tally_stage(cbp.Flow(xs, frame_by=hour), bonus, "inner")
        return flow, xs, bonus, stage["seen"].output(), stage.state.output()

    epochs = [[(1, 4), (2, 3)], [(1, 4), (3, 12)], [(4, 2), (0, 25)], [(2, 31)]]

    def feed(xs, bonus, flow, start, stop):
        for e in range(start, stop):
            xs.insert(epochs[e])
            bonus.insert([(1,)] if e % 2 else [])
            xs.advance_to(e + 1)
            bonus.advance_to(e + 1)
            flow.run()

    def finish(xs, bonus, flow, seen, kept):
        xs.close()
        bonus.close()
        flow.run()
        assert kept.complete_through >= 6  # (the messages go on after the input closed)
        changes = sorted(map(tuple, seen.changes().values.tolist()))
        snaps = [sorted(map(tuple, kept.snapshot(e).values.tolist())) for e in range(1, 7)]
        return changes, snaps

    flow, xs, bonus, seen, kept = build(tmp_path / "a")
    with flow:
        feed(xs, bonus, flow, 0, len(epochs))
        want = finish(xs, bonus, flow, seen, kept)

    flow, xs, bonus, seen, kept = build(tmp_path / "b")
    with flow:
        feed(xs, bonus, flow, 0, 2)
        flow.checkpoint()
        feed(xs, bonus, flow, 2, 3)  # (work the restored flow does again)
    flow, xs, bonus, seen, kept = build(tmp_path / "b")
    with flow:
        assert flow.restore() == 1
        feed(xs, bonus, flow, 2, len(epochs))
        got = finish(xs, bonus, flow, seen, kept)
    # (a restored output holds the checkpoint's epoch as its changes at that epoch)
    assert [c for c in got[0] if c[5] > 1] == [c for c in want[0] if c[5] > 1]
    assert got[1] == want[1]


def test_state_stays_on_its_worker_an_epochs_traffic_follows_the_increment():
    """With two worker processes, the bytes moved for an epoch of a few URLs are the same with
    ten times the state: state written for a group's own key stays on its worker (the paper's
    incremental shuffling) and is read there by index."""

    def count(url, state, flows, out):
        out.state((url, (state[0][1] if state else 0) + len(flows["urls"])))

    def traffic(n_state):
        flow = dd.Dataflow(workers=2, processes=True)
        urls = flow.input("urls", schema={"url": "str"})
        cbp.stage(
            "count",
            count,
            key={"url": "str"},
            inputs={"urls": urls},
            state={"url": "str", "n": "int64"},
            grouping="inner",
        )
        with flow:
            urls.insert([f"u{i}" for i in range(n_state)])
            urls.advance_to(1)
            flow.run()
            remote = flow.worker.shards[1:]  # (worker 0 is this process)
            before = sum(s.bytes_in + s.bytes_out for s in remote)
            for e in range(2, 6):  # a few epochs of ten URLs, half of them known
                urls.insert([f"u{i}" for i in range(5)] + [f"new{e}-{i}" for i in range(5)])
                urls.advance_to(e)
                flow.run()
            return (sum(s.bytes_in + s.bytes_out for s in remote) - before) / 4

    small, large = traffic(2_000), traffic(20_000)
    assert large < 1.3 * small, (small, large)
    assert large < 20_000 * 8, "an epoch moved as many bytes as the state has records"


@pytest.mark.parametrize("runtime", ["embedded", (3, False), (2, True)])
def test_a_cycle_of_two_stages_through_a_feedback(runtime):
    """Stage A counts what reaches a key, from its input and from stage B; B sends the key back
    to A until its count reaches 4: each trip takes an epoch."""

    def a(key, state, flows, out):
        total = (state[0][1] if state else 0) + len(flows["xs"]) + len(flows["back"])
        out.state((key, total))
        out.write("to_b", (key, total))

    def b(key, state, flows, out):
        for _, total in flows["from_a"]:
            if total < 4:
                out.write("back", (key,))

    flow = new_flow(runtime)
    xs = flow.input("xs", schema={"k": "int64"})
    back = cbp.Feedback(flow, {"k": "int64"})
    first = cbp.stage(
        "a",
        a,
        key={"k": "int64"},
        inputs={"xs": xs, "back": back.collection},
        outputs={"to_b": {"k": "int64", "total": "int64"}},
        state={"k": "int64", "total": "int64"},
        grouping="inner",
        runnable=cbp.RunnableANY,
    )
    second = cbp.stage(
        "b",
        b,
        key={"k": "int64"},
        inputs={"from_a": first["to_b"]},
        outputs={"back": {"k": "int64"}},
    )
    back.close(second["back"])
    totals = first["to_b"].output()
    with flow:
        xs.insert([(7,), (8,), (8,), (8,)])
        xs.close()
        flow.run()
        got = sorted(map(tuple, totals.changes()[["k", "total", "time"]].values.tolist()))
    assert got == [(7, 1, 0), (7, 2, 1), (7, 3, 2), (7, 4, 3), (8, 3, 0), (8, 4, 1)]


def test_a_feedback_never_closed_is_named():
    flow = dd.Dataflow()
    xs = flow.input("xs", schema={"k": "int64"})
    back = cbp.Feedback(flow, {"k": "int64"})  # the line named
    cbp.stage("a", print, key={"k": "int64"}, inputs={"xs": xs, "back": back.collection})
    xs.close()
    with pytest.raises(dd.GraphError, match="never closed") as e:
        flow.run()
    site = e.value.site
    with open(site.filename) as f:
        assert "the line named" in f.read().splitlines()[site.lineno - 1]
    other = dd.Dataflow()
    ys = other.input("ys", schema={"k": "int64"})
    with pytest.raises(dd.GraphError, match="cannot close with a collection of"):
        cbp.Feedback(other, {"k": "str"}).close(ys)
    with pytest.raises(dd.GraphError, match="of its dataflow"):
        cbp.Feedback(other, {"k": "int64"}).close(xs)

"""The reference interpreter (:func:`ddflow.testing.reference`) against brute force.

Every semantics test trusts the reference, so here the reference itself is checked against
computations that share nothing with it: pandas ``merge`` / ``groupby`` over weight columns for
the relational operators, NetworkX (descendants, components, Dijkstra) for loops, and plain
Python written in the test (``k`` applications of a body, loops nested by hand, the sequential
definition of a prioritized loop) for ``max_iterations``, nesting and priorities.

The reference is called on a dataflow that is built and never run::

    flow = dd.Dataflow(); xs = flow.input("xs", ...); out = xs.join(...).output()
    reference(flow, {"xs": Counter(...)})[out]

Inputs are multisets drawn by Hypothesis with negative multiplicities, zero entries, duplicate
records (summed by the oracles themselves: a record drawn twice is two rows of the pandas frame)
and null keys. Multiplicities are weight columns: a row ``(record, w)`` stands for ``w`` copies,
so a join's weight is the product of its sides' and a group's count is the sum of its weights.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import networkx as nx
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ddflow as dd
import ddflow.testing.loops as loops
from ddflow.testing import ReferenceError, reference

SETTINGS = settings(
    max_examples=60,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
LOOP_SETTINGS = settings(
    max_examples=25,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

Record = tuple[Any, ...]
Rows = list[tuple[Record, int]]  # (record, diff), a record possibly several times


# ---------------------------------------------------------------------- helpers


def multisets(record: st.SearchStrategy[Record], max_size: int = 10) -> st.SearchStrategy[Rows]:
    """``(record, diff)`` rows: duplicates, negative and zero diffs."""
    return st.lists(st.tuples(record, st.integers(-2, 3)), max_size=max_size)


def counter(rows: Rows) -> Counter:
    """The rows as the input collection the reference is given (zero entries kept: the
    reference must drop them itself)."""
    c: Counter = Counter()
    for r, m in rows:
        c[r] += m
    return c


def positive(rows: Rows) -> set[Record]:
    """The records whose multiplicity is positive (what ``distinct`` keeps)."""
    return {r for r, m in counter(rows).items() if m > 0}


def frame(rows: Rows, names: Sequence[str]) -> pd.DataFrame:
    """The rows as a pandas frame with nullable integer columns and a weight column ``w``."""
    df = pd.DataFrame([(*r, m) for r, m in rows], columns=[*names, "w"])
    return df.astype({n: "Int64" for n in names} | {"w": "int64"})


def py(v: Any) -> Any:
    """A pandas/NumPy scalar as the Python value the reference holds (``pd.NA``: ``None``)."""
    if v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v)):
        return None
    return v.item() if hasattr(v, "item") else v


def weighted(df: pd.DataFrame, names: Sequence[str], weight: str = "w") -> Counter:
    """Sum the weights of equal records (nulls included as values); drop zero sums."""
    out: Counter = Counter()
    for row in df[[*names, weight]].itertuples(index=False, name=None):
        out[tuple(py(v) for v in row[:-1])] += int(row[-1])
    return Counter({r: m for r, m in out.items() if m != 0})


def build(
    schemas: dict[str, dict[str, str]],
    query: Callable[..., dd.Collection | Sequence[dd.Collection]],
    inputs: dict[str, Counter],
) -> list[Counter]:
    """Build ``query`` over fresh inputs (never run) and evaluate it with the reference."""
    flow = dd.Dataflow()
    handles = {name: flow.input(name, schema=s) for name, s in schemas.items()}
    got = query(**handles)
    outs = [c.output() for c in ([got] if isinstance(got, dd.Collection) else got)]
    values = reference(flow, inputs)
    return [values[o] for o in outs]


# ---------------------------------------------------------------------- relational operators

keys = st.one_of(st.none(), st.integers(0, 3))
values = st.integers(-3, 3)
LEFT = {"k": "int64?", "a": "int64"}
RIGHT = {"k": "int64?", "b": "int64"}
left_rows = multisets(st.tuples(keys, values))
right_rows = multisets(st.tuples(keys, values))


def pandas_join(xs: Rows, ys: Rows) -> Counter:
    """Inner join on ``k``; a null key matches nothing (SQL), whereas ``pd.merge`` would
    match nulls with each other: they are dropped first."""
    left, right = frame(xs, ["k", "a"]), frame(ys, ["k", "b"])
    left, right = left[left["k"].notna()], right[right["k"].notna()]
    m = left.merge(right, on="k", suffixes=("_x", "_y"))
    m["w"] = m["w_x"] * m["w_y"]
    return weighted(m, ["k", "a", "b"])


def pandas_present_keys(ys: Rows) -> set[Any]:
    """The non-null keys whose total multiplicity in ``ys`` is positive."""
    right = frame(ys, ["k", "b"])
    totals = right.groupby("k", dropna=True)["w"].sum()
    return {py(k) for k, w in totals.items() if w > 0}


@SETTINGS
@given(xs=left_rows, ys=right_rows)
def test_join_semijoin_antijoin_equal_pandas_merge(xs, ys):
    joined, semi, anti = build(
        {"xs": LEFT, "ys": RIGHT},
        lambda xs, ys: [xs.join(ys, on="k"), xs.semijoin(ys, on="k"), xs.antijoin(ys, on="k")],
        {"xs": counter(xs), "ys": counter(ys)},
    )
    assert joined == pandas_join(xs, ys)
    left = frame(xs, ["k", "a"])
    present = pandas_present_keys(ys)
    in_keys = left["k"].map(lambda k: py(k) in present).astype(bool)
    assert semi == weighted(left[in_keys], ["k", "a"])
    assert anti == weighted(left[~in_keys], ["k", "a"])


@SETTINGS
@given(xs=left_rows)
def test_group_by_agg_equals_pandas_groupby(xs):
    (got,) = build(
        {"xs": LEFT},
        lambda xs: xs.group_by("k").agg(
            n=dd.count(), s=dd.sum("a"), lo=dd.min("a"), hi=dd.max("a"), avg=dd.mean("a")
        ),
        {"xs": counter(xs)},
    )
    df = frame(xs, ["k", "a"])
    df["aw"] = df["a"].astype("int64") * df["w"]
    expected: Counter = Counter()
    # null keys form one group (a group-by key, unlike a join key, is a value)
    for k, g in df.groupby("k", dropna=False):
        count = int(g["w"].sum())
        if count <= 0:  # a group with no positive count has no row
            continue
        total = int(g["aw"].sum())
        per_value = g.groupby("a")["w"].sum()  # min/max: over values with positive weight
        present = [py(v) for v, w in per_value.items() if w > 0]
        key = py(k[0] if isinstance(k, tuple) else k)
        expected[
            (
                key,
                count,
                total,
                min(present, default=None),
                max(present, default=None),
                total / count,
            )
        ] += 1
    assert got == expected


THRESHOLDS: dict[str, Callable[[int], int]] = {
    "square": lambda m: m * m,
    "positive": lambda m: max(m, 0),
    "at_least_two": lambda m: int(m >= 2),
    "negated": lambda m: -m,
}


@SETTINGS
@given(xs=left_rows, ys=left_rows, fn=st.sampled_from(sorted(THRESHOLDS)))
def test_distinct_threshold_concat_negate_equal_pandas(xs, ys, fn):
    f = THRESHOLDS[fn]
    distinct, thresholded, concat, negated = build(
        {"xs": LEFT, "ys": LEFT},
        lambda xs, ys: [xs.distinct(), xs.threshold(f), xs.concat(ys), xs.negate()],
        {"xs": counter(xs), "ys": counter(ys)},
    )
    left = frame(xs, ["k", "a"])
    totals = left.groupby(["k", "a"], dropna=False)["w"].sum().reset_index()
    ones = totals[totals["w"] > 0].assign(w=1)
    assert distinct == weighted(ones, ["k", "a"])
    # fn of each record's multiplicity (records of multiplicity 0 are absent: fn(0) == 0)
    assert thresholded == weighted(
        totals[totals["w"] != 0].assign(w=totals["w"].map(f)), ["k", "a"]
    )
    both = pd.concat([left, frame(ys, ["k", "a"])])
    assert concat == weighted(both, ["k", "a"])
    assert negated == weighted(left.assign(w=-left["w"]), ["k", "a"])


# ---------------------------------------------------------------------- loops against NetworkX

nodes = st.integers(0, 6)
EDGES = {"src": "int64", "dst": "int64"}
ROOTS = {"n": "int64"}
edge_rows = multisets(st.tuples(nodes, nodes), max_size=14)
root_rows = multisets(st.tuples(nodes), max_size=4)


def digraph(edges: Iterable[Record]) -> nx.DiGraph:
    g = nx.DiGraph()
    g.add_edges_from((e[0], e[1]) for e in edges)
    return g


def step(x: dd.Collection, e: dd.Collection) -> dd.Collection:
    """One reachability step: ``x`` and the heads of the edges leaving it, as a set."""
    return x.concat(x.join(e, left_on="n", right_on="src").select(n="dst")).distinct()


def reach(roots: dd.Collection, edges: dd.Collection, **loop: Any) -> dd.Collection:
    e = edges.distinct()
    return roots.distinct().iterate(lambda x: step(x, e), **loop)


def closure(edges: dd.Collection) -> dd.Collection:
    e = edges.distinct()

    def body(p: dd.Collection) -> dd.Collection:
        longer = p.join(e, left_on="dst", right_on="src").select("src", dst="dst_right")
        return longer.concat(e).distinct()

    return e.iterate(body)


def nx_reach(roots: set[Record], edges: set[Record]) -> Counter:
    g = digraph(edges)
    out = {r for (r,) in roots}
    for (r,) in roots:
        if r in g:
            out |= nx.descendants(g, r)
    return Counter({(n,): 1 for n in out})


def nx_closure(edges: set[Record]) -> Counter:
    """``(u, v)`` for every path of one edge or more (``(u, u)`` for ``u`` on a cycle)."""
    g = digraph(edges)
    out = set()
    for u in g:
        for s in g.successors(u):
            out |= {(u, v) for v in nx.descendants(g, s) | {s}}
    return Counter(dict.fromkeys(out, 1))


@LOOP_SETTINGS
@given(roots=root_rows, edges=edge_rows)
def test_iterate_reachability_and_closure_equal_networkx(roots, edges):
    """Also from an empty loop input, the roots entering the body from outside: they are
    there at the loop's least time, where the body is evaluated on the empty variable."""

    def query(roots, edges):
        e, r = edges.distinct(), roots.distinct()
        nothing = r.filter(dd.col("n") < 0)
        return [
            reach(roots, edges),
            closure(edges),
            nothing.iterate(lambda x: step(x.concat(r), e)),
        ]

    got_reach, got_closure, from_nothing = build(
        {"roots": ROOTS, "edges": EDGES}, query, {"roots": counter(roots), "edges": counter(edges)}
    )
    assert got_reach == nx_reach(positive(roots), positive(edges))
    assert got_closure == nx_closure(positive(edges))
    assert from_nothing == got_reach


def apply_times(f: Callable[[Counter], Counter], x: Counter, k: int) -> Counter:
    """``f`` applied ``k`` times (fewer if a fixed point comes first: the same result)."""
    for _ in range(k):
        x = _clean(f(x))
    return x


def _clean(c: Counter) -> Counter:
    return Counter({r: m for r, m in c.items() if m != 0})


def hand_step(x: Counter, edges: set[Record]) -> Counter:
    """:func:`step` by hand."""
    heads = Counter()
    for (n,), m in x.items():
        heads[(n,)] += m
        for s, d in edges:
            if s == n:
                heads[(d,)] += m
    return Counter({r: 1 for r, m in heads.items() if m > 0})


def hand_shift(x: Counter, roots: Counter) -> Counter:
    """``x.select(n=n + 1).concat(roots)`` by hand: a body that never converges."""
    out = Counter()
    for (n,), m in x.items():
        out[(n + 1,)] += m
    for r, m in roots.items():
        out[r] += m
    return _clean(out)


@LOOP_SETTINGS
@given(roots=root_rows, edges=edge_rows, k=st.integers(1, 4))
def test_max_iterations_is_k_applications_of_the_body(roots, edges, k):
    def query(roots, edges):
        return [
            reach(roots, edges, max_iterations=k),
            roots.iterate(lambda x: x.select(n=dd.col("n") + 1).concat(roots), max_iterations=k),
        ]

    got_reach, got_shift = build(
        {"roots": ROOTS, "edges": EDGES}, query, {"roots": counter(roots), "edges": counter(edges)}
    )
    es = positive(edges)
    start = Counter(dict.fromkeys(positive(roots), 1))
    assert got_reach == apply_times(lambda x: hand_step(x, es), start, k)
    r = _clean(counter(roots))  # a multiset: negative multiplicities flow through the loop
    assert got_shift == apply_times(lambda x: hand_shift(x, r), r, k)


def label_propagation(labels: dd.Collection, sym: dd.Collection) -> Callable:
    def body(lab: dd.Collection) -> dd.Collection:
        sent = lab.join(sym, left_on="node", right_on="src").select(node="dst", label="label")
        return sent.concat(lab).group_by("node").agg(label=dd.min("label"))

    return body


def nx_components(edges: set[Record]) -> Counter:
    g = digraph(edges).to_undirected()
    return Counter({(v, min(c)): 1 for c in nx.connected_components(g) for v in c})


@LOOP_SETTINGS
@given(edges=edge_rows, priority=st.sampled_from(["label", "label % 3", "6 - label"]))
def test_prioritized_connected_components_equal_networkx(edges, priority):
    prio = {
        "label": dd.col("label"),
        "label % 3": dd.col("label") % 3,
        "6 - label": 6 - dd.col("label"),
    }[priority]

    def query(edges):
        e = edges.distinct()
        sym = e.concat(e.select(src="dst", dst="src")).distinct()
        labels = sym.select(node="src", label="src").distinct()
        body = label_propagation(labels, sym)
        return [labels.iterate(body), labels.prioritized_iterate(body, priority=prio)]

    plain, prioritized = build({"edges": EDGES}, query, {"edges": counter(edges)})
    expected = nx_components(positive(edges))
    assert plain == expected
    assert prioritized == expected


WEIGHTED = {"src": "int64", "dst": "int64", "w": "int64"}
SOURCES = {"n": "int64", "d": "int64"}


def dijkstra(edges: set[Record], sources: dict[int, int]) -> Counter:
    """Least ``offset(s) + path weight`` over sources: Dijkstra from a super-source joined
    to each source by an edge of weight ``offset(s)`` (parallel edges: the least weight)."""
    g = nx.DiGraph()
    for s, d, w in edges:
        if not g.has_edge(s, d) or g[s][d]["weight"] > w:
            g.add_edge(s, d, weight=w)
    for s, off in sources.items():
        g.add_edge("root", s, weight=off)
    dist = nx.single_source_dijkstra_path_length(g, "root") if sources else {}
    return Counter({(v, d): 1 for v, d in dist.items() if v != "root"})


@LOOP_SETTINGS
@given(
    edges=multisets(st.tuples(nodes, nodes, st.integers(1, 5)), max_size=14),
    sources=multisets(st.tuples(nodes, st.integers(0, 8)), max_size=4),
    by_bucket=st.booleans(),
)
def test_prioritized_shortest_paths_equal_dijkstra(edges, sources, by_bucket):
    """Bellman-Ford with the sources entering in order of their offset (priority = the
    distance itself, or its power-of-two bucket)."""

    def query(edges, sources):
        e = edges.distinct()
        start = sources.distinct().group_by("n").agg(d=dd.min("d"))

        def body(x: dd.Collection) -> dd.Collection:
            sent = x.join(e, left_on="n", right_on="src").select(
                n="dst", d=dd.col("d") + dd.col("w")
            )
            return sent.concat(x).group_by("n").agg(d=dd.min("d"))

        priority = dd.col("d") // 4 if by_bucket else dd.col("d")
        return [start.prioritized_iterate(body, priority=priority), start.iterate(body)]

    prioritized, plain = build(
        {"edges": WEIGHTED, "sources": SOURCES},
        query,
        {"edges": counter(edges), "sources": counter(sources)},
    )
    offsets: dict[int, int] = {}
    for n, d in positive(sources):
        offsets[n] = min(offsets.get(n, d), d)
    expected = dijkstra(positive(edges), offsets)
    assert prioritized == expected
    assert plain == expected


# ---------------------------------------------------------------------- priorities by hand


def fix(f: Callable[[Counter], Counter], x: Counter) -> Counter:
    """Iterate ``x <- f(x)`` until ``f(x) == x``."""
    for _ in range(1000):
        y = _clean(f(x))
        if y == x:
            return y
        x = y
    raise AssertionError("no fixed point")


def sequential_priorities(
    f: Callable[[Counter], Counter], source: Counter, priority: Callable[[Record], int]
) -> Counter:
    """differential-dataflow-cidr2013 §4.1-4.2: starting from the empty collection, add the
    records of each priority in turn (priority 0 always comes first) and iterate to the fixed
    point, which is the start of the next priority."""
    x: Counter = Counter()
    for p in sorted({priority(r) for r in source} | {0}):
        for r, m in source.items():
            if priority(r) == p:
                x[r] += m
        x = fix(f, _clean(x))
    return x


def claim_body(x: Counter, edges: set[Record]) -> Counter:
    """By hand: ``x`` plus, for every node with no label in ``x``, the least label offered
    along an edge (so the result depends on when each label enters)."""
    labelled = Counter()
    for (n, _), m in x.items():
        labelled[n] += m
    offers = Counter()
    for (u, label), m in x.items():
        for s, d in edges:
            if s == u and labelled[d] <= 0:
                offers[(d, label)] += m
    claimed = Counter()
    by_node: dict[int, list[int]] = {}
    totals = Counter()
    for (n, label), m in offers.items():
        totals[n] += m
        if m > 0:
            by_node.setdefault(n, []).append(label)
    for n, labels in by_node.items():
        if totals[n] > 0:
            claimed[(n, min(labels))] += 1
    return _clean(_sum(x, claimed))


def _sum(a: Counter, b: Counter) -> Counter:
    out = Counter(a)
    for r, m in b.items():
        out[r] += m
    return out


@LOOP_SETTINGS
@given(
    edges=edge_rows,
    seeds=multisets(st.tuples(nodes, st.integers(0, 4)), max_size=5),
    fixed=multisets(st.tuples(nodes, st.integers(0, 9)), max_size=2),
)
def test_prioritized_iterate_introduces_priorities_in_turn(edges, seeds, fixed):
    """A body whose fixed point depends on when each record enters (a label claims the
    unlabelled nodes it reaches first): the reference equals the sequential definition. The
    body also adds ``fixed`` labels from outside the loop, which are there from the least
    time ``(0, 0)``, before the seeds of any priority above 0 (in the sequential definition:
    priority 0 runs even when no seed has it)."""

    def query(edges, seeds, fixed):
        e, f = edges.distinct(), fixed.distinct()

        def body(x: dd.Collection) -> dd.Collection:
            x = x.concat(f).distinct()
            offers = x.join(e, left_on="node", right_on="src").select(node="dst", label="label")
            new = offers.antijoin(x, on="node")
            return x.concat(new.group_by("node").agg(label=dd.min("label")))

        return seeds.prioritized_iterate(body, priority=dd.col("label"))

    seed_schema = {"node": "int64", "label": "int64"}
    (got,) = build(
        {"edges": EDGES, "seeds": seed_schema, "fixed": seed_schema},
        query,
        {"edges": counter(edges), "seeds": counter(seeds), "fixed": counter(fixed)},
    )
    es = positive(edges)
    fs = Counter(dict.fromkeys(positive(fixed), 1))

    def body(x: Counter) -> Counter:
        return claim_body(Counter({r: 1 for r, m in _sum(x, fs).items() if m > 0}), es)

    assert got == sequential_priorities(body, _clean(counter(seeds)), lambda r: r[1])


@LOOP_SETTINGS
@given(
    xs=multisets(st.tuples(st.integers(0, 9), st.integers(0, 3)), max_size=6), k=st.integers(1, 4)
)
def test_prioritized_max_iterations_applies_a_linear_body_k_times(xs, k):
    """With ``max_iterations=k`` each priority runs at most ``k`` rounds and what it leaves
    undone is not resumed; for a linear body (here ``n -> n + 1``, which never converges)
    every record then gets exactly ``k`` applications, whatever its priority."""
    (got,) = build(
        {"xs": {"n": "int64", "p": "int64"}},
        lambda xs: xs.prioritized_iterate(
            lambda x: x.select(n=dd.col("n") + 1, p="p"), priority=dd.col("p"), max_iterations=k
        ),
        {"xs": counter(xs)},
    )
    expected = Counter()
    for (n, p), m in counter(xs).items():
        expected[(n + k, p)] += m
    assert got == _clean(expected)


# ---------------------------------------------------------------------- nested loops by hand

ABC = {"roots": ROOTS, "a": EDGES, "b": EDGES, "c": EDGES}


def hand_step_over(x: Counter, edges: set[Record], *also: Counter) -> Counter:
    out = _clean(Counter(x))
    for extra in also:
        out = _sum(out, extra)
    return hand_step(out, edges)


@LOOP_SETTINGS
@given(roots=root_rows, a=edge_rows, b=edge_rows, c=edge_rows)
def test_loops_nested_two_and_three_deep_equal_hand_computation(roots, a, b, c):
    """Two deep: each outer round closes the set under ``a`` (the inner loop, which reads the
    outer variable), then steps along ``b``. Three deep: a third loop inside, closing under
    ``a`` inside a loop closing under ``b`` inside a loop stepping along ``c``. The hand
    computation nests Python loops the same way; NetworkX gives the same sets."""

    def query(roots, a, b, c):
        ea, eb, ec = a.distinct(), b.distinct(), c.distinct()

        def two(x: dd.Collection) -> dd.Collection:
            closed = x.iterate(lambda y: step(y.concat(x), ea))
            return step(closed, eb)

        def three(x: dd.Collection) -> dd.Collection:
            def middle(y: dd.Collection) -> dd.Collection:
                closed = y.iterate(lambda z: step(z.concat(y, x), ea))
                return step(closed, eb)

            return step(x.iterate(middle), ec)

        r = roots.distinct()
        return [r.iterate(two), r.iterate(three)]

    got_two, got_three = build(
        ABC, query, {"roots": counter(roots), "a": counter(a), "b": counter(b), "c": counter(c)}
    )
    ea, eb, ec = positive(a), positive(b), positive(c)
    start = Counter(dict.fromkeys(positive(roots), 1))

    def hand_two(x: Counter) -> Counter:
        closed = fix(lambda y: hand_step_over(y, ea, x), x)
        return hand_step(closed, eb)

    def hand_three(x: Counter) -> Counter:
        def middle(y: Counter) -> Counter:
            closed = fix(lambda z: hand_step_over(z, ea, y, x), y)
            return hand_step(closed, eb)

        return hand_step(fix(middle, x), ec)

    assert got_two == fix(hand_two, start)
    assert got_two == nx_reach(positive(roots), ea | eb)
    assert got_three == fix(hand_three, start)
    assert got_three == nx_reach(positive(roots), ea | eb | ec)


@LOOP_SETTINGS
@given(
    xs=multisets(st.tuples(st.integers(0, 5)), max_size=4),
    k1=st.integers(1, 3),
    k2=st.integers(1, 3),
    k3=st.integers(1, 3),
)
def test_nested_max_iterations_with_outer_variables_equal_hand_computation(xs, k1, k2, k3):
    """Loops three deep that never converge (only ``max_iterations`` stops them), each body
    adding the enclosing loops' variables: the multiplicities at every level depend on the
    exact number of rounds of each loop and on the outer variable's value at each outer
    round (the inner loops are evaluated afresh for every outer round)."""

    def query(xs):
        def outer(x: dd.Collection) -> dd.Collection:
            def middle(y: dd.Collection) -> dd.Collection:
                inner = y.iterate(
                    lambda z: z.select(n=dd.col("n") + 1).concat(x), max_iterations=k3
                )
                return inner.concat(y.negate()).concat(x)

            return x.iterate(middle, max_iterations=k2).select(n=dd.col("n") * 2)

        return [xs.iterate(outer, max_iterations=k1)]

    (got,) = build({"xs": {"n": "int64"}}, query, {"xs": counter(xs)})

    def bump(c: Counter, by: int = 1) -> Counter:
        out = Counter()
        for (n,), m in c.items():
            out[(n + by,)] += m
        return out

    def outer(x: Counter) -> Counter:
        def middle(y: Counter) -> Counter:
            inner = apply_times(lambda z: _sum(bump(z), x), y, k3)
            return _clean(_sum(_sum(inner, Counter({r: -m for r, m in y.items()})), x))

        out = Counter()
        for (n,), m in apply_times(middle, x, k2).items():
            out[(n * 2,)] += m
        return _clean(out)

    assert got == apply_times(outer, _clean(counter(xs)), k1)


@LOOP_SETTINGS
@given(edges=edge_rows)
def test_prioritized_loop_inside_an_iterate_equals_networkx_scc(edges):
    """The intra-SCC edges by trimming (naiad-tech-report Figure 8): an outer ``iterate`` over
    the edge set, each round keeping the edges whose endpoints have equal reachability labels
    (forward, then backward), the labels computed by a ``prioritized_iterate`` inside it."""

    def labels_of(e: dd.Collection) -> dd.Collection:
        nodes = e.select(node="src").concat(e.select(node="dst")).distinct()
        start = nodes.select("node", label="node")

        def body(lab: dd.Collection) -> dd.Collection:
            sent = lab.join(e, left_on="node", right_on="src").select(node="dst", label="label")
            return sent.concat(lab).group_by("node").agg(label=dd.min("label"))

        return start.prioritized_iterate(body, priority=dd.col("label") % 3)

    def trim(e: dd.Collection) -> dd.Collection:
        lab = labels_of(e)
        both = e.join(lab.select(src="node", ls="label"), on="src").join(
            lab.select(dst="node", ld="label"), on="dst"
        )
        return both.filter(dd.col("ls") == dd.col("ld")).select(src="dst", dst="src")

    (got,) = build(
        {"edges": EDGES},
        lambda edges: edges.distinct().iterate(lambda y: trim(trim(y)).distinct()),
        {"edges": counter(edges)},
    )
    es = positive(edges)
    g = digraph(es)
    component = {v: i for i, c in enumerate(nx.strongly_connected_components(g)) for v in c}
    assert got == Counter({(u, v): 1 for u, v in es if component[u] == component[v]})


# ---------------------------------------------------------------------- non-convergence


def test_a_loop_that_does_not_converge_raises(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(loops, "MAX_REFERENCE_ITERATIONS", 40)
    with pytest.raises(ReferenceError, match="did not converge"):
        build(
            {"xs": {"n": "int64"}},
            lambda xs: xs.iterate(lambda x: x.select(n=dd.col("n") + 1)),
            {"xs": Counter({(0,): 1})},
        )

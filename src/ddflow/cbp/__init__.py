"""Stateful bulk processing (CBP, cbp-socc2010) on ddflow's engine.

A CBP program is a graph of *stages*. Each epoch a stage calls its ``translate`` function per
group: with the group's key, its state records and its records on each input flow, and
translate writes records to the stage's output flows, to its loopback flows and to its state.
What translate writes to state in epoch ``e`` is its group's state in ``e + 1``; a state record
not written again is dropped. A loopback flow's records written in ``e`` are read in ``e + 1``.

Stages are operators of the dataflow: an input flow is any ddflow collection (an input, a
Spark source, a differential operator's result, another stage's output), an output flow is a
collection whose changes at epoch ``e`` are the records written in ``e`` (insertions), and the
stage runs embedded, with worker processes and on Spark alike, its state partitioned by key
over the workers and kept there.

The URL count of the paper's Figure 3::

    import ddflow as dd
    from ddflow import cbp

    def url_count(url, state, flows, out):
        count = len(flows["urls"]) + (state[0][1] if state else 0)
        out.state((url, count))
        out.write("updates", (url, count))

    flow = dd.Dataflow()
    urls = flow.input("urls", schema={"url": "str"})
    counts = cbp.stage(
        "url_count", url_count,
        key={"url": "str"},
        inputs={"urls": urls},
        outputs={"updates": {"url": "str", "count": "int64"}},
        state={"url": "str", "count": "int64"},
        grouping="inner",
    )
    updates = counts["updates"].output()

The model's parts (cbp-socc2010 Table 1), with their defaults:

* **translate** ``(key, state, flows, out)``: ``state`` is the group's state records (a list
  of tuples in the state schema's column order), ``flows`` maps every input and loopback flow's
  name to the group's records in this epoch's increment (tuples; an empty tuple where the flow
  has none or is not read); ``out.write(flow, record)``, ``out.state(record)``,
  ``out.associate(key, address)``, ``out.epoch``.
* **Grouping**: ``"outer"`` calls translate for every key with state or input;
  ``"inner"`` only for keys in a non-state input, reading only those keys' state, by index.
* **RouteBy** per flow (``route_by=``): a column name or a list of them (one key); a function
  of the record giving a key, a list of keys (the record reaches each group), :data:`ALL`
  (every group called in the epoch), :data:`ALL_STATE` (every group with state, which is then
  called) or a :class:`Multicast` address; :data:`RouteByRcd` (the record is its own key).
  The default is the stage key's columns; a flow without them names its RouteBy.
* **OrderBy** per flow (``order_by=``): column names or a function of a record, the order of a
  group's records; :data:`OrderByAny` (the default) leaves it to the system.
* **FrameBy** per flow (``frame_by=``, with ``frame_state=``): a function ``(record, state)
  -> (framing key, state)`` cutting the flow into increments: consecutive records with one
  framing key (an int) are an increment, complete once a record with another key follows or the
  flow ends. The records are framed in epoch order, and in an epoch in their sort order.
  :data:`FrameByPrior` (the default): an increment is what the flow received in an epoch, its
  framing key the epoch.
* **Cycles of stages**: a stage's loopback flows return to itself; a :class:`Feedback`
  carries a later stage's output back to an earlier stage's input one epoch later.
* **Runnable** (``runnable=``, with ``runnable_state=``): a function
  ``(framing_keys, state) -> (reads, removes, state)`` given, for every input and loopback
  flow, the framing keys of its complete increments not removed yet; the stage runs if
  ``reads`` names a flow, translate then sees the first increment of each flow in ``reads``,
  and the first increment of each flow in ``removes`` is dropped (a flow read and not removed
  is read again next time: a lookup table). :data:`RunnableALL` (the default) runs when every
  flow has an increment and reads and removes one of each; :data:`RunnableANY` runs when any
  has one and reads and removes one of each that has.

A stage runs at most once per epoch: at an epoch in which one of its flows received records,
and again at the next epoch while increments it did not read are left and the last run
removed one. An epoch with work left runs when the dataflow reaches it: feed the inputs
(``advance_to``) or close them, and the stage goes on through the epochs it needs.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ddflow.api.collection import Collection, _align
from ddflow.api.inputs import InputCollection
from ddflow.differential.operators.cbp_flows import (
    ALL,
    ALL_STATE,
    FlowSpec,
    FrameByPrior,
    Multicast,
    OrderByAny,
    Route,
    RouteByRcd,
    StageSpec,
)
from ddflow.errors import CallSite, GraphError, call_site
from ddflow.schema import Schema

__all__ = [
    "ALL",
    "ALL_STATE",
    "Feedback",
    "Flow",
    "FrameByPrior",
    "Loopback",
    "Multicast",
    "OrderByAny",
    "RouteByRcd",
    "RunnableALL",
    "RunnableANY",
    "Stage",
    "State",
    "stage",
]


def RunnableALL(framing_keys: Mapping[str, list[int]], state: Any) -> tuple[Any, Any, Any]:
    """Runnable when every flow has an increment: read and remove one of each."""
    if all(framing_keys.values()):
        names = list(framing_keys)
        return names, names, state
    return [], [], state


def RunnableANY(framing_keys: Mapping[str, list[int]], state: Any) -> tuple[Any, Any, Any]:
    """Runnable when any flow has an increment: read and remove one of each that has."""
    names = [n for n, keys in framing_keys.items() if keys]
    return names, names, state


@dataclass(frozen=True)
class Flow:
    """An input flow: a collection with its RouteBy, OrderBy and FrameBy (see the module).

    * ``collection``: the records the flow carries (insertions only);
    * ``route_by``: which groups a record reaches (default: the stage key's columns, which the
      collection must have; a column, a list of them, a function of the record,
      :data:`ALL`, :data:`ALL_STATE`, :data:`RouteByRcd`);
    * ``order_by``: the order of a group's records (columns or a function; default:
      :data:`OrderByAny`);
    * ``frame_by``, ``frame_state``: ``frame_by(record, state) -> (increment, state)`` cuts
      the flow into increments that Runnable chooses from, from ``frame_state``.
    """

    collection: Collection
    route_by: Any = None
    order_by: Any = None
    frame_by: Callable[[tuple[Any, ...], Any], tuple[int, Any]] | None = None
    frame_state: Any = None


@dataclass(frozen=True)
class Loopback:
    """A loopback flow: written by the stage's translate in one epoch, read by it in the
    next (messages between groups: to a neighbour in a graph, to a multicast address).

    ``schema`` is its records' columns and types; ``route_by`` and ``order_by`` as
    :class:`Flow`'s (a :class:`Multicast` routes to the groups associated with an address).
    """

    schema: Mapping[str, Any] | Schema
    route_by: Any = None
    order_by: Any = None


@dataclass(frozen=True)
class State:
    """The stage's state: its records' ``schema``, ``route_by`` (the default: the key's
    columns; a state record belongs to one group) and ``order_by`` (as :class:`Flow`'s)."""

    schema: Mapping[str, Any] | Schema
    route_by: Any = None
    order_by: Any = None


class Stage:
    """A stage in a dataflow: ``stage[name]`` is an output flow as a collection (a record
    written in epoch ``e`` is an insertion at ``e``); :attr:`state` the state it keeps after
    each epoch's run (what the next run reads), as a collection; :attr:`metrics` one row per
    worker and run: ``worker``, ``calls`` (translate calls), ``state_read`` (state records
    read), ``state_size`` (state records it keeps)."""

    def __init__(
        self,
        name: str,
        outputs: dict[str, Collection],
        state: Collection | None,
        metrics: Collection,
    ) -> None:
        self.name = name
        self.outputs = outputs
        self._state = state
        self.metrics = metrics

    def __getitem__(self, flow: str) -> Collection:
        try:
            return self.outputs[flow]
        except KeyError:
            raise GraphError(
                f"stage {self.name!r} has no output flow {flow!r} (its outputs: "
                f"{sorted(self.outputs)})",
                site=call_site(),
            ) from None

    @property
    def state(self) -> Collection:
        if self._state is None:
            raise GraphError(f"stage {self.name!r} keeps no state", site=call_site())
        return self._state

    def __repr__(self) -> str:
        return f"Stage({self.name!r}, outputs={sorted(self.outputs)})"


class Feedback:
    """A flow from a later stage back to an earlier one, closing a cycle of stages: what its
    source holds at epoch ``e``, at ``e + 1`` (records written by the later stage in ``e`` are
    read by the earlier one in ``e + 1``, as on a loopback).

    ``fb = cbp.Feedback(flow, schema)``; ``fb.collection`` is an input flow of the earlier
    stage; ``fb.close(later["out"])`` gives it its source, once, before the first ``run()``.

    >>> import ddflow as dd
    >>> from ddflow import cbp
    >>> flow = dd.Dataflow()
    >>> fb = cbp.Feedback(flow, {"k": "int64"})
    >>> fb.collection.schema
    Schema({'k': 'int64'})
    """

    def __init__(self, flow: Any, schema: Mapping[str, Any] | Schema) -> None:
        site = call_site()
        self.schema = schema if isinstance(schema, Schema) else Schema(schema)
        self._flow = flow
        self._node = flow.plan.add("delay", (), self.schema, flow.plan.top, {}, site)
        self.collection = Collection(flow, self._node)
        self._closed = False

    def close(self, source: Collection) -> None:
        """Make ``source`` (a collection of the same schema, at the top of the dataflow) the
        feedback's source."""
        site = call_site()
        if self._closed:
            raise GraphError("this cbp.Feedback is closed already", site=site)
        if not isinstance(source, Collection) or source._flow is not self._flow:
            raise GraphError(
                f"a cbp.Feedback closes with a collection of its dataflow, got {source!r}",
                site=site,
            )
        if source.schema != self.schema:
            raise GraphError(
                f"a cbp.Feedback of {dict(self.schema.items())} cannot close with a collection "
                f"of {dict(source.schema.items())}",
                site=site,
            )
        (node,) = _align([source], site)
        if node.scope.parent is not None:
            raise GraphError("a cbp.Feedback closes with a collection outside any loop", site=site)
        self._flow.plan.add(
            "delay_close", (node,), self.schema, node.scope, {"delay": self._node}, site
        )
        self._closed = True


_METRICS = Schema(
    {"worker": "int64", "calls": "int64", "state_read": "int64", "state_size": "int64"}
)


def stage(
    name: str,
    translate: Callable[..., Any],
    *,
    key: Mapping[str, Any],
    inputs: Mapping[str, Collection | Flow],
    outputs: Mapping[str, Mapping[str, Any] | Schema] | None = None,
    state: Mapping[str, Any] | Schema | State | None = None,
    loopbacks: Mapping[str, Loopback] | None = None,
    grouping: str = "outer",
    runnable: Callable[..., Any] = RunnableALL,
    runnable_state: Any = None,
) -> Stage:
    """Add a CBP stage reading ``inputs`` (see the module); ``key`` is its groups' key
    columns and their types."""
    site = call_site()
    if not isinstance(name, str) or not name:
        raise GraphError(f"a stage's name is a non-empty string, got {name!r}", site=site)
    if not callable(translate):
        raise GraphError(f"stage {name!r}: translate {translate!r} is not a function", site=site)
    _check_parameters(name, "translate", translate, ("key", "state", "flows", "out"), site)
    if grouping not in ("outer", "inner"):
        raise GraphError(
            f"stage {name!r}: grouping is 'outer' or 'inner', got {grouping!r}", site=site
        )
    if not callable(runnable):
        raise GraphError(f"stage {name!r}: runnable {runnable!r} is not a function", site=site)
    _check_parameters(name, "runnable", runnable, ("framing_keys", "state"), site)
    key_schema = key if isinstance(key, Schema) else Schema(key)
    if len(key_schema) == 0:
        raise GraphError(f"stage {name!r}: the key needs at least one column", site=site)
    if not inputs:
        raise GraphError(f"stage {name!r} needs at least one input flow", site=site)
    flows = {n: f if isinstance(f, Flow) else Flow(f) for n, f in inputs.items()}
    for n, f in flows.items():
        if not isinstance(f.collection, Collection):
            raise GraphError(
                f"stage {name!r}: input flow {n!r} is {f.collection!r}, not a collection",
                site=site,
            )
    names: set[str] = set()

    def fresh(flow: str, what: str) -> str:
        if not isinstance(flow, str) or not flow or flow.startswith("__"):
            raise GraphError(f"stage {name!r}: {what} name {flow!r} is not a flow name", site=site)
        if flow in names:
            raise GraphError(f"stage {name!r}: two flows are named {flow!r}", site=site)
        names.add(flow)
        return flow

    nodes = _align([f.collection for f in flows.values()], site)
    if any(n.scope.parent is not None for n in nodes):
        raise GraphError(
            f"stage {name!r}: a CBP stage runs at the top of a dataflow, not inside a loop",
            site=site,
        )
    in_specs = tuple(
        FlowSpec(
            fresh(n, "input"),
            node.schema,
            _route(f.route_by, node.schema, key_schema, name, n, site, "input"),
            _order(f.order_by, node.schema, name, n, site),
            _frame(f.frame_by, name, n, site),
            f.frame_state,
        )
        for (n, f), node in zip(flows.items(), nodes, strict=True)
    )
    loop_specs = []
    for n, lb in (loopbacks or {}).items():
        if not isinstance(lb, Loopback):
            raise GraphError(
                f"stage {name!r}: loopback {n!r} is {lb!r}, not a cbp.Loopback", site=site
            )
        sch = _schema(lb.schema, name, n, site)
        loop_specs.append(
            FlowSpec(
                fresh(n, "loopback"),
                sch,
                _route(lb.route_by, sch, key_schema, name, n, site, "loopback"),
                _order(lb.order_by, sch, name, n, site),
            )
        )
    out_specs = []
    for n, out_schema in (outputs or {}).items():
        out_specs.append(
            FlowSpec(fresh(n, "output"), _schema(out_schema, name, n, site), Route("none"))
        )
    state_spec = None
    if state is not None:
        st = state if isinstance(state, State) else State(state)
        sch = _schema(st.schema, name, "state", site)
        state_spec = FlowSpec(
            "state",
            sch,
            _route(st.route_by, sch, key_schema, name, "state", site, "state"),
            _order(st.order_by, sch, name, "state", site),
        )
        if state_spec.route.kind not in ("columns", "record", "fn"):
            raise GraphError(
                f"stage {name!r}: a state record belongs to one group: route the state by "
                f"its key columns or a function of the record, not {st.route_by!r}",
                site=site,
            )
    assoc = None
    if any(f.route.kind == "multicast" for f in loop_specs):
        assoc_schema = Schema([*key_schema.items(), ("address", "str")])
        assoc = FlowSpec("__associations", assoc_schema, Route("columns", tuple(key_schema.names)))
    elif any(f.route.kind == "multicast" for f in in_specs):
        raise GraphError(
            f"stage {name!r}: cbp.Multicast routes a loopback flow (the records a stage writes "
            "in the epoch it associates keys with the address), not an input flow",
            site=site,
        )
    spec = StageSpec(
        name,
        key_schema,
        translate,
        in_specs,
        tuple(loop_specs),
        tuple(out_specs),
        state_spec,
        grouping,
        runnable,
        runnable_state,
        site,
        assoc,
    )
    dataflow = flows[next(iter(flows))].collection._flow
    plan = dataflow.plan
    first = out_specs[0].schema if out_specs else _METRICS
    node = plan.add("stage", tuple(nodes), first, nodes[0].scope, {"spec": spec}, site)

    def port(i: int, schema: Schema) -> Collection:
        return Collection(
            dataflow, plan.add("port", (node,), schema, node.scope, {"port": i}, site)
        )

    outs = {f.name: port(i, f.schema) for i, f in enumerate(out_specs)}
    for n, f in flows.items():
        if isinstance(f.collection, InputCollection):  # (retractions refused at their line)
            f.collection._cbp_readers.append((name, n))
    n_out = len(spec.out_ports()) + 2
    state_coll = port(n_out - 2, state_spec.schema) if state_spec is not None else None
    return Stage(name, outs, state_coll, port(n_out - 1, _METRICS))


def _schema(spec: Any, stage: str, flow: str, site: CallSite | None) -> Schema:
    if isinstance(spec, Schema):
        return spec
    if not isinstance(spec, Mapping) or not spec:
        raise GraphError(
            f"stage {stage!r}: flow {flow!r} needs a schema (a dict of column names and types), "
            f"got {spec!r}",
            site=site,
        )
    return Schema(spec)


def _check_parameters(
    stage: str, what: str, fn: Callable[..., Any], params: tuple[str, ...], site: CallSite | None
) -> None:
    """Refuse a stage's function that cannot be called with its parameters (where its
    signature can be read): found here, not as a TypeError inside a run."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # (a builtin or an object without one: called as it is)
        return
    try:
        signature.bind(*params)
    except TypeError:
        raise GraphError(
            f"stage {stage!r}: {what} is called with {len(params)} arguments "
            f"({', '.join(params)}), but {getattr(fn, '__name__', repr(fn))}{signature} does "
            "not take them",
            site=site,
        ) from None


def _route(
    route_by: Any,
    schema: Schema,
    key: Schema,
    stage: str,
    flow: str,
    site: CallSite | None,
    flow_kind: str,
) -> Route:
    """A flow's RouteBy, checked against its schema and the stage's key (``flow_kind``:
    ``"input"``, ``"loopback"`` or ``"state"``)."""
    if route_by is ALL:
        return Route("all")
    if route_by is ALL_STATE:
        return Route("all_state")
    if isinstance(route_by, Multicast):
        if route_by.column not in schema.names:
            raise GraphError(
                f"stage {stage!r}: flow {flow!r} multicasts by column {route_by.column!r}, "
                f"which it does not have (its columns: {list(schema.names)})",
                site=site,
            )
        return Route("multicast", (route_by.column,))
    if route_by is None:  # (by the key's columns: the flow must have them)
        missing = [c for c in key.names if c not in schema.names]
        if missing:
            what = "the state" if flow_kind == "state" else f"{flow_kind} {flow!r}"
            raise GraphError(
                f"stage {stage!r}: {what} has no column {missing[0]!r} of the stage's "
                f"key {list(key.names)} (its columns: {list(schema.names)}); name the key's "
                "columns as its, or give it route_by (a column, a function of the record, "
                "cbp.RouteByRcd...)",
                site=site,
            )
        route_by = list(key.names)
    if route_by is RouteByRcd:
        cols = tuple(schema.names)
        what = "routes by record (RouteByRcd)"
    elif isinstance(route_by, str):
        cols, what = (route_by,), f"routes by {route_by!r}"
    elif isinstance(route_by, (list, tuple)) and all(isinstance(c, str) for c in route_by):
        cols, what = tuple(route_by), f"routes by {list(route_by)}"
    elif callable(route_by):
        return Route("fn", (), route_by)
    else:
        raise GraphError(
            f"stage {stage!r}: flow {flow!r} has route_by={route_by!r}; give a column name, a "
            "list of them, a function of the record, cbp.ALL, cbp.ALL_STATE, cbp.Multicast "
            "or cbp.RouteByRcd",
            site=site,
        )
    missing = [c for c in cols if c not in schema.names]
    if missing:
        raise GraphError(
            f"stage {stage!r}: flow {flow!r} {what}, but has no column {missing[0]!r} (its "
            f"columns: {list(schema.names)})",
            site=site,
        )
    if len(cols) != len(key):
        raise GraphError(
            f"stage {stage!r}: flow {flow!r} {what}: {len(cols)} column(s) "
            f"{list(cols)} for the stage's key of {len(key)} {dict(key.items())}; give route_by",
            site=site,
        )
    for c, (k, kt) in zip(cols, key.items(), strict=True):
        ct = schema[c]
        if ct.kind != kt.kind:
            raise GraphError(
                f"stage {stage!r}: flow {flow!r} {what}: its column {c!r} is {ct}, the key's "
                f"{k!r} is {kt}",
                site=site,
            )
    return Route("columns", cols)


def _order(order_by: Any, schema: Schema, stage: str, flow: str, site: CallSite | None) -> Any:
    if order_by is None or order_by is OrderByAny:
        return None
    if callable(order_by):
        return order_by
    cols = (order_by,) if isinstance(order_by, str) else tuple(order_by)
    missing = [c for c in cols if c not in schema.names]
    if missing or not cols:
        raise GraphError(
            f"stage {stage!r}: flow {flow!r} orders by {order_by!r}; give its columns "
            f"({list(schema.names)}) or a function of the record",
            site=site,
        )
    return cols


def _frame(frame_by: Any, stage: str, flow: str, site: CallSite | None) -> Any:
    if frame_by is None or frame_by is FrameByPrior:
        return None
    if not callable(frame_by):
        raise GraphError(
            f"stage {stage!r}: flow {flow!r} has frame_by={frame_by!r}; give a function "
            "(record, state) -> (framing key, state), or cbp.FrameByPrior",
            site=site,
        )
    return frame_by

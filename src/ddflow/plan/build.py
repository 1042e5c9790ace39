"""From plan to operators: instantiate every plan node on the dataflow's runtime.

Nodes are visited in id order, a topological order once loops' feedback edges are set aside, so
each operator gets a lower scheduling index than its consumers (the scheduler runs the lowest
index with work first: upstream before downstream, the loop's variable before its body). Each
node becomes one operator, except:

* ``join`` inputs are arranged first (an ``ArrangeOp``), unless the input is an ``arrange``
  node with the same keys, whose arrangement is then shared; a ``reduce`` arranges its input
  itself (an :class:`~ddflow.differential.operators.join.Arranger` it keeps: nothing else reads it);
* a loop's ``variable`` is the concatenation of the entered collection and the loop's feedback,
  connected once the ``feedback`` node (after the body) has been built;
* a node the fusion pass (:mod:`ddflow.plan.fusion`) marks as fused is no operator of its
  own: its function is applied by its consumer (a chain of them is one function), or a fused
  ``concat``'s inputs are taken by the arrangement that reads it, each on a port of its own.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any, NamedTuple, cast

import polars as pl

from ddflow.differential.batch import DIFF
from ddflow.differential.operators.cbp import StageOp
from ddflow.differential.operators.cbp_flows import (
    KEYED,
    FlowSpec,
    FrameOp,
    StageSpec,
    delay_route,
    route_frame,
)
from ddflow.differential.operators.io import (
    CommitOp,
    InputOp,
    OutputOp,
    PartSinkOp,
    ProbeOp,
)
from ddflow.differential.operators.join import ArrangeOp, Arranger, JoinOp
from ddflow.differential.operators.linear import ConsolidateOp, Linear
from ddflow.differential.operators.reduce import ReduceOp, ReduceSpec
from ddflow.differential.operators.region import RegionOp
from ddflow.differential.operators.vertex import VertexOp
from ddflow.errors import GraphError, SchemaError
from ddflow.plan.fusion import fused_nodes
from ddflow.plan.nodes import Node
from ddflow.plan.regions import RegionPlan, find_regions
from ddflow.timely.cluster import Cluster, Idle, Shard
from ddflow.timely.lattice import EPOCHS
from ddflow.timely.operator import Operator
from ddflow.timely.progress import Summary
from ddflow.timely.scheduler import Worker

if TYPE_CHECKING:
    from ddflow.differential.kernel import Kernels, LoopRegions, Partitions
    from ddflow.differential.operators.io import InputSource
    from ddflow.plan.nodes import Plan

__all__ = ["build"]


def build(
    plan: Plan,
    kernels: Kernels,
    inputs: Mapping[str, InputSource],
    *,
    last_epoch: Callable[[], int],
    loop_counts: dict[str, dict[tuple[int, ...], int]],
    workers: int = 1,
    regions: bool = True,
) -> Worker | Cluster:
    """The operators of ``plan`` on the runtime whose kernels are ``kernels``, in a started
    worker. ``inputs``: the source of each input node, by name; ``last_epoch()``: the last
    epoch the inputs have closed (outputs release epochs up to it); ``loop_counts``: where
    each loop's variable counts its updates per time (by loop name).

    With ``workers`` > 1, a :class:`~ddflow.timely.cluster.Cluster` of that many workers in
    this process, each with a copy of every operator, and exchanges before keyed operators
    (see :func:`build_shard`).

    ``regions``: the loops the runtime can run whole (:mod:`ddflow.plan.regions`) are one
    operator each, where its settings ask for it (one worker only; False for a dataflow whose
    state is checkpointed)."""
    if workers == 1:
        worker = Worker(tracker=kernels.progress_tracker)
        _Builder(plan, kernels, inputs, last_epoch, loop_counts, worker, regions).build()
        worker.start()
        return worker
    cluster = Cluster(workers)
    for shard in cluster.shards:
        build_shard(plan, kernels, inputs, shard, last_epoch=last_epoch, loop_counts=loop_counts)
    cluster.start()
    return cluster


def build_shard(
    plan: Plan,
    kernels: Kernels,
    inputs: Mapping[str, InputSource],
    shard: Shard,
    *,
    last_epoch: Callable[[], int],
    loop_counts: dict[str, dict[tuple[int, ...], int]],
) -> None:
    """One worker's copy of the operators of ``plan`` (``shard``, one of the workers of a
    :class:`~ddflow.timely.cluster.Cluster`; every worker gets the same operators at the
    same indices). Routes: the inputs of an arrangement or a reduce are exchanged by its keys
    (a fused function on the way is applied before, by the sender); the inputs of a
    consolidation (a loop's feedback, ``consolidate``) by the whole record, so that the
    updates of a record meet; pinned operators (outputs, probes, vertices without a key) exist
    on worker 0 alone and everything they read is gathered there. An input has a copy on every
    worker (worker 0's reads the handle; every copy reads the files it is handed, see
    :class:`~ddflow.differential.operators.io.InputOp`). Stateless operators run where their
    input is."""
    _Builder(plan, kernels, inputs, last_epoch, loop_counts, shard).build()


class _Fused(NamedTuple):
    """A stateless node built as no operator (see the module): what it reads, as pairs of a
    node (never itself fused) and the function applied to that node's messages (None: none),
    one pair for a chain of one-input nodes and one per input for a concat; and its name as
    an operator (the names of the nodes it stands for)."""

    inputs: tuple[tuple[Node, Any], ...]
    name: str


def _then(first: Any, second: Any, kernels: Any) -> Any:
    """``second`` applied to what ``first`` gives, but not to nothing (``None``, or an empty
    batch, which an operator of its own would not have sent on)."""
    if second is None:
        return first

    def both(batch: Any) -> Any:
        out = first(batch)
        if out is None or kernels.is_empty(out):
            return out
        return second(out)

    return both


class _Builder:
    def __init__(
        self,
        plan: Plan,
        kernels: Kernels,
        inputs: Mapping[str, InputSource],
        last_epoch: Callable[[], int],
        loop_counts: dict[str, dict[tuple[int, ...], int]],
        worker: Worker | Shard,
        regions: bool = False,
    ) -> None:
        self.plan = plan
        self.k = kernels
        self.inputs = inputs
        self.last_epoch = last_epoch
        self.loop_counts = loop_counts
        self.worker = worker
        # with several workers: this worker's number (0 owns the pinned operators), and how
        # many there are (1: a Worker alone, no routes)
        self.shard = worker.index if isinstance(worker, Shard) else 0
        self.workers = worker.cluster.workers if isinstance(worker, Shard) else 1
        # node id -> (operator, output port)
        self.ports: dict[int, tuple[Operator, int]] = {}
        self.arranged: dict[int, ArrangeOp] = {}
        # node id -> the node's function, applied by its consumer (see the module)
        self.fused: dict[int, _Fused] = {}
        # node id -> how many inputs of other nodes read it
        # the nodes applied by their one consumer (see ddflow.plan.fusion)
        self.fusion = fused_nodes(plan, self.workers)
        # feedbacks not closed yet (see _op_delay)
        self.unclosed: dict[int, Node] = {}
        # the loops run whole by the runtime: by their last node; and every node they hold
        self.regions: dict[int, tuple[RegionPlan, Any]] = {}
        self.in_region: set[int] = set()
        caps = kernels.capabilities
        if regions and self.workers == 1 and caps.loop_regions:
            runtime = cast("LoopRegions", kernels)
            if runtime.runs_regions:
                found, refused = find_regions(plan)
                for region in found:
                    self.regions[region.last] = (region, runtime.loop_region(region))
                    self.in_region |= region.members
                if isinstance(worker, Worker):
                    worker.notes.extend(
                        f"loop {name!r} runs as Python operators: {why}"
                        for name, why in refused.items()
                    )

    def build(self) -> None:
        for node in self.plan.nodes:
            if node.id in self.in_region:
                if node.id in self.regions:
                    self._region(*self.regions[node.id])
                continue
            getattr(self, f"_op_{node.op}")(node)
        for node in self.unclosed.values():
            raise GraphError(
                "a cbp.Feedback was never closed: give it its source with close(collection) "
                "before the first run()",
                site=node.site,
            )
        # (a fused node has one consumer, and every node is built: each was taken up)
        assert not self.fused, f"fused nodes without an operator: {sorted(self.fused)}"

    # ------------------------------------------------------------------ routes

    def _exchange(self, keys: tuple[str, ...], fn: Any = None) -> Any:
        """The route of an edge into an operator keyed by ``keys`` (None with one worker):
        each update to the worker that owns its key, after ``fn`` (a fused function the
        receiver would otherwise apply)."""
        if self.workers == 1:
            return None
        k, workers = cast("Partitions", self.k), self.workers

        def route(batch: Any) -> Any:
            if fn is not None:
                batch = fn(batch)
                if batch is None or k.is_empty(batch):
                    return ()
            return k.partition(batch, keys, workers)

        return route

    def _gather(self) -> Any:
        return None if self.workers == 1 else _to_first

    def _pinned(self, make: Callable[[], Operator], inputs: Any, outputs: Any) -> Operator:
        """An operator that runs on worker 0 alone: made there (``make()``), a placeholder
        with its ports on the other workers."""
        if self.shard == 0:
            op = make()
            op.pinned = self.workers > 1
            return op
        return Idle(inputs, outputs, None, "idle")

    # ------------------------------------------------------------------ helpers

    def _add(
        self,
        op: Operator,
        node: Node | None,
        inputs: tuple[Node, ...] = (),
        routes: Callable[[int], Any] | None = None,
    ) -> Operator:
        """Add ``op`` reading ``inputs`` (input ``i`` through the route ``routes(i)``, and
        through the gather to worker 0 if ``op`` is pinned)."""
        sources = []
        chains: list[str] = []
        for i, n in enumerate(inputs):
            chain = None
            if type(op) is Linear:
                n, fn, chain = self._chain(n)
                if chain is not None:  # (its function applied by op)
                    op.fns[i] = _then(fn, op.fns[i], self.k)
            chains.append(chain or "-")
            sources.append(self._port(n.id))
        if any(c != "-" for c in chains):  # (named after what it applies: select+enter, or
            # concat(select+filter, -) for a chain on the first of two inputs)
            name = op.kind = op.name
            op.name = f"{chains[0]}+{name}" if len(chains) == 1 else f"{name}({', '.join(chains)})"
        self.worker.add(op)  # (after any operator _port made for its inputs: upstream first)
        for i, (src, port) in enumerate(sources):
            route = self._gather() if op.pinned else None if routes is None else routes(i)
            self._connect(src, port, op, i, route)
        if node is not None:
            self.ports[node.id] = (op, 0)
        return op

    def _chain(self, n: Node) -> tuple[Node, Any, str | None]:
        """What a reader of ``n`` takes up: where ``n`` is a fused chain of one-input nodes,
        the node the chain reads, its function and its name (the chain is then the reader's
        to apply); else ``n`` itself, with no function and no name."""
        up = self.fused.get(n.id)
        if up is None or len(up.inputs) > 1:
            return n, None, None
        del self.fused[n.id]
        ((source, fn),) = up.inputs
        return source, fn, up.name

    def _port(self, node_id: int) -> tuple[Operator, int]:
        """The operator and port giving a node's output (never a fused node's: its consumer
        takes it up). An ``arrange`` node read as a collection (by anything but a join on its
        keys, which shares the arrangement itself) gives its records without the key column
        the arrangement adds, through an operator made when first asked for."""
        assert node_id not in self.fused, f"fused node {node_id} read by an operator"
        if node_id not in self.ports and node_id in self.arranged:
            arranged = self.arranged[node_id]
            tt = arranged.output_types[0]
            plain = Linear("arrange-records", [tt], tt, [self.k.drop_key], self.k)
            self.worker.add(plain)
            self.worker.connect(arranged, 0, plain, 0)
            self.ports[node_id] = (plain, 0)
        return self.ports[node_id]

    def _linear(self, node: Node, fn: Any, name: str | None = None) -> None:
        tt = node.scope.time_type
        (src,) = node.inputs
        if node.id in self.fusion:  # (applied by its consumer: a stateless operator or an
            # arrangement)
            name = name or node.op
            source, first, chain = self._chain(src)
            if chain is None:
                self.fused[node.id] = _Fused(((src, fn),), name)
            else:  # (a chain: one function)
                self.fused[node.id] = _Fused(
                    ((source, _then(first, fn, self.k)),), f"{chain}+{name}"
                )
            return
        self._add(Linear(name or node.op, [tt], tt, [fn], self.k), node, node.inputs)

    def _empty(self, node: Node) -> Any:
        return self.k.empty(node.schema.polars_schema(), node.scope.time_type)

    def _arrangement(
        self,
        node: Node,
        keys: tuple[str, ...],
        prepare: Any = None,
        sums: tuple[str, ...] = (DIFF,),
        empty: Any = None,
    ) -> ArrangeOp:
        """An arrangement of ``node`` by ``keys``: shared if ``node`` is such an arrangement."""
        if prepare is None and node.op == "arrange" and tuple(node.params["keys"]) == keys:
            return self.arranged[node.id]
        arranger, sources, name = self._arranger(node, keys, prepare, sums, empty)
        op = ArrangeOp(node.scope.time_type, arranger)
        self._add_reading(op, sources, name, arranger)
        return op

    def _arranger(
        self,
        node: Node,
        keys: tuple[str, ...],
        prepare: Any = None,
        sums: tuple[str, ...] = (DIFF,),
        empty: Any = None,
    ) -> tuple[Arranger, list[tuple[Operator, int]], str | None]:
        """A new arrangement of ``node`` by ``keys``, for an operator to keep: the
        :class:`Arranger`, the ports its operator's inputs read, and the name of the fused
        node it takes up (None: none; see the module)."""
        fused = self.fused.pop(node.id, None)  # (its inputs taken on ports of the arrangement)
        inputs = ((node, None),) if fused is None else fused.inputs
        sources = [self._port(n.id) for n, _ in inputs]
        arranger = Arranger(
            node.scope.time_type,
            self.k,
            keys,
            self._empty(node) if empty is None else empty,
            prepare=prepare,
            sums=sums,
            fns=[fn for _, fn in inputs],
        )
        return arranger, sources, None if fused is None else fused.name

    def _add_reading(
        self,
        op: Operator,
        sources: list[tuple[Operator, int]],
        fused: str | None,
        arranger: Arranger,
    ) -> None:
        """Add ``op``, its inputs reading ``sources`` (named after the node it takes up), the
        inputs of ``arranger``: exchanged by its keys with several workers."""
        if fused is not None:
            op.kind = op.name
            op.name = f"{fused}+{op.name}"
        self.worker.add(op)
        for i, (src, port) in enumerate(sources):
            route = None
            if self.workers > 1:  # (the port's function is applied by the sender)
                route = self._exchange(tuple(arranger.keys), arranger.fns[i])
                arranger.fns[i] = None
            self._connect(src, port, op, i, route)

    def _connect(self, src: Operator, port: int, op: Operator, i: int, route: Any) -> None:
        if route is None:
            self.worker.connect(src, port, op, i)
        else:
            self.worker.connect(src, port, op, i, route)  # type: ignore[call-arg]

    # ------------------------------------------------------------------ sources and sinks

    def _op_input(self, node: Node) -> None:
        # (a copy on every worker, for the splits the workers read; worker 0's reads the
        # handle)
        source = self.inputs[node.params["name"]] if self.shard == 0 else None
        op = InputOp(source, self.k)
        if source is not None:
            source.attach(op)
        self._add(op, node)

    def _op_output(self, node: Node) -> None:
        op = self._pinned(
            lambda: OutputOp(self.k, node.params["sink"]._on_epoch, self.last_epoch), [EPOCHS], []
        )
        self._add(op, node, node.inputs)

    def _op_sink(self, node: Node) -> None:
        """A sink the workers write in parallel: a part sink on every worker, fed by an
        exchange on the whole record, and the commit on worker 0 (see
        :class:`~ddflow.differential.operators.io.PartSinkOp`)."""
        writer = node.params["writer"]
        part = PartSinkOp(self.k, writer, self.shard)
        (source,) = node.inputs
        names = tuple(source.schema.names)
        self._add(part, None, node.inputs, lambda i: self._exchange(names))
        committer: Any = node.params.get("committer")  # (on worker 0: it stays there)
        commit = self._pinned(lambda: CommitOp(committer, self.last_epoch), [EPOCHS], [])
        self.worker.add(commit)
        self._connect(part, 0, commit, 0, self._gather())

    def _op_probe(self, node: Node) -> None:
        tt = node.scope.time_type
        op = self._add(self._pinned(ProbeOp, [tt], []), node, node.inputs)
        if self.shard == 0:
            node.params["probe"].op = op

    # ------------------------------------------------------------------ linear

    def _compiled(self, node: Node) -> list[Any]:
        schema = node.inputs[0].schema
        return [self.k.compile(e, schema, name) for name, e in node.params["exprs"]]

    def _op_select(self, node: Node) -> None:
        compiled = self._compiled(node)
        tt = node.scope.time_type
        k = self.k
        self._linear(node, lambda b: k.select(b, compiled, tt))

    def _op_with_columns(self, node: Node) -> None:
        compiled = self._compiled(node)
        names = list(node.schema.names)
        tt = node.scope.time_type
        k = self.k
        self._linear(node, lambda b: k.with_columns(b, compiled, names, tt))

    def _op_filter(self, node: Node) -> None:
        pred = self.k.compile(node.params["expr"], node.inputs[0].schema, None)
        k = self.k
        self._linear(node, lambda b: k.filter(b, pred))

    def _op_map(self, node: Node) -> None:
        self._row_fn(node, flat=False)

    def _op_flat_map(self, node: Node) -> None:
        self._row_fn(node, flat=True)

    def _row_fn(self, node: Node, flat: bool) -> None:
        fn, schema, tt, k = node.params["fn"], node.schema, node.scope.time_type, self.k
        src_names = list(node.inputs[0].schema.names)

        def apply(b: Any) -> Any:
            try:
                return k.map_rows(b, fn, schema, src_names, tt, flat)
            except SchemaError as e:  # (results that do not fit: the map's line, not run()'s)
                raise SchemaError(e.message, site=node.site) from None

        self._linear(node, apply)

    def _op_negate(self, node: Node) -> None:
        self._linear(node, self.k.negate)

    def _op_consolidate(self, node: Node) -> None:
        op = ConsolidateOp("consolidate", node.scope.time_type, self.k, 1)
        self._add(op, node, node.inputs, self._by_record(node))

    def _by_record(self, node: Node) -> Callable[[int], Any] | None:
        """The routes into a consolidation: by the whole record, so that the updates of a
        record meet on one worker and cancel (None with one worker)."""
        if self.workers == 1:
            return None
        route = self._exchange(tuple(node.inputs[0].schema.names))
        return lambda i: route

    def _op_inspect(self, node: Node) -> None:
        tt, k = node.scope.time_type, self.k
        names = list(node.schema.names)
        if self.workers > 1:  # (on worker 0, where the user's function lives: see
            # ddflow.plan.fusion, which leaves it unfused)
            fn: Any = node.params.get("fn")  # (not sent to worker processes)
            op = self._pinned(
                lambda: Linear("inspect", [tt], tt, [lambda b: k.inspect(b, fn, names, tt)], k),
                [tt],
                [tt],
            )
            self._add(op, node, node.inputs)
            return
        fn = node.params["fn"]
        self._linear(node, lambda b: k.inspect(b, fn, names, tt))

    def _op_concat(self, node: Node) -> None:
        tt = node.scope.time_type
        if node.id in self.fusion:
            # taken up by the arrangement that reads it, with the functions of its fused inputs
            inputs: list[tuple[Node, Any]] = []
            names = []
            for n in node.inputs:
                source, fn, chain = self._chain(n)
                inputs.append((source, fn))
                names.append(chain or "-")
            self.fused[node.id] = _Fused(tuple(inputs), f"concat({', '.join(names)})")
            return
        self._add(
            Linear("concat", [tt] * len(node.inputs), tt, [None] * len(node.inputs), self.k),
            node,
            node.inputs,
        )

    def _op_port(self, node: Node) -> None:
        (vertex,) = node.inputs
        op, _ = self.ports[vertex.id]
        self.ports[node.id] = (op, node.params["port"])

    def _op_vertex(self, node: Node) -> None:
        tt = node.scope.time_type
        outputs = node.params["outputs"]
        keys = node.params.get("key")
        if keys and self.workers > 1:  # (on every worker, a copy each, exchanged by key)
            vertex = node.params["vertex"]
            if self.shard:  # (unbound: a vertex's copy leaves its operator behind)
                vertex = copy.deepcopy(vertex)
            route = self._exchange(tuple(keys))
            op: Operator = VertexOp(vertex, tt, len(node.inputs), outputs, self.k)
            self._add(op, node, node.inputs, routes=lambda i: route)
            return
        op = self._pinned(
            lambda: VertexOp(node.params["vertex"], tt, len(node.inputs), outputs, self.k),
            [tt] * len(node.inputs),
            [tt] * len(outputs),
        )
        self._add(op, node, node.inputs)

    # ------------------------------------------------------------------ CBP stages

    def _op_stage(self, node: Node) -> None:
        """A CBP stage (see :mod:`ddflow.differential.operators.cbp`): a route before each
        input flow (a framer on worker 0 for a flow with FrameBy), the stage on every worker,
        and a delay route from each loopback output back to its input."""
        spec: StageSpec = node.params["spec"]
        k = self.k
        op = StageOp(spec, k, self.shard)
        sources = []
        for flow, n in zip(spec.inputs, node.inputs, strict=True):
            src, port = self._port(n.id)
            if flow.frame_by is not None:
                framer = self._pinned(partial(FrameOp, spec, flow, k), [EPOCHS], [EPOCHS])
                self.worker.add(framer)
                self._connect(src, port, framer, 0, self._gather())
                sources.append(framer)
                continue
            route = Linear(
                f"cbp-route({flow.name})",
                [EPOCHS],
                EPOCHS,
                [_on_frames(route_frame, spec, flow, k)],
                k,
            )
            self.worker.add(route)
            self.worker.connect(src, port, route, 0)
            sources.append(route)
        self.worker.add(op)
        for i, src in enumerate(sources):
            self._connect(src, 0, op, i, self._routed(len(spec.key)))
        loops = spec.out_ports()[len(spec.outputs) :]
        first_in = len(spec.inputs)
        for j, flow in enumerate(loops):
            delay = Linear(
                f"cbp-loop({flow.name})",
                [EPOCHS],
                EPOCHS,
                [_on_frames(delay_route, spec, flow, k)],
                k,
                _next_epoch,
                Summary.increment(EPOCHS, 1),
            )
            self.worker.add(delay)
            self.worker.connect(op, len(spec.outputs) + j, delay, 0)
            self._connect(delay, 0, op, first_in + j, self._routed(len(spec.key)))
        self.ports[node.id] = (op, 0)

    def _op_delay(self, node: Node) -> None:
        """A feedback's collection (:class:`ddflow.cbp.Feedback`): what its source holds at
        epoch ``e``, at ``e + 1``; the source is connected by the ``delay_close`` node."""
        k = self.k

        def later(batch: Any) -> Any:
            return k.from_polars(k.to_polars(batch).with_columns(pl.col("__t0") + 1))

        op = Linear("delay", [EPOCHS], EPOCHS, [later], k, _next_epoch, Summary.increment(EPOCHS))
        self.worker.add(op)
        self.ports[node.id] = (op, 0)
        self.unclosed[node.id] = node

    def _op_delay_close(self, node: Node) -> None:
        (src,) = node.inputs
        delay = node.params["delay"]
        op, _ = self.ports[delay.id]
        source, port = self._port(src.id)
        self.worker.connect(source, port, op, 0)
        del self.unclosed[delay.id]

    def _routed(self, width: int) -> Any:
        """The route of a stage's routed rows: keyed rows to the worker owning their key, the
        others (casts and markers) to every worker."""
        if self.workers == 1:
            return None
        k, workers = cast("Partitions", self.k), self.workers
        gcols = [f"__g{i}" for i in range(width)]

        def route(batch: Any) -> Any:
            f = k.to_polars(batch)
            keyed = f.filter(pl.col("__cast") == KEYED)
            out = list(k.partition(k.from_polars(keyed), gcols, workers)) if keyed.height else []
            rest = f.filter(pl.col("__cast") != KEYED)
            if rest.height:
                b = k.from_polars(rest)
                out += [(w, b) for w in range(workers)]
            return out

        return route

    # ------------------------------------------------------------------ loops

    def _region(self, region: RegionPlan, handle: Any) -> None:
        """A loop run whole by the runtime: one operator reading the loop's outer inputs
        (with the chains fused into their enters) and giving its results."""
        sources, fns = [], []
        for n in region.sources:
            source, fn, _ = self._chain(n)
            sources.append(self._port(source.id))
            fns.append(fn)
        counts = {i: self.loop_counts.setdefault(name, {}) for i, name in region.variables.items()}
        op = RegionOp(
            region.name, handle, len(region.sources), len(region.sinks), fns, counts, self.k
        )
        self.worker.add(op)
        for i, (src, port) in enumerate(sources):
            self._connect(src, port, op, i, None)
        for j, leave in enumerate(region.leaves):
            self.ports[leave.id] = (op, j)

    def _op_enter(self, node: Node) -> None:
        (src,) = node.inputs
        outer, inner = src.scope.time_type, node.scope.time_type
        compiled = node.params.get("compiled")
        k = self.k
        extra = inner.width - outer.width
        summary = Summary.enter(outer, inner.coordinates[-1])

        def time_fn(t: tuple[int, ...]) -> tuple[int, ...]:
            return t + (0,) * extra

        op = Linear(
            "enter",
            [outer],
            inner,
            [lambda b: k.enter(b, outer, inner, compiled)],
            self.k,
            time_fn,
            summary,
        )
        self._add(op, node, node.inputs)

    def _op_variable(self, node: Node) -> None:
        tt = node.scope.time_type
        # port 0: the entered collection; port 1: the feedback, connected in _op_feedback
        stats = self.loop_counts.setdefault(node.params["name"], {})
        k = self.k

        def count(b: Any) -> Any:
            for t, n in k.count_by_time(b, tt):
                stats[t] = stats.get(t, 0) + n
            return b

        op = Linear("variable", [tt, tt], tt, [count, count], self.k)
        self._add(op, node, node.inputs)

    def _op_feedback(self, node: Node) -> None:
        tt = node.scope.time_type
        # port 0: the body's result; port 1: the entered source, subtracted
        op = ConsolidateOp(
            "feedback",
            tt,
            self.k,
            2,
            negate=(1,),
            increment=True,
            limit=node.params["max_iterations"],
        )
        self._add(op, None, node.inputs, self._by_record(node))
        var_op, _ = self.ports[node.params["variable"].id]
        self.worker.connect(op, 0, var_op, 1)

    def _op_leave(self, node: Node) -> None:
        (src,) = node.inputs
        inner, outer = src.scope.time_type, node.scope.time_type
        k = self.k

        def time_fn(t: tuple[int, ...]) -> tuple[int, ...]:
            return t[: outer.width]

        op = Linear(
            "leave",
            [inner],
            outer,
            [lambda b: k.leave(b, inner, outer)],
            self.k,
            time_fn,
            Summary.leave(inner),
        )
        self._add(op, node, node.inputs)

    # ------------------------------------------------------------------ stateful

    def _op_arrange(self, node: Node) -> None:
        keys = tuple(node.params["keys"])
        (src,) = node.inputs
        self.arranged[node.id] = self._arrangement(src, keys)

    def _op_join(self, node: Node) -> None:
        left, right = node.inputs
        lk, rk = tuple(node.params["left_on"]), tuple(node.params["right_on"])
        la = self._arrangement(left, lk)
        ra = self._arrangement(right, rk)
        tt = node.scope.time_type
        op = JoinOp(tt, self.k, la.spine, ra.spine, lk, rk, node.params["output"])
        self.worker.add(op)
        self.worker.connect(la, 0, op, 0)
        self.worker.connect(ra, 0, op, 1)
        self.ports[node.id] = (op, 0)

    def _op_reduce(self, node: Node) -> None:
        (src,) = node.inputs
        tt = node.scope.time_type
        spec = _spec(node)
        k = self.k

        def prepare(b: Any) -> Any:
            return k.reduce_prepare(spec, b, tt)

        # (the input's arrangement, kept by the reduce: no other operator reads it)
        arranger, sources, name = self._arranger(
            src, spec.keys, prepare=prepare, sums=(DIFF, *spec.weights), empty=self._empty(src)
        )
        op = ReduceOp(tt, k, arranger, spec, self._empty(node))
        self._add_reading(op, sources, name, arranger)
        self.ports[node.id] = (op, 0)


def _on_frames(fn: Callable[..., Any], spec: StageSpec, flow: FlowSpec, k: Any) -> Any:
    """A batch function applying ``fn(spec, flow, frame)`` to the batch as a Polars frame."""

    def apply(batch: Any) -> Any:
        return k.from_polars(fn(spec, flow, k.to_polars(batch)))

    return apply


def _next_epoch(t: tuple[int, ...]) -> tuple[int, ...]:
    return (t[0] + 1,)


def _to_first(batch: Any) -> tuple[tuple[int, Any], ...]:
    """The gather route: everything to worker 0."""
    return ((0, batch),)


def _spec(node: Node) -> ReduceSpec:
    p = node.params
    out_types = {n: dt.polars for n, dt in node.schema.items()}
    return ReduceSpec.of(
        p["kind"],
        p["keys"],
        aggs=p.get("aggs", ()),
        fn=p.get("fn"),
        values=p.get("values", ()),
        outputs=p.get("outputs", ()),
        out_types=out_types,
        ranked=p.get("ranked", ()),
    )

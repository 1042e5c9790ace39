//! Loop regions: a subgraph of built-in operators run by the core's own scheduler.
//!
//! A region holds a loop of the plan (with the loops nested in it) whose operators are all
//! built in: maps and filters of [`Expr`]essions, negation, concatenation, the loop's enter,
//! variable, feedback and leave, joins and the reduces of [`Logic`]. To the graph around it,
//! a region is one operator: its inputs are [`Kind::Source`] nodes, fed with the updates the
//! enclosing graph sends it and holding capabilities at that graph's frontier of each input
//! ([`Region::set_input_frontier`]); its outputs are [`Kind::Sink`] nodes, whose updates the
//! caller takes ([`Region::take_output`]). [`Region::run`] steps the region's operators until
//! none has work left, with the region's own progress [`Tracker`]; its iterations never leave
//! the core. [`Region::capabilities`] says at which outer times the region may still produce
//! output by itself (work pending inside it, without what its inputs may still bring): the
//! capabilities the operator standing for it in the enclosing graph holds.
//!
//! Every message holds updates at one time, the message's. The operators follow the rules of
//! the Python operators of the same names (`ddflow.differential.operators`):
//!
//! * linear operators map each message to one at the same time (enter appends the loop's
//!   coordinate, leave drops it);
//! * a feedback holds each time's updates (the body's result minus the collection entered)
//!   until the time is
//!   complete at its input, then sends them consolidated, one iteration later, unless that
//!   reaches the loop's iteration limit;
//! * a join arranges both inputs in [`Spine`]s: a step's new left updates meet the right
//!   arrangement as it was, then the right's new updates meet the left arrangement with the
//!   new left updates in it; each output update is at the least upper bound of its two times,
//!   with the product of their diffs. Each arrangement is advanced to the frontier of the
//!   other input, the only updates it will meet;
//! * a reduce is the core's [`Reducer`], evaluated as the Python `ReduceOp` evaluates it.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashSet};
use std::fmt;

use crate::expr::Expr;
use crate::history::History;
use crate::lattice::{Antichain, Coordinate, TimeType};
use crate::progress::{ProgressError, ProgressGraph, Summary, Tracker, Watching};
use crate::reduce::{Logic, Reducer};
use crate::trace::Spine;

mod operators;
use operators::{by_time, feedback, join, linear, reduce};

/// A time: `width` integers.
pub type Time = Vec<i64>;

/// What a node of a region does (see the module).
#[derive(Clone, Debug)]
pub enum Kind {
    /// An input of the region: updates from the enclosing graph.
    Source,
    /// An output of the region.
    Sink,
    /// Each row mapped to the values of the expressions.
    Map(Vec<Expr>),
    /// The rows for which the predicate is true.
    Filter(Expr),
    Negate,
    /// Every input's updates.
    Concat,
    /// A loop's variable: its two inputs (the entered collection, the feedback) concatenated,
    /// their updates counted per time. At iteration `i + 1` it accumulates to the body's result
    /// at iteration `i`.
    Variable,
    /// Into a loop of this coordinate.
    Enter(Coordinate),
    /// Out of a loop.
    Leave,
    /// A loop's feedback: the body's result minus the entered collection (its two inputs),
    /// one iteration later, below `limit`.
    Feedback {
        limit: Option<i64>,
    },
    /// An equi-join; `output` picks each output column as `(side, column)`, side 0 the left.
    Join {
        left_keys: Vec<usize>,
        right_keys: Vec<usize>,
        output: Vec<(usize, usize)>,
    },
    /// A reduce of the rows' `keys` and `values` columns; its rows are the keys, then the
    /// logic's outputs.
    Reduce {
        keys: Vec<usize>,
        values: Vec<usize>,
        logic: Logic,
    },
}

/// A node: what it does, the nodes whose output each of its inputs reads, the time type of
/// its output (of its input, for a sink) and how many columns its rows have.
#[derive(Clone, Debug)]
pub struct NodeSpec {
    pub kind: Kind,
    pub inputs: Vec<usize>,
    pub time: TimeType,
    pub arity: usize,
}

/// A region that cannot be built or run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RegionError(pub String);

impl fmt::Display for RegionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for RegionError {}

impl From<ProgressError> for RegionError {
    fn from(e: ProgressError) -> Self {
        RegionError(e.to_string())
    }
}

fn invalid<T>(message: String) -> Result<T, RegionError> {
    Err(RegionError(message))
}

/// Updates at one time.
#[derive(Clone, Debug)]
struct Message {
    time: Time,
    updates: History,
}

/// What moves messages and counts them: queues, the tracker, the activations.
struct Runtime {
    tracker: Tracker,
    queues: Vec<Vec<Vec<Message>>>,
    /// per node, the `(node, port)` its output feeds
    targets: Vec<Vec<(usize, usize)>>,
    /// messages pulled in this step, still counted at their target
    consumed: Vec<(usize, usize, Time)>,
    active: BinaryHeap<Reverse<usize>>,
    is_active: Vec<bool>,
    steps: u64,
}

impl Runtime {
    fn activate(&mut self, node: usize) {
        if !self.is_active[node] {
            self.is_active[node] = true;
            self.active.push(Reverse(node));
        }
    }

    fn send(&mut self, from: usize, time: Time, updates: History) -> Result<(), RegionError> {
        if updates.is_empty() {
            return Ok(());
        }
        let targets = self.targets[from].clone();
        let Some((&last, rest)) = targets.split_last() else {
            return Ok(());
        };
        for &(node, port) in rest {
            self.deliver(node, port, time.clone(), updates.clone())?;
        }
        self.deliver(last.0, last.1, time, updates)
    }

    fn deliver(
        &mut self,
        node: usize,
        port: usize,
        time: Time,
        updates: History,
    ) -> Result<(), RegionError> {
        self.tracker.update_target(node, port, &time, 1)?;
        self.queues[node][port].push(Message { time, updates });
        self.activate(node);
        Ok(())
    }

    fn pull(&mut self, node: usize, port: usize) -> Vec<Message> {
        let messages = std::mem::take(&mut self.queues[node][port]);
        for m in &messages {
            self.consumed.push((node, port, m.time.clone()));
        }
        messages
    }

    fn hold(&mut self, node: usize, time: &[i64], delta: i64) -> Result<(), RegionError> {
        Ok(self.tracker.update_source(node, 0, time, delta)?)
    }

    /// Takes the messages pulled so far off the books and brings the frontiers up to date;
    /// nodes whose frontiers moved are activated, except `me`, which reads them next.
    fn settle(&mut self, me: usize) -> Result<(), RegionError> {
        for (node, port, time) in std::mem::take(&mut self.consumed) {
            self.tracker.update_target(node, port, &time, -1)?;
        }
        for n in self.tracker.propagate() {
            if n != me {
                self.activate(n);
            }
        }
        Ok(())
    }

    fn frontier(&self, tt: &TimeType, node: usize, port: usize) -> Result<Antichain, RegionError> {
        let times = self.tracker.frontier(node, port)?;
        Ok(Antichain::from_times(tt, times.iter().map(Vec::as_slice)))
    }
}

/// The state of one node.
enum State {
    Stateless,
    Variable(BTreeMap<Time, i64>),
    Feedback(BTreeMap<Time, History>),
    Join(Box<JoinState>),
    Reduce(Box<ReduceState>),
    Sink(Vec<Message>),
}

struct JoinState {
    left: Spine,
    right: Spine,
    /// the frontiers each arrangement was advanced to, and their generations
    since: [Antichain; 2],
    generation: [u64; 2],
    arity: [usize; 2],
}

struct ReduceState {
    reducer: Reducer,
    held: Vec<Time>,
    taken: usize,
}

/// A loop region (see the module).
pub struct Region {
    specs: Vec<NodeSpec>,
    states: Vec<State>,
    rt: Runtime,
    /// the source and sink nodes, by input and output
    sources: Vec<usize>,
    sinks: Vec<usize>,
    /// the capabilities each source holds: the enclosing graph's frontier of that input
    source_caps: Vec<Vec<Time>>,
}

fn port_types(specs: &[NodeSpec], n: usize) -> Vec<TimeType> {
    specs[n]
        .inputs
        .iter()
        .map(|&up| specs[up].time.clone())
        .collect()
}

impl Region {
    /// A region of these nodes, each source holding a capability at the least time.
    pub fn new(specs: Vec<NodeSpec>) -> Result<Self, RegionError> {
        let mut graph = ProgressGraph::new();
        let mut sources = Vec::new();
        let mut sinks = Vec::new();
        let mut watched = HashSet::new();
        let mut merged = HashSet::new();
        let mut on_demand = HashSet::new();
        let mut states = Vec::new();
        for (n, spec) in specs.iter().enumerate() {
            if let Some(&up) = spec.inputs.iter().find(|&&up| up >= specs.len()) {
                return invalid(format!("node {n} reads node {up}, which the region lacks"));
            }
            let ins = port_types(&specs, n);
            let tt = &spec.time;
            let arity_in: Vec<usize> = spec.inputs.iter().map(|&up| specs[up].arity).collect();
            let same = |what: &str| -> Result<(), RegionError> {
                if ins.iter().any(|t| t != tt) {
                    return invalid(format!("node {n} ({what}) reads times of another type"));
                }
                if arity_in.iter().any(|&a| a != spec.arity) && what != "map" {
                    return invalid(format!("node {n} ({what}) reads rows of another width"));
                }
                Ok(())
            };
            let ports = |k: usize, what: &str| -> Result<(), RegionError> {
                if spec.inputs.len() != k {
                    return invalid(format!(
                        "node {n} ({what}) has {} inputs, not {k}",
                        spec.inputs.len()
                    ));
                }
                Ok(())
            };
            let identity = |out: &TimeType| {
                (0..ins.len())
                    .map(|i| (i, 0, Summary::identity(out)))
                    .collect::<Vec<_>>()
            };
            let (summaries, state) = match &spec.kind {
                Kind::Source => {
                    ports(0, "source")?;
                    sources.push(n);
                    (Vec::new(), State::Stateless)
                }
                Kind::Sink => {
                    ports(1, "sink")?;
                    same("sink")?;
                    sinks.push(n);
                    watched.insert(n);
                    on_demand.insert(n);
                    (Vec::new(), State::Sink(Vec::new()))
                }
                Kind::Map(exprs) => {
                    ports(1, "map")?;
                    same("map")?;
                    let mut cols = Vec::new();
                    exprs.iter().for_each(|e| e.columns(&mut cols));
                    if exprs.len() != spec.arity || cols.iter().any(|&c| c >= arity_in[0]) {
                        return invalid(format!("node {n}'s expressions do not fit its rows"));
                    }
                    (identity(tt), State::Stateless)
                }
                Kind::Filter(e) => {
                    ports(1, "filter")?;
                    same("filter")?;
                    let mut cols = Vec::new();
                    e.columns(&mut cols);
                    if cols.iter().any(|&c| c >= spec.arity) {
                        return invalid(format!("node {n}'s predicate does not fit its rows"));
                    }
                    (identity(tt), State::Stateless)
                }
                Kind::Negate => {
                    ports(1, "negate")?;
                    same("negate")?;
                    (identity(tt), State::Stateless)
                }
                Kind::Concat => {
                    same("concat")?;
                    (identity(tt), State::Stateless)
                }
                Kind::Variable => {
                    ports(2, "variable")?;
                    same("variable")?;
                    (identity(tt), State::Variable(BTreeMap::new()))
                }
                Kind::Enter(c) => {
                    ports(1, "enter")?;
                    let s = Summary::enter(&ins[0], *c);
                    if s.out_type() != tt || arity_in[0] != spec.arity {
                        return invalid(format!("node {n} (enter) does not enter its loop"));
                    }
                    (vec![(0, 0, s)], State::Stateless)
                }
                Kind::Leave => {
                    ports(1, "leave")?;
                    if ins[0].coordinates().is_empty() || arity_in[0] != spec.arity {
                        return invalid(format!("node {n} (leave) leaves no loop"));
                    }
                    let s = Summary::leave(&ins[0]);
                    if s.out_type() != tt {
                        return invalid(format!("node {n} (leave) does not leave its loop"));
                    }
                    (vec![(0, 0, s)], State::Stateless)
                }
                Kind::Feedback { .. } => {
                    ports(2, "feedback")?;
                    same("feedback")?;
                    if tt.coordinates().last() != Some(&Coordinate::Product) {
                        return invalid(format!("node {n} (feedback) is not in a plain loop"));
                    }
                    watched.insert(n);
                    merged.insert(n);
                    let inc = Summary::increment(tt, 1);
                    (
                        vec![(0, 0, inc.clone()), (1, 0, inc)],
                        State::Feedback(BTreeMap::new()),
                    )
                }
                Kind::Join {
                    left_keys,
                    right_keys,
                    output,
                } => {
                    ports(2, "join")?;
                    if ins.iter().any(|t| t != tt) {
                        return invalid(format!("node {n} (join) reads times of another type"));
                    }
                    if left_keys.len() != right_keys.len()
                        || left_keys.iter().any(|&c| c >= arity_in[0])
                        || right_keys.iter().any(|&c| c >= arity_in[1])
                        || output.len() != spec.arity
                        || output.iter().any(|&(s, c)| s > 1 || c >= arity_in[s])
                    {
                        return invalid(format!("node {n}'s join columns do not fit its rows"));
                    }
                    // (it reads its frontiers only to compact its arrangements: computed when
                    // read, from the counts, rather than kept up to date)
                    watched.insert(n);
                    on_demand.insert(n);
                    let w = tt.width();
                    let kw = left_keys.len();
                    let state = JoinState {
                        left: Spine::new(kw, arity_in[0], w, false),
                        right: Spine::new(kw, arity_in[1], w, false),
                        since: [
                            Antichain::from_times(tt, [tt.minimum().as_slice()]),
                            Antichain::from_times(tt, [tt.minimum().as_slice()]),
                        ],
                        generation: [0, 0],
                        arity: [arity_in[0], arity_in[1]],
                    };
                    (identity(tt), State::Join(Box::new(state)))
                }
                Kind::Reduce {
                    keys,
                    values,
                    logic,
                } => {
                    ports(1, "reduce")?;
                    if ins[0] != *tt {
                        return invalid(format!("node {n} (reduce) reads times of another type"));
                    }
                    if *logic == Logic::Threshold
                        || keys.iter().chain(values).any(|&c| c >= arity_in[0])
                        || keys.len() + logic.outputs() != spec.arity
                    {
                        return invalid(format!("node {n}'s reduce does not fit its rows"));
                    }
                    watched.insert(n);
                    merged.insert(n);
                    let reducer = Reducer::new(tt.clone(), logic.clone(), keys.len(), values.len());
                    let state = ReduceState {
                        reducer,
                        held: Vec::new(),
                        taken: 0,
                    };
                    (identity(tt), State::Reduce(Box::new(state)))
                }
            };
            let outputs = if matches!(spec.kind, Kind::Sink) {
                Vec::new()
            } else {
                vec![tt.clone()]
            };
            graph.add_node(ins, outputs, Some(summaries))?;
            states.push(state);
        }
        let mut targets = vec![Vec::new(); specs.len()];
        for (n, spec) in specs.iter().enumerate() {
            for (port, &up) in spec.inputs.iter().enumerate() {
                if matches!(specs[up].kind, Kind::Sink) {
                    return invalid(format!("node {n} reads a sink"));
                }
                graph.add_edge((up, 0), (n, port))?;
                targets[up].push((n, port));
            }
        }
        let watching = Watching {
            watched: Some(watched),
            on_demand,
            merged,
        };
        let mut tracker = Tracker::new(&graph, &watching)?;
        let mut source_caps = Vec::new();
        for &s in &sources {
            let least = specs[s].time.minimum();
            tracker.update_source(s, 0, &least, 1)?;
            source_caps.push(vec![least]);
        }
        tracker.propagate();
        let n = specs.len();
        let queues = specs
            .iter()
            .map(|s| vec![Vec::new(); s.inputs.len()])
            .collect();
        Ok(Region {
            states,
            rt: Runtime {
                tracker,
                queues,
                targets,
                consumed: Vec::new(),
                active: BinaryHeap::new(),
                is_active: vec![false; n],
                steps: 0,
            },
            specs,
            sources,
            sinks,
            source_caps,
        })
    }

    /// How many inputs and outputs.
    pub fn ports(&self) -> (usize, usize) {
        (self.sources.len(), self.sinks.len())
    }

    /// How many operator steps the region has run.
    pub fn steps(&self) -> u64 {
        self.rt.steps
    }

    /// New updates at input `input` (of any times in advance of its frontier), sent on as
    /// one message per time.
    pub fn push(&mut self, input: usize, updates: History) -> Result<(), RegionError> {
        let Some(&source) = self.sources.get(input) else {
            return invalid(format!("the region has no input {input}"));
        };
        let spec = &self.specs[source];
        if updates.arity() != spec.arity || updates.width() != spec.time.width() {
            return invalid(format!(
                "updates of {} columns and times of {} integers at input {input}, which has \
                 {} and {}",
                updates.arity(),
                updates.width(),
                spec.arity,
                spec.time.width()
            ));
        }
        for (time, part) in by_time(updates) {
            self.rt.send(source, time, part)?;
        }
        Ok(())
    }

    /// The enclosing graph's frontier at input `input`: the times at which updates may still
    /// come there.
    pub fn set_input_frontier(
        &mut self,
        input: usize,
        frontier: Vec<Time>,
    ) -> Result<(), RegionError> {
        let Some(&source) = self.sources.get(input) else {
            return invalid(format!("the region has no input {input}"));
        };
        let old = std::mem::replace(&mut self.source_caps[input], frontier.clone());
        for t in &frontier {
            self.rt.hold(source, t, 1)?;
        }
        for t in &old {
            self.rt.hold(source, t, -1)?;
        }
        for n in self.rt.tracker.propagate() {
            self.rt.activate(n);
        }
        Ok(())
    }

    /// Steps the operators until none has work left. As the Python scheduler does, the
    /// count changes of a step are pushed to the frontiers only before an operator that
    /// reads frontiers kept up to date runs (a feedback, a reduce), or when none is left to
    /// run; before a join, whose frontiers are computed when read, they are only counted.
    /// A message passing through linear operators then costs no propagation.
    pub fn run(&mut self) -> Result<(), RegionError> {
        loop {
            let next = self.rt.active.peek().map(|r| r.0);
            match next.map(|n| &self.specs[n].kind) {
                None | Some(Kind::Feedback { .. } | Kind::Reduce { .. }) => {
                    for n in self.rt.tracker.propagate() {
                        self.rt.activate(n);
                    }
                }
                Some(Kind::Join { .. }) => self.rt.tracker.count_pending(),
                Some(_) => {}
            }
            let Some(Reverse(node)) = self.rt.active.pop() else {
                break;
            };
            self.rt.is_active[node] = false;
            self.step(node)?;
            self.rt.steps += 1;
            for (n, port, time) in std::mem::take(&mut self.rt.consumed) {
                self.rt.tracker.update_target(n, port, &time, -1)?;
            }
        }
        self.rt.tracker.count_pending();
        Ok(())
    }

    /// The updates output `output` has received since the last call, by time.
    pub fn take_output(&mut self, output: usize) -> Vec<(Time, History)> {
        match self.sinks.get(output).map(|&n| &mut self.states[n]) {
            Some(State::Sink(out)) => std::mem::take(out)
                .into_iter()
                .map(|m| (m.time, m.updates))
                .collect(),
            _ => Vec::new(),
        }
    }

    /// The minimal outer times at which the region may still send output by itself: from the
    /// work pending inside it, not counting what its inputs may still bring.
    pub fn capabilities(&self) -> Result<Vec<Time>, RegionError> {
        let mut times: Vec<Time> = Vec::new();
        for &s in &self.sinks {
            times.extend(self.rt.tracker.frontier_excluding(s, 0, &self.sources)?);
        }
        times.sort();
        times.dedup();
        let Some(&s) = self.sinks.first() else {
            return Ok(times);
        };
        let tt = &self.specs[s].time;
        let mut minimal: Vec<Time> = Vec::new();
        for t in times {
            if !minimal.iter().any(|m| tt.less_equal(m, &t)) {
                minimal.push(t);
            }
        }
        Ok(minimal)
    }

    /// The updates each variable has received per time since the last call:
    /// `(node, time, updates)`.
    pub fn take_variable_counts(&mut self) -> Vec<(usize, Time, i64)> {
        let mut out = Vec::new();
        for (n, state) in self.states.iter_mut().enumerate() {
            if let State::Variable(counts) = state {
                out.extend(std::mem::take(counts).into_iter().map(|(t, c)| (n, t, c)));
            }
        }
        out
    }

    fn step(&mut self, node: usize) -> Result<(), RegionError> {
        let spec = &self.specs[node];
        let rt = &mut self.rt;
        match (&spec.kind, &mut self.states[node]) {
            (Kind::Source, _) => Ok(()),
            (Kind::Sink, State::Sink(out)) => {
                out.extend(rt.pull(node, 0));
                Ok(())
            }
            (Kind::Feedback { limit }, State::Feedback(buffer)) => {
                feedback(rt, node, &spec.time, *limit, buffer)
            }
            (Kind::Join { .. }, State::Join(state)) => join(rt, node, spec, state),
            (Kind::Reduce { keys, values, .. }, State::Reduce(state)) => {
                reduce(rt, node, &spec.time, keys, values, state)
            }
            (kind, state) => {
                for port in 0..spec.inputs.len() {
                    for m in rt.pull(node, port) {
                        if let State::Variable(counts) = state {
                            *counts.entry(m.time.clone()).or_insert(0) += m.updates.len() as i64;
                        }
                        let (time, updates) = linear(kind, spec, m)?;
                        rt.send(node, time, updates)?;
                    }
                }
                Ok(())
            }
        }
    }
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;

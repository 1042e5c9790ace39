//! Progress tracking: pointstamps, path summaries and frontiers (naiad-timely-dataflow §2.3).
//!
//! The rules of the Python `ddflow.timely.progress`, which the scheduler uses through the
//! bindings and which a differential test compares with this module at every step.
//!
//! Every port of every operator is a *location*: an operator's inputs are *targets*, its
//! outputs *sources*. A *pointstamp* `(location, time)` is something that may still produce
//! data: a message queued at a target, or a capability held at a source. The tracker keeps an
//! occurrence count for every pointstamp, and for every watched target the frontier
//!
//! ```text
//! frontier(T) = minimal { s(t) : count(L, t) > 0, s in summaries(L -> T) }
//! ```
//!
//! where `summaries(L -> T)` is the antichain of minimal path summaries from `L` to `T`
//! (the *could-result-in* relation). A time is complete at `T` when no pointstamp could still
//! result in it. Count changes are pushed through the precomputed summaries into one
//! [`MutableAntichain`] per target, so an update costs in proportion to the targets it
//! reaches. A target read only now and then (a join's) can instead have its frontier computed
//! when read, from the counts held at the locations that reach it (*on demand*).

use std::collections::{HashMap, HashSet};
use std::fmt;

use crate::hash::FastMap;
use crate::lattice::{minimal_sorted, Coordinate, MutableAntichain, TimeType};

/// A port: `(node, port)`.
pub type Port = (usize, usize);

/// A path summary: keep the first `keep` integers of a time, add `adds` to them, then append
/// `append`; the result is a time of `out`.
///
/// ```
/// use ddflow_core::lattice::{Coordinate::*, TimeType};
/// use ddflow_core::progress::Summary;
/// let epochs = TimeType::epochs();
/// let inner = TimeType::new(&[Product, Product]);
/// let s = Summary::enter(&epochs, Product).then(&Summary::increment(&inner, 2));
/// assert_eq!(s.apply(&[5]), vec![5, 2]);
/// assert_eq!(s.then(&Summary::leave(&inner)).apply(&[5]), vec![5]);
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Summary {
    keep: usize,
    adds: Vec<i64>,
    append: Vec<i64>,
    out: TimeType,
    shifts: bool,
}

impl Summary {
    /// A summary from its parts; an error unless `adds` has `keep` integers and the result
    /// (`keep` plus `append`) has the width of `out`.
    pub fn new(
        keep: usize,
        adds: Vec<i64>,
        append: Vec<i64>,
        out: TimeType,
    ) -> Result<Self, ProgressError> {
        if adds.len() != keep || keep + append.len() != out.width() {
            return Err(ProgressError::Invalid(format!(
                "a summary keeping {keep} integers with {} additions and {} appended, into \
                 times of {} integers",
                adds.len(),
                append.len(),
                out.width()
            )));
        }
        let shifts = adds.iter().any(|&a| a != 0);
        Ok(Summary {
            keep,
            adds,
            append,
            out,
            shifts,
        })
    }

    fn of(keep: usize, adds: Vec<i64>, append: Vec<i64>, out: TimeType) -> Self {
        let shifts = adds.iter().any(|&a| a != 0);
        Summary {
            keep,
            adds,
            append,
            out,
            shifts,
        }
    }

    /// The summary of an edge: the time unchanged.
    pub fn identity(tt: &TimeType) -> Self {
        Self::of(tt.width(), vec![0; tt.width()], Vec::new(), tt.clone())
    }

    /// Ingress into a loop: append the least value of the new coordinate.
    pub fn enter(outer: &TimeType, coordinate: Coordinate) -> Self {
        let mut cs = outer.coordinates().to_vec();
        cs.push(coordinate);
        let inner = TimeType::new(&cs);
        let extra = inner.width() - outer.width();
        Self::of(outer.width(), vec![0; outer.width()], vec![0; extra], inner)
    }

    /// Egress from a loop: drop the loop's coordinate.
    pub fn leave(inner: &TimeType) -> Self {
        let cs = inner.coordinates();
        let outer = TimeType::new(&cs[..cs.len() - 1]);
        Self::of(outer.width(), vec![0; outer.width()], Vec::new(), outer)
    }

    /// A loop's feedback: add `amount` to the last integer (the innermost iteration).
    pub fn increment(tt: &TimeType, amount: i64) -> Self {
        let mut adds = vec![0; tt.width()];
        if let Some(last) = adds.last_mut() {
            *last = amount;
        }
        Self::of(tt.width(), adds, Vec::new(), tt.clone())
    }

    /// The time type of the summary's results.
    pub fn out_type(&self) -> &TimeType {
        &self.out
    }

    /// The summary applied to `t`.
    pub fn apply(&self, t: &[i64]) -> Vec<i64> {
        let mut out = Vec::with_capacity(self.keep + self.append.len());
        if self.shifts {
            out.extend(t[..self.keep].iter().zip(&self.adds).map(|(a, b)| a + b));
        } else {
            out.extend_from_slice(&t[..self.keep]);
        }
        out.extend_from_slice(&self.append);
        out
    }

    /// This summary followed by `other`.
    pub fn then(&self, other: &Summary) -> Summary {
        let (k1, k2) = (self.keep, other.keep);
        if k2 <= k1 {
            let adds = (0..k2).map(|i| self.adds[i] + other.adds[i]).collect();
            return Self::of(k2, adds, other.append.clone(), other.out.clone());
        }
        let adds = (0..k1).map(|i| self.adds[i] + other.adds[i]).collect();
        let mut append: Vec<i64> = (0..k2 - k1)
            .map(|j| self.append[j] + other.adds[k1 + j])
            .collect();
        append.extend_from_slice(&other.append);
        Self::of(k1, adds, append, other.out.clone())
    }

    /// `self(t) <= other(t)` for every time `t`.
    pub fn less_equal(&self, other: &Summary) -> bool {
        if self.keep != other.keep || self.out != other.out {
            return false;
        }
        let a: Vec<i64> = self.adds.iter().chain(&self.append).copied().collect();
        let b: Vec<i64> = other.adds.iter().chain(&other.append).copied().collect();
        self.out.less_equal(&a, &b)
    }
}

/// An error in a progress graph or in a use of the tracker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProgressError {
    /// A malformed graph, summary or time (the message says which).
    Invalid(String),
    /// A cycle whose path summary does not advance time.
    Cycle(usize),
    /// The frontier of a target that is not tracked was asked for.
    Untracked(usize),
}

impl fmt::Display for ProgressError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProgressError::Invalid(m) => f.write_str(m),
            ProgressError::Cycle(n) => write!(
                f,
                "the dataflow has a cycle through node {n} that does not advance time: every \
                 cycle must pass through a loop's feedback"
            ),
            ProgressError::Untracked(n) => write!(
                f,
                "the frontier of node {n} is not tracked: the node was declared not to watch \
                 its frontier"
            ),
        }
    }
}

impl std::error::Error for ProgressError {}

/// The shape of a dataflow graph as progress tracking sees it: nodes with typed ports,
/// internal summaries from inputs to outputs, and edges from outputs to inputs.
#[derive(Clone, Debug, Default)]
pub struct ProgressGraph {
    inputs: Vec<Vec<TimeType>>,
    outputs: Vec<Vec<TimeType>>,
    internal: Vec<Vec<(usize, usize, Summary)>>,
    edges: HashMap<Port, Vec<Port>>,
}

impl ProgressGraph {
    /// An empty graph.
    pub fn new() -> Self {
        Self::default()
    }

    /// How many nodes the graph has.
    pub fn nodes(&self) -> usize {
        self.inputs.len()
    }

    /// Add a node; `internal` holds `(input, output, summary)`. `None`: every input reaches
    /// every output unchanged (the ports then share one time type).
    pub fn add_node(
        &mut self,
        inputs: Vec<TimeType>,
        outputs: Vec<TimeType>,
        internal: Option<Vec<(usize, usize, Summary)>>,
    ) -> Result<usize, ProgressError> {
        let node = self.inputs.len();
        let internal = match internal {
            Some(internal) => {
                for (i, j, s) in &internal {
                    let (Some(ti), Some(tj)) = (inputs.get(*i), outputs.get(*j)) else {
                        return Err(ProgressError::Invalid(format!(
                            "node {node} summarizes input {i} to output {j}, which it lacks"
                        )));
                    };
                    if s.keep > ti.width() || s.out_type() != tj {
                        return Err(ProgressError::Invalid(format!(
                            "node {node}'s summary from input {i} to output {j} does not fit \
                             their time types"
                        )));
                    }
                }
                internal
            }
            None => {
                let mut internal = Vec::new();
                for (i, ti) in inputs.iter().enumerate() {
                    for (j, tj) in outputs.iter().enumerate() {
                        if ti != tj {
                            return Err(ProgressError::Invalid(
                                "a node whose ports differ in time type needs summaries".into(),
                            ));
                        }
                        internal.push((i, j, Summary::identity(ti)));
                    }
                }
                internal
            }
        };
        self.inputs.push(inputs);
        self.outputs.push(outputs);
        self.internal.push(internal);
        Ok(node)
    }

    /// Add an edge from an output port to an input port of the same time type.
    pub fn add_edge(&mut self, source: Port, target: Port) -> Result<(), ProgressError> {
        let from = self.outputs.get(source.0).and_then(|o| o.get(source.1));
        let to = self.inputs.get(target.0).and_then(|i| i.get(target.1));
        match (from, to) {
            (Some(a), Some(b)) if a == b => {
                self.edges.entry(source).or_default().push(target);
                Ok(())
            }
            (Some(_), Some(_)) => Err(ProgressError::Invalid(format!(
                "edge {source:?} -> {target:?} joins ports of different time types"
            ))),
            _ => Err(ProgressError::Invalid(format!(
                "edge {source:?} -> {target:?} names a port the graph lacks"
            ))),
        }
    }

    /// Minimal summaries from a location (`source`: an output port, else an input port) to
    /// every input port it reaches (Bellman-Ford over antichains of summaries; a cycle
    /// terminates because it passes through an increment, and one that does not is an
    /// error).
    fn reach(
        &self,
        source: bool,
        start: Port,
    ) -> Result<HashMap<Port, Vec<Summary>>, ProgressError> {
        let tt = if source {
            &self.outputs[start.0][start.1]
        } else {
            &self.inputs[start.0][start.1]
        };
        let identity = Summary::identity(tt);
        let mut best: HashMap<(bool, Port), Vec<Summary>> = HashMap::new();
        best.insert((source, start), vec![identity.clone()]);
        let mut work = vec![((source, start), identity.clone())];
        while let Some(((is_source, (n, p)), s)) = work.pop() {
            let mut next: Vec<((bool, Port), Summary)> = Vec::new();
            if is_source {
                for &target in self.edges.get(&(n, p)).into_iter().flatten() {
                    next.push(((false, target), s.clone()));
                }
            } else {
                for (i, j, inner) in &self.internal[n] {
                    if *i == p {
                        next.push(((true, (n, *j)), s.then(inner)));
                    }
                }
            }
            for (loc, s2) in next {
                if loc == (source, start) && s2.less_equal(&identity) {
                    return Err(ProgressError::Cycle(n));
                }
                let current = best.entry(loc).or_default();
                if current.iter().any(|c| c.less_equal(&s2)) {
                    continue;
                }
                current.retain(|c| !s2.less_equal(c));
                current.push(s2.clone());
                work.push((loc, s2));
            }
        }
        Ok(best
            .into_iter()
            .filter(|((is_source, _), _)| !is_source)
            .map(|((_, port), s)| (port, s))
            .collect())
    }
}

/// Which nodes' input frontiers a [`Tracker`] keeps, and how.
#[derive(Clone, Debug, Default)]
pub struct Watching {
    /// The nodes whose input frontiers are read (`None`: all).
    pub watched: Option<HashSet<usize>>,
    /// Watched nodes whose frontiers are computed when read, from the counts held.
    pub on_demand: HashSet<usize>,
    /// Watched nodes whose ports share one frontier, that of port 0.
    pub merged: HashSet<usize>,
}

/// Occurrence counts of pointstamps and the frontier they imply at every watched target.
#[derive(Debug)]
pub struct Tracker {
    inputs: Vec<Vec<TimeType>>,
    outputs: Vec<Vec<TimeType>>,
    /// the kept targets, by index
    targets: Vec<Port>,
    target_index: HashMap<Port, usize>,
    implied: Vec<MutableAntichain>,
    /// per location: the kept targets it reaches, grouped by the minimal summary to them
    reaches: Vec<Vec<(Summary, Vec<usize>)>>,
    /// the location of each source port, then of each target port
    source_location: Vec<Vec<usize>>,
    target_location: Vec<Vec<usize>>,
    /// an on-demand target -> the locations that reach it -> their minimal summaries
    into: HashMap<Port, HashMap<usize, Vec<Summary>>>,
    /// the counts of the locations an on-demand frontier reads
    counts: Vec<FastMap<Vec<i64>, i64>>,
    read: Vec<bool>,
    /// the read locations holding counts now
    held: HashSet<usize>,
    /// count changes not propagated yet: (location, time, delta)
    pending: Vec<(usize, Vec<i64>, i64)>,
    /// how many of them `counts` holds already
    counted: usize,
    /// per location: the (target, time) a pointstamp at a time reaches
    reached: Vec<FastMap<Vec<i64>, Reached>>,
    reached_size: usize,
}

/// The (kept target, time) pairs a pointstamp reaches.
type Reached = Vec<(usize, Vec<i64>)>;

/// At most this many entries are kept in the reached cache (then it starts again).
const REACHED_CACHE: usize = 4096;

impl Tracker {
    /// A tracker of `graph` with no pointstamp counted.
    pub fn new(graph: &ProgressGraph, watching: &Watching) -> Result<Self, ProgressError> {
        let is_watched = |n: usize| watching.watched.as_ref().map_or(true, |w| w.contains(&n));
        let tracked: Vec<Port> = (0..graph.nodes())
            .filter(|&n| is_watched(n))
            .flat_map(|n| (0..graph.inputs[n].len()).map(move |i| (n, i)))
            .collect();
        let targets: Vec<Port> = tracked
            .iter()
            .copied()
            .filter(|&(n, i)| {
                !watching.on_demand.contains(&n) && (i == 0 || !watching.merged.contains(&n))
            })
            .collect();
        let mut target_index: HashMap<Port, usize> =
            targets.iter().enumerate().map(|(k, &p)| (p, k)).collect();
        for &(n, i) in &tracked {
            if i > 0 && watching.merged.contains(&n) && !watching.on_demand.contains(&n) {
                let k = target_index[&(n, 0)];
                target_index.insert((n, i), k);
            }
        }
        let implied = targets
            .iter()
            .map(|&(n, i)| MutableAntichain::new(graph.inputs[n][i].clone()))
            .collect();
        let mut into: HashMap<Port, HashMap<usize, Vec<Summary>>> = tracked
            .iter()
            .filter(|(n, _)| watching.on_demand.contains(n))
            .map(|&p| (p, HashMap::new()))
            .collect();
        let mut reaches = Vec::new();
        let mut source_location = Vec::new();
        let mut target_location = Vec::new();
        for source in [true, false] {
            let ports = if source {
                &graph.outputs
            } else {
                &graph.inputs
            };
            for (n, types) in ports.iter().enumerate() {
                let mut locations = Vec::new();
                for p in 0..types.len() {
                    let loc = reaches.len();
                    locations.push(loc);
                    let summaries = graph.reach(source, (n, p))?;
                    let mut by_summary: Vec<(Summary, Vec<usize>)> = Vec::new();
                    // (ordered by target port, so that the layout does not depend on hashing)
                    let mut ordered: Vec<(&Port, &Vec<Summary>)> = summaries.iter().collect();
                    ordered.sort_by_key(|(q, _)| **q);
                    for (q, ss) in ordered {
                        if let Some(&k) = target_index.get(q) {
                            for one in ss {
                                match by_summary.iter_mut().find(|(s, _)| s == one) {
                                    Some((_, ks)) => {
                                        if !ks.contains(&k) {
                                            ks.push(k);
                                        }
                                    }
                                    None => by_summary.push((one.clone(), vec![k])),
                                }
                            }
                        }
                        if let Some(into_q) = into.get_mut(q) {
                            into_q.insert(loc, ss.clone());
                        }
                    }
                    reaches.push(by_summary);
                }
                if source {
                    source_location.push(locations);
                } else {
                    target_location.push(locations);
                }
            }
        }
        let mut read = vec![false; reaches.len()];
        for locs in into.values() {
            for &loc in locs.keys() {
                read[loc] = true;
            }
        }
        let n = reaches.len();
        Ok(Tracker {
            inputs: graph.inputs.clone(),
            outputs: graph.outputs.clone(),
            targets,
            target_index,
            implied,
            reaches,
            source_location,
            target_location,
            into,
            counts: vec![FastMap::default(); n],
            read,
            held: HashSet::new(),
            pending: Vec::new(),
            counted: 0,
            reached: vec![FastMap::default(); n],
            reached_size: 0,
        })
    }

    fn location(&self, source: bool, node: usize, port: usize) -> Result<usize, ProgressError> {
        let locations = if source {
            &self.source_location
        } else {
            &self.target_location
        };
        locations
            .get(node)
            .and_then(|ps| ps.get(port))
            .copied()
            .ok_or_else(|| {
                let kind = if source { "output" } else { "input" };
                ProgressError::Invalid(format!("node {node} has no {kind} port {port}"))
            })
    }

    fn change(
        &mut self,
        source: bool,
        node: usize,
        port: usize,
        time: &[i64],
        delta: i64,
    ) -> Result<(), ProgressError> {
        let loc = self.location(source, node, port)?;
        let (kind, width) = if source {
            ("output", self.outputs[node][port].width())
        } else {
            ("input", self.inputs[node][port].width())
        };
        if time.len() != width {
            return Err(ProgressError::Invalid(format!(
                "a time of {} integers at node {node}'s {kind} {port}, whose times have {width}",
                time.len()
            )));
        }
        if delta != 0 {
            self.pending.push((loc, time.to_vec(), delta));
        }
        Ok(())
    }

    /// A capability at an operator output changed count (not visible until
    /// [`Tracker::propagate`]).
    pub fn update_source(
        &mut self,
        node: usize,
        port: usize,
        time: &[i64],
        delta: i64,
    ) -> Result<(), ProgressError> {
        self.change(true, node, port, time, delta)
    }

    /// A message at an operator input changed count (not visible until
    /// [`Tracker::propagate`]).
    pub fn update_target(
        &mut self,
        node: usize,
        port: usize,
        time: &[i64],
        delta: i64,
    ) -> Result<(), ProgressError> {
        self.change(false, node, port, time, delta)
    }

    /// Bring the counts that on-demand frontiers read up to date with the pending changes,
    /// without pushing them to any target; the changes stay pending (and may still cancel
    /// with later ones before they are pushed).
    pub fn count_pending(&mut self) {
        for (loc, t, d) in &self.pending[self.counted..] {
            if !self.read[*loc] {
                continue;
            }
            let at = &mut self.counts[*loc];
            let left = match at.get_mut(t.as_slice()) {
                Some(c) => {
                    *c += d;
                    *c
                }
                None => {
                    at.insert(t.clone(), *d);
                    *d
                }
            };
            if left != 0 {
                self.held.insert(*loc);
            } else {
                at.remove(t.as_slice());
                if at.is_empty() {
                    self.held.remove(loc);
                }
            }
        }
        self.counted = self.pending.len();
    }

    /// How many count changes are not propagated yet.
    pub fn pending_changes(&self) -> usize {
        self.pending.len()
    }

    /// How many of them the counts on-demand frontiers read do not hold yet.
    pub fn uncounted_changes(&self) -> usize {
        self.pending.len() - self.counted
    }

    /// Apply the pending count changes; the nodes whose input frontiers changed, in
    /// increasing order.
    pub fn propagate(&mut self) -> Vec<usize> {
        if self.pending.is_empty() {
            return Vec::new();
        }
        self.count_pending();
        let mut pending = std::mem::take(&mut self.pending);
        self.counted = 0;
        // consolidated per (location, time): +1/-1 pairs cost nothing downstream
        pending.sort_unstable_by(|a, b| (a.0, &a.1).cmp(&(b.0, &b.1)));
        let mut w = 0;
        for r in 0..pending.len() {
            if w > 0 && pending[w - 1].0 == pending[r].0 && pending[w - 1].1 == pending[r].1 {
                pending[w - 1].2 += pending[r].2;
            } else {
                pending.swap(w, r);
                w += 1;
            }
        }
        pending.truncate(w);
        pending.retain(|p| p.2 != 0);
        if self.reached_size > REACHED_CACHE {
            self.reached.iter_mut().for_each(FastMap::clear);
            self.reached_size = 0;
        }
        // the (target, time) each change reaches, cached per location and time
        for (loc, t, _) in &pending {
            let cache = &mut self.reached[*loc];
            if !cache.contains_key(t.as_slice()) {
                let reached: Reached = self.reaches[*loc]
                    .iter()
                    .flat_map(|(s, ks)| {
                        let t2 = s.apply(t);
                        ks.iter().map(move |&k| (k, t2.clone()))
                    })
                    .collect();
                cache.insert(t.clone(), reached);
                self.reached_size += 1;
            }
        }
        let reached = &self.reached;
        let mut changes: Vec<(usize, &[i64], i64)> = Vec::new();
        for (loc, t, d) in &pending {
            for (k, t2) in &reached[*loc][t.as_slice()] {
                changes.push((*k, t2.as_slice(), *d));
            }
        }
        changes.sort_by_key(|c| c.0);
        let mut changed: Vec<usize> = Vec::new();
        for run in changes.chunk_by(|a, b| a.0 == b.0) {
            let k = run[0].0;
            if self.implied[k].apply(run.iter().map(|c| (c.1, c.2))) {
                changed.push(self.targets[k].0);
            }
        }
        changed.sort_unstable();
        changed.dedup();
        changed
    }

    /// The frontier at an operator input: the minimal times that may still arrive there, in
    /// lexicographic order.
    pub fn frontier(&self, node: usize, port: usize) -> Result<Vec<Vec<i64>>, ProgressError> {
        if let Some(&k) = self.target_index.get(&(node, port)) {
            return Ok(self.implied[k].frontier().to_vec());
        }
        match self.into.get(&(node, port)) {
            Some(into) => Ok(self.frontier_now(&self.inputs[node][port], into)),
            None => Err(ProgressError::Untracked(node)),
        }
    }

    /// The on-demand frontier of `(node, port)` as if the outputs of the nodes `skip` held
    /// no capability: what the rest of the graph may still send there (a region's outputs,
    /// without its inputs' capabilities, which the enclosing graph counts itself).
    pub fn frontier_excluding(
        &self,
        node: usize,
        port: usize,
        skip: &[usize],
    ) -> Result<Vec<Vec<i64>>, ProgressError> {
        let into = self
            .into
            .get(&(node, port))
            .ok_or(ProgressError::Untracked(node))?;
        let skipped: HashSet<usize> = skip
            .iter()
            .filter_map(|n| self.source_location.get(*n))
            .flatten()
            .copied()
            .collect();
        Ok(self.frontier_from(&self.inputs[node][port], into, &skipped))
    }

    /// An on-demand frontier: the minimal times the pointstamps held at the locations `into`
    /// imply through their summaries.
    fn frontier_now(&self, tt: &TimeType, into: &HashMap<usize, Vec<Summary>>) -> Vec<Vec<i64>> {
        self.frontier_from(tt, into, &HashSet::new())
    }

    fn frontier_from(
        &self,
        tt: &TimeType,
        into: &HashMap<usize, Vec<Summary>>,
        skipped: &HashSet<usize>,
    ) -> Vec<Vec<i64>> {
        let mut times: Vec<Vec<i64>> = Vec::new();
        for loc in &self.held {
            if skipped.contains(loc) {
                continue;
            }
            if let Some(summaries) = into.get(loc) {
                for (t, &c) in &self.counts[*loc] {
                    if c > 0 {
                        times.extend(summaries.iter().map(|s| s.apply(t)));
                    }
                }
            }
        }
        times.sort_unstable();
        times.dedup();
        minimal_sorted(tt, times)
    }

    /// No pointstamp is left anywhere a frontier is read.
    pub fn all_complete(&self) -> bool {
        let holds = |loc: &usize| self.counts[*loc].values().any(|&c| c > 0);
        self.implied.iter().all(MutableAntichain::is_empty)
            && self.into.values().all(|into| {
                !self
                    .held
                    .iter()
                    .any(|loc| into.contains_key(loc) && holds(loc))
            })
    }
}

#[cfg(test)]
#[path = "progress_tests.rs"]
mod tests;

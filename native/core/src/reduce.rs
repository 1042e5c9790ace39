//! The reduce family over partially ordered times, one key at a time.
//!
//! A reduce maintains, for every key `k` and every complete time `t`:
//!
//! ```text
//! sum of output_k updates at times <= t  ==  f(sum of input_k updates at times <= t)
//! ```
//!
//! A [`Reducer`] owns both arrangements. Each key's updates live together (its input and
//! output [`History`], columns of `i64` values, times and diffs, and its pending times), in a
//! map ordered by the key, so that a step visits its keys in sorted order and does everything
//! for a key in one pass:
//!
//! * [`Reducer::take`]: the new updates are added to their keys' input histories; the
//!   *interesting times* of a key, the least upper bounds of the subsets of its times that
//!   contain a new time (where its accumulation may change), become pending;
//! * [`Reducer::evaluate`]: the pending `(key, time)` pairs whose time is complete at the
//!   frontier (no element of the frontier `<=` it) are evaluated, a key's in the flat
//!   lexicographic order of times (a linear extension), each seeing the corrections made at
//!   the earlier ones: `f(input_k[t]) - output_k[t]` is appended to the output and returned;
//! * [`Reducer::set_since`]: times not in advance of the frontier can no longer be told apart;
//!   a key's histories are advanced to it and consolidated when the key is next visited, and
//!   a sweep, fuelled by the work of each step, compacts the keys no step visits, so that the
//!   arrangements' size follows the live data, not the length of the history.
//!
//! What a group gives ([`Logic`]) is the [`group`](crate::group) module's.

use std::collections::{BTreeMap, BTreeSet};

use crate::group::{corrections, desired_row, Scratch};
pub use crate::group::{Aggregate, Logic};
use crate::history::History;
use crate::lattice::{Antichain, TimeType};

/// A row of nullable integer-family values (keys, values, outputs): `None` is null, ordered
/// before every value.
pub type Row = Vec<Option<i64>>;
/// A time: `width` integers.
pub type Time = Vec<i64>;

#[derive(Clone, Debug)]
struct KeyState {
    /// the input's updates (weights, for [`Logic::Weights`], as values)
    input: History,
    /// the output's updates
    output: History,
    /// the key's pending times, distinct and sorted (few: a vector, not a tree)
    pending: Vec<Time>,
    /// the `since` the histories were last compacted to (its generation)
    compacted: u64,
    /// how many updates the histories held after that compaction
    compacted_len: usize,
}

impl KeyState {
    /// Consolidates both histories (the input's values are weights where `additive`).
    fn consolidate(&mut self, additive: bool) {
        self.input.consolidate(additive);
        self.output.consolidate(false);
        self.compacted_len = self.input.len() + self.output.len();
    }
}

/// Updates of a key: `(key, values, time, diff)`.
pub type KeyedUpdate = (Row, Row, Time, i64);

/// A step's output corrections: `time → [(key, output values, diff)]`, keys in order.
pub type Corrections = BTreeMap<Time, Vec<(Row, Row, i64)>>;

/// The state of one reduce (see the module).
#[derive(Clone, Debug)]
pub struct Reducer {
    tt: TimeType,
    logic: Logic,
    /// values per input update
    arity: usize,
    keys: BTreeMap<Row, KeyState>,
    /// pending time → the keys pending at it (each once: a key's own pending set guards)
    pending: BTreeMap<Time, Vec<Row>>,
    /// the frontier histories may be advanced to, and its generation
    since: Antichain,
    generation: u64,
    /// the next key the compaction sweep visits
    sweep: Option<Row>,
    /// `(key, time)` pairs evaluated so far
    pub evaluated: u64,
    scratch: Scratch,
}

/// The order of rows `a` and `b` of `columns`.
fn cmp_rows(columns: &[Vec<Option<i64>>], a: usize, b: usize) -> std::cmp::Ordering {
    columns
        .iter()
        .map(|c| c[a].cmp(&c[b]))
        .find(|o| o.is_ne())
        .unwrap_or(std::cmp::Ordering::Equal)
}

impl Reducer {
    /// A reducer with empty arrangements, of input updates with `arity` values (weights for
    /// [`Logic::Weights`]).
    pub fn new(tt: TimeType, logic: Logic, arity: usize) -> Self {
        Reducer {
            since: Antichain::from_times(&tt, [tt.minimum().as_slice()]),
            tt,
            logic,
            arity,
            keys: BTreeMap::new(),
            pending: BTreeMap::new(),
            generation: 0,
            sweep: None,
            evaluated: 0,
            scratch: Scratch::default(),
        }
    }

    /// The time type.
    pub fn time_type(&self) -> &TimeType {
        &self.tt
    }

    fn new_key(&self) -> KeyState {
        KeyState {
            input: History::new(self.arity, self.tt.width()),
            output: History::new(self.logic.outputs(), self.tt.width()),
            pending: Vec::new(),
            compacted: 0,
            compacted_len: 0,
        }
    }

    /// How many updates the input and output arrangements hold.
    pub fn sizes(&self) -> (usize, usize) {
        self.keys
            .values()
            .fold((0, 0), |(i, o), s| (i + s.input.len(), o + s.output.len()))
    }

    /// The minimal pending times, in the flat lexicographic order.
    pub fn pending(&self) -> Vec<Time> {
        let a = Antichain::from_times(&self.tt, self.pending.keys().map(Vec::as_slice));
        let mut out: Vec<Time> = a.elements().map(<[i64]>::to_vec).collect();
        out.sort();
        out
    }

    /// [`Reducer::take_columns`] of updates given one by one.
    pub fn take(&mut self, updates: Vec<KeyedUpdate>) -> usize {
        let nk = updates.first().map_or(0, |u| u.0.len());
        let w = self.tt.width();
        let mut keys = vec![Vec::with_capacity(updates.len()); nk];
        let mut values = vec![Vec::with_capacity(updates.len()); self.arity];
        let mut times = vec![Vec::with_capacity(updates.len()); w];
        let mut diffs = Vec::with_capacity(updates.len());
        for (k, v, t, d) in updates {
            keys.iter_mut().zip(k).for_each(|(c, x)| c.push(x));
            values.iter_mut().zip(v).for_each(|(c, x)| c.push(x));
            times.iter_mut().zip(t).for_each(|(c, x)| c.push(x));
            diffs.push(d);
        }
        self.take_columns(&keys, &values, &times, &diffs)
    }

    /// Adds new input updates, given as columns (keys, values, times, diffs; for
    /// [`Logic::Weights`] the values are the weights, already multiplied by the diff), and
    /// makes their interesting times pending. Returns how many updates were added (once
    /// consolidated).
    pub fn take_columns(
        &mut self,
        keys: &[Vec<Option<i64>>],
        values: &[Vec<Option<i64>>],
        times: &[Vec<i64>],
        diffs: &[i64],
    ) -> usize {
        let mut order: Vec<usize> = (0..diffs.len()).collect();
        if let [single] = keys {
            // (one key column, the common case: sorted by its values directly)
            order.sort_by_key(|&r| single[r]);
        } else {
            order.sort_by(|&a, &b| cmp_rows(keys, a, b));
        }
        let additive = self.logic.additive();
        let mut time = vec![0; self.tt.width()];
        let mut added = 0;
        let mut new = History::new(self.arity, self.tt.width());
        let mut key: Row = Vec::with_capacity(keys.len());
        for run in order.chunk_by(|&a, &b| cmp_rows(keys, a, b).is_eq()) {
            new.clear();
            for &r in run {
                for (t, c) in time.iter_mut().zip(times) {
                    *t = c[r];
                }
                new.push(values.iter().map(|c| c[r]), &time, diffs[r]);
            }
            new.consolidate(additive);
            if new.is_empty() {
                continue;
            }
            added += new.len();
            key.clear();
            key.extend(keys.iter().map(|c| c[run[0]]));
            if !self.keys.contains_key(key.as_slice()) {
                let fresh = self.new_key();
                self.keys.insert(key.clone(), fresh);
            }
            let Some(state) = self.keys.get_mut(key.as_slice()) else {
                continue;
            };
            Self::compact_key(
                &self.tt,
                &self.since,
                self.generation,
                additive,
                state,
                false,
            );
            // (the common case, a step's updates of a key all at one time after every time
            // the key had: that time alone is interesting)
            let one = new
                .one_time()
                .filter(|t| state.input.all_before(&self.tt, t));
            let found = match one {
                Some(t) => vec![t.to_vec()],
                None => interesting_times(
                    &self.tt,
                    &new.distinct_times(),
                    &state.input.distinct_times(),
                ),
            };
            for t in found {
                if let Err(at) = state.pending.binary_search(&t) {
                    state.pending.insert(at, t.clone());
                    self.pending.entry(t).or_default().push(key.clone());
                }
            }
            state.input.extend(&new);
        }
        added
    }

    /// Evaluates the pending `(key, time)` pairs complete at `frontier`; `None` if there were
    /// none, else the output corrections by time (also appended to the output arrangement).
    pub fn evaluate(&mut self, frontier: &Antichain) -> Option<Corrections> {
        let ready: Vec<Time> = self
            .pending
            .keys()
            .filter(|t| !frontier.less_equal(&self.tt, t))
            .cloned()
            .collect();
        if ready.is_empty() {
            return None;
        }
        // the keys pending at a ready time, in key order, each evaluated once at all its
        // ready times (in the flat order of times: a linear extension)
        let mut visit: Vec<Row> = Vec::new();
        for t in &ready {
            if let Some(keys) = self.pending.remove(t) {
                visit.extend(keys);
            }
        }
        visit.sort();
        visit.dedup();
        let ready_set: BTreeSet<&Time> = ready.iter().collect();
        let mut out: Corrections = BTreeMap::new();
        let tt = &self.tt;
        let logic = &self.logic;
        let additive = logic.additive();
        for key in visit {
            let Some(state) = self.keys.get_mut(&key) else {
                continue;
            };
            let now: Vec<Time> = state
                .pending
                .iter()
                .filter(|t| ready_set.contains(t))
                .cloned()
                .collect();
            Self::compact_key(tt, &self.since, self.generation, additive, state, false);
            state.pending.retain(|t| !ready_set.contains(t));
            for t in now {
                self.evaluated += 1;
                let desired = desired_row(logic, tt, &state.input, &t, &mut self.scratch);
                for (values, diff) in corrections(tt, &state.output, &t, desired, &mut self.scratch)
                {
                    state.output.push(values.iter().copied(), &t, diff);
                    out.entry(t.clone())
                        .or_default()
                        .push((key.clone(), values, diff));
                }
            }
        }
        Some(out)
    }

    /// Histories may be advanced to `frontier` from now on; compacts up to `fuel` keys that
    /// no step visits (a sweep over the keys, resumed where it stopped).
    pub fn set_since(&mut self, frontier: &Antichain, fuel: usize) {
        if *frontier != self.since {
            self.since = frontier.clone();
            self.generation += 1;
        }
        let start = self.sweep.take();
        let additive = self.logic.additive();
        let range: Box<dyn Iterator<Item = (&Row, &mut KeyState)>> = match &start {
            Some(k) => Box::new(self.keys.range_mut(k.clone()..)),
            None => Box::new(self.keys.iter_mut()),
        };
        let mut next = None;
        let mut emptied = Vec::new();
        for (visited, (key, state)) in range.enumerate() {
            if visited == fuel {
                next = Some(key.clone());
                break;
            }
            Self::compact_key(
                &self.tt,
                &self.since,
                self.generation,
                additive,
                state,
                true,
            );
            if state.input.is_empty() && state.output.is_empty() && state.pending.is_empty() {
                emptied.push(key.clone());
            }
        }
        for key in emptied {
            self.keys.remove(&key);
        }
        self.sweep = next;
    }

    /// Every update of the input and output arrangements: `(key, values, time, diff)`.
    pub fn contents(&self) -> (Vec<KeyedUpdate>, Vec<KeyedUpdate>) {
        let mut input = Vec::new();
        let mut output = Vec::new();
        for (key, state) in &self.keys {
            for (h, into) in [(&state.input, &mut input), (&state.output, &mut output)] {
                for i in 0..h.len() {
                    into.push((key.clone(), h.row(i), h.time(i).to_vec(), h.diff(i)));
                }
            }
        }
        (input, output)
    }

    /// Loads arrangements [`Reducer::contents`] gave, into a reducer that holds nothing.
    pub fn load(&mut self, input: Vec<KeyedUpdate>, output: Vec<KeyedUpdate>) {
        for (updates, is_input) in [(input, true), (output, false)] {
            for (key, values, time, diff) in updates {
                if !self.keys.contains_key(&key) {
                    let fresh = self.new_key();
                    self.keys.insert(key.clone(), fresh);
                }
                if let Some(state) = self.keys.get_mut(&key) {
                    let h = if is_input {
                        &mut state.input
                    } else {
                        &mut state.output
                    };
                    h.push(values, &time, diff);
                }
            }
        }
        let additive = self.logic.additive();
        for state in self.keys.values_mut() {
            state.consolidate(additive);
        }
    }

    /// Advances a key's histories to `since` and consolidates them, unless done for this
    /// generation of `since` already, or (unless `force`d: the sweep) unless they grew to
    /// more than twice what they held after the last compaction: a key visited at every
    /// step of a loop is compacted a number of times logarithmic in its updates, not once
    /// a step, and a key no step visits is left to the sweep.
    fn compact_key(
        tt: &TimeType,
        since: &Antichain,
        generation: u64,
        additive: bool,
        state: &mut KeyState,
        force: bool,
    ) {
        if state.compacted == generation {
            return;
        }
        let held = state.input.len() + state.output.len();
        if !force && held <= 2 * state.compacted_len + 16 {
            return;
        }
        state.compacted = generation;
        state.input.advance(tt, since);
        state.output.advance(tt, since);
        state.consolidate(additive);
    }
}

/// The lubs of the subsets of `new ∪ old` that contain an element of `new`: the closure of
/// `new` under joins with every time of `new ∪ old`. Sorted, distinct.
pub fn interesting_times(tt: &TimeType, new: &[Time], old: &[Time]) -> Vec<Time> {
    let mut found: BTreeSet<Time> = new.iter().cloned().collect();
    // every time found is joined once with every time of `old` and every time found
    // (itself a join of new and old times): a worklist over the found times in order
    let mut all: Vec<Time> = found.iter().cloned().collect();
    let mut joined = vec![0; tt.width()];
    let mut i = 0;
    while i < all.len() {
        let n = all.len();
        for j in 0..old.len() + n {
            let y = if j < old.len() {
                &old[j]
            } else {
                &all[j - old.len()]
            };
            tt.join_into(&all[i], y, &mut joined);
            if joined != all[i] && !found.contains(&joined) {
                found.insert(joined.clone());
                all.push(joined.clone());
            }
        }
        i += 1;
    }
    found.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::times;
    use crate::lattice::Coordinate::{Lexicographic, Product};
    use proptest::prelude::*;

    /// An update of the reference: values, time, diff.
    #[derive(Clone, Debug)]
    struct Update {
        values: Row,
        time: Time,
        diff: i64,
    }

    // The reference: the group's accumulation and `f` of it, recomputed plainly (maps of
    // rows), for the brute-force check of the reducer's fast path.

    /// The accumulation at `t` of a history: values → multiplicity, zeros left out. For additive
    /// values, one entry (the summed weights, keyed by an empty row) with the summed diff; the
    /// weights are returned as its values.
    fn accumulate(tt: &TimeType, history: &[Update], t: &[i64], additive: bool) -> Vec<(Row, i64)> {
        if additive {
            let mut diff = 0i64;
            let mut weights: Option<Vec<i64>> = None;
            let mut any = false;
            for u in history.iter().filter(|u| tt.less_equal(&u.time, t)) {
                any = true;
                diff = diff.wrapping_add(u.diff);
                let w = weights.get_or_insert_with(|| vec![0; u.values.len()]);
                for (a, b) in w.iter_mut().zip(&u.values) {
                    *a = a.wrapping_add(b.unwrap_or(0));
                }
            }
            if !any {
                return Vec::new();
            }
            let row = weights.unwrap_or_default().into_iter().map(Some).collect();
            return vec![(row, diff)];
        }
        let mut acc: BTreeMap<&Row, i64> = BTreeMap::new();
        for u in history.iter().filter(|u| tt.less_equal(&u.time, t)) {
            let e = acc.entry(&u.values).or_insert(0);
            *e = e.wrapping_add(u.diff);
        }
        acc.into_iter()
            .filter(|(_, m)| *m != 0)
            .map(|(v, m)| (v.clone(), m))
            .collect()
    }

    /// The desired output rows of a group (its accumulation) under `logic`.
    fn apply(logic: &Logic, group: &[(Row, i64)]) -> Vec<(Row, i64)> {
        match logic {
            Logic::Distinct => {
                let count = group
                    .iter()
                    .filter(|(v, _)| v.is_empty())
                    .fold(0i64, |c, (_, m)| c.wrapping_add(*m));
                if count > 0 {
                    vec![(Vec::new(), 1)]
                } else {
                    Vec::new()
                }
            }
            Logic::Weights(aggs) => {
                let Some((weights, count)) = group.first() else {
                    return Vec::new();
                };
                if *count <= 0 {
                    return Vec::new();
                }
                let row = aggs
                    .iter()
                    .map(|a| match a {
                        Aggregate::Count => Some(*count),
                        Aggregate::Sum(i) => Some(weights[*i].unwrap_or(0)),
                        Aggregate::Min(_) | Aggregate::Max(_) => None,
                    })
                    .collect();
                vec![(row, 1)]
            }
            Logic::Values(aggs) => {
                let count = group.iter().fold(0i64, |c, (_, m)| c.wrapping_add(*m));
                if count <= 0 {
                    return Vec::new();
                }
                let row = aggs
                    .iter()
                    .map(|a| match a {
                        Aggregate::Count => Some(count),
                        Aggregate::Sum(i) => Some(group.iter().fold(0i64, |s, (v, m)| {
                            s.wrapping_add(v[*i].map_or(0, |x| times(x, *m)))
                        })),
                        Aggregate::Min(i) => present(group, *i).into_iter().next(),
                        Aggregate::Max(i) => present(group, *i).into_iter().next_back(),
                    })
                    .collect();
                vec![(row, 1)]
            }
        }
    }

    /// The non-null values of column `i` whose multiplicity, summed over the records holding
    /// them, is positive; in order.
    fn present(group: &[(Row, i64)], i: usize) -> BTreeSet<i64> {
        let mut per_value: BTreeMap<i64, i64> = BTreeMap::new();
        for (v, m) in group {
            if let Some(x) = v[i] {
                let e = per_value.entry(x).or_insert(0);
                *e = e.wrapping_add(*m);
            }
        }
        per_value
            .into_iter()
            .filter(|(_, m)| *m > 0)
            .map(|(x, _)| x)
            .collect()
    }

    /// `f` of the accumulated input at `t`, recomputed from every update given so far.
    fn brute(
        tt: &TimeType,
        logic: &Logic,
        fed: &[(Row, Row, Time, i64)],
        t: &[i64],
    ) -> BTreeMap<(Row, Row), i64> {
        let mut per_key: BTreeMap<Row, Vec<Update>> = BTreeMap::new();
        for (k, v, time, d) in fed {
            per_key.entry(k.clone()).or_default().push(Update {
                values: v.clone(),
                time: time.clone(),
                diff: *d,
            });
        }
        let mut out = BTreeMap::new();
        for (k, h) in per_key {
            for (v, m) in apply(logic, &accumulate(tt, &h, t, logic.additive())) {
                out.insert((k.clone(), v), m);
            }
        }
        out
    }

    fn output_at(tt: &TimeType, r: &Reducer, t: &[i64]) -> BTreeMap<(Row, Row), i64> {
        let (_, output) = r.contents();
        let mut acc: BTreeMap<(Row, Row), i64> = BTreeMap::new();
        for (k, v, time, d) in output {
            if tt.less_equal(&time, t) {
                *acc.entry((k, v)).or_insert(0) += d;
            }
        }
        acc.retain(|_, m| *m != 0);
        acc
    }

    fn logics() -> impl Strategy<Value = Logic> {
        prop_oneof![
            Just(Logic::Distinct),
            Just(Logic::Values(vec![
                Aggregate::Count,
                Aggregate::Sum(0),
                Aggregate::Min(0),
                Aggregate::Max(1)
            ])),
            Just(Logic::Weights(vec![Aggregate::Count, Aggregate::Sum(0)])),
        ]
    }

    /// Epochs of updates at times `(epoch, iteration)` or `(epoch, priority, iteration)`.
    /// `(key, [value, value], iteration, diff)`
    type Drawn = (i64, [i64; 2], i64, i64);

    fn streams() -> impl Strategy<Value = (bool, Vec<Vec<Drawn>>)> {
        (
            any::<bool>(),
            proptest::collection::vec(
                proptest::collection::vec(
                    (
                        0i64..3,
                        [-1i64..3, 0i64..3],
                        0i64..3,
                        prop_oneof![Just(1i64), Just(-1), Just(2)],
                    ),
                    0..6,
                ),
                1..5,
            ),
        )
    }

    proptest! {
        #[test]
        fn every_complete_time_agrees_with_recomputation(
            logic in logics(),
            (lex, epochs) in streams()
        ) {
            let tt = if lex {
                TimeType::new(&[Product, Lexicographic])
            } else {
                TimeType::new(&[Product, Product])
            };
            let w = tt.width();
            let arity = match &logic {
                Logic::Distinct => 0,
                Logic::Weights(_) => 1,
                Logic::Values(_) => 2,
            };
            let mut r = Reducer::new(tt.clone(), logic.clone(), arity);
            let mut fed: Vec<(Row, Row, Time, i64)> = Vec::new();
            for (epoch, updates) in epochs.iter().enumerate() {
                let epoch = epoch as i64;
                let batch: Vec<(Row, Row, Time, i64)> = updates
                    .iter()
                    .map(|(k, v, i, d)| {
                        let values: Row = match &logic {
                            Logic::Distinct => Vec::new(),
                            Logic::Weights(_) => vec![Some(v[1] * d)],
                            Logic::Values(_) => {
                                vec![if v[0] < 0 { None } else { Some(v[0]) }, Some(v[1])]
                            }
                        };
                        let mut time = vec![epoch, *i];
                        if w == 3 {
                            time.push(v[1]);
                        }
                        (vec![Some(*k)], values, time, *d)
                    })
                    .collect();
                fed.extend(batch.iter().cloned());
                r.take(batch);
                // the epoch is complete: every later epoch is still open
                let frontier = Antichain::from_times(&tt, [{
                    let mut f = vec![0; w];
                    f[0] = epoch + 1;
                    f
                }
                .as_slice()]);
                while r.evaluate(&frontier).is_some() {}
                // the epoch's times, then (compacted to the frontier) the next epoch's
                for at in [epoch, epoch + 1] {
                    if at > epoch {
                        r.set_since(&frontier, 1);
                    }
                    for i in 0..3 {
                        for j in 0..3 {
                            let mut t = vec![at, i];
                            if w == 3 {
                                t.push(j);
                            }
                            prop_assert_eq!(
                                output_at(&tt, &r, &t),
                                brute(&tt, &logic, &fed, &t)
                            );
                        }
                    }
                }
            }
        }

        #[test]
        fn interesting_times_are_closed_under_joins(
            new in proptest::collection::vec(proptest::collection::vec(0i64..3, 2), 1..4),
            old in proptest::collection::vec(proptest::collection::vec(0i64..3, 2), 0..4),
        ) {
            let tt = TimeType::new(&[Product, Product]);
            let found = interesting_times(&tt, &new, &old);
            for n in &new {
                prop_assert!(found.contains(n));
            }
            for x in &found {
                for y in found.iter().chain(&old) {
                    prop_assert!(found.contains(&tt.join(x, y)));
                }
                // every interesting time is above some new time
                prop_assert!(new.iter().any(|n| tt.less_equal(n, x)));
            }
        }
    }

    #[test]
    fn a_sliding_history_compacts_to_the_live_data() {
        let tt = TimeType::epochs();
        let mut r = Reducer::new(tt.clone(), Logic::Values(vec![Aggregate::Min(0)]), 1);
        for e in 0..50i64 {
            let mut batch = vec![(vec![Some(1)], vec![Some(e)], vec![e], 1)];
            if e >= 3 {
                batch.push((vec![Some(1)], vec![Some(e - 3)], vec![e], -1));
            }
            r.take(batch);
            let f = Antichain::from_times(&tt, [[e + 1].as_slice()]);
            while r.evaluate(&f).is_some() {}
            r.set_since(&f, 4);
        }
        let (input, output) = r.sizes();
        assert!(input <= 6, "{input} input updates held");
        assert!(output <= 2, "{output} output updates held");
    }
}

//! The reduce family over partially ordered times, over sorted batches of all keys.
//!
//! A reduce maintains, for every key `k` and every complete time `t`:
//!
//! ```text
//! sum of output_k updates at times <= t  ==  f(sum of input_k updates at times <= t)
//! ```
//!
//! A [`Reducer`] owns both arrangements, each a [`Spine`] of sorted batches of every key's
//! updates (typed columns, offsets per key: see [`trace`](crate::trace)). A step visits its
//! keys in sorted order, reading each batch through a galloping cursor, and does everything
//! for a key in one pass:
//!
//! * [`Reducer::take_columns`]: the new updates become one batch of the input; the
//!   *interesting times* of a key, the least upper bounds of the subsets of its times that
//!   contain a new time (where its accumulation may change), become pending;
//! * [`Reducer::evaluate`]: the pending `(key, time)` pairs whose time is complete at the
//!   frontier (no element of the frontier `<=` it) are evaluated, a key's in the flat
//!   lexicographic order of times (a linear extension), each seeing the corrections made at
//!   the earlier ones: `f(input_k[t]) - output_k[t]`; the step's corrections become one batch
//!   of the output and are returned;
//! * [`Reducer::set_since`]: times not in advance of the frontier can no longer be told apart;
//!   the spines advance and consolidate their updates as they merge batches, and rewrite the
//!   batches no merge reaches with fuel paid by the steps' work, so that the arrangements'
//!   size follows the live data, not the length of the history.
//!
//! A step allocates per batch, not per key: the keys, values, times and diffs of a step's
//! updates, of its pending pairs and of its corrections are flat columns.
//!
//! What a group gives ([`Logic`]) is the [`group`](crate::group) module's.

use std::collections::BTreeMap;
use std::ops::Range;

use crate::group::{corrections, desired_row, Located, Scratch};
pub use crate::group::{Aggregate, Logic};
use crate::history::History;
use crate::interesting::interesting_times;
use crate::lattice::{Antichain, TimeType};
use crate::trace::{Key, Spine};

/// A row of nullable integer-family values (keys, values, outputs): `None` is null, ordered
/// before every value.
pub type Row = Vec<Option<i64>>;
/// A time: `width` integers.
pub type Time = Vec<i64>;

/// Updates of a key: `(key, values, time, diff)`.
pub type KeyedUpdate = (Row, Row, Time, i64);

/// Updates as columns: keys, values, times, diffs.
pub type Columns = (
    Vec<Vec<Option<i64>>>,
    Vec<Vec<Option<i64>>>,
    Vec<Vec<i64>>,
    Vec<i64>,
);

/// A step's output corrections, sorted by time, then key: row `i` is the key
/// [`Corrections::key`] with the output values, time and diff of update `i` of
/// [`Corrections::updates`].
#[derive(Clone, Debug)]
pub struct Corrections {
    key_width: usize,
    keys: Vec<Option<i64>>,
    updates: History,
}

impl Corrections {
    /// How many rows.
    pub fn len(&self) -> usize {
        self.updates.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.updates.is_empty()
    }

    /// The key of row `i`.
    pub fn key(&self, i: usize) -> &Key {
        &self.keys[i * self.key_width..(i + 1) * self.key_width]
    }

    /// Row `i`'s cells: its key, then its output values.
    pub fn cells(&self, i: usize) -> impl Iterator<Item = Option<i64>> + '_ {
        let h = &self.updates;
        let outputs = (0..h.arity()).map(move |c| h.value(i, c));
        self.key(i).iter().copied().chain(outputs)
    }

    /// The output values, times and diffs.
    pub fn updates(&self) -> &History {
        &self.updates
    }

    /// The rows of each time, times increasing.
    pub fn by_time(&self) -> Vec<(Time, Range<usize>)> {
        let h = &self.updates;
        let mut out: Vec<(Time, Range<usize>)> = Vec::new();
        for i in 0..h.len() {
            match out.last_mut() {
                Some((t, r)) if t.as_slice() == h.time(i) => r.end = i + 1,
                _ => out.push((h.time(i).to_vec(), i..i + 1)),
            }
        }
        out
    }
}

/// The pending `(key, time)` pairs, as flat columns (a pair may appear more than once), and
/// how many pairs each time has.
#[derive(Clone, Debug, Default)]
struct Pending {
    keys: Vec<Option<i64>>,
    times: Vec<i64>,
    counts: BTreeMap<Time, usize>,
}

impl Pending {
    /// How many pairs (counted or not).
    fn len(&self) -> usize {
        self.times.len()
    }

    /// Adds a pair; [`Pending::count_from`] counts it.
    fn push(&mut self, key: &Key, time: &[i64]) {
        self.keys.extend_from_slice(key);
        self.times.extend_from_slice(time);
    }

    /// Counts the pairs pushed since there were `from` integers of times (consecutive pairs
    /// often share a time: one count update per run).
    fn count_from(&mut self, from: usize, w: usize) {
        let w = w.max(1);
        for run in self.times[from..]
            .chunks_exact(w)
            .collect::<Vec<_>>()
            .chunk_by(|a, b| a == b)
        {
            match self.counts.get_mut(run[0]) {
                Some(c) => *c += run.len(),
                None => {
                    self.counts.insert(run[0].to_vec(), run.len());
                }
            }
        }
    }

    /// Removes the pairs whose time is `ready`, returned as `(keys, times)` columns.
    fn take(
        &mut self,
        kw: usize,
        w: usize,
        ready: impl Fn(&[i64]) -> bool,
    ) -> (Vec<Option<i64>>, Vec<i64>) {
        self.counts.retain(|t, _| !ready(t));
        let (mut keys, mut times) = (Vec::new(), Vec::new());
        let n = self.times.len() / w.max(1);
        let mut kept = 0;
        for i in 0..n {
            let t = i * w..(i + 1) * w;
            let k = i * kw..(i + 1) * kw;
            if ready(&self.times[t.clone()]) {
                keys.extend_from_slice(&self.keys[k]);
                times.extend_from_slice(&self.times[t]);
            } else {
                self.keys.copy_within(k, kept * kw);
                self.times.copy_within(t, kept * w);
                kept += 1;
            }
        }
        self.keys.truncate(kept * kw);
        self.times.truncate(kept * w);
        (keys, times)
    }
}

/// The input multiplicity of each pair (`pairs` sorted by key, then time) in `input`.
fn multiplicities_of<'a>(
    input: &Spine,
    tt: &TimeType,
    parts: &mut Vec<(usize, usize)>,
    pairs: &[usize],
    key: impl Fn(usize) -> &'a [Option<i64>],
    time: impl Fn(usize) -> &'a [i64],
) -> Vec<i64> {
    let mut counts = Vec::with_capacity(pairs.len());
    let mut cursor = input.cursor();
    for group in pairs.chunk_by(|&a, &b| key(a) == key(b)) {
        parts.clear();
        input.locate(&mut cursor, key(group[0]), parts);
        let located = Located {
            spine: input,
            parts,
        };
        counts.extend(group.iter().map(|&p| located.count(tt, time(p))));
    }
    counts
}

/// Buffers a step reuses from key to key.
#[derive(Clone, Debug)]
struct Work {
    group: Scratch,
    /// a key, a desired output row
    key: Row,
    row: Row,
    order: Vec<usize>,
    /// where a key's input updates are, its output updates, its corrections at a time
    parts: Vec<(usize, usize)>,
    out: History,
    found: History,
    buf: Vec<i64>,
}

/// The state of one reduce (see the module).
#[derive(Clone, Debug)]
pub struct Reducer {
    tt: TimeType,
    logic: Logic,
    key_width: usize,
    /// values per input update
    arity: usize,
    input: Spine,
    output: Spine,
    pending: Pending,
    /// the frontier arrangements may be advanced to, and its generation
    since: Antichain,
    generation: u64,
    /// `(key, time)` pairs evaluated so far
    pub evaluated: u64,
    work: Work,
}

/// The order of rows `a` and `b` of `columns`.
fn cmp_rows(columns: &[Vec<Option<i64>>], a: usize, b: usize) -> std::cmp::Ordering {
    columns
        .iter()
        .map(|c| c[a].cmp(&c[b]))
        .find(|o| o.is_ne())
        .unwrap_or(std::cmp::Ordering::Equal)
}

/// Updates given one by one, as columns.
fn columns_of(updates: Vec<KeyedUpdate>, kw: usize, arity: usize, w: usize) -> Columns {
    let n = updates.len();
    let mut keys = vec![Vec::with_capacity(n); kw];
    let mut values = vec![Vec::with_capacity(n); arity];
    let mut times = vec![Vec::with_capacity(n); w];
    let mut diffs = Vec::with_capacity(n);
    for (k, v, t, d) in updates {
        keys.iter_mut().zip(k).for_each(|(c, x)| c.push(x));
        values.iter_mut().zip(v).for_each(|(c, x)| c.push(x));
        times.iter_mut().zip(t).for_each(|(c, x)| c.push(x));
        diffs.push(d);
    }
    (keys, values, times, diffs)
}

impl Reducer {
    /// A reducer with empty arrangements, of input updates with `key_width` key columns and
    /// `arity` values (weights for [`Logic::Weights`]).
    pub fn new(tt: TimeType, logic: Logic, key_width: usize, arity: usize) -> Self {
        let w = tt.width();
        let outputs = logic.outputs();
        let additive = logic.additive();
        Reducer {
            since: Antichain::from_times(&tt, [tt.minimum().as_slice()]),
            input: Spine::new(key_width, arity, w, additive),
            output: Spine::new(key_width, outputs, w, false),
            work: Work {
                group: Scratch::default(),
                key: Vec::new(),
                row: Vec::new(),
                order: Vec::new(),
                parts: Vec::new(),
                out: History::new(outputs, w),
                found: History::new(outputs, w),
                buf: Vec::new(),
            },
            tt,
            logic,
            key_width,
            arity,
            pending: Pending::default(),
            generation: 0,
            evaluated: 0,
        }
    }

    /// The reducer with merges of more than `updates` done by steps
    /// ([`Spine::with_eager_merge`]).
    pub fn with_eager_merge(mut self, updates: usize) -> Self {
        self.input = self.input.with_eager_merge(updates);
        self.output = self.output.with_eager_merge(updates);
        self
    }

    /// The time type.
    pub fn time_type(&self) -> &TimeType {
        &self.tt
    }

    /// What a group gives.
    pub fn logic(&self) -> &Logic {
        &self.logic
    }

    /// How many updates the input and output arrangements hold.
    pub fn sizes(&self) -> (usize, usize) {
        (self.input.len(), self.output.len())
    }

    /// The minimal pending times, in the flat lexicographic order.
    pub fn pending(&self) -> Vec<Time> {
        let a = Antichain::from_times(&self.tt, self.pending.counts.keys().map(Vec::as_slice));
        let mut out: Vec<Time> = a.elements().map(<[i64]>::to_vec).collect();
        out.sort();
        out
    }

    /// [`Reducer::take_columns`] of updates given one by one.
    pub fn take(&mut self, updates: Vec<KeyedUpdate>) -> usize {
        let columns = columns_of(updates, self.key_width, self.arity, self.tt.width());
        self.take_columns(columns)
    }

    /// Adds new input updates, given as columns (keys, values, times, diffs; for
    /// [`Logic::Weights`] the values are the weights, already multiplied by the diff), and
    /// makes their interesting times pending. Returns how many updates were added (once
    /// consolidated). The columns are dropped once their batch is built, before it is merged
    /// into the arrangement, so that a large batch's columns and a merge do not add up.
    pub fn take_columns(&mut self, columns: Columns) -> usize {
        self.insert(false, true, columns)
    }

    /// Adds updates to the input (or the `output`) arrangement as one batch; with `schedule`,
    /// makes the interesting times of the input's new updates pending.
    fn insert(&mut self, output: bool, schedule: bool, columns: Columns) -> usize {
        let (keys, values, times, diffs) = &columns;
        // the positions in key order, and where each key's run starts
        let n = diffs.len();
        let (order, mut starts): (Vec<usize>, Vec<usize>) = if let [single] = keys.as_slice() {
            // (one key column, the common case: the keys sorted beside their positions, in
            // place, rather than positions sorted by looking their keys up; and by the first
            // value too, so that a key's updates, most often at one time, come consolidated
            // in order without a sort of their own)
            let first = values.first();
            let mut rows: Vec<(Option<i64>, Option<i64>, usize)> = single
                .iter()
                .enumerate()
                .map(|(r, k)| (*k, first.and_then(|c| c[r]), r))
                .collect();
            rows.sort_unstable();
            let starts = (0..n)
                .filter(|&i| i == 0 || rows[i - 1].0 != rows[i].0)
                .collect();
            (rows.into_iter().map(|(_, _, r)| r).collect(), starts)
        } else {
            let mut order: Vec<usize> = (0..n).collect();
            order.sort_unstable_by(|&a, &b| cmp_rows(keys, a, b));
            let starts = (0..n)
                .filter(|&i| i == 0 || cmp_rows(keys, order[i - 1], order[i]).is_ne())
                .collect();
            (order, starts)
        };
        starts.push(n);
        let pending_before = self.pending.len();
        let tt = &self.tt;
        let spine = if output { &self.output } else { &self.input };
        let additive = !output && self.logic.additive();
        let work = &mut self.work;
        let mut batch = spine.batch_with_capacity(starts.len() - 1, n);
        let mut cursor = spine.cursor();
        let mut time = vec![0; tt.width()];
        let mut added = 0;
        let mut new = History::new(values.len(), tt.width());
        for run in starts.windows(2) {
            new.clear();
            for &r in &order[run[0]..run[1]] {
                for (t, c) in time.iter_mut().zip(times) {
                    *t = c[r];
                }
                new.push(values.iter().map(|c| c[r]), &time, diffs[r]);
            }
            work.key.clear();
            work.key.extend(keys.iter().map(|c| c[order[run[0]]]));
            let start = batch.len();
            let n = batch.push_key(&work.key, &new, additive, &mut work.order);
            added += n;
            if n == 0 || !schedule {
                continue;
            }
            work.parts.clear();
            spine.locate(&mut cursor, &work.key, &mut work.parts);
            let had = Located {
                spine,
                parts: &work.parts,
            };
            let h = batch.updates();
            let first = h.time(start);
            // (the common case, a step's updates of a key all at one time after every time
            // the key had: that time alone is interesting)
            if (start..start + n).all(|u| h.time(u) == first) && had.all_before(tt, first) {
                self.pending.push(&work.key, first);
                continue;
            }
            let mut fresh: Vec<Time> = (start..start + n).map(|u| h.time(u).to_vec()).collect();
            fresh.sort();
            fresh.dedup();
            let old = had.distinct_times(tt, &self.since, &mut work.buf);
            for t in interesting_times(tt, &fresh, &old) {
                self.pending.push(&work.key, &t);
            }
        }
        let spine = if output {
            &mut self.output
        } else {
            &mut self.input
        };
        drop(order);
        drop(columns);
        spine.insert(batch, tt, &self.since, self.generation);
        self.pending.count_from(pending_before, tt.width());
        added
    }

    /// Evaluates the pending `(key, time)` pairs complete at `frontier`; `None` if there were
    /// none, else the output corrections (also added to the output arrangement). For
    /// [`Logic::Threshold`], `multiplicities` gives the function's values at the distinct
    /// multiplicities of the records evaluated (called once, with them in increasing order);
    /// where it fails, the pairs stay pending and its error is returned.
    pub fn evaluate<E>(
        &mut self,
        frontier: &Antichain,
        multiplicities: impl FnOnce(&[i64]) -> Result<Vec<i64>, E>,
    ) -> Result<Option<Corrections>, E> {
        let tt = &self.tt;
        let ready = |t: &[i64]| !frontier.less_equal(tt, t);
        if !self.pending.counts.keys().any(|t| ready(t)) {
            return Ok(None);
        }
        let (kw, w) = (self.key_width, tt.width());
        let (keys, times) = self.pending.take(kw, w, ready);
        let key = |i: usize| &keys[i * kw..(i + 1) * kw];
        let time = |i: usize| &times[i * w..(i + 1) * w];
        // each ready pair once, by key, then time (a linear extension)
        let mut pairs: Vec<usize> = (0..times.len() / w).collect();
        pairs.sort_by(|&a, &b| key(a).cmp(key(b)).then_with(|| time(a).cmp(time(b))));
        pairs.dedup_by(|a, b| key(*a) == key(*b) && time(*a) == time(*b));
        // a threshold's multiplicities: each pair's, and the function's at each
        let (mut counts, mut mapped) = (Vec::new(), Vec::new());
        if self.logic == Logic::Threshold {
            counts = multiplicities_of(&self.input, tt, &mut self.work.parts, &pairs, key, time);
            let mut distinct: Vec<i64> = counts.iter().copied().filter(|&m| m != 0).collect();
            distinct.sort_unstable();
            distinct.dedup();
            match multiplicities(&distinct) {
                Ok(values) => mapped = distinct.into_iter().zip(values).collect(),
                Err(e) => {
                    let from = self.pending.times.len();
                    for p in 0..times.len() / w {
                        self.pending.push(key(p), time(p));
                    }
                    self.pending.count_from(from, w);
                    return Err(e);
                }
            }
        }
        let work = &mut self.work;
        let mut step_keys: Vec<Option<i64>> = Vec::new();
        let mut step = History::new(self.logic.outputs(), w);
        let (mut ci, mut co) = (self.input.cursor(), self.output.cursor());
        // (a pair's place in `pairs`)
        let mut at = 0usize;
        for group in pairs.chunk_by(|&a, &b| key(a) == key(b)) {
            let k = key(group[0]);
            work.parts.clear();
            self.input.locate(&mut ci, k, &mut work.parts);
            let input = Located {
                spine: &self.input,
                parts: &work.parts,
            };
            work.out.clear();
            self.output.read(&mut co, k, &mut work.out);
            for &p in group {
                let t = time(p);
                self.evaluated += 1;
                let desired = if self.logic == Logic::Threshold {
                    let m = counts[at];
                    let mult = if m == 0 {
                        0
                    } else {
                        mapped[mapped.partition_point(|&(x, _)| x < m)].1
                    };
                    work.row.clear();
                    Some((work.row.as_slice(), mult))
                } else {
                    desired_row(&self.logic, tt, input, t, &mut work.group, &mut work.row)
                        .then_some((work.row.as_slice(), 1))
                };
                at += 1;
                work.found.clear();
                corrections(tt, &work.out, t, desired, &mut work.group, &mut work.found);
                work.out.extend(&work.found);
                step.extend(&work.found);
                for _ in 0..work.found.len() {
                    step_keys.extend_from_slice(k);
                }
            }
        }
        // the step's corrections, by key: a batch of the output
        let mut batch = self.output.batch();
        let row_key = |i: usize| &step_keys[i * kw..(i + 1) * kw];
        let rows: Vec<usize> = (0..step.len()).collect();
        for run in rows.chunk_by(|&a, &b| row_key(a) == row_key(b)) {
            work.out.clear();
            work.out.extend_range(&step, run[0]..run[run.len() - 1] + 1);
            batch.push_key(row_key(run[0]), &work.out, false, &mut work.order);
        }
        self.output.insert(batch, tt, &self.since, self.generation);
        // and by time, then key, for the caller
        let mut by_time = rows;
        by_time.sort_by(|&a, &b| step.time(a).cmp(step.time(b)));
        let mut out = Corrections {
            key_width: kw,
            keys: Vec::with_capacity(step_keys.len()),
            updates: History::new(self.logic.outputs(), w),
        };
        for i in by_time {
            out.keys.extend_from_slice(row_key(i));
            out.updates.push_from(&step, i);
        }
        Ok(Some(out))
    }

    /// The arrangements may be advanced to `frontier` from now on; `fuel` (about the updates
    /// of the steps since the last call) is spent rewriting batches no merge has advanced.
    pub fn set_since(&mut self, frontier: &Antichain, fuel: usize) {
        if *frontier != self.since {
            self.since = frontier.clone();
            self.generation += 1;
        }
        let (tt, since, g) = (&self.tt, &self.since, self.generation);
        self.input.compact(tt, since, g, fuel);
        self.output.compact(tt, since, g, fuel);
    }

    /// Every update of the input and output arrangements: `(key, values, time, diff)`.
    pub fn contents(&self) -> (Vec<KeyedUpdate>, Vec<KeyedUpdate>) {
        let all = |spine: &Spine| {
            let mut out = Vec::with_capacity(spine.len());
            spine.for_each(|k, h, u| {
                out.push((k.to_vec(), h.row(u), h.time(u).to_vec(), h.diff(u)))
            });
            out
        };
        (all(&self.input), all(&self.output))
    }

    /// Loads arrangements [`Reducer::contents`] gave, into a reducer that holds nothing.
    pub fn load(&mut self, input: Vec<KeyedUpdate>, output: Vec<KeyedUpdate>) {
        let (kw, w) = (self.key_width, self.tt.width());
        let input = columns_of(input, kw, self.arity, w);
        let output = columns_of(output, kw, self.logic.outputs(), w);
        self.load_columns(input, output);
    }

    /// [`Reducer::load`] of columns.
    pub fn load_columns(&mut self, input: Columns, output: Columns) {
        self.insert(false, false, input);
        self.insert(true, false, output);
    }
}

#[cfg(test)]
#[path = "reduce_tests.rs"]
mod tests;

//! The group functions of the reduce family: what a key's group at a time gives.
//!
//! A [`Logic`] says what `f` computes of a key's group; [`desired_row`] computes it from the
//! key's input [`History`] at a time, and [`corrections`] compares it with the key's output
//! there. The semantics are those shared with the Python data plane and the reference
//! interpreter: `count` is the sum of the multiplicities, `sum(c)` the sum of
//! `c × multiplicity` (wrapping in 64 bits; nulls add nothing), a group yields a row only when
//! its count is positive, `min`/`max` range over the non-null values whose multiplicity in the
//! group (summed over the updates holding the value) is positive, `distinct` keeps the
//! records of positive multiplicity once, and `threshold(fn)` gives each record of
//! multiplicity `m` (not zero) the multiplicity `fn(m)`. Every group gives at most one row, of
//! multiplicity 1 but for `threshold`'s.

use crate::history::History;
use crate::lattice::TimeType;
use crate::reduce::Row;
use crate::trace::Spine;

/// What an output column of an aggregate computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Aggregate {
    /// The sum of the multiplicities.
    Count,
    /// The sum of value column `i` times the multiplicity (nulls skipped).
    Sum(usize),
    /// The least value of column `i` among those of positive multiplicity (null if none).
    Min(usize),
    /// The greatest value of column `i` among those of positive multiplicity (null if none).
    Max(usize),
    /// The value of column `i` of the `(value, by)` pair of column `i` and column `j` of
    /// positive multiplicity (both not null) with the greatest `by`, ties broken by the least
    /// value (null if none).
    ArgMax(usize, usize),
}

/// The function a reduce applies to each key's group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Logic {
    /// Aggregates of `count` and `sum` only, over pre-multiplied *weights*: an update's values
    /// are its weights (`c × diff` for `sum(c)`), which add up like diffs. `Aggregate::Sum(i)`
    /// reads weight `i`.
    Weights(Vec<Aggregate>),
    /// Aggregates over the records' value columns.
    Values(Vec<Aggregate>),
    /// The records (keys, no values) of positive multiplicity, once.
    Distinct,
    /// The records (keys, no values), each of multiplicity `m` (not zero) with the
    /// multiplicity a function gives `m` (a user's, called by the evaluation with many
    /// multiplicities at once).
    Threshold,
}

impl Logic {
    /// Whether the values are weights that add up like diffs ([`Logic::Weights`]).
    pub fn additive(&self) -> bool {
        matches!(self, Logic::Weights(_))
    }

    /// How many output columns (after the keys).
    pub fn outputs(&self) -> usize {
        match self {
            Logic::Weights(a) | Logic::Values(a) => a.len(),
            Logic::Distinct | Logic::Threshold => 0,
        }
    }
}

/// Buffers an evaluation reuses from key to key.
#[derive(Clone, Debug, Default)]
pub struct Scratch {
    /// `(value, diff)` of one column's updates at or before the time
    pairs: Vec<(i64, i64)>,
    /// indexes of the output's updates at or before the time
    outputs: Vec<usize>,
    /// a position and an end per part, for a walk of the parts in value order
    walk: Vec<(usize, usize)>,
    /// `(by, value, diff)` of the updates at or before the time, for an arg max
    ranked: Vec<(i64, i64, i64)>,
}

/// A key's updates where they lie in a spine: `(batch, key position)` for each batch that
/// holds the key ([`Spine::locate`]).
#[derive(Clone, Copy, Debug)]
pub struct Located<'a> {
    pub spine: &'a Spine,
    pub parts: &'a [(usize, usize)],
}

impl Located<'_> {
    /// Calls `f(history, update)` for each update.
    fn each(&self, mut f: impl FnMut(&History, usize)) {
        let batches = self.spine.batches();
        for &(b, k) in self.parts {
            let batch = &batches[b];
            for u in batch.range(k) {
                f(batch.updates(), u);
            }
        }
    }

    /// The sum of the diffs at or before `t` (from the batches' per-key times).
    pub fn count(&self, tt: &TimeType, t: &[i64]) -> i64 {
        let batches = self.spine.batches();
        let mut count = 0i64;
        for &(b, k) in self.parts {
            batches[b].for_each_time(k, |time, d| {
                if tt.less_equal(time, t) {
                    count = count.wrapping_add(d);
                }
            });
        }
        count
    }

    /// Whether every time is `<= t`.
    pub fn all_before(&self, tt: &TimeType, t: &[i64]) -> bool {
        let batches = self.spine.batches();
        let mut all = true;
        for &(b, k) in self.parts {
            batches[b].for_each_time(k, |time, _| all &= tt.less_equal(time, t));
        }
        all
    }

    /// The distinct times, each advanced by `since`, sorted.
    pub fn distinct_times(
        &self,
        tt: &TimeType,
        since: &crate::lattice::Antichain,
        buf: &mut Vec<i64>,
    ) -> Vec<Vec<i64>> {
        let batches = self.spine.batches();
        let mut out: Vec<Vec<i64>> = Vec::new();
        for &(b, k) in self.parts {
            batches[b].for_each_time(k, |x, _| {
                let mut x = x.to_vec();
                tt.advance_in_place(&mut x, since, buf);
                out.push(x);
            });
        }
        out.sort();
        out.dedup();
        out
    }
}

/// `diff` times weight `w`, in 64-bit wrapping arithmetic.
pub fn times(w: i64, diff: i64) -> i64 {
    w.wrapping_mul(diff)
}

/// The least (`first`) or greatest non-null value of `column` among the updates at or
/// before `t` whose multiplicity, summed over the updates holding the value, is positive.
fn extreme(
    tt: &TimeType,
    input: Located<'_>,
    t: &[i64],
    column: usize,
    first: bool,
    scratch: &mut Scratch,
) -> Option<i64> {
    if column == 0 {
        return extreme_in_order(tt, input, t, first, &mut scratch.walk);
    }
    let pairs = &mut scratch.pairs;
    pairs.clear();
    input.each(|h, u| {
        if let Some(v) = h.value(u, column).filter(|_| tt.less_equal(h.time(u), t)) {
            pairs.push((v, h.diff(u)));
        }
    });
    pairs.sort_unstable_by_key(|p| p.0);
    let runs = pairs.chunk_by(|a, b| a.0 == b.0);
    let positive = |run: &[(i64, i64)]| run.iter().fold(0i64, |m, p| m.wrapping_add(p.1)) > 0;
    if first {
        runs.into_iter().find(|r| positive(r)).map(|r| r[0].0)
    } else {
        runs.rev().find(|r| positive(r)).map(|r| r[0].0)
    }
}

/// [`Aggregate::ArgMax`] of the updates at or before `t`: their `(by, value)` pairs sorted
/// by `by` descending, then value ascending, and the first whose multiplicity is positive.
fn arg_max(
    tt: &TimeType,
    input: Located<'_>,
    t: &[i64],
    column: usize,
    by: usize,
    scratch: &mut Scratch,
) -> Option<i64> {
    let ranked = &mut scratch.ranked;
    ranked.clear();
    input.each(|h, u| {
        if let (Some(v), Some(b)) = (h.value(u, column), h.value(u, by)) {
            if tt.less_equal(h.time(u), t) {
                ranked.push((b, v, h.diff(u)));
            }
        }
    });
    ranked.sort_unstable_by(|p, q| q.0.cmp(&p.0).then(p.1.cmp(&q.1)));
    ranked
        .chunk_by(|p, q| (p.0, p.1) == (q.0, q.1))
        .find(|run| run.iter().fold(0i64, |m, p| m.wrapping_add(p.2)) > 0)
        .map(|run| run[0].1)
}

/// [`extreme`] of the first value column, by which a key's updates are sorted in each batch:
/// the parts are walked together in value order (from the least, or from the greatest), and
/// the walk stops at the first value of positive multiplicity, usually after a few updates.
fn extreme_in_order(
    tt: &TimeType,
    input: Located<'_>,
    t: &[i64],
    first: bool,
    walk: &mut Vec<(usize, usize)>,
) -> Option<i64> {
    let batches = input.spine.batches();
    // per part, the updates still to walk: `start..end`, taken from the front (least
    // first) or from the back
    walk.clear();
    walk.extend(input.parts.iter().map(|&(b, k)| {
        let r = batches[b].range(k);
        (r.start, r.end)
    }));
    let value = |p: usize, at: usize| batches[input.parts[p].0].updates().value(at, 0);
    loop {
        // the next value: the least (greatest) at the walked end of any part, nulls skipped
        let mut next: Option<i64> = None;
        for (p, (start, end)) in walk.iter_mut().enumerate() {
            if first {
                while *start < *end && value(p, *start).is_none() {
                    *start += 1;
                }
            }
            if start < end {
                let v = value(p, if first { *start } else { *end - 1 });
                if let Some(v) = v {
                    let better = next.map_or(true, |n| if first { v < n } else { v > n });
                    if better {
                        next = Some(v);
                    }
                }
            }
        }
        let v = next?;
        // its multiplicity at `t`, over every part; the walk moves past it
        let mut m = 0i64;
        for (p, (start, end)) in walk.iter_mut().enumerate() {
            let h = batches[input.parts[p].0].updates();
            loop {
                let at = if first { *start } else { end.wrapping_sub(1) };
                if start >= end || h.value(at, 0) != Some(v) {
                    break;
                }
                if tt.less_equal(h.time(at), t) {
                    m = m.wrapping_add(h.diff(at));
                }
                if first {
                    *start += 1;
                } else {
                    *end -= 1;
                }
            }
        }
        if m > 0 {
            return Some(v);
        }
    }
}

/// The one output row `f` gives a key's group at `t` (its multiplicity is 1), written to
/// `row`; `false` where the group yields none (a count not positive).
pub fn desired_row(
    logic: &Logic,
    tt: &TimeType,
    input: Located<'_>,
    t: &[i64],
    scratch: &mut Scratch,
    row: &mut Row,
) -> bool {
    row.clear();
    let count = input.count(tt, t);
    if count <= 0 {
        return false;
    }
    let sum = |c: usize, weighted: bool| {
        let mut s = 0i64;
        input.each(|h, u| {
            if tt.less_equal(h.time(u), t) {
                let x = h.value(u, c).unwrap_or(0);
                s = s.wrapping_add(if weighted { x } else { times(x, h.diff(u)) });
            }
        });
        s
    };
    match logic {
        Logic::Distinct | Logic::Threshold => {}
        Logic::Weights(aggs) => row.extend(aggs.iter().map(|a| match a {
            Aggregate::Count => Some(count),
            Aggregate::Sum(c) => Some(sum(*c, true)),
            Aggregate::Min(_) | Aggregate::Max(_) | Aggregate::ArgMax(..) => None,
        })),
        Logic::Values(aggs) => {
            for a in aggs {
                let v = match a {
                    Aggregate::Count => Some(count),
                    Aggregate::Sum(c) => Some(sum(*c, false)),
                    Aggregate::Min(c) => extreme(tt, input, t, *c, true, scratch),
                    Aggregate::Max(c) => extreme(tt, input, t, *c, false, scratch),
                    Aggregate::ArgMax(c, by) => arg_max(tt, input, t, *c, *by, scratch),
                };
                row.push(v);
            }
        }
    }
    true
}

/// `desired - output at t`, by output row, zeros left out: appended to `found` at time `t`
/// (`desired`: a row and its multiplicity).
pub fn corrections(
    tt: &TimeType,
    output: &History,
    t: &[i64],
    desired: Option<(&[Option<i64>], i64)>,
    scratch: &mut Scratch,
    found: &mut History,
) {
    let outs = &mut scratch.outputs;
    outs.clear();
    outs.extend((0..output.len()).filter(|&i| tt.less_equal(output.time(i), t)));
    outs.sort_unstable_by(|&a, &b| output.cmp_values(a, b));
    let mut desired = desired;
    for run in outs.chunk_by(|&a, &b| output.cmp_values(a, b).is_eq()) {
        let mut m = run
            .iter()
            .fold(0i64, |m, &i| m.wrapping_add(output.diff(i)));
        if let Some((_, mult)) = desired.filter(|(d, _)| output.row_is(run[0], d)) {
            desired = None;
            m = m.wrapping_sub(mult);
        }
        if m != 0 {
            let first = run[0];
            found.push(
                (0..output.arity()).map(|c| output.value(first, c)),
                t,
                m.wrapping_neg(),
            );
        }
    }
    if let Some((row, mult)) = desired.filter(|&(_, mult)| mult != 0) {
        found.push(row.iter().copied(), t, mult);
    }
}

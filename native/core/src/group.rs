//! The group functions of the reduce family: what a key's group at a time gives.
//!
//! A [`Logic`] says what `f` computes of a key's group; [`desired_row`] computes it from the
//! key's input [`History`] at a time, and [`corrections`] compares it with the key's output
//! there. The semantics are those shared with the Python data plane and the reference
//! interpreter: `count` is the sum of the multiplicities, `sum(c)` the sum of
//! `c × multiplicity` (wrapping in 64 bits; nulls add nothing), a group yields a row only when
//! its count is positive, `min`/`max` range over the non-null values whose multiplicity in the
//! group (summed over the updates holding the value) is positive, and `distinct` keeps the
//! records of positive multiplicity once. Every group gives at most one row, of multiplicity 1.

use crate::history::History;
use crate::lattice::TimeType;
use crate::reduce::Row;

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
            Logic::Distinct => 0,
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
}

/// `diff` times weight `w`, in 64-bit wrapping arithmetic.
pub fn times(w: i64, diff: i64) -> i64 {
    w.wrapping_mul(diff)
}

/// The least (`first`) or greatest non-null value of `column` among the updates at or
/// before `t` whose multiplicity, summed over the updates holding the value, is positive.
fn extreme(
    tt: &TimeType,
    input: &History,
    t: &[i64],
    column: usize,
    first: bool,
    pairs: &mut Vec<(i64, i64)>,
) -> Option<i64> {
    pairs.clear();
    pairs.extend(
        (0..input.len())
            .filter(|&i| tt.less_equal(input.time(i), t))
            .filter_map(|i| input.value(i, column).map(|v| (v, input.diff(i)))),
    );
    pairs.sort_unstable_by_key(|p| p.0);
    let runs = pairs.chunk_by(|a, b| a.0 == b.0);
    let positive = |run: &[(i64, i64)]| run.iter().fold(0i64, |m, p| m.wrapping_add(p.1)) > 0;
    if first {
        runs.into_iter().find(|r| positive(r)).map(|r| r[0].0)
    } else {
        runs.rev().find(|r| positive(r)).map(|r| r[0].0)
    }
}

/// The one output row `f` gives a key's group at `t` (its multiplicity is 1), written to
/// `row`; `false` where the group yields none (a count not positive).
pub fn desired_row(
    logic: &Logic,
    tt: &TimeType,
    input: &History,
    t: &[i64],
    scratch: &mut Scratch,
    row: &mut Row,
) -> bool {
    row.clear();
    let at = || (0..input.len()).filter(|&i| tt.less_equal(input.time(i), t));
    let count = at().fold(0i64, |c, i| c.wrapping_add(input.diff(i)));
    if count <= 0 {
        return false;
    }
    match logic {
        Logic::Distinct => {}
        Logic::Weights(aggs) => row.extend(aggs.iter().map(|a| match a {
            Aggregate::Count => Some(count),
            Aggregate::Sum(c) => {
                Some(at().fold(0i64, |s, i| s.wrapping_add(input.value(i, *c).unwrap_or(0))))
            }
            Aggregate::Min(_) | Aggregate::Max(_) => None,
        })),
        Logic::Values(aggs) => {
            for a in aggs {
                let v = match a {
                    Aggregate::Count => Some(count),
                    Aggregate::Sum(c) => Some(at().fold(0i64, |s, i| {
                        s.wrapping_add(input.value(i, *c).map_or(0, |x| times(x, input.diff(i))))
                    })),
                    Aggregate::Min(c) => extreme(tt, input, t, *c, true, &mut scratch.pairs),
                    Aggregate::Max(c) => extreme(tt, input, t, *c, false, &mut scratch.pairs),
                };
                row.push(v);
            }
        }
    }
    true
}

/// `desired (multiplicity 1) - output at t`, by output row, zeros left out: appended to
/// `found` at time `t`.
pub fn corrections(
    tt: &TimeType,
    output: &History,
    t: &[i64],
    desired: Option<&[Option<i64>]>,
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
        if desired.is_some_and(|d| output.row_is(run[0], d)) {
            desired = None;
            m = m.wrapping_sub(1);
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
    if let Some(row) = desired {
        found.push(row.iter().copied(), t, 1);
    }
}

//! Updates `(values, time, diff)` as columns.
//!
//! A [`History`] holds updates as flat columns (`arity` nullable `i64` values, `width` time
//! integers and a diff per update): a batch holds every key's updates in one, and a step reads
//! a key's updates into one, so that reading a key's group at a time is a scan of a few
//! contiguous arrays, with no allocation per update.
//!
//! Invariant after [`History::consolidate`]: no two updates share `(values, time)` (for an
//! *additive* history, whose values are weights that add up like diffs: no two share a time),
//! and none is zero (a zero diff, and for an additive one zero weights too). Consolidating and
//! [`History::advance`] keep every accumulation at times in advance of the frontier advanced
//! by.

use std::cmp::Ordering;

use crate::lattice::{Antichain, TimeType};

/// The updates of one key (see the module).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct History {
    arity: usize,
    width: usize,
    /// `arity` values per update (0 where null)
    values: Vec<i64>,
    /// `arity` flags per update: the value is null
    nulls: Vec<bool>,
    /// `width` integers per update
    times: Vec<i64>,
    diffs: Vec<i64>,
}

impl History {
    /// An empty history of updates with `arity` values and times of `width` integers.
    pub fn new(arity: usize, width: usize) -> Self {
        History {
            arity,
            width,
            ..Default::default()
        }
    }

    /// An empty history with room for `n` updates.
    pub fn with_capacity(arity: usize, width: usize, n: usize) -> Self {
        History {
            arity,
            width,
            values: Vec::with_capacity(n * arity),
            nulls: Vec::with_capacity(n * arity),
            times: Vec::with_capacity(n * width),
            diffs: Vec::with_capacity(n),
        }
    }

    /// How many updates.
    pub fn len(&self) -> usize {
        self.diffs.len()
    }

    /// Whether there is no update.
    pub fn is_empty(&self) -> bool {
        self.diffs.is_empty()
    }

    /// Adds an update.
    pub fn push(&mut self, values: impl IntoIterator<Item = Option<i64>>, time: &[i64], diff: i64) {
        let before = self.values.len();
        for v in values {
            self.values.push(v.unwrap_or(0));
            self.nulls.push(v.is_none());
        }
        debug_assert_eq!(self.values.len() - before, self.arity);
        debug_assert_eq!(time.len(), self.width);
        self.times.extend_from_slice(time);
        self.diffs.push(diff);
    }

    /// Adds update `i` of `other` (a history of the same shape).
    pub fn push_from(&mut self, other: &History, i: usize) {
        let (a, w) = (self.arity, self.width);
        self.values
            .extend_from_slice(&other.values[i * a..(i + 1) * a]);
        self.nulls
            .extend_from_slice(&other.nulls[i * a..(i + 1) * a]);
        self.times
            .extend_from_slice(&other.times[i * w..(i + 1) * w]);
        self.diffs.push(other.diffs[i]);
    }

    /// The time of update `i`.
    pub fn time(&self, i: usize) -> &[i64] {
        &self.times[i * self.width..(i + 1) * self.width]
    }

    /// The diff of update `i`.
    pub fn diff(&self, i: usize) -> i64 {
        self.diffs[i]
    }

    /// Value `c` of update `i` (`None`: null).
    pub fn value(&self, i: usize, c: usize) -> Option<i64> {
        let at = i * self.arity + c;
        (!self.nulls[at]).then_some(self.values[at])
    }

    /// The values of update `i`.
    pub fn row(&self, i: usize) -> Vec<Option<i64>> {
        (0..self.arity).map(|c| self.value(i, c)).collect()
    }

    /// Whether the values of update `i` are `row`.
    pub fn row_is(&self, i: usize, row: &[Option<i64>]) -> bool {
        row.len() == self.arity && row.iter().enumerate().all(|(c, v)| self.value(i, c) == *v)
    }

    /// The order of the values of updates `i` and `j` (nulls first, column by column).
    pub fn cmp_values(&self, i: usize, j: usize) -> Ordering {
        (0..self.arity)
            .map(|c| self.value(i, c).cmp(&self.value(j, c)))
            .find(|o| o.is_ne())
            .unwrap_or(Ordering::Equal)
    }

    /// Negates every diff (the updates of the collection's negation).
    pub fn negate(&mut self) {
        self.diffs.iter_mut().for_each(|d| *d = d.wrapping_neg());
    }

    /// Moves every update to `time`.
    pub fn set_times(&mut self, time: &[i64]) {
        debug_assert_eq!(time.len(), self.width);
        self.times
            .chunks_exact_mut(self.width.max(1))
            .for_each(|t| t.copy_from_slice(time));
    }

    /// Advances every time by `since`.
    pub fn advance(&mut self, tt: &TimeType, since: &Antichain) {
        self.advance_with(tt, since, &mut Vec::new());
    }

    /// [`History::advance`] with `buf` as scratch.
    pub fn advance_with(&mut self, tt: &TimeType, since: &Antichain, buf: &mut Vec<i64>) {
        let w = self.width;
        for i in 0..self.len() {
            tt.advance_in_place(&mut self.times[i * w..(i + 1) * w], since, buf);
        }
    }

    /// Consolidates (see the module); an additive history adds its weights up with the diffs.
    pub fn consolidate(&mut self, additive: bool) {
        if self.len() == 1 {
            // (one update: consolidated unless zero)
            if self.is_zero(0, additive) {
                self.clear();
            }
            return;
        }
        let mut out = History::new(self.arity, self.width);
        self.consolidate_into(additive, &mut out, &mut Vec::new());
        *self = out;
    }

    /// Whether update `i` adds nothing: a zero diff (and, `additive`, zero weights).
    fn is_zero(&self, i: usize, additive: bool) -> bool {
        let a = self.arity;
        self.diffs[i] == 0 && (!additive || self.values[i * a..(i + 1) * a].iter().all(|w| *w == 0))
    }

    /// Appends the consolidated updates of `self` to `out` (sorted by values then time; by
    /// time where `additive`), using `order` as scratch; returns how many it appended.
    pub fn consolidate_into(
        &self,
        additive: bool,
        out: &mut History,
        order: &mut Vec<usize>,
    ) -> usize {
        self.consolidate_runs_into(self.len(), additive, out, order)
    }

    /// The order of updates `i` and `j`: by values, then time (by time where `additive`).
    fn cmp_updates(&self, i: usize, j: usize, additive: bool) -> Ordering {
        let by_time = || self.time(i).cmp(self.time(j));
        if additive {
            by_time()
        } else {
            self.cmp_values(i, j).then_with(by_time)
        }
    }

    /// [`History::consolidate_into`] of updates that may be two sorted runs, `..split` and
    /// `split..` (a key's updates from two batches): merged in one pass where they are,
    /// sorted where they are not.
    pub fn consolidate_runs_into(
        &self,
        split: usize,
        additive: bool,
        out: &mut History,
        order: &mut Vec<usize>,
    ) -> usize {
        debug_assert_eq!((out.arity, out.width), (self.arity, self.width));
        let before = out.len();
        let n = self.len();
        if n == 1 {
            // (one update: consolidated unless zero)
            if !self.is_zero(0, additive) {
                out.push_from(self, 0);
            }
            return out.len() - before;
        }
        let split = split.min(n);
        let sorted = |r: std::ops::Range<usize>| {
            (r.start + 1..r.end).all(|i| self.cmp_updates(i - 1, i, additive).is_le())
        };
        order.clear();
        if sorted(0..split) && sorted(split..n) {
            // (already in order, as a key's updates of one batch, advanced, often are; or two
            // sorted runs, merged)
            let (mut i, mut j) = (0, split);
            while i < split && j < n {
                if self.cmp_updates(i, j, additive).is_le() {
                    order.push(i);
                    i += 1;
                } else {
                    order.push(j);
                    j += 1;
                }
            }
            order.extend(i..split);
            order.extend(j..n);
        } else {
            order.extend(0..n);
            order.sort_unstable_by(|&i, &j| self.cmp_updates(i, j, additive));
        }
        let a = self.arity;
        let mut start = 0;
        while start < order.len() {
            let first = order[start];
            let mut end = start + 1;
            while end < order.len()
                && self.time(order[end]) == self.time(first)
                && (additive || self.cmp_values(order[end], first).is_eq())
            {
                end += 1;
            }
            out.push_from(self, first);
            let at = out.len() - 1;
            for &i in &order[start + 1..end] {
                out.diffs[at] = out.diffs[at].wrapping_add(self.diffs[i]);
                if additive {
                    for c in 0..a {
                        let w = self.value(i, c).unwrap_or(0);
                        out.values[at * a + c] = out.values[at * a + c].wrapping_add(w);
                    }
                }
            }
            if additive {
                // (weights are never null: a null weight adds nothing)
                out.nulls[at * a..(at + 1) * a].fill(false);
            }
            if out.is_zero(at, additive) {
                out.truncate(at);
            }
            start = end;
        }
        out.len() - before
    }

    /// Keeps the first `n` updates.
    pub fn truncate(&mut self, n: usize) {
        self.values.truncate(n * self.arity);
        self.nulls.truncate(n * self.arity);
        self.times.truncate(n * self.width);
        self.diffs.truncate(n);
    }

    /// Removes every update (keeping the allocations).
    pub fn clear(&mut self) {
        self.values.clear();
        self.nulls.clear();
        self.times.clear();
        self.diffs.clear();
    }

    /// Appends updates `range` of `other` (of the same shape).
    pub fn extend_range(&mut self, other: &History, range: std::ops::Range<usize>) {
        let (a, w) = (self.arity, self.width);
        self.values
            .extend_from_slice(&other.values[range.start * a..range.end * a]);
        self.nulls
            .extend_from_slice(&other.nulls[range.start * a..range.end * a]);
        self.times
            .extend_from_slice(&other.times[range.start * w..range.end * w]);
        self.diffs.extend_from_slice(&other.diffs[range]);
    }

    /// How many values per update.
    pub fn arity(&self) -> usize {
        self.arity
    }

    /// How many integers per time.
    pub fn width(&self) -> usize {
        self.width
    }

    /// Appends the updates of `other` (of the same shape).
    pub fn extend(&mut self, other: &History) {
        self.values.extend_from_slice(&other.values);
        self.nulls.extend_from_slice(&other.nulls);
        self.times.extend_from_slice(&other.times);
        self.diffs.extend_from_slice(&other.diffs);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lattice::Coordinate::Product;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    fn histories() -> impl Strategy<Value = Vec<(Option<i64>, [i64; 2], i64)>> {
        proptest::collection::vec(
            (
                proptest::option::of(0i64..3),
                [0i64..3, 0i64..3],
                prop_oneof![Just(1i64), Just(-1), Just(2)],
            ),
            0..30,
        )
    }

    fn accumulations(tt: &TimeType, h: &History) -> BTreeMap<(Vec<i64>, Vec<Option<i64>>), i64> {
        let mut acc = BTreeMap::new();
        for a in 0..3 {
            for b in 0..4 {
                let t = vec![a, b];
                for i in (0..h.len()).filter(|&i| tt.less_equal(h.time(i), &t)) {
                    *acc.entry((t.clone(), h.row(i))).or_insert(0i64) += h.diff(i);
                }
            }
        }
        acc.retain(|_, m| *m != 0);
        acc
    }

    proptest! {
        #[test]
        fn consolidation_keeps_every_accumulation(updates in histories()) {
            let tt = TimeType::new(&[Product, Product]);
            let mut h = History::new(1, 2);
            for (v, t, d) in &updates {
                h.push([*v], t, *d);
            }
            let before = accumulations(&tt, &h);
            h.consolidate(false);
            prop_assert_eq!(&before, &accumulations(&tt, &h));
            for i in 1..h.len() {
                prop_assert!(
                    h.cmp_values(i - 1, i).then_with(|| h.time(i - 1).cmp(h.time(i))).is_lt()
                );
            }
            // advancing keeps every accumulation at times in advance of the frontier
            let since = Antichain::from_times(&tt, [[1i64, 1].as_slice()]);
            let mut advanced = h.clone();
            advanced.advance(&tt, &since);
            advanced.consolidate(false);
            let keep = |acc: BTreeMap<(Vec<i64>, Vec<Option<i64>>), i64>| -> Vec<_> {
                acc.into_iter().filter(|((t, _), _)| t[0] >= 1 && t[1] >= 1).collect()
            };
            prop_assert_eq!(keep(accumulations(&tt, &h)), keep(accumulations(&tt, &advanced)));
        }

        #[test]
        fn two_sorted_runs_consolidate_as_their_concatenation(
            first in histories(),
            second in histories(),
            additive in any::<bool>(),
        ) {
            let build = |updates: &[(Option<i64>, [i64; 2], i64)]| {
                let mut h = History::new(1, 2);
                for (v, t, d) in updates {
                    h.push([v.map(|x| if additive { x * d } else { x })], t, *d);
                }
                h
            };
            let (mut a, mut b) = (build(&first), build(&second));
            a.consolidate(additive);
            b.consolidate(additive);
            let mut both = a.clone();
            both.extend(&b);
            let mut order = Vec::new();
            let mut merged = History::new(1, 2);
            both.consolidate_runs_into(a.len(), additive, &mut merged, &mut order);
            let mut sorted = History::new(1, 2);
            both.consolidate_runs_into(both.len(), additive, &mut sorted, &mut order);
            let mut plain = both.clone();
            plain.consolidate(additive);
            prop_assert_eq!(&merged, &plain);
            prop_assert_eq!(&sorted, &plain);
        }

        #[test]
        fn additive_consolidation_adds_weights_by_time(updates in histories()) {
            let mut h = History::new(1, 2);
            for (v, t, d) in &updates {
                h.push([v.map(|x| x * d)], t, *d);
            }
            let mut sums: BTreeMap<Vec<i64>, (i64, i64)> = BTreeMap::new();
            for (v, t, d) in &updates {
                let e = sums.entry(t.to_vec()).or_default();
                e.0 += d;
                e.1 += v.map_or(0, |x| x * d);
            }
            sums.retain(|_, (d, w)| *d != 0 || *w != 0);
            h.consolidate(true);
            let got: BTreeMap<Vec<i64>, (i64, i64)> = (0..h.len())
                .map(|i| (h.time(i).to_vec(), (h.diff(i), h.value(i, 0).unwrap_or(0))))
                .collect();
            prop_assert_eq!(got, sums);
        }
    }
}

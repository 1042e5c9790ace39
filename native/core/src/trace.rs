//! Arrangements: updates indexed by key, as immutable sorted batches merged by a spine.
//!
//! A [`Batch`] holds updates `(key, values, time, diff)` for many keys as a two-level trie of
//! flat columns: the distinct keys in order, and for each key an offset into one [`History`]
//! holding every key's updates, consolidated and sorted by values then time. Building a batch,
//! reading a key or merging two batches allocates per batch, never per key or update.
//!
//! A [`Spine`] is a list of batches, oldest (and largest) first. A new batch is pushed at the
//! end, and while the batch before the last holds at most twice as many updates as the last,
//! the two are merged: batch sizes grow geometrically, so there are logarithmically many of
//! them and an update is merged a logarithmic number of times. A merge advances the times of
//! its updates to the spine's `since` frontier and consolidates them, so the spine compacts
//! as it merges; [`Spine::compact`] rewrites the batches no merge reaches, with fuel paid by
//! the work of the steps, so that a spine's size follows the live data.
//!
//! A [`Cursor`] reads a spine's keys in increasing order, one position per batch, each moved
//! forward by galloping (exponential then binary search): a step that reads `k` sorted keys of
//! a batch of `n` pays `O(k log(n / k))`, not `O(k log n)` nor `O(n)`.

use std::ops::Range;

use crate::history::History;
use crate::lattice::{Antichain, TimeType};

/// A key: nullable integers (`None` orders first).
pub type Key = [Option<i64>];

/// Updates of many keys, sorted and consolidated (see the module).
///
/// Invariant: keys are distinct and increasing; each key has at least one update; a key's
/// updates are consolidated ([`History::consolidate_into`]).
#[derive(Clone, Debug)]
pub struct Batch {
    /// integers per key
    key_width: usize,
    /// `key_width` per distinct key
    keys: Vec<Option<i64>>,
    /// key `k`'s updates are `offsets[k]..offsets[k + 1]`
    offsets: Vec<usize>,
    updates: History,
    /// per key, its distinct times in order with their summed diffs (the third level of the
    /// trie, read where a key's times or its count are asked): key `k`'s are
    /// `times_at[k]..times_at[k + 1]`, `width` integers each in `times`
    times_at: Vec<usize>,
    times: Vec<i64>,
    time_diffs: Vec<i64>,
    /// the generation of `since` its times were last advanced to
    generation: u64,
    /// the insertions into its spine it holds: `lower..upper` (see [`Description`])
    lower: u64,
    upper: u64,
}

/// What one of a spine's batches holds: the accumulation of the spine's insertions
/// `lower..upper` (a spine counts its insertions), at every time in advance of the `since`
/// of `generation`, to which its times were advanced. An inserted batch holds one insertion;
/// a merge of adjacent batches, the union of their ranges.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Description {
    pub lower: u64,
    pub upper: u64,
    pub generation: u64,
}

impl Batch {
    /// An empty batch of keys of `key_width` integers and updates of `arity` values and times
    /// of `width` integers.
    pub fn new(key_width: usize, arity: usize, width: usize) -> Self {
        Self::with_capacity(key_width, arity, width, 0, 0)
    }

    /// [`Batch::new`] with room for `keys` keys and `updates` updates (a batch's final
    /// size, where known, spares the copies of growing).
    pub fn with_capacity(
        key_width: usize,
        arity: usize,
        width: usize,
        keys: usize,
        updates: usize,
    ) -> Self {
        let mut offsets = Vec::with_capacity(keys + 1);
        offsets.push(0);
        Batch {
            key_width,
            keys: Vec::with_capacity(keys * key_width),
            offsets,
            updates: History::with_capacity(arity, width, updates),
            times_at: {
                let mut v = Vec::with_capacity(keys + 1);
                v.push(0);
                v
            },
            times: Vec::new(),
            time_diffs: Vec::new(),
            generation: 0,
            lower: 0,
            upper: 0,
        }
    }

    /// Which insertions it holds, and how far its times were advanced.
    pub fn description(&self) -> Description {
        Description {
            lower: self.lower,
            upper: self.upper,
            generation: self.generation,
        }
    }

    /// How many updates.
    pub fn len(&self) -> usize {
        self.updates.len()
    }

    /// Whether it holds no update.
    pub fn is_empty(&self) -> bool {
        self.updates.is_empty()
    }

    /// How many distinct keys.
    pub fn key_count(&self) -> usize {
        self.offsets.len() - 1
    }

    /// Key `k`.
    pub fn key(&self, k: usize) -> &Key {
        &self.keys[k * self.key_width..(k + 1) * self.key_width]
    }

    /// The positions of key `k`'s updates in [`Batch::updates`].
    pub fn range(&self, k: usize) -> Range<usize> {
        self.offsets[k]..self.offsets[k + 1]
    }

    /// Every key's updates, in key order.
    pub fn updates(&self) -> &History {
        &self.updates
    }

    /// Key `k`'s distinct times (flat, `width` integers each, in order) and their summed
    /// diffs, where it has more than [`SUMMARY_MIN`] updates; else nothing.
    pub fn key_times(&self, k: usize) -> (&[i64], &[i64]) {
        let (a, b) = (self.times_at[k], self.times_at[k + 1]);
        let w = self.updates.width();
        (&self.times[a * w..b * w], &self.time_diffs[a..b])
    }

    /// Calls `f(time, diff)` for key `k`'s distinct times with their summed diffs, or, for a
    /// key of few updates, for each update: either way the diffs of a time add up to the
    /// key's.
    pub fn for_each_time(&self, k: usize, mut f: impl FnMut(&[i64], i64)) {
        let (times, diffs) = self.key_times(k);
        if diffs.is_empty() {
            for u in self.range(k) {
                f(self.updates.time(u), self.updates.diff(u));
            }
        } else {
            let w = self.updates.width();
            for (t, d) in times.chunks_exact(w).zip(diffs) {
                f(t, *d);
            }
        }
    }

    /// Records the distinct times of the last key's updates, `from..` of `updates`, with their
    /// summed diffs (`order` is scratch).
    fn summarize_last(&mut self, from: usize, order: &mut Vec<usize>) {
        let h = &self.updates;
        if h.len() - from <= SUMMARY_MIN {
            // (a light key: its few updates are read instead)
            self.times_at.push(self.time_diffs.len());
            return;
        }
        order.clear();
        order.extend(from..h.len());
        if !order.windows(2).all(|p| h.time(p[0]) <= h.time(p[1])) {
            order.sort_unstable_by(|&a, &b| h.time(a).cmp(h.time(b)));
        }
        for run in order.chunk_by(|&a, &b| h.time(a) == h.time(b)) {
            self.times.extend_from_slice(h.time(run[0]));
            self.time_diffs
                .push(run.iter().fold(0i64, |d, &u| d.wrapping_add(h.diff(u))));
        }
        self.times_at.push(self.time_diffs.len());
    }

    /// Appends the consolidation of `updates` as the updates of `key`, which must be greater
    /// than every key held (nothing is added if they consolidate to none). `order` is scratch.
    /// Returns how many updates were added.
    pub fn push_key(
        &mut self,
        key: &Key,
        updates: &History,
        additive: bool,
        order: &mut Vec<usize>,
    ) -> usize {
        self.push_key_runs(key, updates, updates.len(), additive, order)
    }

    /// [`Batch::push_key`] of updates that may be two sorted runs, `..split` and `split..`.
    fn push_key_runs(
        &mut self,
        key: &Key,
        updates: &History,
        split: usize,
        additive: bool,
        order: &mut Vec<usize>,
    ) -> usize {
        debug_assert_eq!(key.len(), self.key_width);
        debug_assert!(self.key_count() == 0 || self.key(self.key_count() - 1) < key);
        let from = self.updates.len();
        let added = updates.consolidate_runs_into(split, additive, &mut self.updates, order);
        if added > 0 {
            self.keys.extend_from_slice(key);
            self.offsets.push(self.updates.len());
            self.summarize_last(from, order);
        }
        added
    }

    /// Appends key `k` of `other` as it is (already consolidated, times already advanced).
    fn push_key_of(&mut self, other: &Batch, k: usize) {
        self.keys.extend_from_slice(other.key(k));
        self.updates.extend_range(&other.updates, other.range(k));
        self.offsets.push(self.updates.len());
        let (times, diffs) = other.key_times(k);
        self.times.extend_from_slice(times);
        self.time_diffs.extend_from_slice(diffs);
        self.times_at.push(self.time_diffs.len());
    }

    /// The first position at or after `from` whose key is at least `key` (galloping).
    pub fn seek(&self, from: usize, key: &Key) -> usize {
        let n = self.key_count();
        if from >= n || self.key(from) >= key {
            return from;
        }
        // key(lo) < key: double the step until a key at least `key` or the end is passed
        let mut lo = from;
        let mut step = 1;
        while lo + step < n && self.key(lo + step) < key {
            lo += step;
            step *= 2;
        }
        let hi = (lo + step).min(n);
        // the answer is in lo + 1 ..= hi
        let mut a = lo + 1;
        let mut b = hi;
        while a < b {
            let mid = a + (b - a) / 2;
            if self.key(mid) < key {
                a = mid + 1;
            } else {
                b = mid;
            }
        }
        a
    }
}

/// Keys of more updates than this in a batch keep their distinct times with summed diffs.
pub const SUMMARY_MIN: usize = 8;

/// Merges of at most this many updates are done at once (about a millisecond).
pub const EAGER_MERGE: usize = 1 << 16;

/// The units of merge work (updates read) an insertion pays per update it adds: a merge of
/// two batches of about `s` updates each is due when the batches inserted since it started add
/// up to about `s / 2`, and it reads at most `3 s`.
pub const MERGE_FUEL: usize = 8;

/// A merge of batches `at` and `at + 1` of a spine in progress.
#[derive(Clone, Debug)]
struct Merging {
    at: usize,
    /// the next key of each batch
    i: usize,
    j: usize,
    out: Batch,
    /// the frontier times are advanced to, and its generation, when the merge started
    since: Antichain,
    generation: u64,
}

impl Merging {
    fn new(spine: &Spine, at: usize, since: &Antichain, generation: u64) -> Self {
        let (a, b) = (&spine.batches[at], &spine.batches[at + 1]);
        let mut out = spine.batch_with_capacity(a.key_count() + b.key_count(), a.len() + b.len());
        out.generation = generation;
        (out.lower, out.upper) = (a.lower, b.upper);
        Merging {
            at,
            i: 0,
            j: 0,
            out,
            since: since.clone(),
            generation,
        }
    }
}

/// A position per batch of a spine, for reading its keys in increasing order.
#[derive(Clone, Debug, Default)]
pub struct Cursor {
    positions: Vec<usize>,
}

/// A list of batches merged geometrically (see the module).
#[derive(Clone, Debug)]
pub struct Spine {
    key_width: usize,
    arity: usize,
    width: usize,
    /// a key's values are weights that add up like diffs
    additive: bool,
    /// oldest first
    batches: Vec<Batch>,
    /// batches inserted so far
    inserted: u64,
    /// fuel saved towards rewriting a batch whose times are behind `since`
    fuel: usize,
    /// a merge in progress, and the size above which merges proceed by steps
    merging: Option<Merging>,
    eager: usize,
    /// scratch: a key's updates before consolidation, and an order
    scratch: History,
    order: Vec<usize>,
    buf: Vec<i64>,
}

impl Spine {
    /// An empty spine (the shapes as in [`Batch::new`]).
    pub fn new(key_width: usize, arity: usize, width: usize, additive: bool) -> Self {
        Spine {
            key_width,
            arity,
            width,
            additive,
            batches: Vec::new(),
            inserted: 0,
            fuel: 0,
            merging: None,
            eager: EAGER_MERGE,
            scratch: History::new(arity, width),
            order: Vec::new(),
            buf: Vec::new(),
        }
    }

    /// The spine with merges of more than `updates` done by steps (rather than
    /// [`EAGER_MERGE`]).
    pub fn with_eager_merge(mut self, updates: usize) -> Self {
        self.eager = updates;
        self
    }

    /// An empty batch of this spine's shape.
    pub fn batch(&self) -> Batch {
        Batch::new(self.key_width, self.arity, self.width)
    }

    /// An empty batch of this spine's shape with room for `keys` keys and `updates` updates.
    pub fn batch_with_capacity(&self, keys: usize, updates: usize) -> Batch {
        Batch::with_capacity(self.key_width, self.arity, self.width, keys, updates)
    }

    /// How many batches were inserted (the next insertion's position).
    pub fn inserted(&self) -> u64 {
        self.inserted
    }

    /// How many updates, over all batches.
    pub fn len(&self) -> usize {
        self.batches.iter().map(Batch::len).sum()
    }

    /// Whether it holds no update.
    pub fn is_empty(&self) -> bool {
        self.batches.is_empty()
    }

    /// The batches, oldest first.
    pub fn batches(&self) -> &[Batch] {
        &self.batches
    }

    /// A cursor before every key.
    pub fn cursor(&self) -> Cursor {
        Cursor {
            positions: vec![0; self.batches.len()],
        }
    }

    /// Appends `key`'s updates in every batch to `into`, moving `cursor` past them; the keys
    /// read through one cursor must increase, and the spine must not change meanwhile.
    pub fn read(&self, cursor: &mut Cursor, key: &Key, into: &mut History) {
        debug_assert_eq!(cursor.positions.len(), self.batches.len());
        for (batch, at) in self.batches.iter().zip(cursor.positions.iter_mut()) {
            *at = batch.seek(*at, key);
            if *at < batch.key_count() && batch.key(*at) == key {
                into.extend_range(&batch.updates, batch.range(*at));
                *at += 1;
            }
        }
    }

    /// Where `key` is: `(batch, key position)` for every batch holding it, appended to
    /// `into`, moving `cursor` past them (as [`Spine::read`], without copying).
    pub fn locate(&self, cursor: &mut Cursor, key: &Key, into: &mut Vec<(usize, usize)>) {
        debug_assert_eq!(cursor.positions.len(), self.batches.len());
        for (b, (batch, at)) in self
            .batches
            .iter()
            .zip(cursor.positions.iter_mut())
            .enumerate()
        {
            *at = batch.seek(*at, key);
            if *at < batch.key_count() && batch.key(*at) == key {
                into.push((b, *at));
                *at += 1;
            }
        }
    }

    /// Adds a batch, whose times are in advance of the `since` of `generation` (new updates
    /// are), and merges while the batch before the last is at most twice the last. A merge of
    /// more than [`EAGER_MERGE`] updates is not done at once: it proceeds by steps, each
    /// insertion paying [`MERGE_FUEL`] units of work per update it adds, and its two batches
    /// are read until it completes, so that no single step pays for merging the largest
    /// batches. A merge in progress is completed first where a new one would involve either
    /// of its batches.
    pub fn insert(&mut self, mut batch: Batch, tt: &TimeType, since: &Antichain, generation: u64) {
        if batch.is_empty() {
            return;
        }
        let size = batch.len();
        batch.generation = generation;
        (batch.lower, batch.upper) = (self.inserted, self.inserted + 1);
        self.inserted += 1;
        self.batches.push(batch);
        self.tidy(tt, since, generation);
        if let Some(mut m) = self.merging.take() {
            if self.run_merge(&mut m, MERGE_FUEL.saturating_mul(size), tt) {
                self.complete(m);
                self.tidy(tt, since, generation);
            } else {
                self.merging = Some(m);
            }
        }
    }

    /// Merges (or starts merging) adjacent batches until none is at most twice the next one,
    /// the merge in progress aside.
    fn tidy(&mut self, tt: &TimeType, since: &Antichain, generation: u64) {
        loop {
            let merging = self.merging.as_ref().map(|m| m.at);
            let out_of_order = |at: &usize| {
                Some(*at) != merging && self.batches[*at].len() <= 2 * self.batches[*at + 1].len()
            };
            let Some(at) = (0..self.batches.len().saturating_sub(1))
                .rev()
                .find(out_of_order)
            else {
                break;
            };
            if let Some(m) = merging {
                if at + 1 >= m && at <= m + 1 {
                    // (a pair that shares a batch with the merge in progress)
                    self.finish_merge(tt);
                    continue;
                }
            }
            let mut m = Merging::new(self, at, since, generation);
            if self.merging.is_none() && self.pair_len(at) > self.eager {
                self.merging = Some(m);
                continue;
            }
            self.run_merge(&mut m, usize::MAX, tt);
            self.complete(m);
        }
    }

    /// The updates of batches `at` and `at + 1`.
    fn pair_len(&self, at: usize) -> usize {
        self.batches[at].len() + self.batches[at + 1].len()
    }

    /// Completes the merge in progress.
    fn finish_merge(&mut self, tt: &TimeType) {
        if let Some(mut m) = self.merging.take() {
            self.run_merge(&mut m, usize::MAX, tt);
            self.complete(m);
        }
    }

    /// Puts a finished merge's batch in the place of its two (the merge in progress, if it
    /// is another, keeps its batches).
    fn complete(&mut self, m: Merging) {
        let removed = if m.out.is_empty() {
            self.batches.drain(m.at..m.at + 2);
            2
        } else {
            self.batches.splice(m.at..m.at + 2, [m.out]);
            1
        };
        if let Some(other) = self.merging.as_mut() {
            if other.at > m.at {
                other.at -= removed;
            }
        }
    }

    /// Merges keys of batches `m.at` and `m.at + 1` into `m.out` (older first) until `fuel`
    /// updates were read or they are done (`true`): their times advanced to the merge's
    /// `since`, consolidated.
    fn run_merge(&mut self, m: &mut Merging, fuel: usize, tt: &TimeType) -> bool {
        let (a, b) = (&self.batches[m.at], &self.batches[m.at + 1]);
        let out = &mut m.out;
        let mut spent = 0usize;
        let (mut i, mut j) = (m.i, m.j);
        while i < a.key_count() || j < b.key_count() {
            if spent >= fuel {
                break;
            }
            let take_a = j == b.key_count() || (i < a.key_count() && a.key(i) <= b.key(j));
            let take_b = i == a.key_count() || (j < b.key_count() && b.key(j) <= a.key(i));
            let stale =
                (take_a && a.generation < m.generation) || (take_b && b.generation < m.generation);
            if !stale && take_a != take_b {
                // a key in one batch, its times current: copied as it is
                let (from, k) = if take_a { (a, i) } else { (b, j) };
                spent += from.range(k).len();
                out.push_key_of(from, k);
            } else {
                self.scratch.clear();
                if take_a {
                    self.scratch.extend_range(&a.updates, a.range(i));
                }
                if take_b {
                    self.scratch.extend_range(&b.updates, b.range(j));
                }
                spent += self.scratch.len();
                if stale {
                    self.scratch.advance_with(tt, &m.since, &mut self.buf);
                }
                let key = if take_a { a.key(i) } else { b.key(j) };
                // (two sorted runs where the key is in both batches)
                let split = if take_a { a.range(i).len() } else { 0 };
                out.push_key_runs(key, &self.scratch, split, self.additive, &mut self.order);
            }
            i += usize::from(take_a);
            j += usize::from(take_b);
        }
        (m.i, m.j) = (i, j);
        i == a.key_count() && j == b.key_count()
    }

    /// Spends `fuel` (and what was saved) rewriting batches whose times are behind the
    /// `since` of `generation`, newest first: each is advanced and consolidated once the fuel
    /// saved covers its size. Fuel is saved only while such a batch waits. The batches of a
    /// merge in progress are left to it.
    pub fn compact(&mut self, tt: &TimeType, since: &Antichain, generation: u64, fuel: usize) {
        self.fuel = self.fuel.saturating_add(fuel);
        let mut at = self.batches.len();
        while at > 0 {
            at -= 1;
            let merging = self.merging.as_ref().map(|m| m.at);
            if self.batches[at].generation >= generation
                || merging.is_some_and(|m| at == m || at == m + 1)
            {
                continue;
            }
            let size = self.batches[at].len();
            if self.fuel < size {
                return;
            }
            self.fuel -= size;
            // (rewritten as the merge of the batch with an empty one just after it, of no
            // insertion)
            let mut empty = self.batch();
            (empty.lower, empty.upper) = (self.batches[at].upper, self.batches[at].upper);
            self.batches.insert(at + 1, empty);
            if let Some(other) = self.merging.as_mut() {
                if other.at > at {
                    other.at += 1;
                }
            }
            let mut m = Merging::new(self, at, since, generation);
            self.run_merge(&mut m, usize::MAX, tt);
            self.complete(m);
        }
        // nothing waits: no fuel is saved for later
        self.fuel = 0;
    }

    /// Every update: `(key, values, time, diff)` through `f`, batch by batch.
    pub fn for_each(&self, mut f: impl FnMut(&Key, &History, usize)) {
        for batch in &self.batches {
            for k in 0..batch.key_count() {
                for u in batch.range(k) {
                    f(batch.key(k), &batch.updates, u);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lattice::Coordinate::Product;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    /// `(key, value, time, diff)`
    type Drawn = (i64, i64, [i64; 2], i64);

    type Acc = BTreeMap<(Vec<Option<i64>>, Vec<Option<i64>>, Vec<i64>), i64>;

    /// The accumulation of a spine's updates at every time of a small grid, by (key, values).
    fn accumulations(tt: &TimeType, spine: &Spine, grid: &[Vec<i64>]) -> Acc {
        let mut acc = Acc::new();
        spine.for_each(|key, h, u| {
            for t in grid {
                if tt.less_equal(h.time(u), t) {
                    *acc.entry((key.to_vec(), h.row(u), t.clone())).or_insert(0) += h.diff(u);
                }
            }
        });
        acc.retain(|_, m| *m != 0);
        acc
    }

    fn batch_of(spine: &Spine, updates: &[Drawn]) -> Batch {
        let mut sorted = updates.to_vec();
        sorted.sort_by_key(|u| u.0);
        let mut batch = spine.batch();
        let mut h = History::new(1, 2);
        let mut order = Vec::new();
        for run in sorted.chunk_by(|a, b| a.0 == b.0) {
            h.clear();
            for (_, v, t, d) in run {
                h.push([Some(*v)], t, *d);
            }
            batch.push_key(&[Some(run[0].0)], &h, false, &mut order);
        }
        batch
    }

    fn batches() -> impl Strategy<Value = Vec<Vec<Drawn>>> {
        proptest::collection::vec(
            proptest::collection::vec(
                (
                    0i64..6,
                    0i64..3,
                    [0i64..3, 0i64..3],
                    prop_oneof![Just(1i64), Just(-1)],
                ),
                0..12,
            ),
            1..10,
        )
    }

    fn grid() -> Vec<Vec<i64>> {
        (0..4)
            .flat_map(|a| (0..4).map(move |b| vec![a, b]))
            .collect()
    }

    /// The batches' descriptions: increasing, disjoint ranges of the insertions so far, and
    /// each batch accumulates (at the times of `grid`) to the insertions of its range
    /// (`plain` holds each insertion as a batch of its own).
    fn descriptions_cover(
        tt: &TimeType,
        spine: &Spine,
        plain: &Spine,
        grid: &[Vec<i64>],
    ) -> Result<(), TestCaseError> {
        let ds: Vec<Description> = spine.batches().iter().map(Batch::description).collect();
        prop_assert_eq!(spine.inserted(), plain.batches().len() as u64);
        for pair in ds.windows(2) {
            prop_assert!(pair[0].upper <= pair[1].lower);
        }
        for (batch, d) in spine.batches().iter().zip(&ds) {
            prop_assert!(d.lower < d.upper && d.upper <= spine.inserted());
            let mut alone = Spine::new(1, 1, 2, false);
            alone.batches.push(batch.clone());
            let mut range = Spine::new(1, 1, 2, false);
            for b in &plain.batches()[d.lower as usize..d.upper as usize] {
                range.batches.push(b.clone());
            }
            prop_assert_eq!(
                accumulations(tt, &alone, grid),
                accumulations(tt, &range, grid)
            );
        }
        Ok(())
    }

    proptest! {
        /// Merging batches as a spine does keeps every accumulation (`merge ==
        /// consolidate(concat)`), and the spine's invariants hold: batches of sorted distinct
        /// keys with consolidated updates, sizes decreasing geometrically.
        #[test]
        fn a_spine_keeps_every_accumulation(
            batches in batches(),
            since in [0i64..3, 0i64..3],
            eager in prop_oneof![Just(EAGER_MERGE), 0usize..8],
        ) {
            let tt = TimeType::new(&[Product, Product]);
            let mut spine = Spine::new(1, 1, 2, false).with_eager_merge(eager);
            let mut plain = Spine::new(1, 1, 2, false);
            let frontier = Antichain::from_times(&tt, [[0i64, 0].as_slice()]);
            for b in &batches {
                spine.insert(batch_of(&spine, b), &tt, &frontier, 0);
                // the reference: every batch kept apart, never merged
                let apart = batch_of(&plain, b);
                if !apart.is_empty() {
                    plain.batches.push(apart);
                }
            }
            let g = grid();
            prop_assert_eq!(accumulations(&tt, &spine, &g), accumulations(&tt, &plain, &g));
            descriptions_cover(&tt, &spine, &plain, &g)?;
            let merging = spine.merging.as_ref().map(|m| m.at);
            for (at, pair) in spine.batches().windows(2).enumerate() {
                if merging != Some(at) {
                    prop_assert!(pair[0].len() > 2 * pair[1].len());
                }
            }
            for batch in spine.batches() {
                for k in 1..batch.key_count() {
                    prop_assert!(batch.key(k - 1) < batch.key(k));
                }
                for k in 0..batch.key_count() {
                    let r = batch.range(k);
                    prop_assert!(!r.is_empty());
                    let h = batch.updates();
                    // the key's times: its distinct times in order, with their summed diffs
                    let mut sums: BTreeMap<Vec<i64>, i64> = BTreeMap::new();
                    for u in r.clone() {
                        *sums.entry(h.time(u).to_vec()).or_insert(0) += h.diff(u);
                    }
                    let mut summed: BTreeMap<Vec<i64>, i64> = BTreeMap::new();
                    batch.for_each_time(k, |t, d| *summed.entry(t.to_vec()).or_insert(0) += d);
                    summed.retain(|_, d| *d != 0);
                    let mut nonzero = sums.clone();
                    nonzero.retain(|_, d| *d != 0);
                    prop_assert_eq!(summed, nonzero);
                    let (times, diffs) = batch.key_times(k);
                    if diffs.is_empty() {
                        prop_assert!(r.len() <= SUMMARY_MIN);
                        continue;
                    }
                    let got: Vec<(Vec<i64>, i64)> =
                        times.chunks_exact(2).map(<[i64]>::to_vec).zip(diffs.iter().copied()).collect();
                    prop_assert_eq!(got, sums.into_iter().collect::<Vec<_>>());
                    for u in r.start + 1..r.end {
                        let order = h.cmp_values(u - 1, u).then_with(|| h.time(u - 1).cmp(h.time(u)));
                        prop_assert!(order.is_lt());
                    }
                }
            }
            // compacted to a frontier: the same accumulations at every time in advance of it
            let frontier = Antichain::from_times(&tt, [since.as_slice()]);
            spine.compact(&tt, &frontier, 1, usize::MAX);
            let later: Vec<Vec<i64>> =
                g.into_iter().filter(|t| frontier.less_equal(&tt, t)).collect();
            prop_assert_eq!(accumulations(&tt, &spine, &later), accumulations(&tt, &plain, &later));
            descriptions_cover(&tt, &spine, &plain, &later)?;
            // (but for a merge's two batches, still read as they are while it proceeds)
            let merging = spine.merging.as_ref().map(|m| m.at);
            for (at, batch) in spine.batches().iter().enumerate() {
                if merging.is_some_and(|m| at == m || at == m + 1) {
                    continue;
                }
                prop_assert_eq!(batch.description().generation, 1);
                let h = batch.updates();
                for u in 0..h.len() {
                    prop_assert!(frontier.less_equal(&tt, h.time(u)));
                }
            }
        }

        /// A cursor finds every key of every batch, read in increasing order, skipping keys.
        #[test]
        fn a_cursor_reads_keys_in_order(
            batches in batches(),
            wanted in proptest::collection::btree_set(0i64..8, 0..8),
            eager in prop_oneof![Just(EAGER_MERGE), 0usize..8],
        ) {
            let tt = TimeType::new(&[Product, Product]);
            let mut spine = Spine::new(1, 1, 2, false).with_eager_merge(eager);
            let frontier = Antichain::from_times(&tt, [[0i64, 0].as_slice()]);
            for b in &batches {
                spine.insert(batch_of(&spine, b), &tt, &frontier, 0);
            }
            let mut cursor = spine.cursor();
            for k in wanted {
                let mut got = History::new(1, 2);
                spine.read(&mut cursor, &[Some(k)], &mut got);
                let mut expected = History::new(1, 2);
                spine.for_each(|key, h, u| {
                    if key == [Some(k)] {
                        expected.push_from(h, u);
                    }
                });
                prop_assert_eq!(got, expected);
            }
        }
    }

    #[test]
    fn galloping_finds_the_first_key_at_least_asked() {
        let spine = Spine::new(1, 1, 2, false);
        let mut batch = spine.batch();
        let mut h = History::new(1, 2);
        h.push([Some(0)], &[0, 0], 1);
        let mut order = Vec::new();
        for k in (0..100).map(|k| k * 2) {
            batch.push_key(&[Some(k)], &h, false, &mut order);
        }
        for from in [0, 3, 50, 99, 100] {
            for k in -1..202 {
                let expected = (from..100)
                    .find(|&i| batch.key(i) >= &[Some(k)][..])
                    .unwrap_or(100);
                assert_eq!(
                    batch.seek(from, &[Some(k)]),
                    expected,
                    "from {from}, key {k}"
                );
            }
        }
    }
}

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
#[path = "trace_tests.rs"]
mod tests;

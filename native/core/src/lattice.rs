//! Times and their lattice.
//!
//! A time is a short vector of non-negative integers `(epoch, c1, c2, ...)`: the epoch, then the
//! coordinates that enclosing loops add. A [`TimeType`] says how each coordinate is ordered:
//!
//! * [`Coordinate::Product`]: one integer, ordered with the product order against the others
//!   (the epoch, an ordinary `iterate` loop's counter);
//! * [`Coordinate::Lexicographic`]: a pair `(priority, iteration)` stored as two adjacent
//!   integers and ordered lexicographically within the pair (a `prioritized_iterate`).
//!
//! The order of a time type is the product of its coordinates' orders, so for times `s, t`:
//!
//! ```text
//! less_equal(s, t)  iff  every coordinate of s <= the same coordinate of t
//! join(s, t)        least upper bound: coordinate-wise max (lexicographic max in a pair)
//! meet(s, t)        greatest lower bound: coordinate-wise min (lexicographic min in a pair)
//! advance_by(t, F)  = meet over f in F of join(t, f)
//! ```
//!
//! Every coordinate is a chain, so the lattice is distributive, and `advance_by` has the
//! property compaction relies on: for every `u` in advance of the frontier `F` (some
//! `f <= u`), `t <= u` iff `advance_by(t, F) <= u`. The flat lexicographic order of the
//! integers ([`TimeType::linear_cmp`], plain slice comparison) is a linear extension of the
//! partial order: `s <= t` implies `s` sorts no later than `t`.
//!
//! A [`MutableAntichain`] counts times and keeps the frontier of those with positive counts,
//! as progress tracking needs at every input it watches.
//!
//! These are the rules of the Python `ddflow.timely.lattice`, which the bindings' tests compare
//! with this module.

use std::cmp::Ordering;

use crate::hash::FastMap;

/// How one coordinate of a time is ordered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Coordinate {
    /// One integer, in the product order with the other coordinates.
    Product,
    /// Two integers `(priority, iteration)`, ordered lexicographically within the pair.
    Lexicographic,
}

/// The lattice of times of one scope.
///
/// ```
/// use ddflow_core::lattice::{Coordinate::*, TimeType};
/// let tt = TimeType::new(&[Product, Product]);
/// assert!(tt.less_equal(&[0, 1], &[1, 1]));
/// assert!(!tt.less_equal(&[0, 2], &[1, 1]));
/// assert_eq!(tt.join(&[0, 2], &[1, 1]), vec![1, 2]);
/// assert_eq!(tt.meet(&[0, 2], &[1, 1]), vec![0, 1]);
/// let lex = TimeType::new(&[Product, Lexicographic]);
/// assert!(lex.less_equal(&[0, 0, 9], &[0, 1, 0]));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TimeType {
    coordinates: Vec<Coordinate>,
    width: usize,
    /// `true` at the flat position of the first integer of each lexicographic pair
    pair_start: Vec<bool>,
    /// no lexicographic pair: the order is the product of the integers
    product: bool,
}

impl TimeType {
    /// The time type of these coordinates, outermost (the epoch) first.
    pub fn new(coordinates: &[Coordinate]) -> Self {
        let mut pair_start = Vec::new();
        for c in coordinates {
            match c {
                Coordinate::Product => pair_start.push(false),
                Coordinate::Lexicographic => pair_start.extend([true, false]),
            }
        }
        TimeType {
            coordinates: coordinates.to_vec(),
            width: pair_start.len(),
            product: !pair_start.contains(&true),
            pair_start,
        }
    }

    /// The time type of the top scope: epochs, a single chain.
    pub fn epochs() -> Self {
        Self::new(&[Coordinate::Product])
    }

    /// The coordinates, outermost first.
    pub fn coordinates(&self) -> &[Coordinate] {
        &self.coordinates
    }

    /// How many integers a time of this type has.
    pub fn width(&self) -> usize {
        self.width
    }

    /// Whether every coordinate is ordered by the product order.
    pub fn is_product(&self) -> bool {
        self.product
    }

    /// The least time: all zeros.
    pub fn minimum(&self) -> Vec<i64> {
        vec![0; self.width]
    }

    /// The coordinate-wise walk: calls `f(position, is_pair)` for each coordinate's first
    /// integer, where `is_pair` says whether it starts a lexicographic pair.
    fn parts(&self) -> impl Iterator<Item = (usize, bool)> + '_ {
        let mut i = 0;
        std::iter::from_fn(move || {
            if i >= self.width {
                return None;
            }
            let pair = self.pair_start[i];
            let at = i;
            i += if pair { 2 } else { 1 };
            Some((at, pair))
        })
    }

    /// `s <= t` in the partial order.
    pub fn less_equal(&self, s: &[i64], t: &[i64]) -> bool {
        debug_assert_eq!(s.len(), self.width);
        debug_assert_eq!(t.len(), self.width);
        if self.product {
            return s.iter().zip(t).all(|(a, b)| a <= b);
        }
        self.parts().all(|(i, pair)| {
            if pair {
                (s[i], s[i + 1]) <= (t[i], t[i + 1])
            } else {
                s[i] <= t[i]
            }
        })
    }

    /// `s < t` in the partial order.
    pub fn less_than(&self, s: &[i64], t: &[i64]) -> bool {
        s != t && self.less_equal(s, t)
    }

    /// The least upper bound of `s` and `t`, written to `out`.
    pub fn join_into(&self, s: &[i64], t: &[i64], out: &mut [i64]) {
        self.bound_into(s, t, out, true);
    }

    /// The greatest lower bound of `s` and `t`, written to `out`.
    pub fn meet_into(&self, s: &[i64], t: &[i64], out: &mut [i64]) {
        self.bound_into(s, t, out, false);
    }

    /// The join (`upper`) or meet of `s` and `t`: coordinate-wise max (min), a lexicographic
    /// pair taken whole.
    fn bound_into(&self, s: &[i64], t: &[i64], out: &mut [i64], upper: bool) {
        if self.product {
            for ((o, a), b) in out.iter_mut().zip(s).zip(t) {
                *o = pick(upper, *a, *b);
            }
            return;
        }
        for (i, pair) in self.parts() {
            if pair {
                let m = pick(upper, (s[i], s[i + 1]), (t[i], t[i + 1]));
                out[i] = m.0;
                out[i + 1] = m.1;
            } else {
                out[i] = pick(upper, s[i], t[i]);
            }
        }
    }

    /// The least upper bound of `s` and `t`.
    pub fn join(&self, s: &[i64], t: &[i64]) -> Vec<i64> {
        let mut out = vec![0; self.width];
        self.join_into(s, t, &mut out);
        out
    }

    /// The greatest lower bound of `s` and `t`.
    pub fn meet(&self, s: &[i64], t: &[i64]) -> Vec<i64> {
        let mut out = vec![0; self.width];
        self.meet_into(s, t, &mut out);
        out
    }

    /// `t` advanced by the frontier: the meet over `f` in `frontier` of `join(t, f)`; `t`
    /// itself for an empty frontier (nothing can be distinguished any more, and the caller
    /// keeps what it has).
    pub fn advance_by(&self, t: &[i64], frontier: &Antichain) -> Vec<i64> {
        let mut out = t.to_vec();
        self.advance_in_place(&mut out, frontier, &mut Vec::new());
        out
    }

    /// [`TimeType::advance_by`] in place, with `buf` as scratch (no allocation once it has
    /// grown).
    pub fn advance_in_place(&self, t: &mut [i64], frontier: &Antichain, buf: &mut Vec<i64>) {
        let w = self.width;
        let mut elements = frontier.elements();
        let Some(first) = elements.next() else {
            return;
        };
        buf.resize(3 * w, 0);
        let (acc, rest) = buf.split_at_mut(w);
        let (joined, met) = rest.split_at_mut(w);
        self.join_into(t, first, acc);
        for f in elements {
            self.join_into(t, f, joined);
            self.meet_into(acc, joined, met);
            acc.copy_from_slice(met);
        }
        t.copy_from_slice(acc);
    }

    /// A total order that extends the partial order (flat lexicographic order).
    pub fn linear_cmp(&self, s: &[i64], t: &[i64]) -> Ordering {
        s.cmp(t)
    }
}

/// The greater (`upper`) or the lesser of `a` and `b`.
fn pick<T: Ord>(upper: bool, a: T, b: T) -> T {
    if upper {
        a.max(b)
    } else {
        a.min(b)
    }
}

/// A set of mutually incomparable times (a frontier), kept minimal.
///
/// Invariant: no element is `<=` another; [`Antichain::insert`] of a time that some element is
/// `<=` changes nothing, and otherwise drops every element the new time is `<=`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Antichain {
    width: usize,
    /// the elements, `width` integers each, in the order they were kept
    flat: Vec<i64>,
    /// how many elements
    len: usize,
}

impl Antichain {
    /// The empty antichain of times of `width` integers (a frontier past every time).
    pub fn new(width: usize) -> Self {
        Antichain {
            width,
            flat: Vec::new(),
            len: 0,
        }
    }

    /// The minimal elements of `times`.
    pub fn from_times<'a>(tt: &TimeType, times: impl IntoIterator<Item = &'a [i64]>) -> Self {
        let mut a = Antichain::new(tt.width());
        for t in times {
            a.insert(tt, t);
        }
        a
    }

    /// Adds `t` unless an element is `<=` it; whether it was added.
    pub fn insert(&mut self, tt: &TimeType, t: &[i64]) -> bool {
        if self.less_equal(tt, t) {
            return false;
        }
        let w = self.width;
        let mut kept = Vec::with_capacity(self.flat.len() + w);
        let mut len = 1;
        for f in self.elements() {
            if !tt.less_equal(t, f) {
                kept.extend_from_slice(f);
                len += 1;
            }
        }
        kept.extend_from_slice(t);
        self.flat = kept;
        self.len = len;
        true
    }

    /// How many elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there is no element.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The elements.
    pub fn elements(&self) -> impl Iterator<Item = &[i64]> {
        self.flat.chunks_exact(self.width.max(1)).take(self.len)
    }

    /// Whether some element is `<= t` (`t` is not complete at this frontier).
    pub fn less_equal(&self, tt: &TimeType, t: &[i64]) -> bool {
        self.elements().any(|f| tt.less_equal(f, t))
    }

    /// Whether some element is `< t`.
    pub fn less_than(&self, tt: &TimeType, t: &[i64]) -> bool {
        self.elements().any(|f| tt.less_than(f, t))
    }
}

/// The minimal elements of distinct `times` sorted lexicographically (a linear extension of
/// the order: a time can only be dominated by an earlier one).
pub fn minimal_sorted(tt: &TimeType, times: impl IntoIterator<Item = Vec<i64>>) -> Vec<Vec<i64>> {
    let mut minimal: Vec<Vec<i64>> = Vec::new();
    for t in times {
        if !minimal.iter().any(|m| tt.less_equal(m, &t)) {
            minimal.push(t);
        }
    }
    minimal
}

/// Counts of times and the frontier of those with positive count.
#[derive(Clone, Debug)]
pub struct MutableAntichain {
    tt: TimeType,
    counts: FastMap<Vec<i64>, i64>,
    frontier: Vec<Vec<i64>>,
}

impl MutableAntichain {
    /// No time counted.
    pub fn new(tt: TimeType) -> Self {
        MutableAntichain {
            tt,
            counts: FastMap::default(),
            frontier: Vec::new(),
        }
    }

    /// The minimal times with positive count, in lexicographic order.
    pub fn frontier(&self) -> &[Vec<i64>] {
        &self.frontier
    }

    /// No time has a positive count.
    pub fn is_empty(&self) -> bool {
        self.frontier.is_empty()
    }

    /// Apply count changes; whether the frontier changed. A time that leaves and comes back
    /// within the changes changes nothing: the frontier is judged on the counts at the end.
    pub fn apply_changes(&mut self, changes: &[(Vec<i64>, i64)]) -> bool {
        self.apply(changes.iter().map(|(t, d)| (t.as_slice(), *d)))
    }

    /// [`MutableAntichain::apply_changes`] of borrowed times.
    pub fn apply<'a>(&mut self, changes: impl IntoIterator<Item = (&'a [i64], i64)>) -> bool {
        let mut flipped: Vec<&[i64]> = Vec::new();
        for (t, d) in changes {
            if d == 0 {
                continue;
            }
            let (old, new) = match self.counts.get_mut(t) {
                Some(c) => {
                    let old = *c;
                    *c += d;
                    (old, *c)
                }
                None => {
                    self.counts.insert(t.to_vec(), d);
                    (0, d)
                }
            };
            if new == 0 {
                self.counts.remove(t);
            }
            if (old > 0) != (new > 0) {
                flipped.push(t);
            }
        }
        let tt = &self.tt;
        let moves = flipped.iter().any(|t| {
            if self.counts.get(*t).is_some_and(|&c| c > 0) {
                // a new positive time moves the frontier only if nothing in it is <= t
                !self.frontier.iter().any(|f| tt.less_equal(f, t))
            } else {
                self.frontier.iter().any(|f| f.as_slice() == *t)
            }
        });
        if !moves {
            return false;
        }
        let mut positive: Vec<Vec<i64>> = self
            .counts
            .iter()
            .filter(|(_, &c)| c > 0)
            .map(|(t, _)| t.clone())
            .collect();
        positive.sort_unstable();
        let frontier = minimal_sorted(tt, positive);
        let changed = frontier != self.frontier;
        self.frontier = frontier;
        changed
    }
}

#[cfg(test)]
mod tests {
    use super::Coordinate::{Lexicographic, Product};
    use super::*;
    use proptest::prelude::*;

    fn time_types() -> impl Strategy<Value = TimeType> {
        proptest::collection::vec(prop_oneof![Just(Product), Just(Lexicographic)], 1..4)
            .prop_map(|cs| TimeType::new(&cs))
    }

    fn typed_times(n: usize) -> impl Strategy<Value = (TimeType, Vec<Vec<i64>>)> {
        time_types().prop_flat_map(move |tt| {
            let w = tt.width();
            (
                Just(tt),
                proptest::collection::vec(proptest::collection::vec(0i64..4, w), n),
            )
        })
    }

    proptest! {
        #[test]
        fn less_equal_is_a_partial_order((tt, ts) in typed_times(3)) {
            let (a, b, c) = (&ts[0], &ts[1], &ts[2]);
            prop_assert!(tt.less_equal(a, a));
            if tt.less_equal(a, b) && tt.less_equal(b, a) {
                prop_assert_eq!(a, b);
            }
            if tt.less_equal(a, b) && tt.less_equal(b, c) {
                prop_assert!(tt.less_equal(a, c));
            }
        }

        #[test]
        fn join_is_the_least_upper_bound((tt, ts) in typed_times(3)) {
            let (a, b, u) = (&ts[0], &ts[1], &ts[2]);
            let j = tt.join(a, b);
            prop_assert!(tt.less_equal(a, &j) && tt.less_equal(b, &j));
            if tt.less_equal(a, u) && tt.less_equal(b, u) {
                prop_assert!(tt.less_equal(&j, u));
            }
            prop_assert_eq!(&j, &tt.join(b, a));
            prop_assert_eq!(tt.join(&j, u), tt.join(a, &tt.join(b, u)));
        }

        #[test]
        fn meet_is_the_greatest_lower_bound((tt, ts) in typed_times(3)) {
            let (a, b, l) = (&ts[0], &ts[1], &ts[2]);
            let m = tt.meet(a, b);
            prop_assert!(tt.less_equal(&m, a) && tt.less_equal(&m, b));
            if tt.less_equal(l, a) && tt.less_equal(l, b) {
                prop_assert!(tt.less_equal(l, &m));
            }
            // absorption: a lattice
            prop_assert_eq!(tt.join(a, &tt.meet(a, b)), a.clone());
            prop_assert_eq!(tt.meet(a, &tt.join(a, b)), a.clone());
        }

        #[test]
        fn the_lattice_is_distributive((tt, ts) in typed_times(3)) {
            let (a, b, c) = (&ts[0], &ts[1], &ts[2]);
            prop_assert_eq!(
                tt.meet(a, &tt.join(b, c)),
                tt.join(&tt.meet(a, b), &tt.meet(a, c))
            );
        }

        #[test]
        fn flat_order_extends_the_partial_order((tt, ts) in typed_times(2)) {
            if tt.less_equal(&ts[0], &ts[1]) {
                prop_assert_ne!(tt.linear_cmp(&ts[0], &ts[1]), Ordering::Greater);
            }
        }

        #[test]
        fn advance_by_keeps_every_comparison_in_advance_of_the_frontier(
            (tt, ts) in typed_times(6)
        ) {
            let t = &ts[0];
            let frontier = Antichain::from_times(&tt, ts[1..3].iter().map(Vec::as_slice));
            let advanced = tt.advance_by(t, &frontier);
            for u in &ts[3..] {
                if frontier.less_equal(&tt, u) {
                    prop_assert_eq!(tt.less_equal(t, u), tt.less_equal(&advanced, u));
                }
            }
            // advancing is idempotent and never goes back
            prop_assert_eq!(tt.advance_by(&advanced, &frontier), advanced.clone());
            prop_assert!(tt.less_equal(t, &advanced));
        }

        #[test]
        fn an_antichain_is_the_minimal_elements((tt, ts) in typed_times(6)) {
            let a = Antichain::from_times(&tt, ts.iter().map(Vec::as_slice));
            let elements: Vec<&[i64]> = a.elements().collect();
            for (i, x) in elements.iter().enumerate() {
                for (j, y) in elements.iter().enumerate() {
                    if i != j {
                        prop_assert!(!tt.less_equal(x, y));
                    }
                }
            }
            for t in &ts {
                prop_assert!(a.less_equal(&tt, t));
                let minimal = !ts.iter().any(|s| tt.less_than(s, t));
                prop_assert_eq!(minimal, elements.contains(&t.as_slice()));
            }
        }
    }

    #[test]
    fn a_lexicographic_pair_compares_its_priority_first() {
        let tt = TimeType::new(&[Product, Lexicographic]);
        assert!(tt.less_equal(&[1, 0, 7], &[1, 1, 0]));
        assert!(!tt.less_equal(&[1, 1, 0], &[1, 0, 7]));
        assert_eq!(tt.join(&[0, 1, 0], &[1, 0, 5]), vec![1, 1, 0]);
        assert_eq!(tt.meet(&[0, 1, 0], &[1, 0, 5]), vec![0, 0, 5]);
        assert_eq!(tt.width(), 3);
        assert!(!tt.is_product());
    }

    #[test]
    fn advancing_by_an_empty_frontier_keeps_the_time() {
        let tt = TimeType::epochs();
        assert_eq!(tt.advance_by(&[3], &Antichain::new(1)), vec![3]);
        let f = Antichain::from_times(&tt, [[5i64].as_slice()]);
        assert_eq!(tt.advance_by(&[3], &f), vec![5]);
    }
}

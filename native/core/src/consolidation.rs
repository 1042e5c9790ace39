//! Consolidation: updates with equal `(data, time)` add up, and zero diffs vanish.
//!
//! A list of updates is *consolidated* when it is sorted by `(data, time)`, no two updates share
//! `(data, time)` and no diff is zero. Consolidating keeps every accumulation: for each record
//! and each time `t`, the sum of the diffs at times `<= t` is what it was. Diffs add with
//! two's-complement wrapping, as the Python data plane's `int64` sums do.

/// Sorts `updates` by their data (which includes the time) and adds up the diffs of equal
/// data, dropping those that sum to zero.
///
/// ```
/// let mut u = vec![(("b", 1), 2), (("a", 0), 1), (("b", 1), -2), (("a", 0), 3)];
/// ddflow_core::consolidation::consolidate(&mut u);
/// assert_eq!(u, vec![(("a", 0), 4)]);
/// ```
pub fn consolidate<D: Ord>(updates: &mut Vec<(D, i64)>) {
    updates.sort_by(|a, b| a.0.cmp(&b.0));
    consolidate_sorted(updates);
}

/// [`consolidate`] of updates already sorted by their data.
pub fn consolidate_sorted<D: Ord>(updates: &mut Vec<(D, i64)>) {
    let mut write = 0;
    for read in 0..updates.len() {
        if write > 0 && updates[write - 1].0 == updates[read].0 {
            updates[write - 1].1 = updates[write - 1].1.wrapping_add(updates[read].1);
        } else {
            if write > 0 && updates[write - 1].1 == 0 {
                write -= 1;
            }
            updates.swap(write, read);
            write += 1;
        }
    }
    if write > 0 && updates[write - 1].1 == 0 {
        write -= 1;
    }
    updates.truncate(write);
}

/// Whether `updates` are consolidated: strictly increasing data, no zero diff.
pub fn is_consolidated<D: Ord>(updates: &[(D, i64)]) -> bool {
    updates.windows(2).all(|w| w[0].0 < w[1].0) && updates.iter().all(|u| u.1 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lattice::{Coordinate, TimeType};
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    type Update = ((u8, Vec<i64>), i64);

    fn updates() -> impl Strategy<Value = Vec<Update>> {
        proptest::collection::vec(
            (
                (0u8..4, proptest::collection::vec(0i64..3, 2)),
                prop_oneof![
                    Just(-1i64),
                    Just(1),
                    Just(2),
                    Just(i64::MAX),
                    Just(i64::MIN)
                ],
            ),
            0..40,
        )
    }

    /// The accumulation of `updates` at `t`, record by record (zeros left out).
    fn accumulate(tt: &TimeType, updates: &[Update], t: &[i64]) -> BTreeMap<u8, i64> {
        let mut acc = BTreeMap::new();
        for ((d, s), m) in updates {
            if tt.less_equal(s, t) {
                let e: &mut i64 = acc.entry(*d).or_default();
                *e = e.wrapping_add(*m);
            }
        }
        acc.retain(|_, m| *m != 0);
        acc
    }

    proptest! {
        #[test]
        fn consolidation_keeps_every_accumulation(u in updates()) {
            let tt = TimeType::new(&[Coordinate::Product, Coordinate::Product]);
            let mut c = u.clone();
            consolidate(&mut c);
            prop_assert!(is_consolidated(&c));
            for a in 0..3 {
                for b in 0..3 {
                    prop_assert_eq!(accumulate(&tt, &u, &[a, b]), accumulate(&tt, &c, &[a, b]));
                }
            }
        }

        #[test]
        fn consolidation_is_idempotent_and_ignores_order(u in updates()) {
            let mut once = u.clone();
            consolidate(&mut once);
            let mut twice = once.clone();
            consolidate(&mut twice);
            prop_assert_eq!(&once, &twice);
            let mut reversed: Vec<Update> = u.iter().rev().cloned().collect();
            consolidate(&mut reversed);
            prop_assert_eq!(once, reversed);
        }
    }

    #[test]
    fn sums_that_wrap_cancel_as_int64_does() {
        let mut u = vec![(1, i64::MAX), (1, 1), (1, i64::MAX), (1, 1)];
        consolidate(&mut u);
        assert!(u.is_empty());
    }
}

//! A key's interesting times: where its accumulation may change once new updates arrive.
//!
//! A reduce must reevaluate a key at every time where the accumulation of its input may differ
//! from before: the least upper bounds of the subsets of the key's times that contain a new
//! time (a lub of old times alone was evaluated when they were new).

use std::collections::BTreeSet;

use crate::lattice::TimeType;
use crate::reduce::Time;

/// The lubs of the subsets of `new ∪ old` that contain an element of `new`: the closure of
/// `new` under joins with every time of `new ∪ old`. Sorted, distinct.
///
/// Where the times form a chain (every two comparable, as a loop's times are once their
/// epochs are advanced to one), a lub is the greatest time of its subset, and these are the
/// times at or after the least new one: found in one pass, not by joining every pair.
pub fn interesting_times(tt: &TimeType, new: &[Time], old: &[Time]) -> Vec<Time> {
    let mut all: Vec<&Time> = new.iter().chain(old).collect();
    all.sort();
    all.dedup();
    if all.windows(2).all(|p| tt.less_equal(p[0], p[1])) {
        let Some(least) = new.iter().min() else {
            return Vec::new();
        };
        return all.into_iter().filter(|t| *t >= least).cloned().collect();
    }
    // (a time below every new one joins with any of them, or with a join of them, to it)
    let old: Vec<Time> = old
        .iter()
        .filter(|o| !new.iter().all(|n| tt.less_equal(o, n)))
        .cloned()
        .collect();
    closure(tt, new, &old)
}

/// [`interesting_times`] by a worklist: every time found is joined once with every time of
/// `old` and every time found (itself a join of new and old times).
fn closure(tt: &TimeType, new: &[Time], old: &[Time]) -> Vec<Time> {
    let mut found: BTreeSet<Time> = new.iter().cloned().collect();
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
    use crate::lattice::Coordinate::{Lexicographic, Product};
    use proptest::prelude::*;

    proptest! {
        /// The fast paths (a chain; old times below every new one left out) find what the
        /// worklist over every pair finds.
        #[test]
        fn interesting_times_agree_with_the_worklist(
            lex in any::<bool>(),
            chain in any::<bool>(),
            new in proptest::collection::vec(proptest::collection::vec(0i64..4, 2), 1..4),
            old in proptest::collection::vec(proptest::collection::vec(0i64..4, 2), 0..8),
        ) {
            let tt = if lex {
                TimeType::new(&[Lexicographic])
            } else {
                TimeType::new(&[Product, Product])
            };
            // (a chain: one epoch, as a loop's times are once advanced)
            let fix = |ts: Vec<Time>| -> Vec<Time> {
                ts.into_iter().map(|t| if chain { vec![1, t[1]] } else { t }).collect()
            };
            let (new, old) = (fix(new), fix(old));
            prop_assert_eq!(interesting_times(&tt, &new, &old), closure(&tt, &new, &old));
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
}

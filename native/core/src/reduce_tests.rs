//! The tests of [`crate::reduce`]: proptests against recomputation, and cases.

use super::*;
use crate::group::times;
use crate::lattice::Coordinate::{Lexicographic, Product};
use proptest::prelude::*;
use std::collections::BTreeSet;

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

/// The threshold function of the tests: not monotone, zero at 1, negative below zero.
fn thresholded(m: i64) -> i64 {
    if m < 0 {
        -1
    } else {
        (m - 1).min(2)
    }
}

/// Evaluates as the operator does, with [`thresholded`] as a threshold's function.
fn evaluate(r: &mut Reducer, frontier: &Antichain) -> Option<Corrections> {
    let f = |ms: &[i64]| Ok::<_, ()>(ms.iter().map(|&m| thresholded(m)).collect());
    r.evaluate(frontier, f).expect("the function never fails")
}

/// The desired output rows of a group (its accumulation) under `logic`.
fn apply(logic: &Logic, group: &[(Row, i64)]) -> Vec<(Row, i64)> {
    match logic {
        Logic::Threshold => {
            let count = group.iter().fold(0i64, |c, (_, m)| c.wrapping_add(*m));
            match if count == 0 { 0 } else { thresholded(count) } {
                0 => Vec::new(),
                m => vec![(Vec::new(), m)],
            }
        }
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
                    Aggregate::Min(_) | Aggregate::Max(_) | Aggregate::ArgMax(..) => None,
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
                    Aggregate::ArgMax(i, by) => ranked_first(group, *i, *by),
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

/// The value of column `i` of the `(value, by)` pair of positive multiplicity (both not null)
/// with the greatest `by`, the least value of those: every pair's multiplicity summed, the
/// pairs ranked plainly.
fn ranked_first(group: &[(Row, i64)], i: usize, by: usize) -> Option<i64> {
    let mut pairs: BTreeMap<(i64, i64), i64> = BTreeMap::new();
    for (v, m) in group {
        if let (Some(x), Some(b)) = (v[i], v[by]) {
            let e = pairs.entry((b, x)).or_insert(0);
            *e = e.wrapping_add(*m);
        }
    }
    let best_by = pairs
        .iter()
        .filter(|(_, m)| **m > 0)
        .map(|((b, _), _)| *b)
        .max()?;
    pairs
        .iter()
        .filter(|((b, _), m)| *b == best_by && **m > 0)
        .map(|((_, x), _)| *x)
        .min()
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
        Just(Logic::Threshold),
        Just(Logic::Values(vec![
            Aggregate::Count,
            Aggregate::Sum(0),
            Aggregate::Min(0),
            Aggregate::Max(1)
        ])),
        Just(Logic::Weights(vec![Aggregate::Count, Aggregate::Sum(0)])),
        // (the first value column's extremes walk the batches in value order)
        Just(Logic::Values(vec![Aggregate::Max(0), Aggregate::Min(1)])),
        Just(Logic::Values(vec![
            Aggregate::ArgMax(0, 1),
            Aggregate::ArgMax(1, 0)
        ])),
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
        (lex, epochs) in streams(),
        eager in prop_oneof![Just(crate::trace::EAGER_MERGE), 0usize..6],
    ) {
        let tt = if lex {
            TimeType::new(&[Product, Lexicographic])
        } else {
            TimeType::new(&[Product, Product])
        };
        let w = tt.width();
        let arity = match &logic {
            Logic::Distinct | Logic::Threshold => 0,
            Logic::Weights(_) => 1,
            Logic::Values(_) => 2,
        };
        let mut r = Reducer::new(tt.clone(), logic.clone(), 1, arity).with_eager_merge(eager);
        let mut fed: Vec<(Row, Row, Time, i64)> = Vec::new();
        for (epoch, updates) in epochs.iter().enumerate() {
            let epoch = epoch as i64;
            let batch: Vec<(Row, Row, Time, i64)> = updates
                .iter()
                .map(|(k, v, i, d)| {
                    let values: Row = match &logic {
                        Logic::Distinct | Logic::Threshold => Vec::new(),
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
            while evaluate(&mut r, &frontier).is_some() {}
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
}

#[test]
fn a_sliding_history_compacts_to_the_live_data() {
    let tt = TimeType::epochs();
    let mut r = Reducer::new(tt.clone(), Logic::Values(vec![Aggregate::Min(0)]), 1, 1);
    for e in 0..50i64 {
        let mut batch = vec![(vec![Some(1)], vec![Some(e)], vec![e], 1)];
        if e >= 3 {
            batch.push((vec![Some(1)], vec![Some(e - 3)], vec![e], -1));
        }
        r.take(batch);
        let f = Antichain::from_times(&tt, [[e + 1].as_slice()]);
        while evaluate(&mut r, &f).is_some() {}
        r.set_since(&f, 4);
    }
    let (input, output) = r.sizes();
    assert!(input <= 6, "{input} input updates held");
    assert!(output <= 2, "{output} output updates held");
}

#[test]
fn a_failing_threshold_function_leaves_its_pairs_pending() {
    let tt = TimeType::epochs();
    let mut r = Reducer::new(tt.clone(), Logic::Threshold, 1, 0);
    r.take(vec![
        (vec![Some(1)], vec![], vec![0], 2),
        (vec![Some(2)], vec![], vec![0], 1),
    ]);
    let f = Antichain::from_times(&tt, [[1].as_slice()]);
    let mut asked = Vec::new();
    let failed = r.evaluate(&f, |ms| {
        asked.extend_from_slice(ms);
        Err("no")
    });
    assert_eq!(failed.expect_err("the function failed"), "no");
    assert_eq!(asked, [1, 2]);
    assert_eq!(r.pending(), vec![vec![0]]);
    let out = evaluate(&mut r, &f).expect("the pairs are still pending");
    assert_eq!(out.updates.len(), 1); // (key 1: thresholded(2) = 1; key 2: 0)
    assert_eq!(
        output_at(&tt, &r, &[0]),
        brute(
            &tt,
            &Logic::Threshold,
            &[
                (vec![Some(1)], vec![], vec![0], 2),
                (vec![Some(2)], vec![], vec![0], 1),
            ],
            &[0]
        )
    );
    assert!(evaluate(&mut r, &f).is_none());
}

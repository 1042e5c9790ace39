//! The tests of [`crate::trace`]: proptests against recomputation, and cases.

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

//! The tests of [`crate::region`]: label propagation run in a region, against a fixed point
//! computed from scratch at every complete epoch, with retractions, several epochs in
//! flight and iteration limits.

use super::*;
use crate::expr::BinOp;
use crate::group::Aggregate;
use crate::lattice::Coordinate::Product;
use proptest::prelude::*;
use std::collections::BTreeSet;

fn epochs() -> TimeType {
    TimeType::epochs()
}

fn inner() -> TimeType {
    TimeType::new(&[Product, Product])
}

fn node(kind: Kind, inputs: &[usize], time: TimeType, arity: usize) -> NodeSpec {
    NodeSpec {
        kind,
        inputs: inputs.to_vec(),
        time,
        arity,
    }
}

/// Directed label propagation: `(node, label)` with the least node that reaches it (itself
/// included), as an `iterate` of a join, a concat and a min, with `limit` iterations at most.
/// Inputs: 0 the edges `(src, dst)`, 1 the nodes `(node, node)`; output 0 the labels. Edges
/// with `src == skip` are filtered out in the loop (a filter, and a map of the join's output
/// through an expression).
fn propagation(limit: Option<i64>, skip: i64) -> Vec<NodeSpec> {
    let keep = Expr::Binary(
        BinOp::Ne,
        Box::new(Expr::Col(0)),
        Box::new(Expr::Lit(Some(skip))),
    );
    vec![
        node(Kind::Source, &[], epochs(), 2),         // 0 edges
        node(Kind::Source, &[], epochs(), 2),         // 1 nodes
        node(Kind::Enter(Product), &[0], inner(), 2), // 2
        node(Kind::Enter(Product), &[1], inner(), 2), // 3
        node(Kind::Variable, &[3, 11], inner(), 2),   // 4
        node(Kind::Filter(keep), &[2], inner(), 2),   // 5
        node(
            Kind::Join {
                left_keys: vec![0],
                right_keys: vec![0],
                output: vec![(1, 1), (0, 1), (0, 0)],
            },
            &[4, 5],
            inner(),
            3,
        ), // 6: (dst, label, src)
        node(
            Kind::Map(vec![
                Expr::Col(0),
                Expr::Binary(
                    BinOp::Add,
                    Box::new(Expr::Col(1)),
                    Box::new(Expr::Lit(Some(0))),
                ),
            ]),
            &[6],
            inner(),
            2,
        ), // 7: (dst, label)
        node(Kind::Concat, &[7, 4], inner(), 2),      // 8
        node(
            Kind::Reduce {
                keys: vec![0],
                values: vec![1],
                logic: Logic::Values(vec![Aggregate::Min(0)]),
            },
            &[8],
            inner(),
            2,
        ), // 9
        node(Kind::Leave, &[9], epochs(), 2),         // 10
        node(Kind::Feedback { limit }, &[9, 3], inner(), 2), // 11
        node(Kind::Sink, &[10], epochs(), 2),         // 12
    ]
}

/// The labels from scratch: the least node reaching each node within `limit` hops.
fn labels(
    nodes: &BTreeSet<i64>,
    edges: &BTreeMap<(i64, i64), i64>,
    limit: Option<i64>,
    skip: i64,
) -> BTreeSet<(i64, i64)> {
    let mut label: BTreeMap<i64, i64> = nodes.iter().map(|&n| (n, n)).collect();
    let mut round = 0;
    loop {
        if limit.is_some_and(|l| round >= l) {
            break;
        }
        let mut next = label.clone();
        for (&(s, d), &m) in edges {
            if m > 0 && s != skip {
                if let Some(&l) = label.get(&s) {
                    let e = next.entry(d).or_insert(l);
                    *e = (*e).min(l);
                }
            }
        }
        round += 1;
        if next == label {
            break;
        }
        label = next;
    }
    label.into_iter().collect()
}

fn history(rows: &[(i64, i64, i64, i64)]) -> History {
    let mut h = History::new(2, 1);
    for &(a, b, t, d) in rows {
        h.push([Some(a), Some(b)], &[t], d);
    }
    h
}

/// The output's accumulation at `epoch`: rows with positive count (all must be 1).
fn accumulated(out: &[(Time, History)], epoch: i64) -> BTreeSet<(i64, i64)> {
    let mut acc: BTreeMap<(i64, i64), i64> = BTreeMap::new();
    for (_, h) in out {
        for i in 0..h.len() {
            if h.time(i)[0] <= epoch {
                let key = (
                    h.value(i, 0).expect("a node"),
                    h.value(i, 1).expect("a label"),
                );
                *acc.entry(key).or_insert(0) += h.diff(i);
            }
        }
    }
    acc.retain(|_, c| *c != 0);
    assert!(acc.values().all(|&c| c == 1), "multiplicities {acc:?}");
    acc.into_keys().collect()
}

type Change = (i64, i64, i64);

fn streams() -> impl Strategy<Value = (Vec<Vec<Change>>, usize, Option<i64>, i64)> {
    let change = (0i64..7, 0i64..7, prop_oneof![Just(1i64), Just(1), Just(-1)]);
    (
        proptest::collection::vec(proptest::collection::vec(change, 0..6), 1..5),
        1usize..4,
        prop_oneof![Just(None), (1i64..4).prop_map(Some)],
        -1i64..7,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn a_region_keeps_the_fixed_point_at_every_complete_epoch(
        (stream, in_flight, limit, skip) in streams()
    ) {
        let mut region = Region::new(propagation(limit, skip)).expect("a region");
        assert_eq!(region.ports(), (2, 1));
        let nodes: BTreeSet<i64> = (0..7).collect();
        region
            .push(1, history(&nodes.iter().map(|&n| (n, n, 0, 1)).collect::<Vec<_>>()))
            .expect("the nodes");
        let mut edges: BTreeMap<(i64, i64), i64> = BTreeMap::new();
        let mut expected = Vec::new();
        let mut out = Vec::new();
        let epochs = stream.len() as i64;
        for (e, changes) in stream.iter().enumerate() {
            let e = e as i64;
            // (a retraction only of an edge present: edge multiplicities stay 0 or 1)
            let mut rows = Vec::new();
            for &(s, d, m) in changes {
                let now = edges.get(&(s, d)).copied().unwrap_or(0);
                if (m > 0 && now == 0) || (m < 0 && now == 1) {
                    edges.insert((s, d), now + m);
                    rows.push((s, d, e, m));
                }
            }
            region.push(0, history(&rows)).expect("the edges");
            expected.push(labels(&nodes, &edges, limit, skip));
            // the inputs' frontier lags the epochs pushed by `in_flight`
            let done = e + 1 - in_flight as i64;
            if done >= 0 {
                region.set_input_frontier(0, vec![vec![done + 1]]).expect("edges frontier");
                region.set_input_frontier(1, vec![vec![done + 1]]).expect("nodes frontier");
                region.run().expect("a run");
                out.extend(region.take_output(0));
                for c in region.capabilities().expect("capabilities") {
                    prop_assert!(c[0] > done, "a capability at {c:?} after epoch {done}");
                }
                for d in 0..=done {
                    prop_assert_eq!(&accumulated(&out, d), &expected[d as usize], "epoch {}", d);
                }
            }
        }
        region.set_input_frontier(0, vec![]).expect("closed");
        region.set_input_frontier(1, vec![]).expect("closed");
        region.run().expect("the last run");
        out.extend(region.take_output(0));
        prop_assert!(region.capabilities().expect("capabilities").is_empty());
        for d in 0..epochs {
            prop_assert_eq!(&accumulated(&out, d), &expected[d as usize], "epoch {}", d);
        }
        // every update of the output is at a time of the epochs pushed
        prop_assert!(out.iter().all(|(t, _)| t[0] < epochs));
        let counted: i64 = region.take_variable_counts().iter().map(|c| c.2).sum();
        prop_assert!(counted >= 7);
    }
}

#[test]
fn malformed_regions_are_refused_by_name() {
    let mut specs = propagation(None, -1);
    specs[6].inputs = vec![4];
    let e = Region::new(specs).err().expect("a join of one input");
    assert!(e.0.contains("node 6 (join) has 1 inputs"), "{e}");
    let mut specs = propagation(None, -1);
    specs[8].inputs = vec![7, 40];
    let e = Region::new(specs).err().expect("a missing node");
    assert!(e.0.contains("node 8 reads node 40"), "{e}");
    let mut specs = propagation(None, -1);
    specs[4].inputs = vec![3, 9];
    let e = Region::new(specs)
        .err()
        .expect("a cycle without the feedback");
    assert!(e.0.contains("does not advance time"), "{e}");
    let mut region = Region::new(propagation(None, -1)).expect("a region");
    let e = region
        .push(0, History::new(3, 1))
        .expect_err("three columns");
    assert!(e.0.contains("3 columns"), "{e}");
    assert!(region.push(2, History::new(2, 1)).is_err());
}

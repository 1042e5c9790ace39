//! The tests of [`crate::progress`]: summaries against their application, antichains against
//! recomputation, and the tracker's frontiers against a search over times.

use super::*;
use crate::lattice::Coordinate::{Lexicographic, Product};
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};

fn tt(cs: &[Coordinate]) -> TimeType {
    TimeType::new(cs)
}

/// The minimal elements of `times`, by brute force.
fn minimal(tt: &TimeType, times: &BTreeSet<Vec<i64>>) -> Vec<Vec<i64>> {
    times
        .iter()
        .filter(|t| !times.iter().any(|s| s != *t && tt.less_equal(s, t)))
        .cloned()
        .collect()
}

/// A loop scope's graph: an input, an ingress, `body` nodes of two inputs each, a feedback
/// that adds `step` to the loop counter, an egress and an output; `links` are the body's edges
/// `(from, to, port)` with `from < to`, `back` the body node the feedback feeds, `out` the one
/// the egress reads.
#[derive(Clone, Debug)]
struct Shape {
    coordinate: Coordinate,
    body: usize,
    links: Vec<(usize, usize, usize)>,
    step: i64,
    back: usize,
    out: usize,
}

impl Shape {
    fn inner(&self) -> TimeType {
        tt(&[Product, self.coordinate])
    }
    // node numbers
    fn ingress(&self) -> usize {
        1
    }
    fn body_node(&self, i: usize) -> usize {
        2 + i
    }
    fn feedback(&self) -> usize {
        2 + self.body
    }
    fn egress(&self) -> usize {
        3 + self.body
    }
    fn output(&self) -> usize {
        4 + self.body
    }

    fn graph(&self) -> ProgressGraph {
        let outer = TimeType::epochs();
        let inner = self.inner();
        let mut g = ProgressGraph::new();
        g.add_node(vec![], vec![outer.clone()], None)
            .expect("input");
        g.add_node(
            vec![outer.clone()],
            vec![inner.clone()],
            Some(vec![(0, 0, Summary::enter(&outer, self.coordinate))]),
        )
        .expect("ingress");
        for _ in 0..self.body {
            g.add_node(vec![inner.clone(); 2], vec![inner.clone()], None)
                .expect("body");
        }
        g.add_node(
            vec![inner.clone()],
            vec![inner.clone()],
            Some(vec![(0, 0, Summary::increment(&inner, self.step))]),
        )
        .expect("feedback");
        g.add_node(
            vec![inner.clone()],
            vec![outer.clone()],
            Some(vec![(0, 0, Summary::leave(&inner))]),
        )
        .expect("egress");
        g.add_node(vec![outer], vec![], None).expect("output");
        for (s, t) in self.edges() {
            g.add_edge(s, t).expect("edge");
        }
        g
    }

    fn edges(&self) -> Vec<(Port, Port)> {
        let mut e = vec![((0, 0), (1, 0)), ((1, 0), (self.body_node(0), 0))];
        for &(a, b, p) in &self.links {
            e.push(((self.body_node(a), 0), (self.body_node(b), p)));
        }
        e.push(((self.body_node(self.body - 1), 0), (self.feedback(), 0)));
        e.push(((self.feedback(), 0), (self.body_node(self.back), 1)));
        e.push(((self.body_node(self.out), 0), (self.egress(), 0)));
        e.push(((self.egress(), 0), (self.output(), 0)));
        e
    }

    /// A time through a node from one input to an output.
    fn through(&self, node: usize, t: &[i64]) -> Vec<i64> {
        let inner = self.inner();
        if node == self.ingress() {
            let mut t = t.to_vec();
            t.extend(std::iter::repeat(0).take(inner.width() - 1));
            t
        } else if node == self.feedback() {
            let mut t = t.to_vec();
            *t.last_mut().expect("a loop time") += self.step;
            t
        } else if node == self.egress() {
            t[..1].to_vec()
        } else {
            t.to_vec()
        }
    }

    /// The times that may arrive at every input port from pointstamps, by a search over
    /// `(location, time)`: a time dominated by one already reached at its port goes no
    /// further (times only grow along a cycle).
    fn reached(&self, points: &[(bool, Port, Vec<i64>)]) -> BTreeMap<Port, BTreeSet<Vec<i64>>> {
        let g = self.graph();
        let edges = self.edges();
        let mut at: BTreeMap<Port, BTreeSet<Vec<i64>>> = BTreeMap::new();
        let mut work: Vec<(bool, Port, Vec<i64>)> = points.to_vec();
        for (source, port, t) in points {
            if !source {
                at.entry(*port).or_default().insert(t.clone());
            }
        }
        while let Some((source, (n, p), t)) = work.pop() {
            if source {
                for (s, target) in &edges {
                    if *s == (n, p) {
                        let tt = &g.inputs[target.0][target.1];
                        let seen = at.entry(*target).or_default();
                        if seen.iter().any(|s| tt.less_equal(s, &t)) {
                            continue;
                        }
                        seen.insert(t.clone());
                        work.push((false, *target, t.clone()));
                    }
                }
            } else {
                for j in 0..g.outputs[n].len() {
                    work.push((true, (n, j), self.through(n, &t)));
                }
            }
        }
        at
    }
}

fn shapes() -> impl Strategy<Value = Shape> {
    (1usize..5).prop_flat_map(|body| {
        // (a drawn pair of equal nodes is no link; the others go forward)
        let links =
            proptest::collection::vec((0..body, 0..body, 0usize..2), 0..6).prop_map(|drawn| {
                drawn
                    .into_iter()
                    .filter(|(a, b, _)| a != b)
                    .map(|(a, b, p)| (a.min(b), a.max(b), p))
                    .collect::<Vec<_>>()
            });
        (
            prop_oneof![Just(Product), Just(Lexicographic)],
            Just(body),
            links,
            1i64..3,
            0..body,
            0..body,
        )
            .prop_map(|(coordinate, body, links, step, back, out)| Shape {
                coordinate,
                body,
                links,
                step,
                back,
                out,
            })
    })
}

/// `(is a source, node, port, time, delta)` of ports that exist in `shape`, positive.
fn changes(shape: &Shape) -> impl Strategy<Value = Vec<(bool, Port, Vec<i64>, i64)>> {
    let shape = shape.clone();
    let n = shape.output() + 1;
    let width = shape.inner().width();
    proptest::collection::vec(
        (
            any::<bool>(),
            0..n,
            0usize..2,
            proptest::collection::vec(0i64..3, width),
            prop_oneof![Just(1i64), Just(2)],
        ),
        0..14,
    )
    .prop_map(move |drawn| {
        let g = shape.graph();
        drawn
            .into_iter()
            .filter_map(|(source, node, port, t, d)| {
                let ports = if source { &g.outputs } else { &g.inputs };
                let tt = ports[node].get(port)?;
                Some((source, (node, port), t[..tt.width()].to_vec(), d))
            })
            .collect()
    })
}

fn apply(tracker: &mut Tracker, changes: &[(bool, Port, Vec<i64>, i64)]) {
    for (source, (n, p), t, d) in changes {
        let r = if *source {
            tracker.update_source(*n, *p, t, *d)
        } else {
            tracker.update_target(*n, *p, t, *d)
        };
        r.expect("a port of the graph");
    }
}

/// The positive pointstamps of the accumulated changes.
fn positive(changes: &[(bool, Port, Vec<i64>, i64)]) -> Vec<(bool, Port, Vec<i64>)> {
    let mut acc: BTreeMap<(bool, Port, Vec<i64>), i64> = BTreeMap::new();
    for (s, p, t, d) in changes {
        *acc.entry((*s, *p, t.clone())).or_insert(0) += d;
    }
    acc.into_iter()
        .filter(|(_, c)| *c > 0)
        .map(|(k, _)| k)
        .collect()
}

proptest! {
    #[test]
    fn summaries_compose_as_their_applications(
        step in 0i64..3, lex in any::<bool>(), t in proptest::collection::vec(0i64..4, 1),
        inner_t in proptest::collection::vec(0i64..4, 3),
    ) {
        let outer = TimeType::epochs();
        let coordinate = if lex { Lexicographic } else { Product };
        let enter = Summary::enter(&outer, coordinate);
        let inner = enter.out_type().clone();
        let inc = Summary::increment(&inner, step);
        let leave = Summary::leave(&inner);
        let it = &inner_t[..inner.width()];
        prop_assert_eq!(enter.then(&inc).apply(&t), inc.apply(&enter.apply(&t)));
        prop_assert_eq!(inc.then(&inc).apply(it), inc.apply(&inc.apply(it)));
        prop_assert_eq!(inc.then(&leave).apply(it), leave.apply(&inc.apply(it)));
        prop_assert_eq!(
            enter.then(&inc).then(&leave).apply(&t),
            enter.then(&inc.then(&leave)).apply(&t)
        );
        // an order on summaries is the order of their results
        let id = Summary::identity(&inner);
        prop_assert!(id.less_equal(&inc));
        prop_assert_eq!(inc.less_equal(&id), step == 0);
        prop_assert!(inner.less_equal(&id.apply(it), &inc.apply(it)));
    }

    #[test]
    fn any_two_summaries_compose_as_their_applications(
        w0 in 1usize..4, k1 in 0usize..4, a1 in proptest::collection::vec(0i64..3, 0..3),
        k2 in 0usize..6, a2 in proptest::collection::vec(0i64..3, 0..3),
        adds in proptest::collection::vec(0i64..3, 10), t in proptest::collection::vec(0i64..5, 4),
    ) {
        let product = |w: usize| tt(&vec![Product; w]);
        let k1 = k1.min(w0);
        let w1 = k1 + a1.len();
        let k2 = k2.min(w1);
        let w2 = k2 + a2.len();
        prop_assume!(w1 > 0 && w2 > 0);
        let s1 = Summary::new(k1, adds[..k1].to_vec(), a1, product(w1)).expect("s1");
        let s2 = Summary::new(k2, adds[4..4 + k2].to_vec(), a2, product(w2)).expect("s2");
        let t = &t[..w0];
        prop_assert_eq!(s1.then(&s2).apply(t), s2.apply(&s1.apply(t)));
    }

    #[test]
    fn a_mutable_antichain_holds_the_minimal_positive_times(
        lex in any::<bool>(),
        rounds in proptest::collection::vec(
            proptest::collection::vec(
                ([0i64..3, 0i64..3, 0i64..3], prop_oneof![Just(1i64), Just(-1), Just(2)]),
                0..6,
            ),
            1..8,
        ),
    ) {
        let tt = if lex { tt(&[Product, Lexicographic]) } else { tt(&[Product, Product, Product]) };
        let mut m = MutableAntichain::new(tt.clone());
        let mut counts: BTreeMap<Vec<i64>, i64> = BTreeMap::new();
        for round in rounds {
            let before = m.frontier().to_vec();
            let changes: Vec<(Vec<i64>, i64)> =
                round.iter().map(|(t, d)| (t.to_vec(), *d)).collect();
            for (t, d) in &changes {
                *counts.entry(t.clone()).or_insert(0) += d;
            }
            let moved = m.apply_changes(&changes);
            let positive: BTreeSet<Vec<i64>> =
                counts.iter().filter(|(_, c)| **c > 0).map(|(t, _)| t.clone()).collect();
            let want = minimal(&tt, &positive);
            prop_assert_eq!(m.frontier(), want.as_slice());
            prop_assert_eq!(moved, before != want);
        }
    }

    #[test]
    fn the_frontiers_are_the_least_times_the_pointstamps_reach(
        (shape, changes, retract, split, on_demand, merged) in shapes().prop_flat_map(|s| {
            let n = s.output() + 1;
            let c = changes(&s);
            (Just(s), c, proptest::collection::vec(any::<bool>(), 14), 0usize..14,
             proptest::collection::btree_set(0..n, 0..3),
             proptest::collection::btree_set(0..n, 0..3))
        })
    ) {
        let g = shape.graph();
        let watching = Watching {
            watched: None,
            on_demand: on_demand.iter().copied().collect(),
            merged: merged.iter().copied().collect(),
        };
        let mut tracker = Tracker::new(&g, &watching).expect("a tracker");
        // in two rounds: a propagation in between, and on-demand counts taken early
        // (counts never end negative at a location, as a scheduler's never do: some of the
        // additions are retracted in the second round)
        let split = split.min(changes.len());
        let mut second = changes[split..].to_vec();
        for (c, _) in changes.iter().zip(&retract).filter(|(_, r)| **r) {
            second.push((c.0, c.1, c.2.clone(), -c.3));
        }
        apply(&mut tracker, &changes[..split]);
        tracker.count_pending();
        tracker.propagate();
        apply(&mut tracker, &second);
        tracker.count_pending();
        tracker.propagate();
        let mut changes = changes[..split].to_vec();
        changes.extend(second);
        let reached = shape.reached(&positive(&changes));
        for n in 0..g.nodes() {
            let ports = g.inputs[n].len();
            let union: BTreeSet<Vec<i64>> = (0..ports)
                .flat_map(|p| reached.get(&(n, p)).cloned().unwrap_or_default())
                .collect();
            for p in 0..ports {
                let tt = &g.inputs[n][p];
                let want = if merged.contains(&n) && !on_demand.contains(&n) {
                    minimal(tt, &union)
                } else {
                    minimal(tt, &reached.get(&(n, p)).cloned().unwrap_or_default())
                };
                let got = tracker.frontier(n, p).expect("a watched port");
                prop_assert_eq!(got, want, "node {} port {}", n, p);
            }
        }
        prop_assert_eq!(tracker.all_complete(), reached.values().all(BTreeSet::is_empty));
    }
}

#[test]
fn a_cycle_that_does_not_advance_time_is_refused() {
    let epochs = TimeType::epochs();
    let mut g = ProgressGraph::new();
    let a = g
        .add_node(vec![epochs.clone()], vec![epochs.clone()], None)
        .expect("a");
    let b = g
        .add_node(vec![epochs.clone()], vec![epochs], None)
        .expect("b");
    g.add_edge((a, 0), (b, 0)).expect("a -> b");
    g.add_edge((b, 0), (a, 0)).expect("b -> a");
    let e = Tracker::new(&g, &Watching::default()).expect_err("a cycle");
    assert!(matches!(e, ProgressError::Cycle(_)));
    assert!(e.to_string().contains("does not advance time"));
}

#[test]
fn unwatched_nodes_and_bad_ports_are_errors() {
    let shape = Shape {
        coordinate: Product,
        body: 1,
        links: vec![],
        step: 1,
        back: 0,
        out: 0,
    };
    let g = shape.graph();
    let watching = Watching {
        watched: Some([shape.body_node(0)].into_iter().collect()),
        ..Watching::default()
    };
    let mut tracker = Tracker::new(&g, &watching).expect("a tracker");
    assert_eq!(
        tracker.frontier(shape.egress(), 0),
        Err(ProgressError::Untracked(shape.egress()))
    );
    assert!(tracker.update_target(99, 0, &[0], 1).is_err());
    assert!(tracker.update_source(0, 0, &[0, 0], 1).is_err());
    tracker
        .update_source(0, 0, &[3], 1)
        .expect("the input's capability");
    assert_eq!(tracker.propagate(), vec![shape.body_node(0)]);
    assert_eq!(
        tracker.frontier(shape.body_node(0), 1).expect("watched"),
        vec![vec![3, 1]]
    );
    assert_eq!(tracker.propagate(), Vec::<usize>::new());
}

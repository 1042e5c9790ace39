//! The operators of a region that keep state or transform updates: the functions
//! [`Region::step`](super::Region) calls for each kind of node.

use std::collections::BTreeMap;
use std::convert::Infallible;

use super::{invalid, JoinState, Kind, Message, NodeSpec, ReduceState, RegionError, Runtime, Time};
use crate::history::History;
use crate::lattice::TimeType;
use crate::reduce::Columns;

/// The updates of `h`, one history per distinct time, times increasing (`h` itself where it
/// holds one time, the common case).
pub(super) fn by_time(h: History) -> Vec<(Time, History)> {
    if h.is_empty() {
        return Vec::new();
    }
    if (1..h.len()).all(|i| h.time(i) == h.time(0)) {
        return vec![(h.time(0).to_vec(), h)];
    }
    let mut order: Vec<usize> = (0..h.len()).collect();
    order.sort_by(|&a, &b| h.time(a).cmp(h.time(b)));
    order
        .chunk_by(|&a, &b| h.time(a) == h.time(b))
        .map(|run| {
            let mut part = History::with_capacity(h.arity(), h.width(), run.len());
            for &i in run {
                part.push_from(&h, i);
            }
            (h.time(run[0]).to_vec(), part)
        })
        .collect()
}

/// What a linear operator does with one update: its cells, time and diff, into the output.
type RowFn<'a> = dyn FnMut(&[Option<i64>], &[i64], i64, &mut History) + 'a;

/// A linear operator's output message for `m`.
pub(super) fn linear(
    kind: &Kind,
    spec: &NodeSpec,
    m: Message,
) -> Result<(Time, History), RegionError> {
    let h = &m.updates;
    let w = h.width();
    let mut row = Vec::new();
    let rows = |f: &mut RowFn| {
        let mut out = History::with_capacity(spec.arity, spec.time.width(), h.len());
        let mut cells = Vec::with_capacity(h.arity());
        for i in 0..h.len() {
            cells.clear();
            cells.extend((0..h.arity()).map(|c| h.value(i, c)));
            f(&cells, h.time(i), h.diff(i), &mut out);
        }
        out
    };
    Ok(match kind {
        Kind::Concat | Kind::Variable => (m.time, m.updates),
        Kind::Negate => {
            let mut updates = m.updates;
            updates.negate();
            (m.time, updates)
        }
        Kind::Map(exprs) => (
            m.time,
            rows(&mut |r, t, d, out| {
                row.clear();
                row.extend(exprs.iter().map(|e| e.eval(r)));
                out.push(row.iter().copied(), t, d);
            }),
        ),
        Kind::Filter(p) => (
            m.time,
            rows(&mut |r, t, d, out| {
                if p.keeps(r) {
                    out.push(r.iter().copied(), t, d);
                }
            }),
        ),
        Kind::Enter(_) => {
            let extra = spec.time.width() - w;
            let mut time = m.time.clone();
            time.extend(std::iter::repeat(0).take(extra));
            let mut t2 = Vec::with_capacity(spec.time.width());
            let out = rows(&mut |r, t, d, out| {
                t2.clear();
                t2.extend_from_slice(t);
                t2.extend(std::iter::repeat(0).take(extra));
                out.push(r.iter().copied(), &t2, d);
            });
            (time, out)
        }
        Kind::Leave => {
            let keep = spec.time.width();
            let out = rows(&mut |r, t, d, out| out.push(r.iter().copied(), &t[..keep], d));
            (m.time[..keep].to_vec(), out)
        }
        _ => return invalid(format!("{kind:?} is not linear")),
    })
}

pub(super) fn feedback(
    rt: &mut Runtime,
    node: usize,
    tt: &TimeType,
    limit: Option<i64>,
    buffer: &mut BTreeMap<Time, History>,
) -> Result<(), RegionError> {
    let next = |t: &[i64]| {
        let mut u = t.to_vec();
        if let Some(last) = u.last_mut() {
            *last += 1;
        }
        u
    };
    for port in 0..2 {
        for m in rt.pull(node, port) {
            let h = match buffer.get_mut(&m.time) {
                Some(h) => h,
                None => {
                    rt.hold(node, &next(&m.time), 1)?;
                    buffer
                        .entry(m.time.clone())
                        .or_insert_with(|| History::new(m.updates.arity(), m.updates.width()))
                }
            };
            let mut updates = m.updates;
            if port == 1 {
                updates.negate();
            }
            h.extend(&updates);
        }
    }
    if buffer.is_empty() {
        return Ok(());
    }
    rt.settle(node)?;
    let frontier = rt.frontier(tt, node, 0)?;
    let ready: Vec<Time> = buffer
        .keys()
        .filter(|t| !frontier.less_equal(tt, t))
        .cloned()
        .collect();
    for t in ready {
        let Some(mut h) = buffer.remove(&t) else {
            continue;
        };
        h.consolidate(false);
        let out_t = next(&t);
        let below = limit.map_or(true, |l| out_t[out_t.len() - 1] < l);
        if !h.is_empty() && below {
            h.set_times(&out_t);
            rt.send(node, out_t.clone(), h)?;
        }
        rt.hold(node, &out_t, -1)?;
    }
    Ok(())
}

/// The rows of `h` by key (`keys` of its columns): the positions in key order, and where each
/// key's run starts (with the end last).
fn keyed(h: &History, keys: &[usize]) -> (Vec<usize>, Vec<usize>) {
    let key = |i: usize| keys.iter().map(move |&c| h.value(i, c));
    let mut order: Vec<usize> = (0..h.len()).collect();
    order.sort_by(|&a, &b| key(a).cmp(key(b)));
    let mut starts: Vec<usize> = (0..order.len())
        .filter(|&i| i == 0 || key(order[i - 1]).ne(key(order[i])))
        .collect();
    starts.push(order.len());
    (order, starts)
}

pub(super) fn join(
    rt: &mut Runtime,
    node: usize,
    spec: &NodeSpec,
    state: &mut JoinState,
) -> Result<(), RegionError> {
    let Kind::Join {
        left_keys,
        right_keys,
        output,
    } = &spec.kind
    else {
        return invalid(format!("node {node} is not a join"));
    };
    let tt = &spec.time;
    let w = tt.width();
    let gather = |rt: &mut Runtime, port: usize, arity: usize| {
        let mut all = History::new(arity, w);
        for m in rt.pull(node, port) {
            all.extend(&m.updates);
        }
        all
    };
    let new = [gather(rt, 0, state.arity[0]), gather(rt, 1, state.arity[1])];
    // (each arrangement may be advanced to the frontier of the other input)
    let since = [rt.frontier(tt, node, 1)?, rt.frontier(tt, node, 0)?];
    for (side, frontier) in since.into_iter().enumerate() {
        if frontier != state.since[side] {
            state.since[side] = frontier;
            state.generation[side] += 1;
        }
    }
    let mut out = History::new(spec.arity, w);
    let mut lub = vec![0; w];
    let mut row: Vec<Option<i64>> = Vec::with_capacity(spec.arity);
    for (side, h) in new.iter().enumerate() {
        if h.is_empty() {
            continue;
        }
        let keys = if side == 0 { left_keys } else { right_keys };
        let (order, starts) = keyed(h, keys);
        // the new updates meet the other side's arrangement: the right's as it was before
        // this step, the left's with this step's new updates in it
        {
            let theirs = if side == 0 { &state.right } else { &state.left };
            let mut cursor = theirs.cursor();
            let mut key: Vec<Option<i64>> = Vec::with_capacity(keys.len());
            let mut other = History::new(state.arity[1 - side], w);
            for run in starts.windows(2) {
                let first = order[run[0]];
                key.clear();
                key.extend(keys.iter().map(|&c| h.value(first, c)));
                if key.iter().any(Option::is_none) {
                    continue; // (a null key joins nothing)
                }
                other.clear();
                theirs.read(&mut cursor, &key, &mut other);
                for &i in &order[run[0]..run[1]] {
                    for j in 0..other.len() {
                        row.clear();
                        for &(s, c) in output {
                            row.push(if s == side {
                                h.value(i, c)
                            } else {
                                other.value(j, c)
                            });
                        }
                        tt.join_into(h.time(i), other.time(j), &mut lub);
                        out.push(
                            row.iter().copied(),
                            &lub,
                            h.diff(i).wrapping_mul(other.diff(j)),
                        );
                    }
                }
            }
        }
        // then they join their own arrangement, advanced to the other input's frontier
        let mine = if side == 0 {
            &mut state.left
        } else {
            &mut state.right
        };
        let mut batch = mine.batch_with_capacity(starts.len(), h.len());
        let mut run_updates = History::new(h.arity(), w);
        let mut scratch = Vec::new();
        let mut buf = Vec::new();
        let mut key: Vec<Option<i64>> = Vec::with_capacity(keys.len());
        for run in starts.windows(2) {
            let first = order[run[0]];
            key.clear();
            key.extend(keys.iter().map(|&c| h.value(first, c)));
            if key.iter().any(Option::is_none) {
                continue;
            }
            run_updates.clear();
            for &i in &order[run[0]..run[1]] {
                run_updates.push_from(h, i);
            }
            run_updates.advance_with(tt, &state.since[side], &mut buf);
            batch.push_key(&key, &run_updates, false, &mut scratch);
        }
        mine.insert(batch, tt, &state.since[side], state.generation[side]);
    }
    // (batches no merge reaches are rewritten with fuel paid by the updates taken)
    let fuel = 2 * (new[0].len() + new[1].len());
    state
        .left
        .compact(tt, &state.since[0], state.generation[0], fuel);
    state
        .right
        .compact(tt, &state.since[1], state.generation[1], fuel);
    for (time, mut part) in by_time(out) {
        part.consolidate(false);
        rt.send(node, time, part)?;
    }
    Ok(())
}

pub(super) fn reduce(
    rt: &mut Runtime,
    node: usize,
    tt: &TimeType,
    keys: &[usize],
    values: &[usize],
    state: &mut ReduceState,
) -> Result<(), RegionError> {
    let w = tt.width();
    let messages = rt.pull(node, 0);
    if !messages.is_empty() {
        let n: usize = messages.iter().map(|m| m.updates.len()).sum();
        let mut columns: Columns = (
            vec![Vec::with_capacity(n); keys.len()],
            vec![Vec::with_capacity(n); values.len()],
            vec![Vec::with_capacity(n); w],
            Vec::with_capacity(n),
        );
        for m in &messages {
            let h = &m.updates;
            for i in 0..h.len() {
                for (col, &c) in columns.0.iter_mut().zip(keys) {
                    col.push(h.value(i, c));
                }
                for (col, &c) in columns.1.iter_mut().zip(values) {
                    col.push(h.value(i, c));
                }
                for (col, &x) in columns.2.iter_mut().zip(h.time(i)) {
                    col.push(x);
                }
                columns.3.push(h.diff(i));
            }
        }
        state.taken += n;
        if state.reducer.take_columns(columns) > 0 {
            set_capabilities(rt, node, &mut state.held, state.reducer.pending())?;
            rt.settle(node)?;
        }
    }
    let mut frontier = rt.frontier(tt, node, 0)?;
    loop {
        let evaluated = state
            .reducer
            .evaluate(&frontier, |_| Ok::<Vec<i64>, Infallible>(Vec::new()));
        let Ok(Some(corrections)) = evaluated else {
            break;
        };
        let outputs = corrections.updates().arity();
        for (time, range) in corrections.by_time() {
            let mut part = History::with_capacity(keys.len() + outputs, w, range.len());
            for i in range {
                part.push(corrections.cells(i), &time, corrections.updates().diff(i));
            }
            rt.send(node, time, part)?;
        }
        let pending = state.reducer.pending();
        if pending.is_empty() {
            break;
        }
        // (a pending time held back only by the capabilities at the times just evaluated
        // is complete now, unless what they emitted comes back to it through the loop)
        set_capabilities(rt, node, &mut state.held, pending)?;
        rt.settle(node)?;
        frontier = rt.frontier(tt, node, 0)?;
    }
    set_capabilities(rt, node, &mut state.held, state.reducer.pending())?;
    let fuel = 2 * std::mem::take(&mut state.taken);
    state.reducer.set_since(&frontier, fuel);
    Ok(())
}

/// Holds one capability at each of `times`, releasing those of `held` not among them.
fn set_capabilities(
    rt: &mut Runtime,
    node: usize,
    held: &mut Vec<Time>,
    times: Vec<Time>,
) -> Result<(), RegionError> {
    for t in times.iter().filter(|t| !held.contains(t)) {
        rt.hold(node, t, 1)?;
    }
    for t in held.iter().filter(|t| !times.contains(t)) {
        rt.hold(node, t, -1)?;
    }
    *held = times;
    Ok(())
}

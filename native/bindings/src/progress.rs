//! `ddflow._native.Tracker`: the core's progress tracker behind the Python `Tracker`'s
//! methods (`ddflow.timely.progress`), for the scheduler of one worker.
//!
//! The graph crosses once, when the tracker is made: each node's input and output time types
//! (as coordinate names) and its summaries as `(input, output, keep, adds, append, out)`, and
//! the edges as `(node, port, node, port)`. Then each count change crosses as one call, and a
//! frontier as a list of tuples. The calls are a few microseconds of work each, less than what
//! releasing and taking back the GIL would cost, so they hold it.

use std::collections::HashSet;

use ddflow_core::progress::{ProgressError, ProgressGraph, Summary, Tracker as Core, Watching};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};

use crate::time_type;

/// A summary as it crosses: `(input, output, keep, adds, append, out coordinates)`.
type Crossing = (usize, usize, usize, Vec<i64>, Vec<i64>, Vec<String>);

fn error(e: ProgressError) -> PyErr {
    match e {
        ProgressError::Untracked(_) => PyRuntimeError::new_err(e.to_string()),
        _ => PyValueError::new_err(e.to_string()),
    }
}

/// Occurrence counts of pointstamps and the frontiers they imply (see the core's
/// `progress` module).
#[pyclass(module = "ddflow._native")]
pub struct Tracker {
    core: Core,
}

#[pymethods]
impl Tracker {
    #[new]
    #[pyo3(signature = (inputs, outputs, internal, edges, watched, on_demand, merged))]
    fn new(
        inputs: Vec<Vec<Vec<String>>>,
        outputs: Vec<Vec<Vec<String>>>,
        internal: Vec<Vec<Crossing>>,
        edges: Vec<(usize, usize, usize, usize)>,
        watched: Option<Vec<usize>>,
        on_demand: Vec<usize>,
        merged: Vec<usize>,
    ) -> PyResult<Self> {
        if inputs.len() != outputs.len() || inputs.len() != internal.len() {
            return Err(PyValueError::new_err(
                "a progress graph needs the inputs, outputs and summaries of every node",
            ));
        }
        let mut graph = ProgressGraph::new();
        for ((ins, outs), summaries) in inputs.into_iter().zip(outputs).zip(internal) {
            let ins = ins
                .into_iter()
                .map(time_type)
                .collect::<PyResult<Vec<_>>>()?;
            let outs = outs
                .into_iter()
                .map(time_type)
                .collect::<PyResult<Vec<_>>>()?;
            let summaries = summaries
                .into_iter()
                .map(|(i, j, keep, adds, append, out)| {
                    let s = Summary::new(keep, adds, append, time_type(out)?).map_err(error)?;
                    Ok((i, j, s))
                })
                .collect::<PyResult<Vec<_>>>()?;
            graph.add_node(ins, outs, Some(summaries)).map_err(error)?;
        }
        for (n, p, m, q) in edges {
            graph.add_edge((n, p), (m, q)).map_err(error)?;
        }
        let watching = Watching {
            watched: watched.map(|w| w.into_iter().collect::<HashSet<_>>()),
            on_demand: on_demand.into_iter().collect(),
            merged: merged.into_iter().collect(),
        };
        let core = Core::new(&graph, &watching).map_err(error)?;
        Ok(Tracker { core })
    }

    /// A capability at an operator output changed count (not visible until propagate).
    fn update_source(
        &mut self,
        node: usize,
        port: usize,
        time: Vec<i64>,
        delta: i64,
    ) -> PyResult<()> {
        self.core
            .update_source(node, port, &time, delta)
            .map_err(error)
    }

    /// A message at an operator input changed count (not visible until propagate).
    fn update_target(
        &mut self,
        node: usize,
        port: usize,
        time: Vec<i64>,
        delta: i64,
    ) -> PyResult<()> {
        self.core
            .update_target(node, port, &time, delta)
            .map_err(error)
    }

    /// Count the pending changes where on-demand frontiers read them, without pushing them.
    fn count_pending(&mut self) {
        self.core.count_pending();
    }

    /// How many count changes are not propagated yet.
    fn pending_changes(&self) -> usize {
        self.core.pending_changes()
    }

    /// How many of them the counts on-demand frontiers read do not hold yet.
    fn uncounted_changes(&self) -> usize {
        self.core.uncounted_changes()
    }

    /// Apply the pending changes; the set of nodes whose input frontiers changed.
    fn propagate(&mut self) -> HashSet<usize> {
        self.core.propagate().into_iter().collect()
    }

    /// The frontier at an operator input, as a list of time tuples.
    fn frontier<'py>(
        &self,
        py: Python<'py>,
        node: usize,
        port: usize,
    ) -> PyResult<Bound<'py, PyList>> {
        let times = self.core.frontier(node, port).map_err(error)?;
        let list = PyList::empty(py);
        for t in times {
            list.append(PyTuple::new(py, t)?)?;
        }
        Ok(list)
    }

    /// No pointstamp is left where a frontier is read.
    fn all_complete(&self) -> bool {
        self.core.all_complete()
    }
}

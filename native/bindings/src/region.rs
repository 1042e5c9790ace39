//! `ddflow._native.Region`: a loop region of the core (`ddflow_core::region`) behind the
//! Python operator that stands for it (`ddflow.runtime.native.region`).
//!
//! The region crosses once, as a list of nodes `(kind, inputs, coordinates, arity, params)`;
//! expressions as nested tuples (`("col", i)`, `("lit", v)`, `("binary", op, a, b)`,
//! `("neg", a)`, `("not", a)`, `("is_null", a)`, `("is_not_null", a)`, `("to_bool", a)`).
//! Updates cross as rows: a batch's tuples with the positions of the data, time and diff in
//! them, and the output as tuples `(data..., time..., diff)` per time, booleans as Python
//! booleans where a sink's column is one. A run releases the GIL.

use ddflow_core::expr::{BinOp, Expr};
use ddflow_core::history::History;
use ddflow_core::region::{Kind, NodeSpec, Region as Core, RegionError};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyList, PyTuple};

use crate::ffi::import_batch;
use crate::reducer::logic;
use crate::time_type;

fn error(e: RegionError) -> PyErr {
    PyValueError::new_err(e.0)
}

/// An expression from its nested tuples.
fn expr(e: &Bound<'_, PyAny>) -> PyResult<Expr> {
    let t = e.cast::<PyTuple>()?;
    let kind: String = t.get_item(0)?.extract()?;
    let arg = |i: usize| -> PyResult<Box<Expr>> { Ok(Box::new(expr(&t.get_item(i)?)?)) };
    Ok(match kind.as_str() {
        "col" => Expr::Col(t.get_item(1)?.extract()?),
        "lit" => Expr::Lit(t.get_item(1)?.extract()?),
        "binary" => {
            let op: String = t.get_item(1)?.extract()?;
            let op = BinOp::parse(&op)
                .ok_or_else(|| PyValueError::new_err(format!("no native operator {op:?}")))?;
            Expr::Binary(op, arg(2)?, arg(3)?)
        }
        "neg" => Expr::Neg(arg(1)?),
        "not" => Expr::Not(arg(1)?),
        "is_null" => Expr::IsNull(arg(1)?),
        "is_not_null" => Expr::IsNotNull(arg(1)?),
        "to_bool" => Expr::ToBool(arg(1)?),
        other => {
            return Err(PyValueError::new_err(format!(
                "no native expression {other:?}"
            )))
        }
    })
}

/// A reduce's parameters as they cross: keys, values, the kind and the aggregates (as the
/// native reducer takes them).
type ReduceParams = (
    Vec<usize>,
    Vec<usize>,
    String,
    Vec<(String, Option<usize>, Option<usize>)>,
);

/// A node's kind from its name and parameters.
fn kind(name: &str, params: &Bound<'_, PyAny>) -> PyResult<Kind> {
    Ok(match name {
        "source" => Kind::Source,
        "sink" => Kind::Sink,
        "negate" => Kind::Negate,
        "concat" => Kind::Concat,
        "variable" => Kind::Variable,
        "leave" => Kind::Leave,
        "map" => Kind::Map(
            params
                .try_iter()?
                .map(|e| expr(&e?))
                .collect::<PyResult<Vec<_>>>()?,
        ),
        "filter" => Kind::Filter(expr(params)?),
        "enter" => {
            let c: String = params.extract()?;
            let tt = time_type(vec![c])?;
            Kind::Enter(tt.coordinates()[0])
        }
        "feedback" => Kind::Feedback {
            limit: params.extract()?,
        },
        "join" => {
            let (left_keys, right_keys, output) = params.extract()?;
            Kind::Join {
                left_keys,
                right_keys,
                output,
            }
        }
        "reduce" => {
            let (keys, values, kind, aggs): ReduceParams = params.extract()?;
            Kind::Reduce {
                keys,
                values,
                logic: logic(&kind, aggs)?,
            }
        }
        other => return Err(PyValueError::new_err(format!("no region node {other:?}"))),
    })
}

/// A node as it crosses: kind, inputs, coordinates of its time type, arity, parameters.
type Crossing<'py> = (String, Vec<usize>, Vec<String>, usize, Bound<'py, PyAny>);

/// A loop region in the core.
#[pyclass(module = "ddflow._native")]
pub struct Region {
    core: Core,
    /// per output, which columns are booleans
    booleans: Vec<Vec<bool>>,
    /// per input, its arity and time width
    inputs: Vec<(usize, usize)>,
}

impl Region {
    /// Input `input`'s arity and time width, checked against a batch's.
    fn input_shape(&self, input: usize, data: usize, times: usize) -> PyResult<(usize, usize)> {
        let Some(&(arity, width)) = self.inputs.get(input) else {
            return Err(PyValueError::new_err(format!(
                "the region has no input {input}"
            )));
        };
        if data != arity || times != width {
            return Err(PyValueError::new_err(format!(
                "input {input} takes {arity} columns and times of {width} integers"
            )));
        }
        Ok((arity, width))
    }
}

#[pymethods]
impl Region {
    #[new]
    fn new(nodes: Vec<Crossing<'_>>, booleans: Vec<Vec<bool>>) -> PyResult<Self> {
        let mut specs = Vec::with_capacity(nodes.len());
        for (name, inputs, coordinates, arity, params) in nodes {
            specs.push(NodeSpec {
                kind: kind(&name, &params)?,
                inputs,
                time: time_type(coordinates)?,
                arity,
            });
        }
        let inputs = specs
            .iter()
            .filter(|s| matches!(s.kind, Kind::Source))
            .map(|s| (s.arity, s.time.width()))
            .collect();
        let core = Core::new(specs).map_err(error)?;
        if booleans.len() != core.ports().1 {
            return Err(PyValueError::new_err(
                "the booleans of every output of the region are needed",
            ));
        }
        Ok(Region {
            core,
            booleans,
            inputs,
        })
    }

    /// Sends a batch held as rows into input `input`: the tuples, and the positions of the
    /// data, the time and the diff in them (integers, booleans or None).
    fn push_rows(
        &mut self,
        input: usize,
        rows: Vec<Bound<'_, PyTuple>>,
        data: Vec<usize>,
        times: Vec<usize>,
        diff: usize,
    ) -> PyResult<()> {
        let (arity, width) = self.input_shape(input, data.len(), times.len())?;
        let mut h = History::with_capacity(arity, width, rows.len());
        let mut cells: Vec<Option<i64>> = Vec::with_capacity(arity);
        let mut time: Vec<i64> = Vec::with_capacity(width);
        for row in &rows {
            cells.clear();
            for &i in &data {
                cells.push(row.get_item(i)?.extract()?);
            }
            time.clear();
            for &i in &times {
                time.push(row.get_item(i)?.extract()?);
            }
            let d: i64 = row.get_item(diff)?.extract()?;
            h.push(cells.iter().copied(), &time, d);
        }
        self.core.push(input, h).map_err(error)
    }

    /// Sends a batch held as columns into input `input`: its data columns, time columns and
    /// diffs as Arrow `int64` arrays (`__arrow_c_array__`, booleans as 0 and 1), read without
    /// copies on the Python side.
    fn push_columns(
        &mut self,
        py: Python<'_>,
        input: usize,
        data: Vec<Bound<'_, PyAny>>,
        times: Vec<Bound<'_, PyAny>>,
        diffs: Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let (arity, width) = self.input_shape(input, data.len(), times.len())?;
        let (data, times, diffs) = import_batch(&data, &times, &diffs)?;
        let n = diffs.len();
        let core = &mut self.core;
        py.detach(|| {
            let mut h = History::with_capacity(arity, width, n);
            let mut time = vec![0; width];
            for (r, &d) in diffs.iter().enumerate() {
                for (t, c) in time.iter_mut().zip(&times) {
                    *t = c[r];
                }
                h.push(data.iter().map(|c| c[r]), &time, d);
            }
            core.push(input, h)
        })
        .map_err(error)
    }

    /// The enclosing graph's frontier at input `input`.
    fn set_input_frontier(&mut self, input: usize, frontier: Vec<Vec<i64>>) -> PyResult<()> {
        self.core.set_input_frontier(input, frontier).map_err(error)
    }

    /// Steps the region until it has no work left (without the GIL).
    fn run(&mut self, py: Python<'_>) -> PyResult<()> {
        let core = &mut self.core;
        py.detach(|| core.run()).map_err(error)
    }

    /// What output `output` received since the last call: `(time, rows)` per time, each row
    /// `(data..., time..., diff)`.
    fn take_output<'py>(&mut self, py: Python<'py>, output: usize) -> PyResult<Bound<'py, PyList>> {
        let booleans = self
            .booleans
            .get(output)
            .ok_or_else(|| PyValueError::new_err(format!("the region has no output {output}")))?;
        let list = PyList::empty(py);
        for (time, h) in self.core.take_output(output) {
            let rows = PyList::empty(py);
            for i in 0..h.len() {
                let mut cells: Vec<Bound<'py, PyAny>> =
                    Vec::with_capacity(h.arity() + time.len() + 1);
                for (c, &b) in booleans.iter().enumerate().take(h.arity()) {
                    let v = h.value(i, c);
                    cells.push(match v {
                        None => py.None().into_bound(py),
                        Some(x) if b => PyBool::new(py, x != 0).to_owned().into_any(),
                        Some(x) => x.into_pyobject(py)?.into_any(),
                    });
                }
                for &t in h.time(i) {
                    cells.push(t.into_pyobject(py)?.into_any());
                }
                cells.push(h.diff(i).into_pyobject(py)?.into_any());
                rows.append(PyTuple::new(py, cells)?)?;
            }
            list.append((PyTuple::new(py, &time)?, rows))?;
        }
        Ok(list)
    }

    /// The minimal outer times at which the region may still send output by itself.
    fn capabilities(&self) -> PyResult<Vec<Vec<i64>>> {
        self.core.capabilities().map_err(error)
    }

    /// `(node, time, updates)` the variables received since the last call.
    fn take_variable_counts(&mut self) -> Vec<(usize, Vec<i64>, i64)> {
        self.core.take_variable_counts()
    }

    /// How many operator steps the region has run.
    #[getter]
    fn steps(&self) -> u64 {
        self.core.steps()
    }
}

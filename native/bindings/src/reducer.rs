//! `ddflow._native.Reducer`: the core's reducer behind the Python `Reducer` contract.
//!
//! Input crosses as columns (Arrow `int64` arrays of the batches' physical values, read
//! through the Arrow C data interface: `crate::ffi`) or, for a batch held as Python rows, as
//! its tuples; output leaves as tuples per time (few rows) or as the
//! `int64` bytes of each column with its validity. The GIL is released around the core's work.

use ddflow_core::lattice::Antichain;
use std::ops::Range;

use ddflow_core::reduce::{
    Aggregate, Columns, Corrections, KeyedUpdate, Logic, Reducer as Core, Row,
};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyList, PyTuple};

use crate::ffi::{import_batch, import_int64, import_int64_valid};
use crate::time_type;

/// An arrangement as it crosses: key, value and time columns, and the diffs.
type Arranged<'py> = (
    Vec<Bound<'py, PyAny>>,
    Vec<Bound<'py, PyAny>>,
    Vec<Bound<'py, PyAny>>,
    Bound<'py, PyAny>,
);

/// The state and step of one reduce, in the core.
#[pyclass(module = "ddflow._native")]
pub struct Reducer {
    core: Core,
    width: usize,
    keys: usize,
    values: usize,
    /// output columns (keys, then outputs) to give as Python booleans in rows
    booleans: Vec<bool>,
    /// the values taken are summed columns, multiplied by the diff on the way in (`sum(c)`
    /// keeps `c × diff`: accumulating is adding)
    weights: bool,
}

/// `values × diff`, the weights of an update (null stays null).
fn weighted(values: Row, diff: i64) -> Row {
    values
        .into_iter()
        .map(|v| v.map(|x| x.wrapping_mul(diff)))
        .collect()
}

pub(crate) fn logic(
    kind: &str,
    aggs: Vec<(String, Option<usize>, Option<usize>)>,
) -> PyResult<Logic> {
    let parsed = aggs
        .into_iter()
        .map(|(a, i, by)| match (a.as_str(), i, by) {
            ("count", _, _) => Ok(Aggregate::Count),
            ("sum", Some(i), _) => Ok(Aggregate::Sum(i)),
            ("min", Some(i), _) => Ok(Aggregate::Min(i)),
            ("max", Some(i), _) => Ok(Aggregate::Max(i)),
            ("arg_max", Some(i), Some(by)) => Ok(Aggregate::ArgMax(i, by)),
            (other, _, _) => Err(PyValueError::new_err(format!(
                "the native reducer has no aggregate {other:?} over {i:?} (by {by:?})"
            ))),
        })
        .collect::<PyResult<Vec<_>>>()?;
    match kind {
        "agg_weights" => Ok(Logic::Weights(parsed)),
        "agg" => Ok(Logic::Values(parsed)),
        "distinct" => Ok(Logic::Distinct),
        "threshold" => Ok(Logic::Threshold),
        other => Err(PyValueError::new_err(format!(
            "the native reducer has no reduce of kind {other:?}"
        ))),
    }
}

fn check_len(what: &str, n: usize, expected: usize) -> PyResult<()> {
    if n != expected {
        return Err(PyValueError::new_err(format!(
            "{what}: {n} columns where {expected} were expected"
        )));
    }
    Ok(())
}

impl Reducer {
    fn frontier(&self, frontier: Vec<Vec<i64>>) -> PyResult<Antichain> {
        let tt = self.core.time_type();
        for f in &frontier {
            check_len("a frontier's time", f.len(), self.width)?;
        }
        Ok(Antichain::from_times(
            tt,
            frontier.iter().map(Vec::as_slice),
        ))
    }

    /// The corrections of `times` as `[(time, rows)]`, each row a tuple of keys, outputs,
    /// time, diff.
    fn as_rows<'py>(
        &self,
        py: Python<'py>,
        out: &Corrections,
        times: &[(Vec<i64>, Range<usize>)],
    ) -> PyResult<Bound<'py, PyList>> {
        let list = PyList::empty(py);
        let h = out.updates();
        for (time, rows) in times {
            let items = PyList::empty(py);
            for r in rows.clone() {
                let mut cells: Vec<Bound<'py, PyAny>> =
                    Vec::with_capacity(self.keys + h.arity() + self.width + 1);
                for (i, v) in out.cells(r).enumerate() {
                    cells.push(match v {
                        None => py.None().into_bound(py),
                        Some(x) if self.booleans.get(i).copied().unwrap_or(false) => {
                            PyBool::new(py, x != 0).to_owned().into_any()
                        }
                        Some(x) => x.into_pyobject(py)?.into_any(),
                    });
                }
                for t in time {
                    cells.push(t.into_pyobject(py)?.into_any());
                }
                cells.push(h.diff(r).into_pyobject(py)?.into_any());
                items.append(PyTuple::new(py, cells)?)?;
            }
            list.append((PyTuple::new(py, time)?, items))?;
        }
        Ok(list)
    }

    /// The corrections of `times` as `[(time, height, columns, diffs)]`: each column the
    /// `int64` bytes of its values and the bytes of its validity (`None` without nulls).
    fn as_columns<'py>(
        &self,
        py: Python<'py>,
        out: &Corrections,
        times: &[(Vec<i64>, Range<usize>)],
    ) -> PyResult<Bound<'py, PyList>> {
        let list = PyList::empty(py);
        let h = out.updates();
        let ncols = self.keys + h.arity();
        for (time, rows) in times {
            let n = rows.len();
            let mut values = vec![Vec::with_capacity(n * 8); ncols];
            let mut valid = vec![Vec::with_capacity(n); ncols];
            let mut diffs = Vec::with_capacity(n * 8);
            for r in rows.clone() {
                for (i, v) in out.cells(r).enumerate() {
                    values[i].extend_from_slice(&v.unwrap_or(0).to_le_bytes());
                    valid[i].push(u8::from(v.is_some()));
                }
                diffs.extend_from_slice(&h.diff(r).to_le_bytes());
            }
            let columns = PyList::empty(py);
            for (v, ok) in values.iter().zip(&valid) {
                let mask = if ok.iter().all(|b| *b == 1) {
                    py.None().into_bound(py)
                } else {
                    PyBytes::new(py, ok).into_any()
                };
                columns.append((PyBytes::new(py, v), mask))?;
            }
            list.append((
                PyTuple::new(py, time)?,
                n,
                columns,
                PyBytes::new(py, &diffs),
            ))?;
        }
        Ok(list)
    }
}

#[pymethods]
impl Reducer {
    /// A reducer of `kind` (`"agg_weights"`, `"agg"`, `"distinct"`) with aggregates
    /// `[(kind, value column, by column)]` (the by column of an `arg_max` only), over `keys`
    /// key columns and `values` value columns, times of the coordinates given; `booleans`
    /// marks the output columns that are booleans.
    #[new]
    fn new(
        coordinates: Vec<String>,
        kind: &str,
        aggs: Vec<(String, Option<usize>, Option<usize>)>,
        keys: usize,
        values: usize,
        booleans: Vec<bool>,
    ) -> PyResult<Self> {
        let tt = time_type(coordinates)?;
        let width = tt.width();
        let logic = logic(kind, aggs)?;
        if let Logic::Weights(a) | Logic::Values(a) = &logic {
            for agg in a {
                let read = match agg {
                    Aggregate::Count => None,
                    Aggregate::Sum(i) | Aggregate::Min(i) | Aggregate::Max(i) => Some(*i),
                    Aggregate::ArgMax(i, by) => Some((*i).max(*by)),
                };
                if let Some(i) = read {
                    if i >= values {
                        return Err(PyValueError::new_err(format!(
                            "an aggregate of value column {i} of {values}"
                        )));
                    }
                }
            }
        }
        Ok(Reducer {
            weights: matches!(logic, Logic::Weights(_)),
            core: Core::new(tt, logic, keys, values),
            width,
            keys,
            values,
            booleans,
        })
    }

    /// Adds a batch given as columns (Arrow `int64` arrays): keys, values (weights for
    /// `agg_weights`), times, diffs. Returns how many updates it added.
    fn take_columns(
        &mut self,
        py: Python<'_>,
        keys: Vec<Bound<'_, PyAny>>,
        values: Vec<Bound<'_, PyAny>>,
        times: Vec<Bound<'_, PyAny>>,
        diffs: Bound<'_, PyAny>,
    ) -> PyResult<usize> {
        check_len("keys", keys.len(), self.keys)?;
        check_len("values", values.len(), self.values)?;
        check_len("times", times.len(), self.width)?;
        let keyed: Vec<Bound<'_, PyAny>> = keys.into_iter().chain(values).collect();
        let (mut data, times, diffs) = import_batch(&keyed, &times, &diffs)?;
        let values = data.split_off(self.keys);
        let keys = data;
        let values = if self.weights {
            values
                .into_iter()
                .map(|c| {
                    c.into_iter()
                        .zip(&diffs)
                        .map(|(v, d)| v.map(|x| x.wrapping_mul(*d)))
                        .collect()
                })
                .collect()
        } else {
            values
        };
        let core = &mut self.core;
        Ok(py.detach(|| core.take_columns((keys, values, times, diffs))))
    }

    /// Adds a batch held as rows: the tuples, and the positions of the keys, values, times and
    /// diff in them (integers, booleans or None).
    fn take_rows(
        &mut self,
        py: Python<'_>,
        rows: Vec<Bound<'_, PyTuple>>,
        keys: Vec<usize>,
        values: Vec<usize>,
        times: Vec<usize>,
        diff: usize,
    ) -> PyResult<usize> {
        check_len("keys", keys.len(), self.keys)?;
        check_len("values", values.len(), self.values)?;
        check_len("times", times.len(), self.width)?;
        let mut updates: Vec<KeyedUpdate> = Vec::with_capacity(rows.len());
        for row in &rows {
            let get = |i: usize| -> PyResult<Option<i64>> { row.get_item(i)?.extract() };
            let k = keys.iter().map(|&i| get(i)).collect::<PyResult<Row>>()?;
            let v = values.iter().map(|&i| get(i)).collect::<PyResult<Row>>()?;
            let t = times
                .iter()
                .map(|&i| row.get_item(i)?.extract::<i64>())
                .collect::<PyResult<Vec<i64>>>()?;
            let d: i64 = row.get_item(diff)?.extract()?;
            let v = if self.weights { weighted(v, d) } else { v };
            updates.push((k, v, t, d));
        }
        let core = &mut self.core;
        Ok(py.detach(|| core.take(updates)))
    }

    /// The minimal pending times, sorted.
    fn pending(&self) -> Vec<Vec<i64>> {
        self.core.pending()
    }

    /// Evaluates the pending times complete at `frontier`: `None` if none was, else
    /// `(rows, columns)`: the corrections of the times with at most `small_rows` of them as
    /// rows, the others as columns (see the module). A threshold's `multiplicities` maps a
    /// list of multiplicities to the function's values at them (called once per evaluation,
    /// with the GIL); where it raises, the times stay pending and the error propagates.
    #[pyo3(signature = (frontier, small_rows, multiplicities=None))]
    fn evaluate<'py>(
        &mut self,
        py: Python<'py>,
        frontier: Vec<Vec<i64>>,
        small_rows: usize,
        multiplicities: Option<Py<PyAny>>,
    ) -> PyResult<Option<(Bound<'py, PyList>, Bound<'py, PyList>)>> {
        let frontier = self.frontier(frontier)?;
        let core = &mut self.core;
        let mapping = |ms: &[i64]| -> PyResult<Vec<i64>> {
            Python::attach(|py| {
                let Some(f) = &multiplicities else {
                    return Err(PyValueError::new_err(
                        "a threshold's evaluation needs its multiplicities function",
                    ));
                };
                let values: Vec<i64> = f.bind(py).call1((ms.to_vec(),))?.extract()?;
                if values.len() != ms.len() {
                    return Err(PyValueError::new_err(format!(
                        "a threshold's multiplicities: {} values for {} multiplicities",
                        values.len(),
                        ms.len()
                    )));
                }
                Ok(values)
            })
        };
        let Some(out) = py.detach(|| core.evaluate(&frontier, mapping))? else {
            return Ok(None);
        };
        let (small, large): (Vec<_>, Vec<_>) = out
            .by_time()
            .into_iter()
            .partition(|(_, rows)| rows.len() <= small_rows);
        Ok(Some((
            self.as_rows(py, &out, &small)?,
            self.as_columns(py, &out, &large)?,
        )))
    }

    /// The arrangements may compact up to `frontier`; `fuel` (about the updates taken since
    /// the last call) is spent rewriting batches no merge has advanced.
    fn set_since(&mut self, py: Python<'_>, frontier: Vec<Vec<i64>>, fuel: usize) -> PyResult<()> {
        let frontier = self.frontier(frontier)?;
        let core = &mut self.core;
        py.detach(|| core.set_since(&frontier, fuel));
        Ok(())
    }

    /// `(input updates, output updates)` held.
    fn sizes(&self) -> (usize, usize) {
        self.core.sizes()
    }

    /// `(key, time)` pairs evaluated so far.
    #[getter]
    fn evaluated(&self) -> u64 {
        self.core.evaluated
    }

    /// Both arrangements as rows `(keys..., values..., times..., diff)`: `(input, output)`.
    fn contents<'py>(&self, py: Python<'py>) -> PyResult<(Bound<'py, PyList>, Bound<'py, PyList>)> {
        let (input, output) = self.core.contents();
        let convert = |updates: Vec<KeyedUpdate>| -> PyResult<Bound<'py, PyList>> {
            let list = PyList::empty(py);
            for (k, v, t, d) in updates {
                let mut cells: Vec<Bound<'py, PyAny>> = Vec::new();
                for x in k.iter().chain(v.iter()) {
                    cells.push(x.into_pyobject(py)?.into_any());
                }
                for x in &t {
                    cells.push(x.into_pyobject(py)?.into_any());
                }
                cells.push(d.into_pyobject(py)?.into_any());
                list.append(PyTuple::new(py, cells)?)?;
            }
            Ok(list)
        };
        Ok((convert(input)?, convert(output)?))
    }

    /// Loads arrangements given as columns `(keys, values, times, diffs)` (Arrow `int64`
    /// arrays) for the input and for the output (values: the output columns), into a reducer
    /// that holds nothing.
    fn load(
        &mut self,
        py: Python<'_>,
        input: Bound<'_, PyAny>,
        output: Bound<'_, PyAny>,
    ) -> PyResult<()> {
        let read = |part: Bound<'_, PyAny>| -> PyResult<Columns> {
            let (k, v, t, d): Arranged<'_> = part.extract()?;
            let k = k.iter().map(import_int64).collect::<PyResult<Vec<_>>>()?;
            let v = v.iter().map(import_int64).collect::<PyResult<Vec<_>>>()?;
            let t = t
                .iter()
                .map(|c| import_int64_valid(c, "a time column"))
                .collect::<PyResult<Vec<_>>>()?;
            let d = import_int64_valid(&d, "the diffs")?;
            let n = d.len();
            let lengths = k.iter().chain(&v).map(Vec::len);
            if lengths.chain(t.iter().map(Vec::len)).any(|l| l != n) {
                return Err(PyValueError::new_err(
                    "an arrangement's columns differ in length",
                ));
            }
            Ok((k, v, t, d))
        };
        let input = read(input)?;
        let output = read(output)?;
        check_len("the input's keys", input.0.len(), self.keys)?;
        check_len("the input's values", input.1.len(), self.values)?;
        check_len("the output's keys", output.0.len(), self.keys)?;
        let outputs = self.core.logic().outputs();
        check_len("the output's values", output.1.len(), outputs)?;
        for part in [&input, &output] {
            check_len("times", part.2.len(), self.width)?;
        }
        let core = &mut self.core;
        py.detach(|| core.load_columns(input, output));
        Ok(())
    }
}

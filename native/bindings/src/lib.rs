//! `ddflow._native`: the Python face of the core crate.
//!
//! A thin layer: it converts at the boundary and calls `ddflow-core`; Python sees only opaque
//! handles and plain values, declared in `ddflow/_native.pyi`. Errors cross as Python
//! exceptions, never as panics.

mod ffi;
mod progress;
mod reducer;
mod region;

use ddflow_core::lattice::{Antichain, Coordinate, TimeType};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// A Python time type's coordinates (`"product"`, `"lexicographic"`) as the core's.
pub(crate) fn time_type(coordinates: Vec<String>) -> PyResult<TimeType> {
    let cs = coordinates
        .iter()
        .map(|c| match c.as_str() {
            "product" => Ok(Coordinate::Product),
            "lexicographic" => Ok(Coordinate::Lexicographic),
            other => Err(PyValueError::new_err(format!(
                "unknown time coordinate {other:?}"
            ))),
        })
        .collect::<PyResult<Vec<_>>>()?;
    Ok(TimeType::new(&cs))
}

fn check_width(tt: &TimeType, t: &[i64]) -> PyResult<()> {
    if t.len() != tt.width() {
        return Err(PyValueError::new_err(format!(
            "a time of {} integers where the time type has {}",
            t.len(),
            tt.width()
        )));
    }
    Ok(())
}

/// `s <= t` in the lattice of `coordinates` (the core's order, for tests against Python's).
#[pyfunction]
fn time_less_equal(coordinates: Vec<String>, s: Vec<i64>, t: Vec<i64>) -> PyResult<bool> {
    let tt = time_type(coordinates)?;
    check_width(&tt, &s)?;
    check_width(&tt, &t)?;
    Ok(tt.less_equal(&s, &t))
}

/// `(join(s, t), meet(s, t))` in the lattice of `coordinates`.
#[pyfunction]
fn time_join_meet(
    coordinates: Vec<String>,
    s: Vec<i64>,
    t: Vec<i64>,
) -> PyResult<(Vec<i64>, Vec<i64>)> {
    let tt = time_type(coordinates)?;
    check_width(&tt, &s)?;
    check_width(&tt, &t)?;
    Ok((tt.join(&s, &t), tt.meet(&s, &t)))
}

/// `t` advanced by the frontier `frontier` in the lattice of `coordinates`.
#[pyfunction]
fn time_advance_by(
    coordinates: Vec<String>,
    t: Vec<i64>,
    frontier: Vec<Vec<i64>>,
) -> PyResult<Vec<i64>> {
    let tt = time_type(coordinates)?;
    check_width(&tt, &t)?;
    for f in &frontier {
        check_width(&tt, f)?;
    }
    let f = Antichain::from_times(&tt, frontier.iter().map(Vec::as_slice));
    Ok(tt.advance_by(&t, &f))
}

/// The values of an Arrow `int64` array (anything with `__arrow_c_array__`), nulls as `None`:
/// what the core reads of a column, for tests of the import.
#[pyfunction]
fn int64_column(column: &Bound<'_, PyAny>) -> PyResult<Vec<Option<i64>>> {
    ffi::import_int64(column)
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("VERSION", ddflow_core::VERSION)?;
    m.add("SOURCE_FINGERPRINT", env!("DDFLOW_SOURCE_FINGERPRINT"))?;
    m.add("BUILD_PROFILE", env!("DDFLOW_BUILD_PROFILE"))?;
    m.add_function(wrap_pyfunction!(time_less_equal, m)?)?;
    m.add_function(wrap_pyfunction!(time_join_meet, m)?)?;
    m.add_function(wrap_pyfunction!(time_advance_by, m)?)?;
    m.add_class::<reducer::Reducer>()?;
    m.add_class::<progress::Tracker>()?;
    m.add_class::<region::Region>()?;
    m.add_function(wrap_pyfunction!(int64_column, m)?)?;
    Ok(())
}

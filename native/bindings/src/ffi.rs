//! The Arrow C data interface, read side: `int64` columns taken from any object that exports
//! an Arrow array through the PyCapsule interface (`__arrow_c_array__`: pyarrow arrays, and
//! so Polars series through `to_arrow()`), without a copy on the Python side.
//!
//! This is the only module with `unsafe`: it reads the `ArrowSchema` and `ArrowArray` structs
//! a producer put in the capsules, and the buffers they point to. Each block says why it is
//! sound. The capsules own the structs (their destructors release them), and this module only
//! reads them while it holds both capsules and runs no Python code.

#![allow(unsafe_code)]

use std::ffi::{c_char, c_void, CStr};

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyCapsule, PyCapsuleMethods};

/// The C data interface's schema struct (Arrow's `abi.h`; every field declared, for the
/// layout, though only some are read).
#[repr(C)]
#[allow(dead_code)]
struct ArrowSchema {
    format: *const c_char,
    name: *const c_char,
    metadata: *const c_char,
    flags: i64,
    n_children: i64,
    children: *mut *mut ArrowSchema,
    dictionary: *mut ArrowSchema,
    release: Option<unsafe extern "C" fn(*mut ArrowSchema)>,
    private_data: *mut c_void,
}

/// The C data interface's array struct (Arrow's `abi.h`; every field declared, for the
/// layout, though only some are read).
#[repr(C)]
#[allow(dead_code)]
struct ArrowArray {
    length: i64,
    null_count: i64,
    offset: i64,
    n_buffers: i64,
    n_children: i64,
    buffers: *mut *const c_void,
    children: *mut *mut ArrowArray,
    dictionary: *mut ArrowArray,
    release: Option<unsafe extern "C" fn(*mut ArrowArray)>,
    private_data: *mut c_void,
}

/// The values of an Arrow `int64` array (`None`: null), read through its PyCapsules.
pub fn import_int64(column: &Bound<'_, PyAny>) -> PyResult<Vec<Option<i64>>> {
    let (schema, array): (Bound<'_, PyCapsule>, Bound<'_, PyCapsule>) =
        column.call_method0("__arrow_c_array__")?.extract()?;
    let schema = schema
        .pointer_checked(Some(c"arrow_schema"))?
        .cast::<ArrowSchema>();
    let array = array
        .pointer_checked(Some(c"arrow_array"))?
        .cast::<ArrowArray>();
    // SAFETY: the capsule named "arrow_schema" holds an `ArrowSchema` (the PyCapsule
    // interface's contract; the name was checked), alive while the capsule is, which this
    // function holds; no Python code runs while it is read. A released schema (`release`
    // null) is refused before its format is read; an unreleased one has a NUL-terminated
    // format string.
    let format = unsafe {
        let s = schema.as_ref();
        if s.release.is_none() {
            return Err(PyValueError::new_err("an Arrow schema already released"));
        }
        CStr::from_ptr(s.format).to_bytes().to_vec()
    };
    if format != b"l" {
        return Err(PyValueError::new_err(format!(
            "an Arrow column of format {:?} where int64 (\"l\") was expected",
            String::from_utf8_lossy(&format)
        )));
    }
    // SAFETY: as above, for the capsule named "arrow_array" and its `ArrowArray`.
    let a = unsafe { array.as_ref() };
    if a.release.is_none() || a.n_buffers != 2 || a.length < 0 || a.offset < 0 {
        return Err(PyValueError::new_err(
            "an Arrow int64 array released, or without its two buffers",
        ));
    }
    let (offset, length) = (a.offset as usize, a.length as usize);
    // SAFETY: an unreleased primitive array has `n_buffers` (checked: 2) buffer pointers.
    let (validity, values) = unsafe { (*a.buffers, *a.buffers.add(1)) };
    if values.is_null() && length > 0 {
        return Err(PyValueError::new_err("an Arrow int64 array without values"));
    }
    let values = values.cast::<i64>();
    let validity = validity.cast::<u8>();
    let valid = |i: usize| -> bool {
        // SAFETY: a validity bitmap, where present, holds a bit for each of the `offset +
        // length` slots; `i` is below that.
        validity.is_null() || unsafe { (*validity.add(i / 8) >> (i % 8)) & 1 == 1 }
    };
    Ok((offset..offset + length)
        .map(|i| {
            // SAFETY: the values buffer of an int64 array holds `offset + length` values and
            // `i` is below that; read unaligned, as a producer need not align it.
            valid(i).then(|| unsafe { values.add(i).read_unaligned() })
        })
        .collect())
}

/// [`import_int64`] of a column that may hold no null (times, diffs).
pub fn import_int64_valid(column: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<i64>> {
    import_int64(column)?
        .into_iter()
        .map(|v| v.ok_or_else(|| PyValueError::new_err(format!("a null in {what}"))))
        .collect()
}

/// A batch's columns as they cross: nullable data columns, then time columns and diffs that
/// hold no null, all of one length.
pub type BatchColumns = (Vec<Vec<Option<i64>>>, Vec<Vec<i64>>, Vec<i64>);

/// Reads a batch's data columns, time columns and diffs (Arrow `int64` arrays), and checks
/// that they have one length.
pub fn import_batch(
    data: &[Bound<'_, PyAny>],
    times: &[Bound<'_, PyAny>],
    diffs: &Bound<'_, PyAny>,
) -> PyResult<BatchColumns> {
    let data = data
        .iter()
        .map(import_int64)
        .collect::<PyResult<Vec<_>>>()?;
    let times = times
        .iter()
        .map(|c| import_int64_valid(c, "a time column"))
        .collect::<PyResult<Vec<_>>>()?;
    let diffs = import_int64_valid(diffs, "the diffs")?;
    let n = diffs.len();
    let lengths = data.iter().map(Vec::len).chain(times.iter().map(Vec::len));
    if lengths.into_iter().any(|l| l != n) {
        return Err(PyValueError::new_err("a batch's columns differ in length"));
    }
    Ok((data, times, diffs))
}

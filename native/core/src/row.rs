//! An order-preserving row encoding: a record's values as bytes whose lexicographic order
//! (`memcmp`) is the order of the records, column by column, by ddflow's rules.
//!
//! Keys of any type then compare, hash and sort as plain byte strings, as in Polars' row format
//! and arrow-row. The rules are those the reference interpreter (`ddflow.testing.values`)
//! states:
//!
//! * a null is less than every value of its column (and equal to a null);
//! * integers, dates, datetimes and durations by value; `false < true`;
//! * floats in a total order: `-0.0 == 0.0`, NaN equal to NaN and greater than every number
//!   (`inf` included);
//! * strings by code point (UTF-8's byte order is the code points' order), a prefix first;
//! * lists element by element, a prefix first.
//!
//! Each value is self-delimiting, so the encoding of a record is the concatenation of its
//! values' and no encoding is a proper prefix of another's:
//!
//! | value | bytes |
//! | --- | --- |
//! | null | `00` |
//! | boolean | `01`, then `00` or `01` |
//! | signed integer | `01`, then its 8 bytes big-endian with the sign bit flipped |
//! | unsigned integer | `01`, then its 8 bytes big-endian |
//! | float | `01`, then 8 bytes: `-0.0` as `0.0` and every NaN as one, the bits of a negative number inverted and of a positive one with the sign bit set, big-endian |
//! | string | `01`, then its bytes with `00` escaped as `00 FF`, then `00 00` |
//! | list | `01`, then `01` and the element's encoding for each element, then `00` |
//!
//! Equal encodings mean equal records, so a hash of the bytes is a hash of the record that is
//! the same in every process.

use std::cmp::Ordering;

/// The type of a column, as far as the encoding is concerned (an `int32`, a date or a
/// datetime is an [`Kind::Int`] of its physical value).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kind {
    Bool,
    Int,
    UInt,
    Float,
    Str,
    List(Box<Kind>),
}

/// One value of a record.
#[derive(Clone, Debug)]
pub enum Value {
    Null,
    Bool(bool),
    Int(i64),
    UInt(u64),
    Float(f64),
    Str(String),
    List(Vec<Value>),
}

/// Why bytes do not decode as a record of the given kinds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecodeError(pub String);

const NULL: u8 = 0x00;
const VALID: u8 = 0x01;
const ESCAPE: u8 = 0xFF;

/// Appends the encoding of `value`, a value of a column of `kind`, to `out`. A value of
/// another kind than the column's is a bug of the caller (it panics in debug builds and is
/// encoded as its own kind otherwise).
pub fn encode(kind: &Kind, value: &Value, out: &mut Vec<u8>) {
    debug_assert!(fits(kind, value), "{value:?} is not of kind {kind:?}");
    match value {
        Value::Null => out.push(NULL),
        Value::Bool(b) => out.extend_from_slice(&[VALID, u8::from(*b)]),
        Value::Int(x) => {
            out.push(VALID);
            out.extend_from_slice(&((*x as u64) ^ (1 << 63)).to_be_bytes());
        }
        Value::UInt(x) => {
            out.push(VALID);
            out.extend_from_slice(&x.to_be_bytes());
        }
        Value::Float(x) => {
            out.push(VALID);
            out.extend_from_slice(&float_bits(*x).to_be_bytes());
        }
        Value::Str(s) => {
            out.push(VALID);
            encode_bytes(s.as_bytes(), out);
        }
        Value::List(items) => {
            out.push(VALID);
            let inner = match kind {
                Kind::List(inner) => inner.as_ref(),
                other => other,
            };
            for item in items {
                out.push(VALID);
                encode(inner, item, out);
            }
            out.push(NULL);
        }
    }
}

/// The encoding of a record whose columns are of `kinds`.
pub fn encode_record(kinds: &[Kind], values: &[Value]) -> Vec<u8> {
    let mut out = Vec::new();
    for (kind, value) in kinds.iter().zip(values) {
        encode(kind, value, &mut out);
    }
    out
}

/// The float's bits, in an order where unsigned comparison is the total order of the module.
fn float_bits(x: f64) -> u64 {
    let x = if x == 0.0 {
        0.0 // (-0.0 as 0.0)
    } else if x.is_nan() {
        f64::NAN // (one NaN: every payload and sign alike)
    } else {
        x
    };
    let bits = x.to_bits();
    // (a canonical NaN's sign bit is clear: it sorts after +inf)
    let bits = if x.is_nan() { bits & !(1 << 63) } else { bits };
    if bits >> 63 == 1 {
        !bits
    } else {
        bits | (1 << 63)
    }
}

/// Inverts [`float_bits`].
fn float_from_bits(bits: u64) -> f64 {
    f64::from_bits(if bits >> 63 == 1 {
        bits & !(1 << 63)
    } else {
        !bits
    })
}

fn encode_bytes(bytes: &[u8], out: &mut Vec<u8>) {
    for &b in bytes {
        out.push(b);
        if b == NULL {
            out.push(ESCAPE);
        }
    }
    out.extend_from_slice(&[NULL, NULL]);
}

/// Whether `value` can be a value of a column of `kind`.
pub fn fits(kind: &Kind, value: &Value) -> bool {
    match (kind, value) {
        (_, Value::Null) => true,
        (Kind::Bool, Value::Bool(_))
        | (Kind::Int, Value::Int(_))
        | (Kind::UInt, Value::UInt(_))
        | (Kind::Float, Value::Float(_))
        | (Kind::Str, Value::Str(_)) => true,
        (Kind::List(inner), Value::List(items)) => items.iter().all(|v| fits(inner, v)),
        _ => false,
    }
}

/// Decodes the record of columns of `kinds` that `bytes` encode (every byte read).
pub fn decode_record(kinds: &[Kind], bytes: &[u8]) -> Result<Vec<Value>, DecodeError> {
    let mut at = 0;
    let mut values = Vec::with_capacity(kinds.len());
    for kind in kinds {
        values.push(decode(kind, bytes, &mut at)?);
    }
    if at != bytes.len() {
        return Err(DecodeError(format!(
            "{} bytes after the record's {} values",
            bytes.len() - at,
            kinds.len()
        )));
    }
    Ok(values)
}

/// Decodes one value of a column of `kind` at `*at`, moving `*at` past it.
pub fn decode(kind: &Kind, bytes: &[u8], at: &mut usize) -> Result<Value, DecodeError> {
    let tag = take(bytes, at, 1)?[0];
    match tag {
        NULL => return Ok(Value::Null),
        VALID => {}
        other => return Err(DecodeError(format!("a value starts with {other:#04x}"))),
    }
    Ok(match kind {
        Kind::Bool => Value::Bool(take(bytes, at, 1)?[0] != 0),
        Kind::Int => Value::Int((u64::from_be_bytes(eight(bytes, at)?) ^ (1 << 63)) as i64),
        Kind::UInt => Value::UInt(u64::from_be_bytes(eight(bytes, at)?)),
        Kind::Float => Value::Float(float_from_bits(u64::from_be_bytes(eight(bytes, at)?))),
        Kind::Str => {
            let mut raw = Vec::new();
            loop {
                let b = take(bytes, at, 1)?[0];
                if b != NULL {
                    raw.push(b);
                    continue;
                }
                match take(bytes, at, 1)?[0] {
                    NULL => break,
                    ESCAPE => raw.push(NULL),
                    other => return Err(DecodeError(format!("a string escapes {other:#04x}"))),
                }
            }
            Value::Str(String::from_utf8(raw).map_err(|e| DecodeError(format!("a string: {e}")))?)
        }
        Kind::List(inner) => {
            let mut items = Vec::new();
            loop {
                match take(bytes, at, 1)?[0] {
                    NULL => break,
                    VALID => items.push(decode(inner, bytes, at)?),
                    other => {
                        return Err(DecodeError(format!("a list continues with {other:#04x}")))
                    }
                }
            }
            Value::List(items)
        }
    })
}

fn take<'a>(bytes: &'a [u8], at: &mut usize, n: usize) -> Result<&'a [u8], DecodeError> {
    let end = at
        .checked_add(n)
        .filter(|&e| e <= bytes.len())
        .ok_or_else(|| DecodeError(format!("the bytes end within a value, at {}", *at)))?;
    let got = &bytes[*at..end];
    *at = end;
    Ok(got)
}

fn eight(bytes: &[u8], at: &mut usize) -> Result<[u8; 8], DecodeError> {
    let mut out = [0u8; 8];
    out.copy_from_slice(take(bytes, at, 8)?);
    Ok(out)
}

/// The order of two values of one column by the module's rules (what the encoding must
/// agree with; the tests check it does).
pub fn compare(a: &Value, b: &Value) -> Ordering {
    match (a, b) {
        (Value::Null, Value::Null) => Ordering::Equal,
        (Value::Null, _) => Ordering::Less,
        (_, Value::Null) => Ordering::Greater,
        (Value::Bool(x), Value::Bool(y)) => x.cmp(y),
        (Value::Int(x), Value::Int(y)) => x.cmp(y),
        (Value::UInt(x), Value::UInt(y)) => x.cmp(y),
        (Value::Float(x), Value::Float(y)) => match (x.is_nan(), y.is_nan()) {
            (true, true) => Ordering::Equal,
            (true, false) => Ordering::Greater,
            (false, true) => Ordering::Less,
            // (-0.0 == 0.0 as IEEE says)
            (false, false) => x.partial_cmp(y).unwrap_or(Ordering::Equal),
        },
        (Value::Str(x), Value::Str(y)) => x.cmp(y),
        (Value::List(x), Value::List(y)) => {
            for (p, q) in x.iter().zip(y) {
                let c = compare(p, q);
                if c != Ordering::Equal {
                    return c;
                }
            }
            x.len().cmp(&y.len())
        }
        // (values of different kinds are never in one column)
        _ => discriminant(a).cmp(&discriminant(b)),
    }
}

fn discriminant(v: &Value) -> u8 {
    match v {
        Value::Null => 0,
        Value::Bool(_) => 1,
        Value::Int(_) => 2,
        Value::UInt(_) => 3,
        Value::Float(_) => 4,
        Value::Str(_) => 5,
        Value::List(_) => 6,
    }
}

/// The order of two records by the module's rules, column by column.
pub fn compare_records(a: &[Value], b: &[Value]) -> Ordering {
    for (p, q) in a.iter().zip(b) {
        let c = compare(p, q);
        if c != Ordering::Equal {
            return c;
        }
    }
    a.len().cmp(&b.len())
}

#[cfg(test)]
#[path = "row_tests.rs"]
mod tests;

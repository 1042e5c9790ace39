//! The tests of [`crate::row`]: the encoding's byte order against the rules
//! ([`compare_records`]) on random records, and decoding.

use super::*;
use proptest::prelude::*;

fn kinds() -> impl Strategy<Value = Kind> {
    let leaf = prop_oneof![
        Just(Kind::Bool),
        Just(Kind::Int),
        Just(Kind::UInt),
        Just(Kind::Float),
        Just(Kind::Str),
    ];
    leaf.prop_recursive(2, 4, 1, |inner| inner.prop_map(|k| Kind::List(Box::new(k))))
}

fn floats() -> impl Strategy<Value = f64> {
    prop_oneof![
        Just(0.0),
        Just(-0.0),
        Just(f64::NAN),
        Just(-f64::NAN),
        Just(f64::from_bits(0x7ff0_0000_0000_0001)), // (a NaN of another payload)
        Just(f64::INFINITY),
        Just(f64::NEG_INFINITY),
        Just(f64::MIN_POSITIVE),
        Just(-f64::MIN_POSITIVE),
        Just(f64::MAX),
        -3.0f64..3.0,
        any::<f64>(),
    ]
}

fn strings() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        Just("\0".to_string()),
        Just("a\0".to_string()),
        Just("a\0\0b".to_string()),
        "[a-c\0]{0,4}",
        "\\PC{0,3}", // (any printable code points: multi-byte UTF-8)
    ]
}

fn values(kind: Kind) -> BoxedStrategy<Value> {
    let present: BoxedStrategy<Value> = match kind {
        Kind::Bool => any::<bool>().prop_map(Value::Bool).boxed(),
        Kind::Int => prop_oneof![
            Just(i64::MIN),
            Just(i64::MAX),
            Just(0i64),
            -3i64..3,
            any::<i64>()
        ]
        .prop_map(Value::Int)
        .boxed(),
        Kind::UInt => prop_oneof![Just(u64::MAX), Just(0u64), 0u64..3, any::<u64>()]
            .prop_map(Value::UInt)
            .boxed(),
        Kind::Float => floats().prop_map(Value::Float).boxed(),
        Kind::Str => strings().prop_map(Value::Str).boxed(),
        Kind::List(inner) => proptest::collection::vec(values(*inner), 0..4)
            .prop_map(Value::List)
            .boxed(),
    };
    prop_oneof![1 => Just(Value::Null), 5 => present].boxed()
}

/// Columns' kinds and two records of them.
fn record_pairs() -> impl Strategy<Value = (Vec<Kind>, Vec<Value>, Vec<Value>)> {
    proptest::collection::vec(kinds(), 1..4).prop_flat_map(|ks| {
        let record = ks.iter().map(|k| values(k.clone())).collect::<Vec<_>>();
        (Just(ks), record.clone(), record)
    })
}

/// Two records that are often equal in some columns (independent draws rarely are).
fn close_pairs() -> impl Strategy<Value = (Vec<Kind>, Vec<Value>, Vec<Value>)> {
    (record_pairs(), proptest::collection::vec(any::<bool>(), 4)).prop_map(|((ks, a, b), same)| {
        let b = a
            .iter()
            .zip(b)
            .zip(same)
            .map(|((x, y), s)| if s { x.clone() } else { y })
            .collect();
        (ks, a, b)
    })
}

/// A value equal to `v` by the rules but maybe of other bits: the other zero, another NaN.
fn twin(v: &Value) -> Value {
    match v {
        Value::Float(x) if *x == 0.0 => Value::Float(-x),
        Value::Float(x) if x.is_nan() => Value::Float(if x.is_sign_negative() {
            f64::from_bits(0x7ff0_0000_0000_0001)
        } else {
            -f64::NAN
        }),
        Value::List(items) => Value::List(items.iter().map(twin).collect()),
        other => other.clone(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    /// Records equal by the rules encode alike (so a hash of the bytes is one of the record):
    /// `-0.0` as `0.0`, every NaN as one.
    #[test]
    fn equal_records_encode_alike((kinds, a, _) in record_pairs()) {
        let b: Vec<Value> = a.iter().map(twin).collect();
        prop_assert_eq!(compare_records(&a, &b), Ordering::Equal);
        prop_assert_eq!(encode_record(&kinds, &a), encode_record(&kinds, &b));
    }

    /// The bytes' order is the records' order by the rules: nulls first, `-0.0 == 0.0`, NaN
    /// (of any payload or sign) equal to NaN and above every number, strings by code point
    /// with `\0` inside, lists element by element, a prefix first.
    #[test]
    fn the_bytes_order_records_as_the_rules_do((kinds, a, b) in prop_oneof![record_pairs(), close_pairs()]) {
        let (ea, eb) = (encode_record(&kinds, &a), encode_record(&kinds, &b));
        prop_assert_eq!(ea.cmp(&eb), compare_records(&a, &b), "{:?} against {:?}", a, b);
    }

    /// A record decodes to one equal to it by the rules (a float's sign of zero and NaN
    /// payload aside, which the rules do not tell apart), and everything else exactly.
    #[test]
    fn a_record_decodes_to_itself((kinds, a, _) in record_pairs()) {
        let bytes = encode_record(&kinds, &a);
        let back = decode_record(&kinds, &bytes).map_err(|e| TestCaseError::fail(e.0))?;
        prop_assert_eq!(compare_records(&back, &a), Ordering::Equal);
        prop_assert_eq!(encode_record(&kinds, &back), bytes);
    }
}

#[test]
fn the_float_order_is_total_with_nan_largest() {
    let ordered = [
        f64::NEG_INFINITY,
        -1.5,
        -f64::MIN_POSITIVE,
        0.0,
        f64::MIN_POSITIVE,
        1.5,
        f64::INFINITY,
        f64::NAN,
    ];
    let enc = |x: f64| encode_record(&[Kind::Float], &[Value::Float(x)]);
    for pair in ordered.windows(2) {
        assert!(enc(pair[0]) < enc(pair[1]), "{} < {}", pair[0], pair[1]);
    }
    assert_eq!(enc(-0.0), enc(0.0));
    assert_eq!(enc(-f64::NAN), enc(f64::NAN));
    assert!(enc(0.0) > encode_record(&[Kind::Float], &[Value::Null]));
}

#[test]
fn a_string_is_after_its_prefixes_and_zero_bytes_are_escaped() {
    let enc = |s: &str| encode_record(&[Kind::Str], &[Value::Str(s.to_string())]);
    assert!(enc("") < enc("\0"));
    assert!(enc("a") < enc("a\0"));
    assert!(enc("a\0") < enc("a\0\0"));
    assert!(enc("a\0") < enc("ab"));
    assert!(enc("z") < enc("é")); // (by code point: U+007A before U+00E9)
    assert_eq!(enc("a\0b"), vec![1, b'a', 0, 0xFF, b'b', 0, 0]);
}

#[test]
fn malformed_bytes_are_refused_naming_why() {
    let kinds = [Kind::Int, Kind::Str];
    let good = encode_record(&kinds, &[Value::Int(7), Value::Str("x".into())]);
    let short = &good[..good.len() - 1];
    let why = |bytes: &[u8], kinds: &[Kind]| {
        decode_record(kinds, bytes)
            .expect_err("malformed bytes are refused")
            .0
    };
    assert!(why(short, &kinds).contains("end within a value"));
    let mut long = good.clone();
    long.push(0);
    assert!(why(&long, &kinds).contains("after the record"));
    assert!(why(&[7], &[Kind::Int]).contains("starts with"));
}

//! Column expressions over rows of integer-family values, evaluated in the core.
//!
//! The expressions a loop body of built-in operators needs: column references, literals,
//! `+`, `-`, `*`, negation, the six comparisons, `&`, `|`, `~` and null tests, and casts
//! between `int64` and `bool`. Values are physical `i64`s (a boolean is `0` or `1`) and
//! `None` is null, with the rules of the Python API's expressions (those of Polars):
//!
//! * arithmetic wraps at 64 bits, as Polars' does, and a null operand makes a null result;
//! * a comparison with a null operand is null;
//! * `&` and `|` follow three-valued logic: `false & null` is `false`, `true | null` is `true`,
//!   and the other combinations with a null are null;
//! * a cast of an integer to `bool` is `x != 0`; of a `bool` to an integer, `0` or `1`.
//!
//! A filter keeps the rows whose predicate is `true` (not null).

/// A binary operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinOp {
    Add,
    Sub,
    Mul,
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    And,
    Or,
}

impl BinOp {
    /// The operator of its Python spelling (`"+"`, `"=="`, `"&"`, ...).
    pub fn parse(op: &str) -> Option<Self> {
        Some(match op {
            "+" => BinOp::Add,
            "-" => BinOp::Sub,
            "*" => BinOp::Mul,
            "==" => BinOp::Eq,
            "!=" => BinOp::Ne,
            "<" => BinOp::Lt,
            "<=" => BinOp::Le,
            ">" => BinOp::Gt,
            ">=" => BinOp::Ge,
            "&" => BinOp::And,
            "|" => BinOp::Or,
            _ => return None,
        })
    }
}

/// An expression over a row (see the module).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Expr {
    /// The row's value at a position.
    Col(usize),
    /// A constant (`None`: null).
    Lit(Option<i64>),
    Binary(BinOp, Box<Expr>, Box<Expr>),
    /// Arithmetic negation.
    Neg(Box<Expr>),
    /// Logical negation of a boolean.
    Not(Box<Expr>),
    IsNull(Box<Expr>),
    IsNotNull(Box<Expr>),
    /// An integer cast to `bool`.
    ToBool(Box<Expr>),
}

fn bool_of(b: bool) -> Option<i64> {
    Some(i64::from(b))
}

impl Expr {
    /// The columns the expression reads.
    pub fn columns(&self, into: &mut Vec<usize>) {
        match self {
            Expr::Col(c) => into.push(*c),
            Expr::Lit(_) => {}
            Expr::Binary(_, a, b) => {
                a.columns(into);
                b.columns(into);
            }
            Expr::Neg(a)
            | Expr::Not(a)
            | Expr::IsNull(a)
            | Expr::IsNotNull(a)
            | Expr::ToBool(a) => a.columns(into),
        }
    }

    /// The expression's value at `row`.
    pub fn eval(&self, row: &[Option<i64>]) -> Option<i64> {
        match self {
            Expr::Col(c) => row[*c],
            Expr::Lit(v) => *v,
            Expr::Neg(a) => a.eval(row).map(i64::wrapping_neg),
            Expr::Not(a) => a.eval(row).map(|x| i64::from(x == 0)),
            Expr::IsNull(a) => bool_of(a.eval(row).is_none()),
            Expr::IsNotNull(a) => bool_of(a.eval(row).is_some()),
            Expr::ToBool(a) => a.eval(row).map(|x| i64::from(x != 0)),
            Expr::Binary(op, a, b) => {
                let (x, y) = (a.eval(row), b.eval(row));
                match op {
                    BinOp::And => match (x, y) {
                        (Some(0), _) | (_, Some(0)) => Some(0),
                        (Some(_), Some(_)) => Some(1),
                        _ => None,
                    },
                    BinOp::Or => match (x, y) {
                        (Some(p), _) if p != 0 => Some(1),
                        (_, Some(q)) if q != 0 => Some(1),
                        (Some(_), Some(_)) => Some(0),
                        _ => None,
                    },
                    _ => {
                        let (x, y) = (x?, y?);
                        match op {
                            BinOp::Add => Some(x.wrapping_add(y)),
                            BinOp::Sub => Some(x.wrapping_sub(y)),
                            BinOp::Mul => Some(x.wrapping_mul(y)),
                            BinOp::Eq => bool_of(x == y),
                            BinOp::Ne => bool_of(x != y),
                            BinOp::Lt => bool_of(x < y),
                            BinOp::Le => bool_of(x <= y),
                            BinOp::Gt => bool_of(x > y),
                            BinOp::Ge => bool_of(x >= y),
                            BinOp::And | BinOp::Or => unreachable!("handled above"),
                        }
                    }
                }
            }
        }
    }

    /// Whether a filter by this predicate keeps `row`.
    pub fn keeps(&self, row: &[Option<i64>]) -> bool {
        matches!(self.eval(row), Some(v) if v != 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn bin(op: BinOp, a: Expr, b: Expr) -> Expr {
        Expr::Binary(op, Box::new(a), Box::new(b))
    }

    #[test]
    fn nulls_propagate_and_logic_has_three_values() {
        let row = [Some(3), None, Some(0), Some(1)];
        assert_eq!(bin(BinOp::Add, Expr::Col(0), Expr::Col(1)).eval(&row), None);
        assert_eq!(bin(BinOp::Eq, Expr::Col(1), Expr::Col(1)).eval(&row), None);
        assert_eq!(
            bin(BinOp::And, Expr::Col(2), Expr::Col(1)).eval(&row),
            Some(0)
        );
        assert_eq!(bin(BinOp::And, Expr::Col(3), Expr::Col(1)).eval(&row), None);
        assert_eq!(
            bin(BinOp::Or, Expr::Col(3), Expr::Col(1)).eval(&row),
            Some(1)
        );
        assert_eq!(bin(BinOp::Or, Expr::Col(2), Expr::Col(1)).eval(&row), None);
        assert_eq!(Expr::IsNull(Box::new(Expr::Col(1))).eval(&row), Some(1));
        assert!(!bin(BinOp::Gt, Expr::Col(1), Expr::Lit(Some(0))).keeps(&row));
        assert_eq!(
            bin(BinOp::Add, Expr::Lit(Some(i64::MAX)), Expr::Lit(Some(1))).eval(&row),
            Some(i64::MIN)
        );
    }

    proptest! {
        #[test]
        fn operators_follow_their_definitions(
            x in proptest::option::of(-5i64..5), y in proptest::option::of(-5i64..5),
        ) {
            let row = [x, y];
            let e = |op| bin(op, Expr::Col(0), Expr::Col(1)).eval(&row);
            let both = x.zip(y);
            prop_assert_eq!(e(BinOp::Add), both.map(|(a, b)| a + b));
            prop_assert_eq!(e(BinOp::Sub), both.map(|(a, b)| a - b));
            prop_assert_eq!(e(BinOp::Mul), both.map(|(a, b)| a * b));
            prop_assert_eq!(e(BinOp::Lt), both.map(|(a, b)| i64::from(a < b)));
            prop_assert_eq!(e(BinOp::Ge), both.map(|(a, b)| i64::from(a >= b)));
            prop_assert_eq!(e(BinOp::Ne), both.map(|(a, b)| i64::from(a != b)));
            let truth = |v: Option<i64>| v.map(|a| a != 0);
            // Kleene logic: the result is known where it does not depend on the unknown
            let and = match (truth(x), truth(y)) {
                (Some(false), _) | (_, Some(false)) => Some(0),
                (Some(true), Some(true)) => Some(1),
                _ => None,
            };
            prop_assert_eq!(e(BinOp::And), and);
            let not = |v: Option<i64>| Expr::Not(Box::new(Expr::Lit(v))).eval(&[]);
            // De Morgan, in three values
            let or = bin(
                BinOp::Or,
                Expr::ToBool(Box::new(Expr::Col(0))),
                Expr::ToBool(Box::new(Expr::Col(1))),
            )
            .eval(&row);
            let de_morgan = not(bin(
                BinOp::And,
                Expr::Not(Box::new(Expr::ToBool(Box::new(Expr::Col(0))))),
                Expr::Not(Box::new(Expr::ToBool(Box::new(Expr::Col(1))))),
            )
            .eval(&row));
            prop_assert_eq!(or, de_morgan);
        }
    }
}

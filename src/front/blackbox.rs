//! The one table of black boxes: the scalar functions ATL calls without
//! looking inside (the paper's `f`, and the derivative boxes `Df`, one call
//! each).
//!
//! Every part of atl-egg reads a black box from [`BLACK_BOXES`]: the front
//! end its name and whether it takes a constant parameter (`pow`'s
//! exponent), the evaluator and the dual numbers its value and derivative,
//! the C emitter its C definition, the reference (`docs/language.md`,
//! checked by `tests/black_boxes.rs`) its documentation line. Only its
//! derivative *rule*, used by the optimizer's differentiation, is data in
//! `rules/derivatives.rules`, which names exactly the boxes of this table
//! (a test of `egraph::rules::derivatives` checks it).
//!
//! The functions are total IEEE functions that follow the conformance
//! reference (`_bb_fn` and `_bb_deriv` of `atl_ref.py`) operation for
//! operation, so results agree bit for bit: out-of-domain arguments give
//! `inf`/`NaN` instead of errors (`recip(0) = inf`, `log(-1) = NaN`, `pow`
//! as C99 `pow`, including a negative base with an integer exponent);
//! `relu(x) = x if x > 0 else 0` and `step(x) = 1 if x > 0 else 0` (so
//! `step(0) = 0`, and both map NaN to 0). The C definitions compute the same
//! operations in the same order (the compiled code runs with
//! `-ffp-contract=off`), so compiled code equals the evaluator bit for bit.

use super::ast::Real;
use std::fmt;

/// One black box.
pub struct BlackBox {
    /// Its name in programs, rules and C (`atlh_<name>`).
    pub name: &'static str,
    /// What its constant parameter is (`pow`'s "exponent", the `k` of
    /// `(pow e k)`), or `None` for a function of its argument alone.
    pub param: Option<&'static str>,
    /// Whether a constant parameter is one the box accepts, or what it
    /// must be (`polygamma`'s order "an integer from 0 to 100").
    pub check_param: fn(k: f64) -> Result<(), &'static str>,
    /// Its value at `x` (and parameter `k`, 0 when it has none).
    pub value: fn(x: f64, k: f64) -> f64,
    /// Its derivative at `x`, given `x`, `k` and `fx`, its value at `x`
    /// (reused where the formula allows, exactly as the reference does).
    pub derivative: fn(x: f64, k: f64, fx: f64) -> f64,
    /// The body of its C definition `double atlh_<name>(double x[, double
    /// k])`, which may call the boxes before it in the table.
    pub c_body: &'static str,
    /// What it computes, one line of `docs/language.md`.
    pub doc: &'static str,
}

/// Every black box. The order is part of the compiler's determinism (it
/// orders function leaves in e-graphs and C definitions): new boxes go at
/// the end.
pub const BLACK_BOXES: &[BlackBox] = &[
    BlackBox {
        name: "exp",
        param: None,
        check_param: any_param,
        value: |x, _| exp(x),
        derivative: |_, _, v| v,
        c_body: "{ return exp(x); }",
        doc: "`e^x`",
    },
    BlackBox {
        name: "log",
        param: None,
        check_param: any_param,
        value: |x, _| log(x),
        derivative: |x, _, _| recip(x),
        c_body: "{ return x > 0.0 ? log(x) : (x == 0.0 ? -INFINITY : NAN); }",
        doc: "the natural logarithm; `log(0) = -inf`, NaN below 0",
    },
    BlackBox {
        name: "sin",
        param: None,
        check_param: any_param,
        value: |x, _| sin(x),
        derivative: |x, _, _| cos(x),
        c_body: "{ return isfinite(x) ? sin(x) : NAN; }",
        doc: "the sine; NaN at infinities",
    },
    BlackBox {
        name: "cos",
        param: None,
        check_param: any_param,
        value: |x, _| cos(x),
        derivative: |x, _, _| -sin(x),
        c_body: "{ return isfinite(x) ? cos(x) : NAN; }",
        doc: "the cosine; NaN at infinities",
    },
    BlackBox {
        name: "tanh",
        param: None,
        check_param: any_param,
        value: |x, _| x.tanh(),
        derivative: |_, _, v| 1.0 - v * v,
        c_body: "{ return tanh(x); }",
        doc: "the hyperbolic tangent",
    },
    BlackBox {
        name: "sqrt",
        param: None,
        check_param: any_param,
        value: |x, _| sqrt(x),
        derivative: |_, _, v| 0.5 * recip(v),
        c_body: "{ return x >= 0.0 ? sqrt(x) : NAN; }",
        doc: "the square root; NaN below 0",
    },
    BlackBox {
        name: "recip",
        param: None,
        check_param: any_param,
        value: |x, _| recip(x),
        derivative: |_, _, v| -(v * v),
        c_body: "{ return x == 0.0 ? copysign(INFINITY, x) : 1.0 / x; }",
        doc: "`1/x`; `recip(±0) = ±inf`",
    },
    BlackBox {
        name: "sigmoid",
        param: None,
        check_param: any_param,
        value: |x, _| sigmoid(x),
        derivative: |_, _, v| v * (1.0 - v),
        c_body: "{\n  if (x >= 0.0) return 1.0 / (1.0 + exp(-x));\n  double e = exp(x);\n  \
                 return e / (1.0 + e);\n}",
        doc: "`1/(1+e^-x)`, computed without overflow",
    },
    BlackBox {
        name: "relu",
        param: None,
        check_param: any_param,
        value: |x, _| relu(x),
        derivative: |x, _, _| step(x),
        c_body: "{ return x > 0.0 ? x : 0.0; }",
        doc: "`x` if `x > 0`, else `0` (NaN gives 0)",
    },
    BlackBox {
        name: "step",
        param: None,
        check_param: any_param,
        value: |x, _| step(x),
        derivative: |_, _, _| 0.0,
        // The bits of 1.0 masked by the comparison: the same value, with
        // no branch for the C compiler to sink a product into (which
        // under -ftrapping-math it then cannot vectorize).
        c_body: "{\n  union { uint64_t u; double d; } r;\n  \
                 r.u = (uint64_t)(-(int64_t)(x > 0.0)) & UINT64_C(0x3FF0000000000000);\n  \
                 return r.d;\n}",
        doc: "`1` if `x > 0`, else `0` (so `step(0) = 0`; NaN gives 0)",
    },
    // pow's exponent goes through a volatile so that the C compiler never
    // sees a constant one: with -fno-math-errno GCC turns pow(x, 0.5) in a
    // vectorized loop into sqrt(x), which differs at -0 and -inf, and it may
    // fold other constant exponents into cheaper code; the evaluator calls
    // pow.
    BlackBox {
        name: "pow",
        param: Some("exponent"),
        check_param: any_param,
        value: pow,
        derivative: |x, k, _| k * pow(x, k - 1.0),
        c_body: "{ volatile double e = k; return pow(x, e); }",
        doc: "`x^k`, as C99 `pow` (a negative base with an integer `k` included)",
    },
    BlackBox {
        name: "dtanh",
        param: None,
        check_param: any_param,
        value: |x, _| dtanh(x),
        derivative: |x, _, v| -2.0 * x.tanh() * v,
        c_body: "{ double t = tanh(x); return 1.0 - t * t; }",
        doc: "`1 - tanh(x)^2`, the derivative of `tanh`",
    },
    BlackBox {
        name: "dsigmoid",
        param: None,
        check_param: any_param,
        value: |x, _| dsigmoid(x),
        derivative: |x, _, v| v * (1.0 - 2.0 * sigmoid(x)),
        c_body: "{ double v = atlh_sigmoid(x); return v * (1.0 - v); }",
        doc: "`s(1 - s)` with `s = sigmoid(x)`, the derivative of `sigmoid`",
    },
    BlackBox {
        name: "dsqrt",
        param: None,
        check_param: any_param,
        value: |x, _| dsqrt(x),
        derivative: |x, _, _| -0.25 * recip(x * sqrt(x)),
        c_body: "{ return 0.5 * atlh_recip(atlh_sqrt(x)); }",
        doc: "`1/(2 sqrt(x))`, the derivative of `sqrt`",
    },
    BlackBox {
        name: "drecip",
        param: None,
        check_param: any_param,
        value: |x, _| drecip(x),
        derivative: |x, _, _| {
            let r = recip(x);
            2.0 * r * r * r
        },
        c_body: "{ double r = atlh_recip(x); return -(r * r); }",
        doc: "`-1/x^2`, the derivative of `recip`",
    },
    BlackBox {
        name: "dcos",
        param: None,
        check_param: any_param,
        value: |x, _| -sin(x),
        derivative: |x, _, _| -cos(x),
        c_body: "{ return -atlh_sin(x); }",
        doc: "`-sin(x)`, the derivative of `cos`",
    },
    BlackBox {
        name: "dpow",
        param: Some("exponent"),
        check_param: any_param,
        value: |x, k| k * pow(x, k - 1.0),
        derivative: |x, k, _| k * (k - 1.0) * pow(x, k - 2.0),
        c_body: "{ volatile double e = k - 1.0; return k * pow(x, e); }",
        doc: "`k x^(k-1)`, the derivative of `(pow x k)`",
    },
    BlackBox {
        name: "lgamma",
        param: None,
        check_param: any_param,
        value: |x, _| lgamma(x),
        derivative: |x, _, _| polygamma(x, 0.0),
        c_body: "{ extern double lgamma_r(double, int *); int s; return lgamma_r(x, &s); }",
        doc: "`ln abs(Γ(x))`, as glibc's `lgamma`; `+inf` at `0, -1, -2, ...` and at `±inf`",
    },
    BlackBox {
        name: "polygamma",
        param: Some("order"),
        check_param: |k| {
            if (0.0..=POLYGAMMA_MAX_ORDER).contains(&k) && k == k.floor() {
                Ok(())
            } else {
                Err("an integer from 0 to 100")
            }
        },
        value: polygamma,
        derivative: |x, k, _| polygamma(x, k + 1.0),
        c_body: POLYGAMMA_C,
        doc: "`ψ⁽ᵏ⁾(x)`, the `k`-th derivative of `digamma` (`k` from 0 to 100); at `0, -1, -2, ...` \
              `+inf` for odd `k`, NaN for even `k`; NaN at `-inf`",
    },
    BlackBox {
        name: "digamma",
        param: None,
        check_param: any_param,
        value: |x, _| polygamma(x, 0.0),
        derivative: |x, _, _| polygamma(x, 1.0),
        c_body: "{ return atlh_polygamma(x, 0.0); }",
        doc: "`ψ(x) = Γ'(x)/Γ(x)`, the derivative of `lgamma` (`(polygamma x 0)`); NaN at \
              `0, -1, -2, ...` and `-inf`, `+inf` at `+inf`",
    },
];

/// [`BlackBox::check_param`] of a box that takes any parameter (or none).
fn any_param(_: f64) -> Result<(), &'static str> {
    Ok(())
}

/// The C definition of `polygamma` (see [`polygamma`]): the same
/// operations in the same order.
const POLYGAMMA_C: &str = "{\n\
  static const double B[10] = {1.0 / 6.0, -1.0 / 30.0, 1.0 / 42.0, -1.0 / 30.0, 5.0 / 66.0,\n\
    -691.0 / 2730.0, 7.0 / 6.0, -3617.0 / 510.0, 43867.0 / 798.0, -174611.0 / 330.0};\n\
  if (!(k >= 0.0 && k <= 100.0) || k != floor(k)) return NAN;\n\
  int n = (int)k;\n\
  if (isnan(x) || x == -INFINITY) return NAN;\n\
  if (x <= 0.0 && x == floor(x)) return n % 2 == 1 ? INFINITY : NAN;\n\
  if (x < 0.0) {\n\
    const double pi = 3.141592653589793;\n\
    double c = 1.0 / tan(pi * x), a[103] = {0.0}, b[103] = {0.0};\n\
    a[1] = 1.0;\n\
    for (int j = 0; j < n; j++) {\n\
      for (int i = 0; i <= j + 2; i++) {\n\
        double up = (double)(i + 1) * a[i + 1];\n\
        double down = i >= 1 ? ((double)i - 1.0) * a[i - 1] : 0.0;\n\
        b[i] = -(up + down);\n\
      }\n\
      for (int i = 0; i <= j + 2; i++) a[i] = b[i];\n\
    }\n\
    double p = a[n + 1], pp = pi;\n\
    for (int i = n; i >= 0; i--) p = p * c + a[i];\n\
    for (int j = 0; j < n; j++) pp *= pi;\n\
    double refl = atlh_polygamma(1.0 - x, k);\n\
    return (n % 2 == 0 ? refl : -refl) - pp * p;\n\
  }\n\
  double fact = 1.0;\n\
  for (int j = 1; j <= n; j++) fact *= (double)j;\n\
  double sign = n % 2 == 0 ? -1.0 : 1.0, lim = 10.0 + (double)n, acc = 0.0;\n\
  while (x < lim) {\n\
    double p = x;\n\
    for (int j = 0; j < n; j++) p *= x;\n\
    acc += 1.0 / p;\n\
    x += 1.0;\n\
  }\n\
  double z = 1.0 / x, z2 = z * z, tail;\n\
  if (n == 0) {\n\
    double r = 0.5 * z2, s = B[0] * r;\n\
    for (int j = 1; j < 10; j++) {\n\
      double m = 2.0 * (double)(j + 1);\n\
      r = r * (m - 2.0) / m * z2;\n\
      s += B[j] * r;\n\
    }\n\
    tail = log(x) - 0.5 * z - s;\n\
  } else {\n\
    double nf = (double)n, zn = 1.0;\n\
    for (int j = 0; j < n; j++) zn *= z;\n\
    double r = fact / nf * zn, s = r + 0.5 * fact * (zn * z);\n\
    for (int j = 0; j < 10; j++) {\n\
      double m = 2.0 * (double)(j + 1);\n\
      r = r * ((m + nf - 2.0) * (m + nf - 1.0)) / ((m - 1.0) * m) * z2;\n\
      s += B[j] * r;\n\
    }\n\
    tail = sign * s;\n\
  }\n\
  return sign * fact * acc + tail;\n\
}";

/// A black box as called: its entry in [`BLACK_BOXES`] and, for a box with
/// a parameter, the constant given. Ordered by the table's order, then by
/// the parameter.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Func {
    index: u8,
    param: Option<Real>,
}

impl Func {
    /// The black box `name` with parameter `k` (`Some` exactly for a box
    /// that takes one): the function of a call written as its name and
    /// arguments, as the e-graph's call nodes are.
    pub fn from_name(name: &str, k: Option<f64>) -> Option<Func> {
        let index = BLACK_BOXES.iter().position(|b| b.name == name)?;
        (BLACK_BOXES[index].param.is_some() == k.is_some()).then_some(Func {
            index: index as u8,
            param: k.map(Real),
        })
    }

    /// The black box `name` of no parameter, if there is one.
    pub fn unary(name: &str) -> Option<Func> {
        Func::from_name(name, None)
    }

    /// The black box `name` with parameter `k`, if `name` takes one.
    pub fn with_exponent(name: &str, k: f64) -> Option<Func> {
        Func::from_name(name, Some(k))
    }

    /// The black box `name` of no parameter; panics if there is none (for
    /// code that names a box it builds, as the division sugar's `recip`).
    pub fn named(name: &str) -> Func {
        Func::unary(name).unwrap_or_else(|| panic!("no black box '{name}'"))
    }

    /// Every black box's name, in the table's order.
    pub fn names() -> impl Iterator<Item = &'static str> {
        BLACK_BOXES.iter().map(|b| b.name)
    }

    /// Is `name` a black box's name (of either arity)?
    pub fn is_name(name: &str) -> bool {
        Func::names().any(|n| n == name)
    }

    /// What the constant parameter of the black box `name` is, if `name`
    /// takes one.
    pub fn param_of(name: &str) -> Option<&'static str> {
        BLACK_BOXES.iter().find(|b| b.name == name)?.param
    }

    /// Its entry in the table.
    pub fn spec(self) -> &'static BlackBox {
        &BLACK_BOXES[self.index as usize]
    }

    pub fn name(self) -> &'static str {
        self.spec().name
    }

    /// The constant parameter, for a box that takes one.
    pub fn exponent(self) -> Option<Real> {
        self.param
    }

    /// The value at `x`.
    pub fn apply(self, x: f64) -> f64 {
        (self.spec().value)(x, self.k())
    }

    /// The derivative at `x`, given `fx = self.apply(x)`.
    pub fn derivative(self, x: f64, fx: f64) -> f64 {
        (self.spec().derivative)(x, self.k(), fx)
    }

    fn k(self) -> f64 {
        self.param.map_or(0.0, |k| k.0)
    }
}

impl fmt::Debug for Func {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self.param {
            Some(k) => write!(f, "{}({})", self.name(), k),
            None => write!(f, "{}", self.name()),
        }
    }
}

/// The C definitions of every black box, in the table's order (a box may
/// call the ones before it), each prefixed by `storage` (the prelude's
/// `ATL_BB`).
pub fn c_definitions(storage: &str) -> String {
    let mut out = String::new();
    for b in BLACK_BOXES {
        let k = if b.param.is_some() { ", double k" } else { "" };
        out += &format!(
            "{storage} double atlh_{}(double x{k}) {}\n",
            b.name, b.c_body
        );
    }
    out
}

/// The rows of the reference's table of black boxes (`docs/language.md`,
/// "Black boxes"): each box's form and what it computes, in the table's
/// order; `derivative` gives the last column (the rule file's entry).
pub fn reference_rows(derivative: impl Fn(&BlackBox) -> String) -> String {
    let mut out = String::new();
    for b in BLACK_BOXES {
        let form = match b.param {
            Some(p) => format!("`({} x k)`, `k` a constant {p}", b.name),
            None => format!("`({} x)`", b.name),
        };
        out += &format!("| {form} | {} | {} |\n", b.doc, derivative(b));
    }
    out
}

// -- the functions, where they take more than one line ------------------------

fn exp(x: f64) -> f64 {
    x.exp()
}

fn log(x: f64) -> f64 {
    if x > 0.0 {
        x.ln()
    } else if x == 0.0 {
        f64::NEG_INFINITY
    } else {
        f64::NAN
    }
}

fn sin(x: f64) -> f64 {
    if x.is_finite() {
        x.sin()
    } else {
        f64::NAN
    }
}

fn cos(x: f64) -> f64 {
    if x.is_finite() {
        x.cos()
    } else {
        f64::NAN
    }
}

fn sqrt(x: f64) -> f64 {
    if x >= 0.0 {
        x.sqrt()
    } else {
        f64::NAN
    }
}

fn recip(x: f64) -> f64 {
    if x == 0.0 {
        f64::INFINITY.copysign(x)
    } else {
        1.0 / x
    }
}

fn sigmoid(x: f64) -> f64 {
    if x >= 0.0 {
        1.0 / (1.0 + exp(-x))
    } else {
        let e = exp(x);
        e / (1.0 + e)
    }
}

fn relu(x: f64) -> f64 {
    if x > 0.0 {
        x
    } else {
        0.0
    }
}

fn step(x: f64) -> f64 {
    if x > 0.0 {
        1.0
    } else {
        0.0
    }
}

/// C99 `pow`: `pow(x, 0) = 1` and `pow(1, y) = 1` even for NaN, a negative
/// base with a non-integer exponent is NaN, `pow(±0, k < 0)` is `±inf` for odd
/// integer `k` and `+inf` otherwise, overflow is `±inf`.
fn pow(x: f64, k: f64) -> f64 {
    x.powf(k)
}

fn dtanh(x: f64) -> f64 {
    let t = x.tanh();
    1.0 - t * t
}

fn dsigmoid(x: f64) -> f64 {
    let v = sigmoid(x);
    v * (1.0 - v)
}

fn dsqrt(x: f64) -> f64 {
    0.5 * recip(sqrt(x))
}

fn drecip(x: f64) -> f64 {
    let r = recip(x);
    -(r * r)
}

/// `ln abs(Γ(x))`, glibc's `lgamma_r`, the function the C code calls too:
/// `+inf` at the poles `0, -1, -2, ...` and at `±inf`.
fn lgamma(x: f64) -> f64 {
    extern "C" {
        fn lgamma_r(x: f64, sign: *mut std::os::raw::c_int) -> f64;
    }
    let mut sign = 0;
    // SAFETY: lgamma_r reads a double and writes one int through a valid
    // pointer.
    unsafe { lgamma_r(x, &mut sign) }
}

/// The largest order of `polygamma`.
pub const POLYGAMMA_MAX_ORDER: f64 = 100.0;

/// Bernoulli numbers `B_2 .. B_20`, for the asymptotic series.
const BERNOULLI: [f64; 10] = [
    1.0 / 6.0,
    -1.0 / 30.0,
    1.0 / 42.0,
    -1.0 / 30.0,
    5.0 / 66.0,
    -691.0 / 2730.0,
    7.0 / 6.0,
    -3617.0 / 510.0,
    43867.0 / 798.0,
    -174611.0 / 330.0,
];

/// `ψ⁽ⁿ⁾(x)`, the `n`-th derivative of the digamma function `ψ = Γ'/Γ`, for
/// an integer order `0 <= n <= 100` (NaN for another order). At the poles
/// `0, -1, -2, ...` it is `+inf` for odd `n` and NaN for even `n` (whose
/// infinities differ in sign on the two sides); `ψ(+inf) = +inf`, `ψ⁽ⁿ⁾(+inf)
/// = ±0` for `n >= 1`, NaN at `-inf`. A negative `x` is reflected:
/// `ψ⁽ⁿ⁾(x) = (-1)^n ψ⁽ⁿ⁾(1-x) - π^(n+1) P_n(cot πx)`, where `P_0(c) = c`
/// and `P_(j+1)(c) = -(1+c²) P_j'(c)` (the derivatives of `cot`). The C
/// definition is the same computation, operation for operation.
fn polygamma(x: f64, k: f64) -> f64 {
    if !(0.0..=POLYGAMMA_MAX_ORDER).contains(&k) || k != k.floor() {
        return f64::NAN;
    }
    let n = k as i32;
    if x.is_nan() || x == f64::NEG_INFINITY {
        return f64::NAN;
    }
    if x <= 0.0 && x == x.floor() {
        return if n % 2 == 1 { f64::INFINITY } else { f64::NAN };
    }
    if x >= 0.0 {
        return polygamma_positive(x, n);
    }
    let pi = std::f64::consts::PI;
    let c = 1.0 / (pi * x).tan();
    let (mut a, mut b) = ([0.0f64; 103], [0.0f64; 103]);
    a[1] = 1.0;
    for j in 0..n as usize {
        for i in 0..=j + 2 {
            let up = (i + 1) as f64 * a[i + 1];
            let down = if i >= 1 {
                (i as f64 - 1.0) * a[i - 1]
            } else {
                0.0
            };
            b[i] = -(up + down);
        }
        a[..=j + 2].copy_from_slice(&b[..=j + 2]);
    }
    let (mut p, mut pp) = (a[n as usize + 1], pi);
    for i in (0..=n as usize).rev() {
        p = p * c + a[i];
    }
    for _ in 0..n {
        pp *= pi;
    }
    let refl = polygamma(1.0 - x, k);
    (if n % 2 == 0 { refl } else { -refl }) - pp * p
}

/// `ψ⁽ⁿ⁾(x)` for `x > 0`: the recurrence `ψ⁽ⁿ⁾(x) = ψ⁽ⁿ⁾(x+1) + (-1)^(n+1)
/// n!/x^(n+1)` up to `x >= 10 + n`, then the asymptotic series (to `B_20`).
fn polygamma_positive(x: f64, n: i32) -> f64 {
    let mut x = x;
    let mut fact = 1.0;
    for j in 1..=n {
        fact *= j as f64;
    }
    let sign = if n % 2 == 0 { -1.0 } else { 1.0 };
    let lim = 10.0 + n as f64;
    let mut acc = 0.0;
    while x < lim {
        let mut p = x;
        for _ in 0..n {
            p *= x;
        }
        acc += 1.0 / p;
        x += 1.0;
    }
    let z = 1.0 / x;
    let z2 = z * z;
    let tail = if n == 0 {
        // ln x - z/2 - sum B_2k z^2k / 2k
        let mut r = 0.5 * z2;
        let mut s = BERNOULLI[0] * r;
        for (j, b) in BERNOULLI.iter().enumerate().skip(1) {
            let m = 2.0 * (j + 1) as f64;
            r = r * (m - 2.0) / m * z2;
            s += b * r;
        }
        x.ln() - 0.5 * z - s
    } else {
        // (-1)^(n+1) [(n-1)! z^n + n! z^(n+1) / 2 + sum B_2k (2k+n-1)!/(2k)! z^(2k+n)]
        let nf = n as f64;
        let mut zn = 1.0;
        for _ in 0..n {
            zn *= z;
        }
        let mut r = fact / nf * zn;
        let mut s = r + 0.5 * fact * (zn * z);
        for (j, b) in BERNOULLI.iter().enumerate() {
            let m = 2.0 * (j + 1) as f64;
            r = r * ((m + nf - 2.0) * (m + nf - 1.0)) / ((m - 1.0) * m) * z2;
            s += b * r;
        }
        sign * s
    };
    sign * fact * acc + tail
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::f64::consts::PI;

    const INF: f64 = f64::INFINITY;

    fn ap(name: &str, x: f64) -> f64 {
        Func::named(name).apply(x)
    }

    fn der(name: &str, x: f64, fx: f64) -> f64 {
        Func::named(name).derivative(x, fx)
    }

    fn pow(k: f64) -> Func {
        Func::with_exponent("pow", k).unwrap()
    }

    fn dpow(k: f64) -> Func {
        Func::with_exponent("dpow", k).unwrap()
    }

    fn polygamma(k: f64) -> Func {
        Func::with_exponent("polygamma", k).unwrap()
    }

    #[test]
    fn gamma_functions_at_special_values() {
        let euler = 0.5772156649015329;
        assert_eq!(ap("lgamma", 1.0), 0.0);
        assert_eq!(ap("lgamma", 2.0), 0.0);
        assert_eq!(ap("lgamma", 0.0), INF);
        assert_eq!(ap("lgamma", -3.0), INF);
        assert_eq!(ap("lgamma", -INF), INF);
        assert_eq!(ap("lgamma", INF), INF);
        assert!(ap("lgamma", f64::NAN).is_nan());
        assert!((ap("digamma", 1.0) + euler).abs() < 1e-15);
        assert!((polygamma(1.0).apply(1.0) - PI * PI / 6.0).abs() < 1e-15);
        // psi(1/2) = -euler - 2 ln 2, psi(-1/2) = psi(1/2) + 2
        let half = -euler - 2.0 * 2f64.ln();
        assert!((ap("digamma", 0.5) - half).abs() < 1e-14);
        assert!((ap("digamma", -0.5) - (half + 2.0)).abs() < 1e-14);
        // psi_1(-1/2) = pi^2/2 + 4
        assert!((polygamma(1.0).apply(-0.5) - (PI * PI / 2.0 + 4.0)).abs() < 1e-13);
        for x in [0.0, -0.0, -1.0, -7.0, -INF, f64::NAN] {
            assert!(ap("digamma", x).is_nan(), "digamma({x})");
            assert!(polygamma(2.0).apply(x).is_nan(), "polygamma({x}, 2)");
        }
        assert_eq!(polygamma(1.0).apply(0.0), INF);
        assert_eq!(polygamma(3.0).apply(-2.0), INF);
        assert_eq!(ap("digamma", INF), INF);
        assert_eq!(polygamma(1.0).apply(INF).to_bits(), 0.0f64.to_bits());
        assert_eq!(polygamma(2.0).apply(INF).to_bits(), (-0.0f64).to_bits());
        assert_eq!(ap("digamma", 5e-324), -INF);
        for k in [0.5, -1.0, 101.0, f64::NAN] {
            assert!(Func::with_exponent("polygamma", k)
                .unwrap()
                .apply(2.0)
                .is_nan());
            assert!((polygamma(1.0).spec().check_param)(k).is_err());
        }
    }

    /// Every black box, those with a parameter at several values.
    fn all_funcs() -> Vec<Func> {
        let mut v = vec![];
        for b in BLACK_BOXES {
            match b.param {
                None => v.push(Func::named(b.name)),
                Some(_) => v.extend(
                    [3.0, 2.0, 0.5, -2.0, -1.5, 1.0, 0.0]
                        .into_iter()
                        .filter(|&k| (b.check_param)(k).is_ok())
                        .map(|k| Func::with_exponent(b.name, k).unwrap()),
                ),
            }
        }
        v
    }

    #[test]
    fn special_values() {
        assert_eq!(ap("recip", 0.0), INF);
        assert_eq!(ap("recip", -0.0), -INF);
        assert!(ap("log", -1.0).is_nan());
        assert_eq!(ap("log", 0.0), -INF);
        assert_eq!(ap("log", -0.0), -INF);
        assert!(ap("sqrt", -1.0).is_nan());
        assert_eq!(ap("sqrt", 4.0), 2.0);
        assert!(ap("sin", INF).is_nan());
        assert!(ap("cos", -INF).is_nan());
        assert_eq!(ap("exp", 1000.0), INF);
        assert_eq!(ap("exp", -INF), 0.0);
        assert_eq!(ap("relu", -2.0), 0.0);
        assert_eq!(ap("relu", 2.5), 2.5);
        assert_eq!(ap("relu", f64::NAN), 0.0);
        assert_eq!(ap("step", 0.0), 0.0);
        assert_eq!(ap("step", 1e-300), 1.0);
        assert_eq!(ap("step", f64::NAN), 0.0);
        assert_eq!(ap("sigmoid", 0.0), 0.5);
        assert_eq!(ap("sigmoid", -1000.0), 0.0);
        assert_eq!(ap("sigmoid", 1000.0), 1.0);
        assert!(ap("sigmoid", f64::NAN).is_nan());
        assert_eq!(ap("dsqrt", 0.0), INF);
        assert_eq!(ap("drecip", 0.0), -INF);
        assert_eq!(ap("dcos", 0.0), -0.0);
        assert_eq!(ap("dtanh", 0.0), 1.0);
        assert_eq!(ap("dsigmoid", 0.0), 0.25);
    }

    #[test]
    fn pow_is_c99_pow() {
        let p = |x: f64, k: f64| pow(k).apply(x);
        assert_eq!(p(-2.0, 3.0), -8.0);
        assert_eq!(p(-2.0, 2.0), 4.0);
        assert_eq!(p(-2.0, -1.0), -0.5);
        assert!(p(-8.0, 1.0 / 3.0).is_nan());
        assert_eq!(p(0.0, -1.0), INF);
        assert_eq!(p(-0.0, -1.0), -INF);
        assert_eq!(p(-0.0, -2.0), INF);
        assert_eq!(p(0.0, -0.5), INF);
        assert_eq!(p(f64::NAN, 0.0), 1.0);
        assert_eq!(p(1.0, f64::NAN), 1.0);
        assert_eq!(p(10.0, 400.0), INF);
        assert_eq!(p(-10.0, 401.0), -INF);
        assert_eq!(p(-10.0, 400.0), INF);
        assert_eq!(p(0.0, 0.0), 1.0);
        assert_eq!(p(2.0, 0.5), 2f64.sqrt());
        assert_eq!(dpow(3.0).apply(2.0), 12.0);
        // 0 * pow(0, -1) = 0 * inf, as in the reference.
        assert!(dpow(0.0).apply(0.0).is_nan());
    }

    #[test]
    fn derivatives_of_special_points() {
        assert_eq!(der("relu", 0.0, 0.0), 0.0);
        assert_eq!(der("relu", 1.0, 1.0), 1.0);
        assert_eq!(der("step", 1.0, 1.0), 0.0);
        assert_eq!(der("log", 0.0, -INF), INF);
        assert_eq!(der("sqrt", 0.0, 0.0), INF);
        assert_eq!(der("recip", 2.0, 0.5), -0.25);
    }

    /// Every derivative agrees with a central finite difference of `apply`.
    #[test]
    fn derivatives_match_finite_differences() {
        let points: [f64; 8] = [-1.7, -0.9, -0.3, 0.2, 0.45, 0.8, 1.3, 2.6];
        for f in all_funcs() {
            for &x in &points {
                // Stay inside the smooth part of the domain.
                let needs_positive = ["log", "sqrt", "dsqrt", "pow", "dpow"].contains(&f.name());
                if needs_positive && x <= 0.0 {
                    continue;
                }
                let h = 1e-6 * x.abs().max(1.0);
                let fd = (f.apply(x + h) - f.apply(x - h)) / (2.0 * h);
                let d = f.derivative(x, f.apply(x));
                let tol = 1e-5 * d.abs().max(1.0);
                assert!(
                    (fd - d).abs() <= tol,
                    "{}^{:?} at {x}: derivative {d}, finite difference {fd}",
                    f.name(),
                    f.exponent()
                );
            }
        }
        // Negative bases with integer exponents are smooth too.
        for k in [2.0, 3.0, -1.0, -2.0] {
            let (f, x) = (pow(k), -1.3);
            let h = 1e-6;
            let fd = (f.apply(x + h) - f.apply(x - h)) / (2.0 * h);
            assert!((fd - f.derivative(x, f.apply(x))).abs() < 1e-5);
        }
    }

    /// The derivative black boxes are the derivatives of their functions.
    #[test]
    fn derivative_boxes_are_derivatives() {
        let pairs = [
            (Func::named("tanh"), Func::named("dtanh")),
            (Func::named("sigmoid"), Func::named("dsigmoid")),
            (Func::named("sqrt"), Func::named("dsqrt")),
            (Func::named("recip"), Func::named("drecip")),
            (Func::named("cos"), Func::named("dcos")),
            (pow(2.5), dpow(2.5)),
            (Func::named("lgamma"), Func::named("digamma")),
            (Func::named("digamma"), polygamma(1.0)),
            (polygamma(2.0), polygamma(3.0)),
        ];
        for (f, df) in pairs {
            for x in [0.3, 1.1, 2.0] {
                assert_eq!(f.derivative(x, f.apply(x)), df.apply(x), "{}", f.name());
            }
        }
    }
}

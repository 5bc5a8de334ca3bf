//! The black-box scalar functions and their derivatives, as total IEEE
//! functions.
//!
//! They follow the conformance reference (`_bb_fn` and `_bb_deriv` of
//! `atl_ref.py`) operation for operation, so results agree bit for bit:
//! out-of-domain arguments give `inf`/`NaN` instead of errors
//! (`recip(0) = inf`, `log(-1) = NaN`, `pow` as C99 `pow`, including a
//! negative base with an integer exponent); `relu(x) = x if x > 0 else 0` and
//! `step(x) = 1 if x > 0 else 0` (so `step(0) = 0`, and both map NaN to 0).
//! The derivative black boxes are `dtanh = 1 - tanh²`, `dsigmoid = s(1 - s)`,
//! `dsqrt = 1/(2√x)`, `drecip = -1/x²`, `dcos = -sin`, `dpow(x, k) = k x^(k-1)`,
//! each differentiable again.

use crate::front::ast::Func;

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

fn dcos(x: f64) -> f64 {
    -sin(x)
}

fn dpow(x: f64, k: f64) -> f64 {
    k * pow(x, k - 1.0)
}

/// The value of the black box `f` at `x`.
pub fn apply(f: Func, x: f64) -> f64 {
    match f {
        Func::Exp => exp(x),
        Func::Log => log(x),
        Func::Sin => sin(x),
        Func::Cos => cos(x),
        Func::Tanh => x.tanh(),
        Func::Sqrt => sqrt(x),
        Func::Recip => recip(x),
        Func::Sigmoid => sigmoid(x),
        Func::Relu => relu(x),
        Func::Step => step(x),
        Func::Pow(k) => pow(x, k.0),
        Func::DTanh => dtanh(x),
        Func::DSigmoid => dsigmoid(x),
        Func::DSqrt => dsqrt(x),
        Func::DRecip => drecip(x),
        Func::DCos => dcos(x),
        Func::DPow(k) => dpow(x, k.0),
    }
}

/// The derivative `f'(x)`, given `x` and `fx = f(x)` (reused where the
/// formula allows, exactly as the reference does).
pub fn derivative(f: Func, x: f64, fx: f64) -> f64 {
    let v = fx;
    match f {
        Func::Exp => v,
        Func::Log => recip(x),
        Func::Sin => cos(x),
        Func::Cos => -sin(x),
        Func::Tanh => 1.0 - v * v,
        Func::Sqrt => 0.5 * recip(v),
        Func::Recip => -(v * v),
        Func::Sigmoid => v * (1.0 - v),
        Func::Relu => step(x),
        Func::Step => 0.0,
        Func::Pow(k) => k.0 * pow(x, k.0 - 1.0),
        Func::DTanh => -2.0 * x.tanh() * v,
        Func::DSigmoid => v * (1.0 - 2.0 * sigmoid(x)),
        Func::DSqrt => -0.25 * recip(x * sqrt(x)),
        Func::DRecip => {
            let r = recip(x);
            2.0 * r * r * r
        }
        Func::DCos => -cos(x),
        Func::DPow(k) => k.0 * (k.0 - 1.0) * pow(x, k.0 - 2.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::front::ast::Real;

    const INF: f64 = f64::INFINITY;

    fn all_funcs() -> Vec<Func> {
        let mut v: Vec<Func> = [
            "exp", "log", "sin", "cos", "tanh", "sqrt", "recip", "sigmoid", "relu", "step",
            "dtanh", "dsigmoid", "dsqrt", "drecip", "dcos",
        ]
        .iter()
        .map(|n| Func::unary(n).unwrap())
        .collect();
        for k in [3.0, 2.0, 0.5, -2.0, -1.5, 1.0, 0.0] {
            v.push(Func::Pow(Real(k)));
            v.push(Func::DPow(Real(k)));
        }
        v
    }

    #[test]
    fn special_values() {
        assert_eq!(apply(Func::Recip, 0.0), INF);
        assert_eq!(apply(Func::Recip, -0.0), -INF);
        assert!(apply(Func::Log, -1.0).is_nan());
        assert_eq!(apply(Func::Log, 0.0), -INF);
        assert_eq!(apply(Func::Log, -0.0), -INF);
        assert!(apply(Func::Sqrt, -1.0).is_nan());
        assert_eq!(apply(Func::Sqrt, 4.0), 2.0);
        assert!(apply(Func::Sin, INF).is_nan());
        assert!(apply(Func::Cos, -INF).is_nan());
        assert_eq!(apply(Func::Exp, 1000.0), INF);
        assert_eq!(apply(Func::Exp, -INF), 0.0);
        assert_eq!(apply(Func::Relu, -2.0), 0.0);
        assert_eq!(apply(Func::Relu, 2.5), 2.5);
        assert_eq!(apply(Func::Relu, f64::NAN), 0.0);
        assert_eq!(apply(Func::Step, 0.0), 0.0);
        assert_eq!(apply(Func::Step, 1e-300), 1.0);
        assert_eq!(apply(Func::Step, f64::NAN), 0.0);
        assert_eq!(apply(Func::Sigmoid, 0.0), 0.5);
        assert_eq!(apply(Func::Sigmoid, -1000.0), 0.0);
        assert_eq!(apply(Func::Sigmoid, 1000.0), 1.0);
        assert!(apply(Func::Sigmoid, f64::NAN).is_nan());
        assert_eq!(apply(Func::DSqrt, 0.0), INF);
        assert_eq!(apply(Func::DRecip, 0.0), -INF);
        assert_eq!(apply(Func::DCos, 0.0), -0.0);
        assert_eq!(apply(Func::DTanh, 0.0), 1.0);
        assert_eq!(apply(Func::DSigmoid, 0.0), 0.25);
    }

    #[test]
    fn pow_is_c99_pow() {
        let p = |x: f64, k: f64| apply(Func::Pow(Real(k)), x);
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
        assert_eq!(apply(Func::DPow(Real(3.0)), 2.0), 12.0);
        // 0 * pow(0, -1) = 0 * inf, as in the reference.
        assert!(apply(Func::DPow(Real(0.0)), 0.0).is_nan());
    }

    #[test]
    fn derivatives_of_special_points() {
        assert_eq!(derivative(Func::Relu, 0.0, 0.0), 0.0);
        assert_eq!(derivative(Func::Relu, 1.0, 1.0), 1.0);
        assert_eq!(derivative(Func::Step, 1.0, 1.0), 0.0);
        assert_eq!(derivative(Func::Log, 0.0, -INF), INF);
        assert_eq!(derivative(Func::Sqrt, 0.0, 0.0), INF);
        assert_eq!(derivative(Func::Recip, 2.0, 0.5), -0.25);
    }

    /// Every derivative agrees with a central finite difference of `apply`.
    #[test]
    fn derivatives_match_finite_differences() {
        let points: [f64; 8] = [-1.7, -0.9, -0.3, 0.2, 0.45, 0.8, 1.3, 2.6];
        for f in all_funcs() {
            for &x in &points {
                // Stay inside the smooth part of the domain.
                let needs_positive = matches!(
                    f,
                    Func::Log | Func::Sqrt | Func::DSqrt | Func::Pow(_) | Func::DPow(_)
                );
                if needs_positive && x <= 0.0 {
                    continue;
                }
                let h = 1e-6 * x.abs().max(1.0);
                let fd = (apply(f, x + h) - apply(f, x - h)) / (2.0 * h);
                let d = derivative(f, x, apply(f, x));
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
            let (f, x) = (Func::Pow(Real(k)), -1.3);
            let h = 1e-6;
            let fd = (apply(f, x + h) - apply(f, x - h)) / (2.0 * h);
            assert!((fd - derivative(f, x, apply(f, x))).abs() < 1e-5);
        }
    }

    /// The derivative black boxes are the derivatives of their functions.
    #[test]
    fn derivative_boxes_are_derivatives() {
        let pairs = [
            (Func::Tanh, Func::DTanh),
            (Func::Sigmoid, Func::DSigmoid),
            (Func::Sqrt, Func::DSqrt),
            (Func::Recip, Func::DRecip),
            (Func::Cos, Func::DCos),
            (Func::Pow(Real(2.5)), Func::DPow(Real(2.5))),
        ];
        for (f, df) in pairs {
            for x in [0.3, 1.1, 2.0] {
                assert_eq!(derivative(f, x, apply(f, x)), apply(df, x), "{}", f.name());
            }
        }
    }
}

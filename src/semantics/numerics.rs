//! Exactly rounded sums and inner products (as Python's `math.fsum`), so
//! that derivative checks compare values, not rounding orders.

use super::value::Value;

// ---------------------------------------------------------------------------
// inner products

/// The flattened dot product `<a, b>`, summed exactly rounded (as Python's
/// `math.fsum`). A `Zero` on either side contributes `0 * x` for every real
/// `x` of the other (so `0 * inf` is NaN, as with explicit zeros). Values of
/// different shapes give NaN.
pub fn inner_product(a: &Value, b: &Value) -> f64 {
    fn leaves(v: &Value, out: &mut Vec<f64>) {
        match v {
            Value::Real(y) => out.push(0.0 * y),
            Value::Pair(a, b) => {
                leaves(a, out);
                leaves(b, out)
            }
            Value::Tensor(xs) => xs.iter().for_each(|x| leaves(x, out)),
            Value::Zero => {}
        }
    }
    fn products(a: &Value, b: &Value, out: &mut Vec<f64>) -> bool {
        match (a, b) {
            (Value::Real(x), Value::Real(y)) => {
                out.push(x * y);
                true
            }
            (Value::Zero, v) | (v, Value::Zero) => {
                leaves(v, out);
                true
            }
            (Value::Pair(a0, a1), Value::Pair(b0, b1)) => {
                products(a0, b0, out) && products(a1, b1, out)
            }
            (Value::Tensor(xs), Value::Tensor(ys)) => {
                xs.len() == ys.len() && xs.iter().zip(ys.iter()).all(|(x, y)| products(x, y, out))
            }
            _ => false,
        }
    }
    let mut out = vec![];
    if products(a, b, &mut out) {
        fsum(out)
    } else {
        f64::NAN
    }
}

/// Exactly rounded sum of floats (Shewchuk's algorithm as in CPython's
/// `math.fsum`). Non-finite summands give their IEEE sum; an intermediate
/// overflow of finite summands gives the plain floating-point sum.
pub fn fsum(xs: impl IntoIterator<Item = f64>) -> f64 {
    let mut partials: Vec<f64> = vec![];
    let mut special = 0.0_f64;
    let mut any_special = false;
    let mut plain = 0.0_f64;
    let mut overflow = false;
    for x0 in xs {
        plain += x0;
        if overflow {
            continue;
        }
        if !x0.is_finite() {
            special += x0;
            any_special = true;
            continue;
        }
        let mut x = x0;
        let mut i = 0;
        for j in 0..partials.len() {
            let mut y = partials[j];
            if x.abs() < y.abs() {
                std::mem::swap(&mut x, &mut y);
            }
            let hi = x + y;
            let lo = y - (hi - x);
            if lo != 0.0 {
                partials[i] = lo;
                i += 1;
            }
            x = hi;
        }
        partials.truncate(i);
        if x != 0.0 {
            if !x.is_finite() {
                overflow = true;
            } else {
                partials.push(x);
            }
        }
    }
    if any_special {
        return special;
    }
    if overflow {
        return plain;
    }
    let mut n = partials.len();
    let mut hi = 0.0;
    if n > 0 {
        n -= 1;
        hi = partials[n];
        let mut lo = 0.0;
        while n > 0 {
            let x = hi;
            n -= 1;
            let y = partials[n];
            hi = x + y;
            let yr = hi - x;
            lo = y - yr;
            if lo != 0.0 {
                break;
            }
        }
        // Round half to even when the rest of the partials push past a tie.
        if n > 0 && ((lo < 0.0 && partials[n - 1] < 0.0) || (lo > 0.0 && partials[n - 1] > 0.0)) {
            let y = lo * 2.0;
            let x = hi + y;
            let yr = x - hi;
            if y == yr {
                hi = x;
            }
        }
    }
    hi
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fsum_is_exact() {
        assert_eq!(fsum([1e100, 1.0, -1e100]), 1.0);
        assert_eq!(fsum([0.1; 10]), 1.0);
        assert_eq!(fsum([]), 0.0);
        assert!(fsum([f64::INFINITY, -f64::INFINITY]).is_nan());
        assert_eq!(fsum([f64::INFINITY, 1.0]), f64::INFINITY);
        assert_eq!(fsum([f64::MAX, f64::MAX]), f64::INFINITY);
        assert_eq!(fsum([1.0, 1e-16, 1e-16]), 1.0000000000000002);
    }
}

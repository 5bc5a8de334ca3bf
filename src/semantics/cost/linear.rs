//! Affine forms over loop slots (`Lin`), comparisons on them, and interval
//! narrowing: the arithmetic under every count.

use super::*;

/// `c + Σ k·slot`, terms sorted by slot, no zero coefficients.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(super) struct Lin {
    pub(super) c: i128,
    pub(super) t: Vec<(u32, i128)>,
}

impl Lin {
    pub(super) fn constant(c: i128) -> Lin {
        Lin { c, t: Vec::new() }
    }

    pub(super) fn is_const(&self) -> bool {
        self.t.is_empty()
    }

    pub(super) fn coeff(&self, s: u32) -> i128 {
        match self.t.binary_search_by_key(&s, |x| x.0) {
            Ok(i) => self.t[i].1,
            Err(_) => 0,
        }
    }

    pub(super) fn mentions(&self, s: u32) -> bool {
        self.t.binary_search_by_key(&s, |x| x.0).is_ok()
    }

    pub(super) fn without(&self, s: u32) -> Lin {
        Lin {
            c: self.c,
            t: self.t.iter().copied().filter(|x| x.0 != s).collect(),
        }
    }

    /// `self + k·o`
    pub(super) fn add_scaled(&self, k: i128, o: &Lin) -> Result<Lin> {
        let c = k
            .checked_mul(o.c)
            .and_then(|x| x.checked_add(self.c))
            .ok_or_else(overflow)?;
        let mut t = Vec::with_capacity(self.t.len() + o.t.len());
        let (mut i, mut j) = (0, 0);
        while i < self.t.len() || j < o.t.len() {
            let take_left = j >= o.t.len() || (i < self.t.len() && self.t[i].0 < o.t[j].0);
            let take_right = i >= self.t.len() || (j < o.t.len() && o.t[j].0 < self.t[i].0);
            if take_left {
                t.push(self.t[i]);
                i += 1;
            } else if take_right {
                let v = k.checked_mul(o.t[j].1).ok_or_else(overflow)?;
                if v != 0 {
                    t.push((o.t[j].0, v));
                }
                j += 1;
            } else {
                let v = k
                    .checked_mul(o.t[j].1)
                    .and_then(|x| x.checked_add(self.t[i].1))
                    .ok_or_else(overflow)?;
                if v != 0 {
                    t.push((self.t[i].0, v));
                }
                i += 1;
                j += 1;
            }
        }
        Ok(Lin { c, t })
    }

    pub(super) fn sub(&self, o: &Lin) -> Result<Lin> {
        self.add_scaled(-1, o)
    }

    pub(super) fn scale(&self, k: i128) -> Result<Lin> {
        Lin::default().add_scaled(k, self)
    }

    pub(super) fn add_const(&self, k: i128) -> Result<Lin> {
        Ok(Lin {
            c: self.c.checked_add(k).ok_or_else(overflow)?,
            t: self.t.clone(),
        })
    }

    /// Replace slot `s` by `by`.
    pub(super) fn substitute(&self, s: u32, by: &Lin) -> Result<Lin> {
        let k = self.coeff(s);
        if k == 0 {
            return Ok(self.clone());
        }
        self.without(s).add_scaled(k, by)
    }

    pub(super) fn eval(&self, env: &[i64]) -> Result<i128> {
        let mut v = self.c;
        for &(s, k) in &self.t {
            let x = env
                .get(s as usize)
                .copied()
                .ok_or_else(|| internal("slot"))?;
            v = k
                .checked_mul(x as i128)
                .and_then(|p| p.checked_add(v))
                .ok_or_else(overflow)?;
        }
        Ok(v)
    }

    /// `(coefficient of s, value of the rest)`.
    pub(super) fn eval_split(&self, s: u32, env: &[i64]) -> Result<(i128, i128)> {
        let mut v = self.c;
        let mut a = 0;
        for &(t, k) in &self.t {
            if t == s {
                a = k;
                continue;
            }
            let x = env
                .get(t as usize)
                .copied()
                .ok_or_else(|| internal("slot"))?;
            v = k
                .checked_mul(x as i128)
                .and_then(|p| p.checked_add(v))
                .ok_or_else(overflow)?;
        }
        Ok((a, v))
    }
}

/// `x op 0`
pub(super) fn holds(op: CmpOp, x: i128) -> bool {
    match op {
        CmpOp::Lt => x < 0,
        CmpOp::Le => x <= 0,
        CmpOp::Eq => x == 0,
        CmpOp::Gt => x > 0,
        CmpOp::Ge => x >= 0,
    }
}

pub(super) fn flip(op: CmpOp) -> CmpOp {
    match op {
        CmpOp::Lt => CmpOp::Gt,
        CmpOp::Le => CmpOp::Ge,
        CmpOp::Eq => CmpOp::Eq,
        CmpOp::Gt => CmpOp::Lt,
        CmpOp::Ge => CmpOp::Le,
    }
}

/// `ceil(a / b)` for `b > 0`.
pub(super) fn ceil_div(a: i128, b: i128) -> i128 {
    let q = a.div_euclid(b);
    if a.rem_euclid(b) != 0 {
        q + 1
    } else {
        q
    }
}

/// Narrow `[lo, hi]` to the integers `v` with `a·v + b op 0` (`a != 0`).
pub(super) fn narrow(op: CmpOp, a: i128, b: i128, lo: &mut i128, hi: &mut i128) -> Result<()> {
    let (a, b, op) = if a < 0 {
        (
            a.checked_neg().ok_or_else(overflow)?,
            b.checked_neg().ok_or_else(overflow)?,
            flip(op),
        )
    } else {
        (a, b, op)
    };
    // a·v op -b, a > 0
    let nb = b.checked_neg().ok_or_else(overflow)?;
    match op {
        CmpOp::Lt => {
            let m = nb.checked_sub(1).ok_or_else(overflow)?;
            *hi = (*hi).min(m.div_euclid(a));
        }
        CmpOp::Le => *hi = (*hi).min(nb.div_euclid(a)),
        CmpOp::Gt => {
            let m = nb.checked_add(1).ok_or_else(overflow)?;
            *lo = (*lo).max(ceil_div(m, a));
        }
        CmpOp::Ge => *lo = (*lo).max(ceil_div(nb, a)),
        CmpOp::Eq => {
            if nb.rem_euclid(a) == 0 {
                let q = nb.div_euclid(a);
                *lo = (*lo).max(q);
                *hi = (*hi).min(q);
            } else {
                *lo = 1;
                *hi = 0;
            }
        }
    }
    Ok(())
}

/// The values of slot `s` in `[0, n)` allowed by `cmps` (each `lin op 0`) at
/// `env`, as an inclusive interval (empty when `lo > hi`).
pub(super) fn interval(s: u32, n: i64, cmps: &[(CmpOp, Lin)], env: &[i64]) -> Result<(i128, i128)> {
    let (mut lo, mut hi) = (0i128, n as i128 - 1);
    for (op, l) in cmps {
        let (a, b) = l.eval_split(s, env)?;
        if a == 0 {
            if !holds(*op, b) {
                return Ok((1, 0));
            }
        } else {
            narrow(*op, a, b, &mut lo, &mut hi)?;
        }
        if lo > hi {
            return Ok((1, 0));
        }
    }
    Ok((lo, hi))
}

/// A comparison `a·v + r op 0` with `a = ±1` as bounds on `v`: pushes lower
/// bounds `L` (v >= L) and upper bounds `U` (v <= U).
pub(super) fn unit_bounds(
    op: CmpOp,
    a: i128,
    r: &Lin,
    lowers: &mut Vec<Lin>,
    uppers: &mut Vec<Lin>,
) -> Result<()> {
    if a == 1 {
        // v op -r
        let m = r.scale(-1)?;
        match op {
            CmpOp::Lt => uppers.push(m.add_const(-1)?),
            CmpOp::Le => uppers.push(m),
            CmpOp::Gt => lowers.push(m.add_const(1)?),
            CmpOp::Ge => lowers.push(m),
            CmpOp::Eq => {
                lowers.push(m.clone());
                uppers.push(m);
            }
        }
    } else {
        // -v + r op 0  <=>  v flip(op) r
        match op {
            CmpOp::Lt => lowers.push(r.add_const(1)?),
            CmpOp::Le => lowers.push(r.clone()),
            CmpOp::Gt => uppers.push(r.add_const(-1)?),
            CmpOp::Ge => uppers.push(r.clone()),
            CmpOp::Eq => {
                lowers.push(r.clone());
                uppers.push(r.clone());
            }
        }
    }
    Ok(())
}

/// Decide comparisons without slots; `false` if one fails.
pub(super) fn fold_closed(cmps: &mut Vec<(CmpOp, Lin)>) -> bool {
    let mut ok = true;
    cmps.retain(|(op, l)| {
        if l.is_const() {
            ok &= holds(*op, l.c);
            false
        } else {
            true
        }
    });
    ok
}

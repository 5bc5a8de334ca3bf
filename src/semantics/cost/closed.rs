//! Closed-form counting of the innermost two loop variables of a plan: the
//! lattice points of a polygon, instead of enumerating the outer variable.
//!
//! With the outer variables fixed, the innermost enumerated variable `x`
//! ranges over an interval and the counted variable `y` over
//! `[max_i ceil(l_i(x)), min_j floor(u_j(x))]`, each `l_i`, `u_j` a line
//! `(p·x + q) / d`. The count is `Σ_x max(0, U(x) - L(x) + 1)`. Cutting the
//! range of `x` where two lower (or two upper) lines cross leaves pieces on
//! which one line is the maximum and one the minimum; on a piece the count
//! is positive exactly where `u(x) >= l(x)` (a half-line), and there it is
//! `Σ floor(u) - Σ ceil(l) + #x`, each sum of floors a
//! [`floor_sum`] in `O(log)` steps. So a triangular, banded or strided
//! nest (`2^k·c + r < n`) at size 10^7 counts in microseconds.

use super::*;

/// The line `(p·x + q) / d`, `d > 0`.
#[derive(Clone, Copy, Debug)]
struct Line {
    p: i128,
    q: i128,
    d: i128,
}

impl Line {
    /// The sign of `self(x) - o(x)` (real values).
    fn cmp_at(&self, o: &Line, x: i128) -> Option<Ordering> {
        let a = self
            .p
            .checked_mul(x)?
            .checked_add(self.q)?
            .checked_mul(o.d)?;
        let b = o.p.checked_mul(x)?.checked_add(o.q)?.checked_mul(self.d)?;
        Some(a.cmp(&b))
    }

    /// `self - o` as `A·x + B` up to the positive factor `1 / (d·o.d)`.
    fn minus(&self, o: &Line) -> Option<(i128, i128)> {
        let a = self
            .p
            .checked_mul(o.d)?
            .checked_sub(o.p.checked_mul(self.d)?)?;
        let b = self
            .q
            .checked_mul(o.d)?
            .checked_sub(o.q.checked_mul(self.d)?)?;
        Some((a, b))
    }

    /// `Σ_{x=s..=t} floor(self(x))`.
    fn floor_sum(&self, s: i128, t: i128) -> Option<i128> {
        floor_sum(
            t - s + 1,
            self.d,
            self.p,
            self.p.checked_mul(s)?.checked_add(self.q)?,
        )
    }

    /// `Σ_{x=s..=t} ceil(self(x))`.
    fn ceil_sum(&self, s: i128, t: i128) -> Option<i128> {
        let neg = Line {
            p: self.p.checked_neg()?,
            q: self.q.checked_neg()?,
            d: self.d,
        };
        neg.floor_sum(s, t)?.checked_neg()
    }
}

use std::cmp::Ordering;

/// `Σ_{i=0}^{n-1} floor((a·i + b) / m)`, `m > 0`, `n >= 0` (`None` on
/// overflow): the classic Euclid-like reduction.
pub(super) fn floor_sum(n: i128, m: i128, a: i128, b: i128) -> Option<i128> {
    if n <= 0 {
        return Some(0);
    }
    let tri = n.checked_mul(n - 1)? / 2;
    let mut ans: i128 = 0;
    let (mut a, mut b) = (a, b);
    if a < 0 || a >= m {
        let (q, r) = (a.div_euclid(m), a.rem_euclid(m));
        ans = ans.checked_add(tri.checked_mul(q)?)?;
        a = r;
    }
    if b < 0 || b >= m {
        let (q, r) = (b.div_euclid(m), b.rem_euclid(m));
        ans = ans.checked_add(n.checked_mul(q)?)?;
        b = r;
    }
    // now 0 <= a, b < m
    let (mut n, mut m) = (n, m);
    loop {
        if a >= m {
            ans = ans.checked_add((n.checked_mul(n - 1)? / 2).checked_mul(a / m)?)?;
            a %= m;
        }
        if b >= m {
            ans = ans.checked_add(n.checked_mul(b / m)?)?;
            b %= m;
        }
        let y_max = a.checked_mul(n)?.checked_add(b)?;
        if y_max < m {
            return Some(ans);
        }
        n = y_max / m;
        b = y_max % m;
        std::mem::swap(&mut m, &mut a);
    }
}

/// Lines bounding `y`: few per polygon (a stencil's window and the
/// array's edges), kept inline: counting calls this once per enumerated
/// outer value, so it must not allocate.
type Lines = SmallVec<[Line; 8]>;

/// The bounds on `y` of the comparisons `cons` (each `Ge` or `Eq`,
/// mentioning `y`) as lines in `x`, the other slots read from `env`, and
/// the comparisons that do not mention `y` narrowed into `[lo, hi]`, the
/// range of `x`; `None` when a comparison does not have that shape.
fn bounds(
    cons: &[Con],
    (y, ny): (Slot, i64),
    (x, lo, hi): (Slot, &mut i128, &mut i128),
    env: &[i64],
    (lower, upper): (&mut Lines, &mut Lines),
) -> Option<()> {
    lower.push(Line { p: 0, q: 0, d: 1 });
    upper.push(Line {
        p: 0,
        q: ny as i128 - 1,
        d: 1,
    });
    // sign·f >= 0
    let mut add = |f: &LinForm<Slot>, sign: i128| -> Option<()> {
        let (mut a, mut b, mut k) = (0i128, 0i128, f.constant.checked_mul(sign)?);
        for &(v, coef) in f.terms() {
            let coef = coef.checked_mul(sign)?;
            if v == y {
                a = coef;
            } else if v == x {
                b = coef;
            } else {
                k = k.checked_add(coef.checked_mul(*env.get(v as usize)? as i128)?)?;
            }
        }
        // a·y + b·x + k >= 0
        match (a.cmp(&0), b.cmp(&0)) {
            (Ordering::Greater, _) => lower.push(Line {
                p: b.checked_neg()?,
                q: k.checked_neg()?,
                d: a,
            }),
            (Ordering::Less, _) => upper.push(Line {
                p: b,
                q: k,
                d: a.checked_neg()?,
            }),
            // b·x + k >= 0, on x alone
            (Ordering::Equal, Ordering::Greater) => *lo = (*lo).max(ceil_div(k.checked_neg()?, b)),
            (Ordering::Equal, Ordering::Less) => *hi = (*hi).min(floor_div(k, b.checked_neg()?)),
            (Ordering::Equal, Ordering::Equal) if k < 0 => (*lo, *hi) = (1, 0),
            (Ordering::Equal, Ordering::Equal) => {}
        }
        Some(())
    };
    for c in cons {
        match c {
            Constraint::Ge(f) => add(f, 1)?,
            // f == 0 as f >= 0 and -f >= 0
            Constraint::Eq(f) => {
                add(f, 1)?;
                add(f, -1)?;
            }
            Constraint::Divides(..) => return None,
        }
    }
    Some(())
}

/// Where two lines of `lines` cross within `[lo, hi)`, as the last value
/// before the crossing (a piece ends there).
fn cuts(lines: &[Line], lo: i128, hi: i128, out: &mut SmallVec<[i128; 16]>) -> Option<()> {
    for (i, a) in lines.iter().enumerate() {
        for b in &lines[i + 1..] {
            let (da, db) = a.minus(b)?;
            if da == 0 {
                continue;
            }
            // da·x + db = 0 (floor_div wants a positive divisor)
            let (num, den) = if da > 0 {
                (db.checked_neg()?, da)
            } else {
                (db, da.checked_neg()?)
            };
            let at = floor_div(num, den);
            if lo <= at && at < hi {
                out.push(at);
            }
        }
    }
    Some(())
}

/// The line that is extreme (`want`: Greater for the maximum, Less for the
/// minimum) over the piece `[s, t]`, on which no two lines cross.
fn extreme(lines: &[Line], s: i128, t: i128, want: Ordering) -> Option<Line> {
    let mut best = lines[0];
    for l in &lines[1..] {
        let at_s = l.cmp_at(&best, s)?;
        if at_s == want || (at_s == Ordering::Equal && l.cmp_at(&best, t)? == want) {
            best = *l;
        }
    }
    Some(best)
}

/// What [`count_polygon`] counts: the points `(x, y)`, or the `x` for
/// which some `y` exists.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Count {
    Points,
    Shadow,
}

/// The number of `(x, y)` (or, for [`Count::Shadow`], of `x`) with `x` in
/// `[lo, hi]` and `y` in `[0, ny)` where every comparison of `cons` holds,
/// or `Ok(None)` when `cons` has a divisibility constraint (then the caller
/// enumerates).
pub(super) fn count_polygon(
    m: &mut Machine,
    (x, lo, hi): (Slot, i128, i128),
    (y, ny): (Slot, i64),
    cons: &[Con],
    what: Count,
) -> Result<Option<u128>> {
    if lo > hi || ny <= 0 {
        return Ok(Some(0));
    }
    let (mut lo, mut hi) = (lo, hi);
    // (filled in place: the lines are large to move)
    let (mut lower, mut upper) = (Lines::new(), Lines::new());
    let lines = (&mut lower, &mut upper);
    if bounds(cons, (y, ny), (x, &mut lo, &mut hi), &m.env, lines).is_none() {
        return Ok(None);
    }
    if lo > hi {
        return Ok(Some(0));
    }
    let mut at: SmallVec<[i128; 16]> = smallvec![lo - 1];
    ck(cuts(&lower, lo, hi, &mut at))?;
    ck(cuts(&upper, lo, hi, &mut at))?;
    at.push(hi);
    at.sort_unstable();
    at.dedup();
    let mut total: i128 = 0;
    for w in at.windows(2) {
        m.take()?;
        let (s, t) = (w[0] + 1, w[1]);
        let l = ck(extreme(&lower, s, t, Ordering::Greater))?;
        let u = ck(extreme(&upper, s, t, Ordering::Less))?;
        // where u(x) >= l(x): A·x + B >= 0
        let (a, b) = ck(u.minus(&l))?;
        let (mut s, mut t) = (s, t);
        match a.cmp(&0) {
            Ordering::Greater => s = s.max(ceil_div(ck(b.checked_neg())?, a)),
            Ordering::Less => t = t.min(floor_div(b, ck(a.checked_neg())?)),
            Ordering::Equal if b < 0 => continue,
            Ordering::Equal => {}
        }
        if s > t {
            continue;
        }
        let piece = match what {
            Count::Points => ck(points(&l, &u, s, t))?,
            Count::Shadow => ck(shadow(&l, &u, (a, b), s, t))?,
        };
        total = total.checked_add(piece).ok_or_else(too_large)?;
    }
    u128::try_from(total)
        .map(Some)
        .map_err(|_| internal("negative lattice-point count"))
}

/// `Σ_{x=s..=t} floor(u(x)) - ceil(l(x)) + 1`.
fn points(l: &Line, u: &Line, s: i128, t: i128) -> Option<i128> {
    u.floor_sum(s, t)?
        .checked_sub(l.ceil_sum(s, t)?)?
        .checked_add(t - s + 1)
}

/// How many `x` in `[s, t]` have an integer in `[l(x), u(x)]`, given
/// `u - l = (a·x + b) / (l.d·u.d) >= 0` there: every `x` where `u - l >= 1`,
/// and where it is less, the integers in `[l, u]` (0 or 1 each).
fn shadow(l: &Line, u: &Line, (a, b): (i128, i128), s: i128, t: i128) -> Option<i128> {
    let one = l.d.checked_mul(u.d)?;
    // a·x + b >= one: the wide part
    let (mut ws, mut wt) = (s, t);
    match a.cmp(&0) {
        Ordering::Greater => ws = ws.max(ceil_div(one.checked_sub(b)?, a)),
        Ordering::Less => wt = wt.min(floor_div(b.checked_sub(one)?, a.checked_neg()?)),
        Ordering::Equal if b >= one => {}
        Ordering::Equal => (ws, wt) = (1, 0),
    }
    if ws > wt {
        return points(l, u, s, t);
    }
    let mut n = wt - ws + 1;
    if s < ws {
        n = n.checked_add(points(l, u, s, ws - 1)?)?;
    }
    if wt < t {
        n = n.checked_add(points(l, u, wt + 1, t)?)?;
    }
    Some(n)
}

use crate::constraints::linear::{ceil_div, floor_div, LinForm};
use smallvec::{smallvec, SmallVec};

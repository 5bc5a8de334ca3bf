//! Loop bounds from a constraint system: what the lowering asks.
//!
//! Given constraints over loop variables `v1 .. vk` (outer to inner) and
//! parameters (every other name), [`plan`] returns
//!
//! * the variables an equality fixes (`defs`): they get no loop, their
//!   values are affine in the others (under a divisibility guard when the
//!   coefficient is not ±1), and their ranges survive as inequalities;
//! * for each remaining loop variable, its lower bounds (`v >= ceil(f/d)`)
//!   and upper bounds (`v <= floor(f/d)`), in terms of outer variables and
//!   parameters only, and the guards to test once it is bound;
//! * the guards over parameters alone (`top`), tested before any loop.
//!
//! Every constraint of the (substituted) system is enforced exactly at the
//! level of its innermost variable, as a bound (inequalities) or a guard
//! (divisibility, equalities over parameters). Fourier–Motzkin projections
//! of inner inequalities are *added* to outer levels: implied by the
//! system, they tighten outer loops and can only leave inner loops empty.

use super::linear::LinForm;
use super::system::{eliminate, ge_bound, solve_for, Constraint, Side, Solved, Truth};
use crate::symbol::Symbol;

/// `v >= ceil(form / div)` (a lower bound) or `v <= floor(form / div)`
/// (an upper bound), `div > 0`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Bound {
    pub form: LinForm,
    pub div: i128,
}

/// One loop of the plan.
#[derive(Clone, Debug, Default)]
pub struct Level {
    pub var: Option<Symbol>,
    pub lower: Vec<Bound>,
    pub upper: Vec<Bound>,
    /// Tested once `var` is bound.
    pub guards: Vec<Constraint>,
}

/// A variable fixed by an equality: `var = num / den`, exact (guarded).
pub type Def = Solved;

#[derive(Clone, Debug, Default)]
pub struct LoopPlan {
    /// Guards over parameters only; `false` constraints end up here.
    pub top: Vec<Constraint>,
    /// The loops, outer to inner (the input order without `defs`' variables).
    pub levels: Vec<Level>,
    /// In an order where each definition uses only loop variables,
    /// parameters and earlier definitions.
    pub defs: Vec<Def>,
}

/// Most Fourier–Motzkin combinations made per eliminated variable.
const FM_LIMIT: usize = 64;

/// Plan loops over `vars` (outer to inner) for the points satisfying
/// `system`. `None` only on coefficient overflow (the caller then guards
/// every constraint in the innermost loop).
pub fn plan(system: &[Constraint], vars: &[Symbol]) -> Option<LoopPlan> {
    let mut cons: Vec<Constraint> = system.iter().cloned().map(Constraint::normalize).collect();
    let mut solved: Vec<Solved> = vec![];
    let mut loops: Vec<Symbol> = vars.to_vec();
    // Equalities: eliminate a loop variable, a ±1 coefficient first, the
    // innermost first.
    loop {
        let mut best: Option<(usize, Symbol, i128, usize)> = None; // (cons, var, |k|, depth)
        for (ci, c) in cons.iter().enumerate() {
            if let Constraint::Eq(f) = c {
                for (depth, &v) in loops.iter().enumerate() {
                    let k = f.coeff(v).abs();
                    if k != 0
                        && best.is_none_or(|(_, _, bk, bd)| {
                            (k, usize::MAX - depth) < (bk, usize::MAX - bd)
                        })
                    {
                        best = Some((ci, v, k, depth));
                    }
                }
            }
        }
        let Some((ci, v, _, _)) = best else { break };
        let eq = cons.remove(ci);
        let (s, guard) = solve_for(eq.form(), v)?;
        cons = cons
            .iter()
            .map(|c| c.substitute(&s).map(Constraint::normalize))
            .collect::<Option<Vec<_>>>()?;
        // Earlier definitions may mention v: substitute into them too.
        for d in &mut solved {
            *d = d.substitute(&s)?;
        }
        cons.extend(guard);
        loops.retain(|&w| w != v);
        solved.push(s);
    }
    // Definitions: num / den with every loop variable bound; a definition
    // never mentions another (they were substituted), any order works.
    let defs = solved;
    let mut levels: Vec<Level> = loops
        .iter()
        .map(|&v| Level {
            var: Some(v),
            ..Level::default()
        })
        .collect();
    let mut top = vec![];
    let innermost = |c: &Constraint, upto: usize| -> Option<usize> {
        (0..upto).rev().find(|&d| c.mentions(loops[d]))
    };
    // Inner to outer: bounds of each variable, then project it out.
    let mut pending = cons;
    for d in (0..loops.len()).rev() {
        let v = loops[d];
        let mut here = vec![];
        let mut rest = vec![];
        for c in pending {
            match innermost(&c, d + 1) {
                Some(k) if k == d => here.push(c),
                _ => rest.push(c),
            }
        }
        let mut ges = vec![];
        for c in here {
            match &c {
                Constraint::Ge(f) => {
                    let (side, form, div) = ge_bound(f, v)?;
                    match side {
                        Side::Lower => levels[d].lower.push(Bound { form, div }),
                        Side::Upper => levels[d].upper.push(Bound { form, div }),
                    }
                    ges.push(f.clone());
                }
                _ => levels[d].guards.push(c.clone()),
            }
        }
        if let Some(projected) = eliminate(&ges, v, FM_LIMIT) {
            for f in projected {
                let c = Constraint::Ge(f).normalize();
                if !rest.contains(&c) {
                    rest.push(c);
                }
            }
        }
        dedup(&mut levels[d].lower);
        dedup(&mut levels[d].upper);
        pending = rest;
    }
    for c in pending {
        match c.truth() {
            Truth::Always => {}
            Truth::Never => {
                top.clear();
                top.push(Constraint::never());
                break;
            }
            Truth::Depends => {
                if !top.contains(&c) {
                    top.push(c)
                }
            }
        }
    }
    Some(LoopPlan { top, levels, defs })
}

fn dedup(bounds: &mut Vec<Bound>) {
    bounds.sort();
    bounds.dedup();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::constraints::linear::{ceil_div, floor_div};
    use crate::rng::Rng;
    use std::collections::{BTreeSet, HashMap};

    fn sym(s: &str) -> Symbol {
        Symbol::from(s)
    }

    /// The points the plan enumerates (loop variables and definitions).
    fn enumerate(p: &LoopPlan, params: &HashMap<Symbol, i128>) -> BTreeSet<Vec<(Symbol, i128)>> {
        let mut out = BTreeSet::new();
        let mut env = params.clone();
        fn holds(c: &Constraint, env: &HashMap<Symbol, i128>) -> bool {
            c.holds(&|v| env.get(&v).copied()).expect("bound")
        }
        if !p.top.iter().all(|c| holds(c, &env)) {
            return out;
        }
        fn go(
            p: &LoopPlan,
            d: usize,
            env: &mut HashMap<Symbol, i128>,
            out: &mut BTreeSet<Vec<(Symbol, i128)>>,
        ) {
            if d == p.levels.len() {
                let mut pt = vec![];
                for l in &p.levels {
                    let v = l.var.unwrap();
                    pt.push((v, env[&v]));
                }
                for df in &p.defs {
                    let n = df.num.eval(&|v| env.get(&v).copied()).unwrap();
                    assert_eq!(n % df.den, 0, "definition not exact");
                    pt.push((df.var, n / df.den));
                }
                pt.sort();
                out.insert(pt);
                return;
            }
            let l = &p.levels[d];
            let ev = |f: &LinForm, env: &HashMap<Symbol, i128>| {
                f.eval(&|v| env.get(&v).copied()).unwrap()
            };
            let lo = l
                .lower
                .iter()
                .map(|b| ceil_div(ev(&b.form, env), b.div))
                .max()
                .expect("lower");
            let hi = l
                .upper
                .iter()
                .map(|b| floor_div(ev(&b.form, env), b.div))
                .min()
                .expect("upper");
            let v = l.var.unwrap();
            for x in lo..=hi {
                env.insert(v, x);
                if l.guards.iter().all(|c| holds(c, env)) {
                    go(p, d + 1, env, out);
                }
            }
            env.remove(&v);
        }
        go(p, 0, &mut env, &mut out);
        out
    }

    #[test]
    fn random_systems_match_brute_force() {
        let vars = [sym("x"), sym("y"), sym("z")];
        let n = sym("n");
        let mut rng = Rng::new(7);
        let mut below = |n: i64| rng.range(0, n - 1) as i128;
        for round in 0..400 {
            let nv = 1 + (round % 3);
            let vs = &vars[..nv];
            // Box: 0 <= v < n + c.
            let mut sys = vec![];
            for &v in vs {
                let c = below(3);
                sys.push(Constraint::Ge(LinForm::var(v)));
                sys.push(Constraint::Ge(
                    LinForm::var(n)
                        .add_constant(c - 1)
                        .unwrap()
                        .combine(1, &LinForm::var(v), -1)
                        .unwrap(),
                ));
            }
            for _ in 0..below(4) {
                let mut f = LinForm::constant(below(7) - 3);
                for &v in vs.iter().chain([&n]) {
                    let k = below(7) - 3;
                    f = f.combine(1, &LinForm::var(v), k).unwrap();
                }
                sys.push(match below(3) {
                    0 => Constraint::Eq(f),
                    _ => Constraint::Ge(f),
                });
            }
            let p = plan(&sys, vs).expect("no overflow");
            for nval in 0..5 {
                let params: HashMap<Symbol, i128> = [(n, nval)].into();
                let got = enumerate(&p, &params);
                let mut want = BTreeSet::new();
                let range: Vec<i128> = (-2..nval + 4).collect();
                let mut pt = vec![0i128; nv];
                loop {
                    let mut env = params.clone();
                    for (v, x) in vs.iter().zip(&pt) {
                        env.insert(*v, range[*x as usize]);
                    }
                    if sys
                        .iter()
                        .all(|c| c.holds(&|v| env.get(&v).copied()).unwrap())
                    {
                        let mut t: Vec<(Symbol, i128)> = vs.iter().map(|v| (*v, env[v])).collect();
                        t.sort();
                        want.insert(t);
                    }
                    let mut k = 0;
                    loop {
                        if k == nv {
                            break;
                        }
                        pt[k] += 1;
                        if pt[k] < range.len() as i128 {
                            break;
                        }
                        pt[k] = 0;
                        k += 1;
                    }
                    if k == nv {
                        break;
                    }
                }
                assert_eq!(got, want, "system {sys:?} at n={nval}: plan {p:?}");
            }
        }
    }
}

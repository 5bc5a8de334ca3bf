//! The optimizer, binding by binding: the entry point [`optimize`].
//!
//! One e-graph over a whole program grows with every order of every
//! binding, so on long programs saturation stops at a limit and the result
//! depends on where it stopped. Here the program is flattened to its
//! bindings (`let`-lifting, [`crate::terms::normalize::lift`]) and each
//! binding's definition, and each leaf of the result, is a *unit* optimized
//! in an e-graph of its own ([`super::phases::optimize_whole`] on a small
//! program whose parameters are the unit's free variables): time is linear
//! in the number of bindings, and each e-graph is small enough for the
//! normalize rules (index elimination, the Iverson algebra) to saturate.
//!
//! * A unit that is a sum of many terms (the adjoint of an input read in
//!   many places) is optimized term by term; the terms' brackets stay
//!   visible to the additions that join them.
//! * Units equal up to the names of their free variables (the layers of a
//!   chain) are optimized once ([`Memo`]); a unit of the shape of one that
//!   came back unchanged, up to its constant indices, is taken as it is
//!   ([`Shapes`]).
//! * Let-level passes outside the e-graphs: the lets a unit's optimization
//!   introduces are lifted to the top, and dead bindings dropped.
//! * A program whose flattened form is small is then also optimized whole,
//!   starting from the per-binding result and from the input, so that
//!   inlining across bindings is still found; the final guard
//!   ([`super::guard::guard`]) keeps the cheapest candidate that costs no
//!   more than the input at any checked sample.

use super::guard::guard;
use super::phases::optimize_whole;
use super::Optimized;
use crate::egraph::runner::{Options, PhaseStats};
use crate::error::Result;
use crate::front::affine::Affine;
use crate::front::ast::{build, Expr, Param, ParamKind, Program, Type};
use crate::front::names::Fresh;
use crate::front::subst::{free_names, Replace, Substituter};
use crate::front::types::{binding_env, type_of, TypeEnv};
use crate::symbol::Symbol;
use crate::terms::brackets::{bracket_additions, exists_bracket};
use crate::terms::canonical::{canonical_binders, canonical_binders_with_hints};
use crate::terms::letpasses::{
    add_terms, drop_broadcast_dimensions, drop_false_brackets, index, inline_free_bindings,
    reuse_bindings, share_repeated_elements,
};
use crate::terms::normalize::{bind_nested_reductions, dead_code, lift, unflatten};
use crate::terms::shape::{shape, Shape};
use crate::terms::size::term_size;
use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::time::Instant;

/// Flattened programs of at most this many nodes are also optimized whole
/// (from the per-binding result with a quarter of the node limit: it finds
/// the inlining and sharing across bindings that per-binding e-graphs
/// miss).
const WHOLE_PROGRAM_NODES: usize = 400;

/// A unit that adds more terms than this is optimized term by term.
const MAX_TERMS: usize = 4;

/// Optimize a program: equal in value, never costlier (at every checked
/// sample), in core forms, with readable names.
pub fn optimize(prog: &Program, opts: &Options) -> Result<Optimized> {
    let started = Instant::now();
    let opts = &opts.started();
    let _deadline = crate::limits::deadline_scope(opts.deadline_at(), opts.time_limit);
    let mut fresh = crate::front::subst::fresh_above(&prog.body);
    let mut candidates = vec![];
    let mut phases = vec![];
    let input_small = term_size(&prog.body) <= WHOLE_PROGRAM_NODES;
    // the input without its `[false]·e` terms: what every e-graph starts from
    let cleaned = Program {
        body: drop_false_brackets(&prog.body),
        ..prog.clone()
    };

    let local = by_binding(&cleaned, opts, &mut fresh)?;
    phases.extend(local.1);
    let local = local.0;
    if term_size(&local.body) <= WHOLE_PROGRAM_NODES || input_small {
        // inlining and sharing across bindings: the whole (small) program
        // in one e-graph, from the per-binding result and from the input
        let starts: Vec<&Program> = if input_small {
            vec![&local, &cleaned]
        } else {
            vec![&local]
        };
        for (k, start) in starts.into_iter().enumerate() {
            let w = optimize_whole(
                start,
                &Options {
                    // the per-binding result needs little more; the input
                    // gets what one e-graph over the program always got
                    node_limit: if k == 0 {
                        opts.node_limit / 4
                    } else {
                        opts.node_limit
                    },
                    ..opts.clone()
                },
            )?;
            let from = if k == 0 { "bindings" } else { "input" };
            for p in w.stats.phases {
                phases.push(PhaseStats {
                    phase: format!("{} (whole, from {from})", p.phase),
                    ..p
                });
            }
            candidates.push(Program {
                body: crate::front::readable::fresh_binders(&w.program.body, &w.hints, &mut fresh),
                ..prog.clone()
            });
        }
    }
    candidates.insert(0, local);
    let (program, stats) = guard(prog, candidates, opts, phases, started)?;
    Ok(Optimized {
        program: crate::front::readable::readable(&program, &HashMap::new()),
        stats,
    })
}

/// Units already optimized, keyed by the term with the free variables
/// renamed by position (and binders canonical) and the types of those
/// variables: the optimized body (free variables by position,
/// binders canonical) and its binder hints.
type Memo = HashMap<(Expr, Vec<Type>), (Expr, HashMap<Symbol, Symbol>)>;

/// What the first unit of each [`Shape`] (with the types of its free
/// variables) came to: whether its optimization returned it unchanged, in
/// canonical binders (`Some(true)`) or as it was (`Some(false)`), or
/// changed it (`None`). A later unit of a shape that came back unchanged
/// is taken as it is without an e-graph (the terms of a wide sum differ
/// only in their constant indices, which defeat [`Memo`]); returning a
/// unit unchanged is always right, and the shape keeps every constant
/// that a comparison could tell apart.
type Shapes = HashMap<(Shape, Vec<Type>), Option<bool>>;

/// What every unit shares.
struct Units<'a> {
    prog: &'a Program,
    opts: &'a Options,
    types: TypeEnv,
    memo: Memo,
    shapes: Shapes,
    /// Statistics summed over the units, per phase.
    stats: Vec<PhaseStats>,
    /// Units that stopped at a limit, and units in all.
    limited: usize,
    count: usize,
    /// Bindings made by the units' own optimization (lifted lets), to go
    /// before the binding being optimized.
    extra: Vec<(Symbol, Expr)>,
}

/// The program optimized unit by unit, and the phases' statistics.
fn by_binding(
    prog: &Program,
    opts: &Options,
    fresh: &mut Fresh,
) -> Result<(Program, Vec<PhaseStats>)> {
    // lifting needs binder names used once (a derivative may copy a `let`)
    let unique = crate::front::readable::fresh_binders(&prog.body, &HashMap::new(), fresh);
    let unique = bind_nested_reductions(&unique, false, fresh);
    let (binds, result) = dead_code(lift(&unique, fresh));
    opts.check_time()?;
    let (binds, result) = dead_code(inline_free_bindings(binds, result, fresh));
    opts.check_time()?;
    let types = binding_env(prog, &binds)?;
    let mut units = Units {
        prog,
        opts,
        types,
        memo: Memo::new(),
        shapes: Shapes::new(),
        stats: vec![],
        limited: 0,
        count: 0,
        extra: vec![],
    };
    let mut out = vec![];
    for (x, e) in binds {
        let e = units.unit(&e, fresh)?;
        out.append(&mut units.extra);
        out.push((x, e));
    }
    let result = bracket_additions(&units.result(&result, fresh)?);
    out.append(&mut units.extra);
    let out = out
        .into_iter()
        .map(|(x, e)| (x, bracket_additions(&e)))
        .collect();
    // the let-level passes are linear, but on a long program they are
    // most of the command's time: the deadline between them
    opts.check_time()?;
    let (out, result) = reuse_bindings(out, result);
    opts.check_time()?;
    let (out, result) = share_repeated_elements(out, result, fresh);
    opts.check_time()?;
    let (out, result) = drop_broadcast_dimensions(out, result);
    opts.check_time()?;
    let body = unflatten(dead_code((out, result)));
    let mut stats = units.stats;
    for s in &mut stats {
        s.phase = format!("{} (per binding)", s.phase);
        if units.limited > 0 && s.stop_reason == "saturated" {
            s.stop_reason = format!(
                "saturated in {} of {} bindings",
                units.count - units.limited,
                units.count
            );
        }
    }
    Ok((
        Program {
            body,
            ..prog.clone()
        },
        stats,
    ))
}

/// `k` copies of the real term `t` added up, as one product: `k · t`, or
/// `[p]·(k · e)` for a bracket `[p]·e` (so that the product is charged only
/// where the bracket holds, as the additions were). Never costlier than
/// `t + ... + t` for k >= 2.
fn times(k: u32, t: Expr) -> Expr {
    if k == 1 {
        return t;
    }
    match t {
        Expr::Iverson(p, e) => Expr::Iverson(p, Box::new(times(k, *e))),
        t => build::mul(build::num(f64::from(k)), t),
    }
}

impl Units<'_> {
    /// The result: each leaf of its pairs a unit.
    fn result(&mut self, e: &Expr, fresh: &mut Fresh) -> Result<Expr> {
        Ok(match e {
            Expr::Pair(a, b) => build::pair(self.result(a, fresh)?, self.result(b, fresh)?),
            e => self.unit(e, fresh)?,
        })
    }

    /// One unit, optimized; a sum of many terms term by term.
    fn unit(&mut self, e: &Expr, fresh: &mut Fresh) -> Result<Expr> {
        let mut gens: Vec<(Symbol, Affine)> = vec![];
        let mut inner = e;
        while let Expr::Gen(i, d, b) = inner {
            gens.push((*i, d.clone()));
            inner = b;
        }
        let mut terms = vec![];
        add_terms(inner, &mut terms);
        if terms.len() <= MAX_TERMS {
            return self.optimize_unit(e, fresh);
        }
        // equal optimized terms are added once, times their count
        let mut like: Vec<(Expr, u32)> = vec![];
        let mut seen: HashMap<Expr, usize> = HashMap::new();
        for t in terms {
            let closed = gens
                .iter()
                .rev()
                .fold(t.clone(), |acc, (i, d)| build::gen(*i, d.clone(), acc));
            let mut o = self.optimize_unit(&closed, fresh)?;
            for (i, _) in &gens {
                o = index(o, &Affine::var(*i), fresh);
            }
            match seen.entry(canonical_binders(&o)) {
                Entry::Occupied(k) => like[*k.get()].1 += 1,
                Entry::Vacant(v) => {
                    v.insert(like.len());
                    like.push((o, 1));
                }
            }
        }
        let mut sum: Option<Expr> = None;
        // each term's sparsity stays visible to the additions that join
        // them, as the rules show it inside a unit
        for (o, count) in like {
            let o = times(count, exists_bracket(o));
            sum = Some(match sum {
                None => o,
                Some(s) => build::add(s, o),
            });
        }
        let body = sum.expect("more than MAX_TERMS terms");
        Ok(gens
            .iter()
            .rev()
            .fold(body, |acc, (i, d)| build::gen(*i, d.clone(), acc)))
    }

    /// One unit in its own e-graph (or from the memo); the lets its
    /// optimization makes go to `self.extra`.
    fn optimize_unit(&mut self, e: &Expr, fresh: &mut Fresh) -> Result<Expr> {
        self.opts.check_time()?;
        if is_trivial(e) {
            return Ok(e.clone());
        }
        let reals: Vec<Symbol> = free_names(e)
            .into_iter()
            .filter(|x| self.types.contains_key(x))
            .collect();
        // the free variables by position (names no program has)
        let taken = free_names(e);
        let mut slots = vec![];
        let mut k = 0;
        while slots.len() < reals.len() {
            let s = crate::front::names::make("arg", format!("slot{k}"));
            k += 1;
            if !taken.contains(&s) {
                slots.push(s);
            }
        }
        let renamed = rename_vars(e, &reals, &slots, fresh);
        let canon = canonical_binders(&renamed);
        let key = (canon, reals.iter().map(|x| self.types[x].clone()).collect());
        let (body, hints) = match self.memo.get(&key) {
            Some(hit) => hit.clone(),
            None => self.optimized(e, renamed, &reals, &slots, key)?,
        };
        let back = rename_vars(&body, &slots, &reals, fresh);
        let unique = crate::front::readable::fresh_binders(&back, &hints, fresh);
        let (binds, out) = lift(&unique, fresh);
        for (x, d) in binds {
            let t = type_of(&d, &mut self.types)?;
            self.types.insert(x, t);
            self.extra.push((x, d));
        }
        Ok(out)
    }

    /// A unit not in the memo (`key`), its free variables `reals` renamed
    /// to `slots` (`renamed`): as it is when the first unit of its shape
    /// came back unchanged, else optimized in its own e-graph.
    fn optimized(
        &mut self,
        e: &Expr,
        renamed: Expr,
        reals: &[Symbol],
        slots: &[Symbol],
        key: (Expr, Vec<Type>),
    ) -> Result<(Expr, HashMap<Symbol, Symbol>)> {
        let shape = shape(&key.0, &key.1).map(|s| (s, key.1.clone()));
        let seen = shape.as_ref().and_then(|s| self.shapes.get(s).copied());
        if let Some(Some(canonical)) = seen {
            let (c, hints) = canonical_binders_with_hints(&renamed);
            return Ok((if canonical { c } else { renamed }, hints));
        }
        let ret = type_of(e, &mut self.types)?;
        let mut params: Vec<Param> = self
            .prog
            .params
            .iter()
            .filter(|p| !matches!(p.kind, ParamKind::Real(_)))
            .cloned()
            .collect();
        params.extend(reals.iter().zip(slots).map(|(x, s)| Param {
            name: *s,
            kind: ParamKind::Real(self.types[x].clone()),
        }));
        let mini = Program {
            name: self.prog.name,
            params,
            sizes: self.prog.sizes.clone(),
            body: renamed,
            ret,
            stored: Default::default(),
        };
        let w = optimize_whole(&mini, self.opts)?;
        self.note(&w.stats.phases);
        if let (Some(s), None) = (shape, seen) {
            let unchanged = if w.program.body == mini.body {
                Some(false)
            } else {
                (w.program.body == canonical_binders(&mini.body)).then_some(true)
            };
            self.shapes.insert(s, unchanged);
        }
        let hit = (w.program.body, w.hints);
        self.memo.insert(key, hit.clone());
        Ok(hit)
    }

    /// Add one unit's phase statistics to the totals.
    fn note(&mut self, phases: &[PhaseStats]) {
        self.count += 1;
        let mut limited = false;
        for p in phases {
            if p.stop_reason != "saturated" {
                limited = true;
            }
            match self.stats.iter_mut().find(|s| s.phase == p.phase) {
                Some(s) => {
                    s.iterations += p.iterations;
                    s.nodes = s.nodes.max(p.nodes);
                    s.classes = s.classes.max(p.classes);
                    s.seconds += p.seconds;
                    s.extract_seconds += p.extract_seconds;
                    if s.stop_reason == "saturated" {
                        s.stop_reason = p.stop_reason.clone();
                    }
                }
                None => self.stats.push(p.clone()),
            }
        }
        if limited {
            self.limited += 1;
        }
    }
}

/// A unit no rule can improve: a variable, a constant, an access of one.
fn is_trivial(e: &Expr) -> bool {
    match e {
        Expr::Var(_) | Expr::Const(_) => true,
        Expr::Get(a, _) | Expr::Fst(a) | Expr::Snd(a) => is_trivial(a),
        _ => false,
    }
}

/// `e` with the variables `from` renamed to `to` (simultaneously: `to`
/// names no variable of `e`).
fn rename_vars(e: &Expr, from: &[Symbol], to: &[Symbol], fresh: &mut Fresh) -> Expr {
    let mut out = e.clone();
    for (x, y) in from.iter().zip(to) {
        let mut names = |b: Symbol| fresh.name(b.as_str());
        out = Substituter::new(&mut names)
            .expr(&out, &Replace::Var(*x, Expr::Var(*y)))
            .expect("renaming a variable cannot overflow");
    }
    out
}

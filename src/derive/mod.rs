//! Derivatives of ATL programs (paper section 5), purely functional.
//!
//! Phases (each a separate pass, as the design asks):
//! 1. **normalize**: A-normal form and let-lifting ([`crate::terms::normalize`]), the
//!    paper's flat "tensor SSA" in which derivative rules copy only atoms;
//! 2. **differentiate**: forward mode by rewriting `(D e)` in an e-graph
//!    with `rules/forward.rules` and the black boxes' derivative table
//!    `rules/derivatives.rules` ([`forward`]); reverse mode by rewriting the
//!    inner product `<w | D[body]>` with `rules/adjoint.rules` (the paper's
//!    Figures "Adjoint Derivative of Tensors") until the coefficients of the
//!    inputs' tangents are plain ATL ([`adjoint`]). Both extract only
//!    programs free of the phase's extension forms ([`phase`]). The
//!    rules' Rust appliers and conditions, and the black-box forward rules,
//!    are in [`crate::egraph::rules::derivatives`];
//! 3. **simplify**: the optimizer of [`crate::egraph`] on the result
//!    (gen pushout, Iverson algebra, index elimination, inlining, dead lets),
//!    extracted by the sparsity-aware work cost.
//!
//! Public entry points: [`jvp`], [`vjp`], [`grad`], [`hvp`] (the library's
//! [`crate::optimize_gradient`] is [`grad`] with the `--wrt` names checked),
//! and [`forward::resolve_wrt`], the one check of those names.

pub mod adjoint;
pub mod direct;
pub mod forms;
pub mod forward;
pub mod forward_direct;
pub mod phase;
pub mod stored;

use crate::egraph::runner::PhaseStats;
use crate::error::{Error, Result};
use crate::front::ast::{Expr, Param, ParamKind, Program, Type};
use crate::optimizer::{optimize, Options, Stats};
use crate::symbol::Symbol;
use std::time::Instant;

/// A derivative program and the optimizer's statistics on it.
#[derive(Clone, Debug)]
pub struct Derived {
    /// The derivative program, optimized.
    pub program: Program,
    /// The statistics of its phases (differentiation, then the optimizer's).
    pub stats: Stats,
}

/// The type of the result of `grad`/`vjp`: one input's type, or the
/// right-nested pair of several.
pub fn nested_type(prog: &Program, wrt: &[Symbol]) -> Type {
    let mut tys: Vec<Type> = wrt
        .iter()
        .map(|w| match &prog.param(*w).expect("resolved").kind {
            ParamKind::Real(t) => t.clone(),
            _ => unreachable!("resolve_wrt keeps real inputs"),
        })
        .collect();
    let mut t = tys.pop().expect("at least one input");
    while let Some(a) = tys.pop() {
        t = Type::Pair(Box::new(a), Box::new(t));
    }
    t
}

/// The simplify phase, on an unsimplified derivative and the statistics of
/// its differentiation phases; `started`: when the command began (the total
/// time in the statistics counts from there).
fn simplify(
    (p, differentiation): (Program, Vec<PhaseStats>),
    opts: &Options,
    started: Instant,
) -> Result<Derived> {
    let mut out = optimize(&p, opts)?;
    if let Some(masked) = stored::mask_unmasked(&out.program) {
        let again = optimize(&masked, opts)?;
        out.stats.phases.extend(again.stats.phases);
        out.program = again.program;
    }
    out.stats.phases.splice(0..0, differentiation);
    out.stats.seconds = started.elapsed().as_secs_f64();
    Ok(Derived {
        program: out.program,
        stats: out.stats,
    })
}

/// The bound by construction: `out` when it costs no more than
/// `reference` (the derivative as the rules produce it) at every size of
/// the spread the optimizer extracts by (about 5 to 10^6), else
/// `reference`.
/// The paper bounds the reference's cost, so the bound holds for what a
/// user gets whatever the optimizer extracted.
/// Fails past the command's deadline (a count cut short by it must not
/// decide).
fn within_reference(mut out: Derived, reference: Program, opts: &Options) -> Result<Derived> {
    let cheaper =
        crate::optimizer::guard::never_costlier(&out.program, &reference, opts.sizes.as_ref());
    opts.check_time()?;
    if !cheaper {
        out.program =
            crate::front::readable::readable(&reference, &std::collections::HashMap::new());
        out.stats.kept_input = true;
    }
    Ok(out)
}

/// Jacobian-vector product: the original parameters, then one tangent per
/// `wrt` input (all real inputs when empty); returns the output tangent.
pub fn jvp(prog: &Program, wrt: &[Symbol], opts: &Options) -> Result<Derived> {
    let started = Instant::now();
    let opts = &opts.started();
    let _deadline = crate::limits::deadline_scope(opts.deadline_at(), opts.time_limit);
    let (p, st) = forward::jvp_program(prog, wrt, opts)?;
    let reference = p.clone();
    within_reference(simplify((p, vec![st]), opts, started)?, reference, opts)
}

/// The unsimplified vector-Jacobian product program.
pub fn vjp_program(
    prog: &Program,
    wrt: &[Symbol],
    opts: &Options,
) -> Result<(Program, PhaseStats)> {
    vjp_program_by(prog, wrt, opts, false)
}

/// The vector-Jacobian product as the rules produce it directly (see
/// [`adjoint::direct_vjp_body`]).
pub fn direct_vjp_program(prog: &Program, wrt: &[Symbol], opts: &Options) -> Result<Program> {
    vjp_program_by(prog, wrt, opts, true).map(|r| r.0)
}

/// The unsimplified vector-Jacobian product.
fn vjp_program_by(
    prog: &Program,
    wrt: &[Symbol],
    opts: &Options,
    direct: bool,
) -> Result<(Program, PhaseStats)> {
    reverse_program(prog, wrt, Seed::Cotangent, opts, direct)
}

/// Where reverse mode starts: a cotangent parameter of the output's type
/// (`vjp`), or 1 for a function returning `R` (`grad`).
enum Seed {
    Cotangent,
    One,
}

/// The unsimplified reverse derivative from `seed`: by e-graphs, or
/// `direct`ly without one; the original parameters (and the cotangent).
fn reverse_program(
    prog: &Program,
    wrt: &[Symbol],
    seed: Seed,
    opts: &Options,
    direct: bool,
) -> Result<(Program, PhaseStats)> {
    if matches!(seed, Seed::One) && prog.ret != Type::Real {
        return Err(Error::input(format!(
            "grad needs a function returning R; this one returns {} (use vjp)",
            prog.ret
        )));
    }
    let wrt = forward::resolve_wrt(prog, wrt)?;
    let mut params = prog.params.clone();
    let mut ct = None;
    let (seed, seed_type) = match seed {
        Seed::One => (crate::front::ast::build::num(1.0), Type::Real),
        Seed::Cotangent => {
            let w = forward::unused_name("ct", &mut forward::names_in(prog));
            params.push(Param {
                name: w,
                kind: ParamKind::Real(prog.ret.clone()),
            });
            ct = Some(w);
            (Expr::Var(w), prog.ret.clone())
        }
    };
    let stored = stored::reverse_storage(prog, &wrt, ct)?;
    let (body, stats) = if direct {
        (
            adjoint::direct_vjp_body(prog, &wrt, seed, &seed_type, opts)?,
            PhaseStats::direct(),
        )
    } else {
        adjoint::vjp_body(prog, &wrt, seed, &seed_type, opts)?
    };
    let p = Program {
        name: prog.name,
        params,
        sizes: prog.sizes.clone(),
        body,
        ret: nested_type(prog, &wrt),
        stored,
    };
    Ok((p, stats))
}

/// Vector-Jacobian product: the original parameters and one cotangent of
/// the output's type; returns what `grad` returns.
pub fn vjp(prog: &Program, wrt: &[Symbol], opts: &Options) -> Result<Derived> {
    let started = Instant::now();
    let opts = &opts.started();
    let _deadline = crate::limits::deadline_scope(opts.deadline_at(), opts.time_limit);
    let (p, st) = vjp_program(prog, wrt, opts)?;
    opts.check_time()?;
    let out = simplify((p, vec![st]), opts, started)?;
    opts.check_time()?;
    let direct = direct_vjp_program(prog, wrt, opts)?;
    opts.check_time()?;
    within_reference(out, direct, opts)
}

/// The unsimplified gradient program.
pub fn grad_program(
    prog: &Program,
    wrt: &[Symbol],
    opts: &Options,
) -> Result<(Program, PhaseStats)> {
    grad_program_by(prog, wrt, opts, false)
}

/// The gradient as the rules produce it directly, without e-graphs or
/// simplification: the derivative the paper's cost bound is about, and
/// the one [`grad`] falls back to (see [`adjoint::direct_vjp_body`]).
pub fn direct_grad_program(prog: &Program, wrt: &[Symbol], opts: &Options) -> Result<Program> {
    grad_program_by(prog, wrt, opts, true).map(|r| r.0)
}

/// The unsimplified gradient.
fn grad_program_by(
    prog: &Program,
    wrt: &[Symbol],
    opts: &Options,
    direct: bool,
) -> Result<(Program, PhaseStats)> {
    reverse_program(prog, wrt, Seed::One, opts, direct)
}

/// The gradient of a function returning `R` with respect to `wrt`.
pub fn grad(prog: &Program, wrt: &[Symbol], opts: &Options) -> Result<Derived> {
    let started = Instant::now();
    let opts = &opts.started();
    let _deadline = crate::limits::deadline_scope(opts.deadline_at(), opts.time_limit);
    let (p, st) = grad_program(prog, wrt, opts)?;
    opts.check_time()?;
    let out = simplify((p, vec![st]), opts, started)?;
    opts.check_time()?;
    let direct = direct_grad_program(prog, wrt, opts)?;
    opts.check_time()?;
    within_reference(out, direct, opts)
}

/// Hessian-vector product (forward over reverse): the original parameters,
/// then one direction per `wrt` input; returns the derivative of the
/// gradient along the directions. The statistics list the gradient's
/// phases (marked "gradient: ..."), then the forward phase and the final
/// simplification.
pub fn hvp(prog: &Program, wrt: &[Symbol], opts: &Options) -> Result<Derived> {
    let started = Instant::now();
    let opts = &opts.started();
    let _deadline = crate::limits::deadline_scope(opts.deadline_at(), opts.time_limit);
    let wrt = forward::resolve_wrt(prog, wrt)?;
    let g = grad(prog, &wrt, opts)?;
    let mut phases: Vec<PhaseStats> = g
        .stats
        .phases
        .into_iter()
        .map(|p| PhaseStats {
            phase: format!("gradient: {}", p.phase),
            ..p
        })
        .collect();
    let (d, st) = forward::jvp_program(&g.program, &wrt, opts)?;
    phases.push(st);
    let reference = d.clone();
    within_reference(simplify((d, phases), opts, started)?, reference, opts)
}

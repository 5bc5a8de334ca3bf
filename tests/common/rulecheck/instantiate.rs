//! Step 2: instances of a left-hand side: concrete types, binder names and
//! random well-typed terms for its variables, elaborated by the real front
//! end and type-checked.

use super::*;

// ---------------------------------------------------------------------------
// 2. instantiation

#[derive(Clone, Debug)]
pub(super) enum Bound {
    Expr(Expr),
    Pred(Pred),
    Aff(Affine),
    Name(Symbol),
    Num(f64),
    Fun(Fun),
}

/// One scope entry of an instantiated pattern variable.
#[derive(Clone, Debug)]
pub(super) enum Entry {
    Var(String, Type),
    Index(String, Affine),
}

/// A term of the e-graph language, possibly with `D` nodes, and its sort.
#[derive(Clone, Debug)]
pub struct Term {
    pub rec: RecExpr<Atl>,
    pub(super) sort: Sort,
    /// Does the sub-term at each id contain an extension form (`D`)?
    pub(super) ext: Vec<bool>,
}

impl Term {
    pub(super) fn new(rec: RecExpr<Atl>, sort: Sort) -> Term {
        let ext = extension_marks(&rec);
        Term { rec, sort, ext }
    }
    pub(super) fn top(&self) -> Id {
        Id::from(self.rec.as_ref().len() - 1)
    }
    pub(super) fn d(&self, id: Id) -> bool {
        self.ext[usize::from(id)]
    }
    pub(super) fn expr(&self, id: Id) -> Result<Expr, String> {
        FromRec {
            node: |i: Id| &self.rec[i],
        }
        .expr(id)
        .map_err(|e| e.0)
    }
    pub(super) fn pred(&self, id: Id) -> Result<Pred, String> {
        FromRec {
            node: |i: Id| &self.rec[i],
        }
        .pred(id)
        .map_err(|e| e.0)
    }
    /// Check that the term reads back in its sort (a `D`-free part as core
    /// syntax).
    pub(super) fn readable(&self) -> Result<(), String> {
        if self.sort == Sort::Pred {
            return self.pred(self.top()).map(|_| ());
        }
        self.readable_at(self.top())
    }
    pub(super) fn readable_at(&self, id: Id) -> Result<(), String> {
        if !self.d(id) {
            return self.expr(id).map(|_| ());
        }
        let n = &self.rec[id];
        if let Some((_, a, _)) = n.as_call() {
            return self.readable_at(a);
        }
        match n {
            Atl::Iverson([p, e]) => {
                self.pred(*p)?;
                self.readable_at(*e)
            }
            Atl::Gen([_, _, e])
            | Atl::Sum([_, _, e])
            | Atl::Maximum([_, _, e])
            | Atl::Minimum([_, _, e])
            | Atl::ArgMax([_, _, e])
            | Atl::ArgMin([_, _, e])
            | Atl::Get([e, _])
            | Atl::D(e)
            | Atl::Fst(e)
            | Atl::Snd(e) => self.readable_at(*e),
            Atl::Let([_, a, b])
            | Atl::Add([a, b])
            | Atl::Mul([a, b])
            | Atl::Max([a, b])
            | Atl::Min([a, b])
            | Atl::Pair([a, b]) => {
                self.readable_at(*a)?;
                self.readable_at(*b)
            }
            n => Err(format!("unexpected node {n} around a D")),
        }
    }
    /// ATL text when `D`-free, else the e-graph syntax.
    pub(super) fn text(&self) -> String {
        let top = self.top();
        if !self.d(top) {
            if self.sort == Sort::Pred {
                if let Ok(p) = self.pred(top) {
                    return pred_to_string(&p);
                }
            } else if let Ok(e) = self.expr(top) {
                return expr_to_string(&e);
            }
        }
        self.rec.to_string()
    }
    /// Does the term mention the name `o` anywhere?
    pub(super) fn mentions(&self, name: Symbol) -> bool {
        self.rec.as_ref().iter().any(|n| match n {
            Atl::Sym(s) => *s == name,
            Atl::Aff(Idx(a)) => a.mentions(name),
            _ => false,
        })
    }
}

/// An instantiated left-hand side.
pub struct Instance {
    pub term: Term,
    pub extents: HashMap<Symbol, Affine>,
    /// Does a binder of the pattern reuse a name bound outside?
    pub shadowed: bool,
}

/// Renames every binder of an elaborated sub-term apart (`s<k>` for
/// indices, `l<k>` for variables), so that binder names are unique within
/// an instantiation (the e-graph keeps one extent per index name).
/// Not `readable::fresh_binders`: its names `base#id` do not read back, and
/// [`type_check`] parses the instance's text again.
pub(super) struct Renamer<'c> {
    pub(super) counter: &'c mut usize,
    pub(super) map: Vec<(Symbol, Symbol)>,
}

impl Renamer<'_> {
    pub(super) fn fresh(&mut self, base: &str) -> Symbol {
        *self.counter += 1;
        sym(&format!("{base}{}", self.counter))
    }
    pub(super) fn look(&self, s: Symbol) -> Symbol {
        self.map
            .iter()
            .rev()
            .find(|(a, _)| *a == s)
            .map_or(s, |(_, b)| *b)
    }
    pub(super) fn aff(&self, a: &Affine) -> Affine {
        let mut out = a.clone();
        for n in a.names() {
            let to = self.look(n);
            if to != n {
                out = out.rename(n, to);
            }
        }
        out
    }
    pub(super) fn pred(&mut self, p: &Pred) -> Pred {
        match p {
            Pred::True | Pred::False => p.clone(),
            Pred::Cmp(op, a, b) => Pred::Cmp(*op, self.aff(a), self.aff(b)),
            Pred::And(ps) => Pred::And(ps.iter().map(|q| self.pred(q)).collect()),
            Pred::Or(ps) => Pred::Or(ps.iter().map(|q| self.pred(q)).collect()),
            Pred::Exists(i, d, q) => {
                let ni = self.fresh("s");
                self.map.push((*i, ni));
                let q = self.pred(q);
                self.map.pop();
                Pred::Exists(ni, d.clone(), Box::new(q))
            }
            Pred::Rel(r, idx) => Pred::Rel(*r, idx.iter().map(|a| self.aff(a)).collect()),
        }
    }
    pub(super) fn expr(&mut self, e: &Expr) -> Expr {
        use atl_egg::front::ast::build::*;
        match e {
            Expr::Var(x) => Expr::Var(self.look(*x)),
            Expr::Get(a, i) => get(self.expr(a), self.aff(i)),
            Expr::IndexReal(a) => Expr::IndexReal(self.aff(a)),
            Expr::Iverson(p, a) => iverson(self.pred(p), self.expr(a)),
            Expr::Gen(i, d, b) | Expr::Sum(i, d, b) | Expr::Reduce(_, i, d, b) => {
                let ni = self.fresh("s");
                self.map.push((*i, ni));
                let b = self.expr(b);
                self.map.pop();
                e.same_loop(ni, d.clone(), b).expect("a loop")
            }
            Expr::Let(x, a, b) => {
                let a = self.expr(a);
                let nx = self.fresh("l");
                self.map.push((*x, nx));
                let b = self.expr(b);
                self.map.pop();
                let_(nx, a, b)
            }
            _ => e.map_children(|c| self.expr(c)),
        }
    }
}

pub(super) fn params_text(vars: &[(String, Type)]) -> String {
    let mut ps: Vec<String> = vars
        .iter()
        .map(|(n, t)| format!("({n} {})", type_to_string(t)))
        .collect();
    ps.push("(S (relation n))".into());
    ps.push("(T (relation n m))".into());
    ps.join(" ")
}

/// The visible variables and index variables of a scope (innermost binding
/// of each name), outermost first.
/// Variables with their types, indices with their extents.
pub(super) type Visible = (Vec<(String, Type)>, Vec<(String, Affine)>);

pub(super) fn visible(entries: &[Entry]) -> Visible {
    let mut vars: Vec<(String, Type)> = vec![];
    let mut idx: Vec<(String, Affine)> = vec![];
    for e in entries {
        match e {
            Entry::Var(n, t) => {
                vars.retain(|v| &v.0 != n);
                vars.push((n.clone(), t.clone()));
            }
            Entry::Index(n, d) => {
                idx.retain(|v| &v.0 != n);
                idx.push((n.clone(), d.clone()));
            }
        }
    }
    (vars, idx)
}

/// Elaborate `inner` (a term, or `(iverson P 1)` for a predicate) in a
/// scope: visible variables become parameters, visible indices wrapping
/// `gen`s (with their extents). Returns the elaborated `inner`.
pub(super) fn elaborate_in(inner: &str, entries: &[Entry]) -> Result<Expr, String> {
    let (vars, idx) = visible(entries);
    let mut body = inner.to_string();
    for (i, d) in idx.iter().rev() {
        body = format!("(gen {i} {d} {body})");
    }
    let text = format!("(fn f ({}) {body})", params_text(&vars));
    let prog = parse_program(text.as_bytes()).map_err(|e| format!("{e}\n  in {text}"))?;
    let mut e = prog.body;
    for _ in &idx {
        match e {
            Expr::Gen(_, _, b) => e = *b,
            other => return Err(format!("unexpected wrapper {}", expr_to_string(&other))),
        }
    }
    Ok(e)
}

pub(super) struct Instantiator<'a> {
    pub(super) shape: &'a Shape,
    pub(super) cfg: &'a CheckConfig,
    pub(super) rng: &'a mut Rng,
    pub(super) counter: usize,
}

impl Instantiator<'_> {
    pub(super) fn gen_cfg(&self) -> GenConfig {
        GenConfig {
            max_depth: self.cfg.depth,
            sugar: true,
            shadow: 0.1,
            relations: true,
            pairs: true,
            prefer_innermost: 0.5,
        }
    }

    pub(super) fn scope_for(&self, entries: &[Entry]) -> Scope {
        let (vars, idx) = visible(entries);
        Scope {
            vars,
            idx: idx.into_iter().map(|(n, _)| n).collect(),
            sizes: vec!["n", "m"],
            rels: vec![("S", 1), ("T", 2)],
        }
    }

    pub(super) fn instantiate(&mut self) -> Result<Instance, String> {
        let infer = &self.shape.infer;
        let mut tmemo = HashMap::new();
        let mut dmemo = HashMap::new();
        // binder names and their scope entries
        let mut binders: HashMap<Var, (Symbol, Entry)> = HashMap::new();
        let mut bound: HashMap<Var, Bound> = HashMap::new();
        let mut shadowed = false;
        let outer_names: Vec<String> = outer_vars().into_iter().map(|v| v.0).collect();
        for v in &infer.order {
            let info = &infer.vars[v];
            match &info.role {
                Role::IndexBinder(d) => {
                    let dim = infer.concrete_dim(*d, self.rng, &mut dmemo);
                    // reuse the outer index name when the extent agrees
                    let name = if dim == n_() && self.rng.chance(self.cfg.shadow) {
                        shadowed = true;
                        OUTER_INDEX.to_string()
                    } else {
                        self.counter += 1;
                        format!("i{}", self.counter)
                    };
                    binders.insert(*v, (sym(&name), Entry::Index(name.clone(), dim)));
                    bound.insert(*v, Bound::Name(sym(&name)));
                }
                Role::VarBinder(t) => {
                    let ty = infer.concrete(t, self.rng, &mut tmemo, &mut dmemo);
                    let name = if self.rng.chance(self.cfg.shadow) {
                        shadowed = true;
                        self.rng.pick(&outer_names).clone()
                    } else {
                        self.counter += 1;
                        format!("b{}", self.counter)
                    };
                    binders.insert(*v, (sym(&name), Entry::Var(name.clone(), ty)));
                    bound.insert(*v, Bound::Name(sym(&name)));
                }
                _ => {}
            }
        }
        let outer: Vec<Entry> = outer_vars()
            .into_iter()
            .map(|(n, t)| Entry::Var(n, t))
            .chain([Entry::Index(OUTER_INDEX.into(), n_())])
            .collect();
        let gcfg = self.gen_cfg();
        let visible_vars = |entries: &[Entry]| visible(entries).0;
        for v in &infer.order {
            let info = &infer.vars[v];
            let scope_vars = info.scope.clone().unwrap_or_default();
            // not-free(?b, ?v): usually keep ?b out of ?v's scope
            let hidden: Vec<Var> = self
                .shape
                .not_free
                .iter()
                .filter(|(_, e)| e == v)
                .map(|(b, _)| *b)
                .filter(|_| self.rng.chance(0.75))
                .collect();
            let mut entries = outer.clone();
            let mut innermost_index: Option<String> = None;
            for b in &scope_vars {
                let (name, entry) = binders[b].clone();
                if hidden.contains(b) {
                    // the name is really bound here (by the hidden binder):
                    // nothing outside of that name is visible either
                    entries.retain(|e| match e {
                        Entry::Var(n, _) | Entry::Index(n, _) => n.as_str() != name.as_str(),
                    });
                    continue;
                }
                if let Entry::Index(..) = entry {
                    innermost_index = Some(name.to_string());
                }
                entries.push(entry);
            }
            let b = match &info.role {
                Role::Expr(t)
                    if self.rng.chance(0.15)
                        && infer.concrete(t, self.rng, &mut tmemo, &mut dmemo) == Type::Real =>
                {
                    // a bare constant (rules such as d-const need one); not 0
                    // under D: the analysis folds (sqrt 0) into 0, and dual
                    // numbers give (D (sqrt 0)) = inf * 0 = NaN, not (D 0) = 0
                    let under_d = matches!(
                        self.shape.ast.as_ref().last(),
                        Some(ENodeOrVar::ENode(Atl::D(_)))
                    );
                    let ks: &[f64] = if under_d {
                        &[1.0, 2.0, -1.0, 0.5, 2.5]
                    } else {
                        &[0.0, 1.0, 2.0, -1.0, 0.5, 2.5]
                    };
                    Bound::Expr(Expr::Const(Real(*self.rng.pick(ks))))
                }
                Role::VarRef(t) => {
                    let ty = infer.concrete(t, self.rng, &mut tmemo, &mut dmemo);
                    let vars = visible_vars(&entries);
                    let fitting: Vec<&(String, Type)> = vars.iter().filter(|v| v.1 == ty).collect();
                    let name = if fitting.is_empty() {
                        self.rng.pick(&vars).0.clone()
                    } else {
                        self.rng.pick(&fitting).0.clone()
                    };
                    Bound::Name(sym(&name))
                }
                Role::Expr(t) => {
                    let ty = infer.concrete(t, self.rng, &mut tmemo, &mut dmemo);
                    let depth = self.rng.range(1, self.cfg.depth.max(1) as i64) as u32;
                    let text =
                        progen::term_text(self.rng, &gcfg, &self.scope_for(&entries), &ty, depth);
                    let e = elaborate_in(&text, &entries)?;
                    let mut ren = Renamer {
                        counter: &mut self.counter,
                        map: vec![],
                    };
                    Bound::Expr(ren.expr(&e))
                }
                Role::Pred => {
                    let scope = self.scope_for(&entries);
                    let mut text = progen::pred_text(self.rng, &gcfg, &scope, 2);
                    // an equation on the innermost pattern index, which
                    // index elimination solves
                    if let Some(i) = innermost_index.filter(|_| self.rng.chance(0.4)) {
                        let mut without = scope.clone();
                        without.idx.retain(|k| *k != i);
                        let a = progen::index_text(self.rng, &gcfg, &without);
                        let eq = if self.rng.chance(0.5) {
                            format!("(== {i} {a})")
                        } else {
                            format!("(== {a} {i})")
                        };
                        text = if self.rng.chance(0.5) {
                            eq
                        } else {
                            format!("(and {eq} {text})")
                        };
                    }
                    let e = elaborate_in(&format!("(iverson {text} 1)"), &entries)?;
                    let Expr::Iverson(p, _) = e else {
                        return Err("predicate wrapper".into());
                    };
                    let mut ren = Renamer {
                        counter: &mut self.counter,
                        map: vec![],
                    };
                    Bound::Pred(ren.pred(&p))
                }
                Role::Index => {
                    let text = progen::index_text(self.rng, &gcfg, &self.scope_for(&entries));
                    let e = elaborate_in(&format!("(iverson (== {text} 0) 1)"), &entries)?;
                    match e {
                        Expr::Iverson(Pred::Cmp(_, a, _), _) => Bound::Aff(a),
                        _ => return Err("index wrapper".into()),
                    }
                }
                Role::Dim(d) => Bound::Aff(infer.concrete_dim(*d, self.rng, &mut dmemo)),
                Role::Num => Bound::Num(*self.rng.pick(&[2.0, 3.0, 0.5])),
                Role::Fun(k) => {
                    let table = atl_egg::egraph::rules::derivatives::derivative_table();
                    let funs: Vec<Fun> = table
                        .keys()
                        .filter(|f| f.takes_exponent() == *k)
                        .copied()
                        .collect();
                    Bound::Fun(*self.rng.pick(&funs))
                }
                Role::IndexBinder(_) | Role::VarBinder(_) => continue,
            };
            bound.insert(*v, b);
        }
        // build the term
        let mut t = ToRec::default();
        let mut map: Vec<Id> = vec![];
        for node in self.shape.ast.as_ref() {
            let id = match node {
                ENodeOrVar::Var(v) => match &bound[v] {
                    Bound::Expr(e) => t.expr(e),
                    Bound::Pred(p) => t.pred(p),
                    Bound::Aff(a) => t.rec.add(Atl::Aff(Idx(a.clone()))),
                    Bound::Name(s) => t.rec.add(Atl::Sym(*s)),
                    Bound::Num(k) => t.rec.add(Atl::Num(Num(Real(*k)))),
                    Bound::Fun(f) => t.rec.add(Atl::Fun(*f)),
                },
                ENodeOrVar::ENode(n) => {
                    let n = n.clone().map_children(|c| map[usize::from(c)]);
                    t.rec.add(n)
                }
            };
            map.push(id);
        }
        let term = Term::new(t.rec, self.shape.root_sort);
        term.readable()?;
        let mut extents = HashMap::new();
        extents.insert(sym(OUTER_INDEX), n_());
        for n in term.rec.as_ref() {
            if let Atl::Gen([i, d, _])
            | Atl::Sum([i, d, _])
            | Atl::Maximum([i, d, _])
            | Atl::Minimum([i, d, _])
            | Atl::ArgMax([i, d, _])
            | Atl::ArgMin([i, d, _])
            | Atl::Exists([i, d, _]) = n
            {
                if let (Atl::Sym(i), Atl::Aff(Idx(d))) = (&term.rec[*i], &term.rec[*d]) {
                    extents.insert(*i, d.clone());
                }
            }
        }
        Ok(Instance {
            term,
            extents,
            shadowed,
        })
    }
}

/// Type-check an instantiated term with the elaborator (inside `(gen o n _)`);
/// a `D` at the root is checked through its argument.
pub(super) fn type_check(term: &Term) -> Result<(), String> {
    let top = term.top();
    let inner = match (&term.rec[top], term.sort) {
        (_, Sort::Pred) => format!("(iverson {} 1)", pred_to_string(&term.pred(top)?)),
        (Atl::D(a), _) if !term.d(*a) => expr_to_string(&term.expr(*a)?),
        (_, _) if !term.d(top) => expr_to_string(&term.expr(top)?),
        _ => return Err("a D below the root".into()),
    };
    let text = format!(
        "(fn f ({}) (gen {OUTER_INDEX} n {inner}))",
        params_text(&outer_vars())
    );
    parse_program(text.as_bytes())
        .map(|_| ())
        .map_err(|e| format!("{e}\n  in {text}"))
}

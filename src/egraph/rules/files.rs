//! The rule files of `rules/`, read into rule specs.

use symbolic_expressions::Sexp;

/// The rule files, compiled into the binary.
pub const RULE_FILES: &[(&str, &str)] = &[
    (
        "let-lifting.rules",
        include_str!("../../../rules/let-lifting.rules"),
    ),
    (
        "pair-elimination.rules",
        include_str!("../../../rules/pair-elimination.rules"),
    ),
    (
        "gen-pushout.rules",
        include_str!("../../../rules/gen-pushout.rules"),
    ),
    (
        "iverson.rules",
        include_str!("../../../rules/iverson.rules"),
    ),
    (
        "algebra.rules",
        include_str!("../../../rules/algebra.rules"),
    ),
    (
        "forward.rules",
        include_str!("../../../rules/forward.rules"),
    ),
    (
        "adjoint.rules",
        include_str!("../../../rules/adjoint.rules"),
    ),
];

/// One rule as written in a file.
#[derive(Clone, Debug)]
pub struct RuleSpec {
    pub file: &'static str,
    /// The title of the rule's group: the paper's figure or section.
    pub group: String,
    pub name: String,
    pub lhs: String,
    pub rhs: Rhs,
    pub conditions: Vec<(String, Vec<String>)>,
    /// The rule sets the rule belongs to (its group's and its own `:tags`).
    pub tags: Vec<String>,
}

#[derive(Clone, Debug)]
pub enum Rhs {
    Pattern(String),
    Applier(String, Vec<String>),
}

/// `text` without `;` comments (outside strings).
fn strip_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let mut in_string = false;
        for c in line.chars() {
            match c {
                '"' => in_string = !in_string,
                ';' if !in_string => break,
                _ => {}
            }
            out.push(c);
        }
        out.push('\n');
    }
    out
}

fn atom(s: &Sexp) -> Option<&str> {
    match s {
        Sexp::String(a) => Some(a),
        _ => None,
    }
}

/// A pattern written back as text (egg parses patterns from text).
fn sexp_text(s: &Sexp) -> String {
    match s {
        Sexp::String(a) => a.clone(),
        Sexp::List(v) => format!(
            "({})",
            v.iter().map(sexp_text).collect::<Vec<_>>().join(" ")
        ),
        Sexp::Empty => String::new(),
    }
}

/// `(NAME ARG ...)` of a condition or applier.
fn call_of(s: &Sexp) -> Result<(String, Vec<String>), String> {
    match s {
        Sexp::List(v) if !v.is_empty() => {
            let name = atom(&v[0]).ok_or("a call starts with a name")?;
            let args = v[1..]
                .iter()
                .map(|a| {
                    atom(a)
                        .map(str::to_string)
                        .ok_or("call arguments are atoms")
                })
                .collect::<Result<Vec<_>, _>>()?;
            Ok((name.to_string(), args))
        }
        _ => Err(format!("expected (NAME ARG ...), found {}", sexp_text(s))),
    }
}

/// A list of atoms, `(a b c)`.
fn atoms(s: &Sexp) -> Result<Vec<String>, String> {
    match s {
        Sexp::List(v) => v
            .iter()
            .map(|a| {
                atom(a)
                    .map(str::to_string)
                    .ok_or_else(|| "expected atoms".into())
            })
            .collect(),
        _ => Err(format!("expected a list, found {}", sexp_text(s))),
    }
}

/// `(rule NAME LHS [RHS] :if C ... :applier (F ?a ...) :tags (..) :for (X a b ..))`.
fn parse_rule(
    file: &'static str,
    group: &str,
    group_tags: &[String],
    items: &[Sexp],
    out: &mut Vec<RuleSpec>,
) -> Result<(), String> {
    let name = items
        .get(1)
        .and_then(atom)
        .ok_or("(rule NAME LHS RHS ...): missing name")?
        .to_string();
    let at = |m: String| format!("rule {name}: {m}");
    let lhs = items
        .get(2)
        .ok_or_else(|| at("missing left-hand side".into()))?;
    let mut rest = &items[3..];
    let mut rhs = None;
    if let Some(r) = rest.first() {
        if !atom(r).is_some_and(|a| a.starts_with(':')) {
            rhs = Some(Rhs::Pattern(sexp_text(r)));
            rest = &rest[1..];
        }
    }
    let (mut conditions, mut tags, mut template) = (vec![], group_tags.to_vec(), None);
    while let Some(key) = rest.first() {
        let value = rest
            .get(1)
            .ok_or_else(|| at(format!("{} without a value", sexp_text(key))))?;
        match atom(key) {
            Some(":if") => conditions.push(call_of(value).map_err(at)?),
            Some(":applier") => {
                let (n, a) = call_of(value).map_err(at)?;
                if rhs.replace(Rhs::Applier(n, a)).is_some() {
                    return Err(at("both a right-hand side and an applier".into()));
                }
            }
            Some(":tags") => tags.extend(atoms(value).map_err(at)?),
            Some(":for") => {
                let v = atoms(value).map_err(at)?;
                if v.len() < 2 {
                    return Err(at(":for (VAR value ...)".into()));
                }
                template = Some((v[0].clone(), v[1..].to_vec()));
            }
            _ => return Err(at(format!("unknown keyword {}", sexp_text(key)))),
        }
        rest = &rest[2..];
    }
    let rhs = rhs.ok_or_else(|| at("no right-hand side and no :applier".into()))?;
    let spec = RuleSpec {
        file,
        group: group.to_string(),
        name: name.clone(),
        lhs: sexp_text(lhs),
        rhs,
        conditions,
        tags,
    };
    let Some((var, vals)) = template else {
        out.push(spec);
        return Ok(());
    };
    // one rule per value, the template variable replaced by the value
    for val in vals {
        let replace = |text: &str| -> Result<String, String> {
            let parsed =
                symbolic_expressions::parser::parse_str(text).map_err(|e| at(format!("{e}")))?;
            fn go(s: &Sexp, var: &str, val: &str) -> Sexp {
                match s {
                    Sexp::String(a) if a == var => Sexp::String(val.to_string()),
                    Sexp::List(v) => Sexp::List(v.iter().map(|x| go(x, var, val)).collect()),
                    other => other.clone(),
                }
            }
            Ok(sexp_text(&go(&parsed, &var, &val)))
        };
        let mut s = spec.clone();
        s.name = format!("{name}-{val}");
        s.lhs = replace(&spec.lhs)?;
        if let Rhs::Pattern(p) = &spec.rhs {
            s.rhs = Rhs::Pattern(replace(p)?);
        }
        out.push(s);
    }
    Ok(())
}

/// Parse one rule file (templates expanded): a sequence of
/// `(group "TITLE" :tags (SET ...) (rule ...) ...)`; see `rules/README.md`.
pub fn parse_rules(file: &'static str, text: &str) -> Result<Vec<RuleSpec>, String> {
    let at = |m: String| format!("{file}: {m}");
    let whole = format!("({})", strip_comments(text));
    let top = symbolic_expressions::parser::parse_str(&whole).map_err(|e| at(format!("{e}")))?;
    let Sexp::List(groups) = top else {
        return Err(at("expected (group ...) forms".into()));
    };
    let mut out = vec![];
    for g in &groups {
        let items = match g {
            Sexp::List(v) if v.first().and_then(atom) == Some("group") => v,
            _ => {
                return Err(at(format!(
                    "expected (group \"TITLE\" ...), found {}",
                    sexp_text(g)
                )))
            }
        };
        let title = items
            .get(1)
            .and_then(atom)
            .ok_or_else(|| at("(group \"TITLE\" ...): missing title".into()))?;
        let mut rest = &items[2..];
        let mut tags = vec![];
        if rest.first().and_then(atom) == Some(":tags") {
            tags = atoms(
                rest.get(1)
                    .ok_or_else(|| at(":tags without a value".into()))?,
            )
            .map_err(at)?;
            rest = &rest[2..];
        }
        for r in rest {
            match r {
                Sexp::List(v) if v.first().and_then(atom) == Some("rule") => {
                    parse_rule(file, title, &tags, v, &mut out).map_err(at)?
                }
                _ => return Err(at(format!("expected (rule ...), found {}", sexp_text(r)))),
            }
        }
    }
    Ok(out)
}

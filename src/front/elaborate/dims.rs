//! The affine side of the language: dimensions (affine in sizes; a
//! parameter's type may declare a size by naming it), the types built from
//! them, and index expressions (affine in index variables and sizes), all
//! to [`Affine`] normal form.

use super::{kind_words, overflow, Binding, Elab};
use crate::error::{Error, Result};
use crate::front::affine::Affine;
use crate::front::ast::Type;
use crate::front::reader::Sexp;
use crate::symbol::Symbol;

impl Elab {
    // -- dimensions ---------------------------------------------------------

    pub(super) fn dim(&mut self, sx: &Sexp, declare: Option<&mut Vec<Symbol>>) -> Result<Affine> {
        let pos = sx.pos();
        match sx {
            Sexp::Num(n, _) => match n.int {
                Some(k) if k >= 0 => Ok(Affine::constant(k)),
                _ => Err(Error::typ(
                    pos,
                    format!(
                        "a dimension must be a natural number or a size expression, not {}",
                        n.text
                    ),
                )),
            },
            Sexp::Sym(s, _) => match self.scope.get(s.as_str()) {
                Some(Binding::Size(a)) => Ok(a.clone()),
                Some(b) => Err(Error::typ(
                    pos,
                    format!(
                        "'{s}' is {}, not a size, and cannot be used as a dimension",
                        kind_words(b)
                    ),
                )),
                None => match declare {
                    Some(decl) => {
                        if ["R", "size", "relation", "tensor", "pair"].contains(&s.as_str()) {
                            return Err(Error::typ(pos, format!("'{s}' is not a valid size name")));
                        }
                        self.bind(s, Binding::Size(Affine::var(Symbol::from(s.as_str()))));
                        decl.push(Symbol::from(s.as_str()));
                        Ok(Affine::var(Symbol::from(s.as_str())))
                    }
                    None => Err(Error::typ(pos, format!("unknown size '{s}'"))
                        .with_hint_opt(self.near(s, |b| matches!(b, Binding::Size(_))))),
                },
            },
            Sexp::List(items, _) => {
                let h = sx.head();
                let args = &items[1.min(items.len())..];
                let mut declare = declare;
                match (h, args.len()) {
                    (Some("+"), n) if n >= 1 => {
                        let mut acc = Affine::constant(0);
                        for a in args {
                            let d = self.dim(a, declare.as_deref_mut())?;
                            acc = acc.add(&d).map_err(overflow(pos))?;
                        }
                        Ok(acc)
                    }
                    (Some("-"), 2) => {
                        let a = self.dim(&args[0], declare.as_deref_mut())?;
                        let b = self.dim(&args[1], declare)?;
                        a.sub(&b).map_err(overflow(pos))
                    }
                    (Some("*"), 2) => {
                        let Sexp::Num(k, _) = &args[0] else {
                            return Err(Error::typ(
                                pos,
                                "in a dimension (* k D), k must be an integer literal",
                            ));
                        };
                        let Some(k) = k.int else {
                            return Err(Error::typ(
                                pos,
                                "in a dimension (* k D), k must be an integer literal",
                            ));
                        };
                        let d = self.dim(&args[1], declare)?;
                        d.scale(k).map_err(overflow(pos))
                    }
                    _ => Err(Error::typ(
                        pos,
                        "malformed dimension (expected a size name, a natural number, (+ D ...), (- D D) or (* k D))",
                    )),
                }
            }
        }
    }

    // -- types ----------------------------------------------------------------

    pub(super) fn typ(&mut self, sx: &Sexp, declare: &mut Vec<Symbol>) -> Result<Type> {
        let pos = sx.pos();
        let malformed = || {
            Error::typ(
                pos,
                "malformed type (expected R, (pair T T) or (tensor D ... T))",
            )
        };
        match sx {
            Sexp::Sym(s, _) if s == "R" => Ok(Type::Real),
            Sexp::Sym(s, _) => Err(Error::typ(
                pos,
                format!("unknown type '{s}' (expected R, (pair T T) or (tensor D ... T))"),
            )),
            Sexp::Num(..) => Err(malformed()),
            Sexp::List(items, _) => {
                let args = &items[1.min(items.len())..];
                match sx.head() {
                    Some("stored-by") => Err(Error::typ(
                        pos,
                        "(stored-by R) ends the tensor type of a parameter or of the result, \
                         (tensor D ... R (stored-by R))",
                    )),
                    Some("pair") => {
                        if args.len() != 2 {
                            return Err(Error::typ(
                                pos,
                                format!("(pair T T) takes 2 types, got {}", args.len()),
                            ));
                        }
                        let a = self.typ(&args[0], declare)?;
                        let b = self.typ(&args[1], declare)?;
                        Ok(Type::Pair(Box::new(a), Box::new(b)))
                    }
                    Some("tuple") if !args.is_empty() => {
                        // right-nested pairs, like the expression form
                        let mut ts = vec![];
                        for a in args {
                            ts.push(self.typ(a, declare)?);
                        }
                        let last = ts.pop().expect("not empty");
                        Ok(ts
                            .into_iter()
                            .rev()
                            .fold(last, |acc, t| Type::Pair(Box::new(t), Box::new(acc))))
                    }
                    Some("tensor") => {
                        if args.len() < 2 {
                            return Err(Error::typ(
                                pos,
                                "(tensor D ... T) needs at least one dimension and an element type",
                            ));
                        }
                        let elem = self.typ(&args[args.len() - 1], declare)?;
                        let mut dims = vec![];
                        for d in &args[..args.len() - 1] {
                            dims.push(self.dim(d, Some(declare))?);
                        }
                        Ok(Type::tensor(&dims, elem))
                    }
                    _ => Err(malformed()),
                }
            }
        }
    }

    // -- index expressions ----------------------------------------------------

    pub(super) fn index(&mut self, sx: &Sexp) -> Result<Affine> {
        let pos = sx.pos();
        match sx {
            Sexp::Num(n, _) => match n.int {
                Some(k) => Ok(Affine::constant(k)),
                None if n.is_int_text => Err(Error::typ(
                    pos,
                    format!("index literal {} is too large", n.text),
                )),
                None => Err(Error::typ(
                    pos,
                    format!(
                        "an index must be an integer expression; {} is not an integer",
                        n.text
                    ),
                )),
            },
            Sexp::Sym(s, _) => match self.scope.get(s.as_str()) {
                Some(Binding::Index(u)) => Ok(Affine::var(*u)),
                Some(Binding::Size(a)) => Ok(a.clone()),
                Some(b) => Err(Error::typ(
                    pos,
                    format!("'{s}' is {} and cannot be used as an index", kind_words(b)),
                )),
                None => Err(Error::typ(pos, format!("unbound index variable '{s}'"))
                    .with_hint_opt(
                        self.near(s, |b| matches!(b, Binding::Index(_) | Binding::Size(_))),
                    )),
            },
            Sexp::List(items, _) => {
                let args = &items[1.min(items.len())..];
                match (sx.head(), args.len()) {
                    (Some("+"), n) if n >= 2 => {
                        let mut acc = Affine::constant(0);
                        for a in args {
                            let d = self.index(a)?;
                            acc = acc.add(&d).map_err(overflow(pos))?;
                        }
                        Ok(acc)
                    }
                    (Some("-"), 2) => {
                        let a = self.index(&args[0])?;
                        let b = self.index(&args[1])?;
                        a.sub(&b).map_err(overflow(pos))
                    }
                    (Some("*"), 2) => {
                        let k = match &args[0] {
                            Sexp::Num(k, _) => k.int,
                            _ => None,
                        };
                        let Some(k) = k else {
                            return Err(Error::typ(
                                pos,
                                "in an index (* k a), k must be an integer literal",
                            ));
                        };
                        let a = self.index(&args[1])?;
                        a.scale(k).map_err(overflow(pos))
                    }
                    _ => Err(Error::typ(
                        pos,
                        "malformed index expression (expected i, n, an integer, (+ a a ...), (- a a) or (* k a))",
                    )),
                }
            }
        }
    }
}

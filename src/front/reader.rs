//! S-expression reader with a line:column position on every node.
//!
//! Why not the `symbolic_expressions` crate (which egg itself uses to read
//! patterns): its parser keeps no source
//! positions, and every syntax and type error of ATL must name its
//! line:column; it also recurses on nesting depth, while ATL programs nested
//! 100,000 deep are legal. This reader is iterative (an explicit stack), so
//! reading never overflows; later passes run on a large stack
//! ([`crate::stack::with_big_stack`]).
//!
//! Lexical rules (docs/language.md, "Lexical rules"): comments run from
//! `;` to the end of the line; atoms are runs of printable ASCII other than
//! `( ) [ ] { } ; " , ` \ # |`; a number is
//! `[+-]?(digits[.digits][e[+-]digits] | .digits[e[+-]digits])`; a token that
//! starts like a number but is not one is a malformed number.

use crate::error::{Error, Pos, Result};

#[derive(Clone, Debug, PartialEq)]
pub enum Sexp {
    /// A symbol.
    Sym(String, Pos),
    /// A number literal: its text, value, and whether it is an integer literal.
    Num(NumLit, Pos),
    /// A parenthesized list; `pos` is the position of its `(`.
    List(Vec<Sexp>, Pos),
}

#[derive(Clone, Debug, PartialEq)]
pub struct NumLit {
    pub text: String,
    pub value: f64,
    /// `Some(k)` when the literal is an integer (`[+-]?digits`) that fits i64.
    pub int: Option<i64>,
    /// The literal is written as an integer (even if too large for i64).
    pub is_int_text: bool,
}

impl Sexp {
    pub fn pos(&self) -> Pos {
        match self {
            Sexp::Sym(_, p) | Sexp::Num(_, p) | Sexp::List(_, p) => *p,
        }
    }
    pub fn as_sym(&self) -> Option<&str> {
        match self {
            Sexp::Sym(s, _) => Some(s),
            _ => None,
        }
    }
    /// The head symbol of a non-empty list.
    pub fn head(&self) -> Option<&str> {
        match self {
            Sexp::List(items, _) => items.first().and_then(Sexp::as_sym),
            _ => None,
        }
    }
}

fn is_atom_char(c: char) -> bool {
    c.is_ascii_graphic() && !"()[]{};\",`\\#|".contains(c)
}

fn describe(c: char) -> String {
    if c == '\0' {
        "NUL byte".to_string()
    } else if c.is_ascii_graphic() {
        format!("'{c}'")
    } else {
        format!("character U+{:04X}", c as u32)
    }
}

/// `[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?` as a whole token.
fn is_number(tok: &str) -> bool {
    let b = tok.as_bytes();
    let mut i = 0;
    if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
        i += 1;
    }
    let digits = |i: &mut usize| {
        let s = *i;
        while *i < b.len() && b[*i].is_ascii_digit() {
            *i += 1;
        }
        *i - s
    };
    let int_digits = digits(&mut i);
    if int_digits > 0 {
        if i < b.len() && b[i] == b'.' {
            i += 1;
            digits(&mut i);
        }
    } else {
        if i >= b.len() || b[i] != b'.' {
            return false;
        }
        i += 1;
        if digits(&mut i) == 0 {
            return false;
        }
    }
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        i += 1;
        if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
            i += 1;
        }
        if digits(&mut i) == 0 {
            return false;
        }
    }
    i == b.len()
}

fn is_int_text(tok: &str) -> bool {
    let t = tok.strip_prefix(['+', '-']).unwrap_or(tok);
    !t.is_empty() && t.bytes().all(|c| c.is_ascii_digit())
}

/// Starts like a number (`[+-]?\.?\d`) but might not be one.
fn looks_numeric(tok: &str) -> bool {
    let t = tok.strip_prefix(['+', '-']).unwrap_or(tok);
    let t = t.strip_prefix('.').unwrap_or(t);
    t.bytes().next().is_some_and(|c| c.is_ascii_digit())
}

fn atom(tok: &str, pos: Pos) -> Result<Sexp> {
    if is_number(tok) {
        let value: f64 = tok
            .parse()
            .map_err(|_| Error::syntax(pos, format!("malformed number '{tok}'")))?;
        let is_int = is_int_text(tok);
        let int = if is_int {
            tok.parse::<i64>().ok()
        } else {
            None
        };
        Ok(Sexp::Num(
            NumLit {
                text: tok.to_string(),
                value,
                int,
                is_int_text: is_int,
            },
            pos,
        ))
    } else if looks_numeric(tok) {
        Err(Error::syntax(pos, format!("malformed number '{tok}'")))
    } else {
        Ok(Sexp::Sym(tok.to_string(), pos))
    }
}

/// Read every top-level S-expression of a text.
pub fn read(bytes: &[u8]) -> Result<Vec<Sexp>> {
    let text = match std::str::from_utf8(bytes) {
        Ok(t) => t,
        Err(e) => {
            let before = &bytes[..e.valid_up_to()];
            let line = before.iter().filter(|&&c| c == b'\n').count() as u32 + 1;
            let last_nl = before
                .iter()
                .rposition(|&c| c == b'\n')
                .map_or(0, |k| k + 1);
            let col = String::from_utf8_lossy(&before[last_nl..]).chars().count() as u32 + 1;
            return Err(Error::syntax(
                Pos { line, col },
                "input is not valid UTF-8 text",
            ));
        }
    };
    let mut stack: Vec<(Vec<Sexp>, Pos)> = vec![];
    let mut top: Vec<Sexp> = vec![];
    let (mut line, mut col) = (1u32, 1u32);
    let mut chars = text.chars().peekable();
    while let Some(&c) = chars.peek() {
        let pos = Pos { line, col };
        match c {
            '\n' => {
                chars.next();
                line += 1;
                col = 1;
            }
            ' ' | '\t' | '\r' | '\x0c' | '\x0b' => {
                chars.next();
                col += 1;
            }
            ';' => {
                while let Some(&d) = chars.peek() {
                    if d == '\n' {
                        break;
                    }
                    chars.next();
                }
            }
            '(' => {
                chars.next();
                col += 1;
                stack.push((vec![], pos));
            }
            ')' => {
                chars.next();
                col += 1;
                let Some((items, open)) = stack.pop() else {
                    return Err(Error::syntax(pos, "unexpected ')' with no matching '('"));
                };
                let list = Sexp::List(items, open);
                match stack.last_mut() {
                    Some((items, _)) => items.push(list),
                    None => top.push(list),
                }
            }
            _ => {
                let mut tok = String::new();
                while let Some(&d) = chars.peek() {
                    if d.is_whitespace() || d == '(' || d == ')' || d == ';' {
                        break;
                    }
                    if !is_atom_char(d) {
                        return Err(Error::syntax(
                            Pos { line, col },
                            format!("unexpected {}", describe(d)),
                        ));
                    }
                    tok.push(d);
                    chars.next();
                    col += 1;
                }
                if tok.is_empty() {
                    // a non-ASCII whitespace character
                    return Err(Error::syntax(pos, format!("unexpected {}", describe(c))));
                }
                let a = atom(&tok, pos)?;
                match stack.last_mut() {
                    Some((items, _)) => items.push(a),
                    None => top.push(a),
                }
            }
        }
    }
    if let Some((_, open)) = stack.last() {
        // the caret goes under the innermost '(' left open; the message
        // says where the input ends
        let end = Pos { line, col };
        return Err(Error::syntax(
            *open,
            format!("unbalanced parentheses: this '(' is never closed (the input ends at {end})"),
        )
        .with_hint("add the missing ')'"));
    }
    Ok(top)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_and_comments() {
        let r = read(b"; hi\n(fn f\n  ((x R)) 2.5e1)").unwrap();
        assert_eq!(r.len(), 1);
        let Sexp::List(items, p) = &r[0] else {
            panic!()
        };
        assert_eq!((p.line, p.col), (2, 1));
        assert_eq!(items[3].pos(), Pos { line: 3, col: 11 });
        let Sexp::Num(n, _) = &items[3] else { panic!() };
        assert_eq!(n.value, 25.0);
        assert_eq!(n.int, None);
    }

    #[test]
    fn numbers() {
        for good in ["1", "-1", "+2", "1.", "1.5", ".5", "3e-2", "-1E+3"] {
            assert!(is_number(good), "{good}");
        }
        for bad in ["1e", ".", "1.2.3", "e5", "--1", "1x"] {
            assert!(!is_number(bad), "{bad}");
        }
        assert!(read(b"(1x)").is_err());
        assert!(read(b"(x-1)").is_ok());
    }

    #[test]
    fn errors_have_positions() {
        let e = read(b"(fn f\n  x[0])").unwrap_err();
        assert_eq!(e.pos, Some(Pos { line: 2, col: 4 }));
        let e = read(b"(a))").unwrap_err();
        assert_eq!(e.pos, Some(Pos { line: 1, col: 4 }));
        let e = read(b"(a (b)").unwrap_err();
        assert!(e.msg.contains("never closed"));
        let e = read(b"(a \xff)").unwrap_err();
        assert_eq!(e.pos, Some(Pos { line: 1, col: 4 }));
    }

    #[test]
    fn deep_nesting_does_not_recurse() {
        let depth = 200_000;
        let text = format!("{}{}", "(".repeat(depth), ")".repeat(depth));
        let r = crate::stack::with_big_stack(move || read(text.as_bytes()).map(|v| v.len()));
        assert_eq!(r, Ok(1));
    }
}

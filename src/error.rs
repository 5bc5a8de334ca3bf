//! One error type for the whole crate: what went wrong, of which kind, and
//! where in the source text (line:column, 1-based) when that is known.

use std::fmt;

/// Source position, 1-based line and column (columns count characters).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Pos {
    pub line: u32,
    pub col: u32,
}

impl fmt::Display for Pos {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.col)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// Malformed text: tokens, parentheses, unknown forms, arity.
    Syntax,
    /// Well-formed text that is not a well-typed program.
    Type,
    /// Bad inputs: JSON values, sizes, files.
    Input,
    /// Evaluation or costing failed (sizes too large, negative dimensions).
    Eval,
    /// A bad command line (exit status 2).
    Usage,
    /// Differentiation or optimization could not be carried out.
    Transform,
}

impl ErrorKind {
    fn word(self) -> &'static str {
        match self {
            ErrorKind::Syntax => "syntax",
            ErrorKind::Type => "type",
            ErrorKind::Input => "input",
            ErrorKind::Eval => "evaluation",
            ErrorKind::Usage => "usage",
            ErrorKind::Transform => "transform",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    pub kind: ErrorKind,
    pub msg: String,
    pub pos: Option<Pos>,
}

impl Error {
    pub fn new(kind: ErrorKind, msg: impl Into<String>) -> Error {
        Error {
            kind,
            msg: msg.into(),
            pos: None,
        }
    }
    pub fn at(kind: ErrorKind, pos: Pos, msg: impl Into<String>) -> Error {
        Error {
            kind,
            msg: msg.into(),
            pos: Some(pos),
        }
    }
    pub fn syntax(pos: Pos, msg: impl Into<String>) -> Error {
        Error::at(ErrorKind::Syntax, pos, msg)
    }
    pub fn typ(pos: Pos, msg: impl Into<String>) -> Error {
        Error::at(ErrorKind::Type, pos, msg)
    }
    pub fn input(msg: impl Into<String>) -> Error {
        Error::new(ErrorKind::Input, msg)
    }
    pub fn eval(msg: impl Into<String>) -> Error {
        Error::new(ErrorKind::Eval, msg)
    }
    pub fn usage(msg: impl Into<String>) -> Error {
        Error::new(ErrorKind::Usage, msg)
    }
    pub fn transform(msg: impl Into<String>) -> Error {
        Error::new(ErrorKind::Transform, msg)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self.pos {
            Some(p) => write!(f, "{}: {} error: {}", p, self.kind.word(), self.msg),
            None => write!(f, "{} error: {}", self.kind.word(), self.msg),
        }
    }
}

impl std::error::Error for Error {}

pub type Result<T, E = Error> = std::result::Result<T, E>;

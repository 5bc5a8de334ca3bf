//! One error type for the whole crate: what went wrong, of which kind,
//! where in the source text (line:column, 1-based) when that is known, and
//! a hint when one helps (the closest name, the flag to use).
//!
//! `Display` gives one line (`2:5: type error: unbound variable 'yy'`);
//! [`crate::diagnostics::render`] gives the full report with the file name,
//! the source line and a caret under the offending text.

use std::fmt;

/// Source position, 1-based line and column (columns count characters).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Pos {
    /// Line, from 1.
    pub line: u32,
    /// Column, from 1, in characters.
    pub col: u32,
}

impl fmt::Display for Pos {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.col)
    }
}

/// What kind of error: decides the exit status and the word in the message.
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
    /// The word for this kind in messages (`syntax`, `type`, `input`, ...).
    pub fn word(self) -> &'static str {
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

/// An error of the compiler, its inputs or its command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    /// The kind of error.
    pub kind: ErrorKind,
    /// What went wrong, in one sentence without a trailing period.
    pub msg: String,
    /// Where in the program text, for syntax and type errors.
    pub pos: Option<Pos>,
    /// What would help: the closest name, the input that is missing, a flag.
    pub hint: Option<String>,
    /// Other places of the program text that explain the error (the
    /// operands of a mistyped `+`, with their types).
    pub labels: Vec<(Pos, String)>,
}

impl Error {
    /// An error without a position.
    pub fn new(kind: ErrorKind, msg: impl Into<String>) -> Error {
        Error {
            kind,
            msg: msg.into(),
            pos: None,
            hint: None,
            labels: vec![],
        }
    }
    /// An error at a position of the program text.
    pub fn at(kind: ErrorKind, pos: Pos, msg: impl Into<String>) -> Error {
        Error {
            kind,
            msg: msg.into(),
            pos: Some(pos),
            hint: None,
            labels: vec![],
        }
    }
    /// The same error with a hint (replacing any earlier one).
    pub fn with_hint(mut self, hint: impl Into<String>) -> Error {
        self.hint = Some(hint.into());
        self
    }
    /// The same error with one more secondary place and what it says.
    pub fn with_label(mut self, pos: Pos, text: impl Into<String>) -> Error {
        self.labels.push((pos, text.into()));
        self
    }
    /// The same error with a hint when there is one.
    pub fn with_hint_opt(mut self, hint: Option<String>) -> Error {
        if hint.is_some() {
            self.hint = hint;
        }
        self
    }
    /// A syntax error at `pos`.
    pub fn syntax(pos: Pos, msg: impl Into<String>) -> Error {
        Error::at(ErrorKind::Syntax, pos, msg)
    }
    /// A type error at `pos`.
    pub fn typ(pos: Pos, msg: impl Into<String>) -> Error {
        Error::at(ErrorKind::Type, pos, msg)
    }
    /// An error in the inputs (JSON values, sizes, files).
    pub fn input(msg: impl Into<String>) -> Error {
        Error::new(ErrorKind::Input, msg)
    }
    /// An error while evaluating or costing.
    pub fn eval(msg: impl Into<String>) -> Error {
        Error::new(ErrorKind::Eval, msg)
    }
    /// A bad command line (exit status 2).
    pub fn usage(msg: impl Into<String>) -> Error {
        Error::new(ErrorKind::Usage, msg)
    }
    /// A derivative or optimization that could not be carried out.
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

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

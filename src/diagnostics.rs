//! Error reports for people: the file name, `line:column`, the source line
//! with a caret under the offending text, and a hint where one helps.
//!
//! Rendering is done by `codespan-reporting` (the crate rustc-style
//! reports in `gleam`, `mun` and `codespan` itself use): it is small, has no
//! proc macros, renders to any writer with or without color, and takes the
//! source as a plain string, which is all we have. (`ariadne` draws
//! prettier multi-line spans but allocates per character and has a less
//! stable API; `miette` wants errors to implement its derive-heavy trait.)
//!
//! ```
//! let src = "(fn f ((x R) (y R))\n  (+ x yy))\n";
//! let err = atl_egg::parse(src).unwrap_err();
//! let text = atl_egg::diagnostics::render(&err, Some(("f.atl", src)), false);
//! assert!(text.contains("f.atl:2:8"));
//! assert!(text.contains("did you mean `y`?"));
//! ```

use crate::error::{Error, Pos};
use codespan_reporting::diagnostic::{Diagnostic, Label};
use codespan_reporting::files::SimpleFile;
use codespan_reporting::term::{self, termcolor, Config};

/// The candidate closest to `name`, when one is close enough to be a
/// likely misspelling (edit distance at most a third of the longer name,
/// and at least one).
pub fn closest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let mut best: Option<(usize, &str)> = None;
    for c in candidates {
        if c == name {
            continue;
        }
        let d = strsim::levenshtein(name, c);
        let bound = (name.chars().count().max(c.chars().count()) / 3).max(1);
        if d <= bound && best.is_none_or(|(bd, bc)| (d, c) < (bd, bc)) {
            best = Some((d, c));
        }
    }
    best.map(|(_, c)| c)
}

/// "did you mean `x`?" for the closest candidate, if any.
pub fn did_you_mean<'a>(
    name: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<String> {
    closest(name, candidates).map(|c| format!("did you mean `{c}`?"))
}

/// Whether reports on standard error should be colored: standard error is
/// a terminal and `NO_COLOR` is unset or empty (<https://no-color.org>).
pub fn stderr_wants_color() -> bool {
    use std::io::IsTerminal;
    let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
    !no_color && std::io::stderr().is_terminal()
}

/// Byte offset of a 1-based line:column (columns count characters) in
/// `text`, clamped to the text.
fn offset_of(text: &str, pos: Pos) -> usize {
    let mut line = 1u32;
    let mut start = 0usize;
    if pos.line > 1 {
        for (k, b) in text.bytes().enumerate() {
            if b == b'\n' {
                line += 1;
                if line == pos.line {
                    start = k + 1;
                    break;
                }
            }
        }
        if line < pos.line {
            return text.len();
        }
    }
    let rest = &text[start..];
    let eol = rest.find('\n').unwrap_or(rest.len());
    rest[..eol]
        .char_indices()
        .nth(pos.col.saturating_sub(1) as usize)
        .map_or(start + eol, |(k, _)| start + k)
}

/// Lines longer than this are not shown whole.
const LONG_LINE: usize = 300;
/// Bytes of context either side of the column in an excerpt of a long line.
const EXCERPT: usize = 40;

/// The largest char boundary of `text` at or before `k`.
fn floor_char(text: &str, mut k: usize) -> usize {
    while !text.is_char_boundary(k) {
        k -= 1;
    }
    k
}

/// The span to underline at `at`: a whole form when it closes on the same
/// line, else its `(`; a whole atom; one character otherwise.
fn span_at(text: &str, at: usize) -> std::ops::Range<usize> {
    let rest = &text[at..];
    let line = &rest[..rest.find('\n').unwrap_or(rest.len())];
    let Some(first) = line.chars().next() else {
        return at..at;
    };
    if first == '(' {
        let mut depth = 0i32;
        for (k, c) in line.char_indices() {
            match c {
                '(' => depth += 1,
                ')' => {
                    depth -= 1;
                    if depth == 0 {
                        return at..at + k + 1;
                    }
                }
                _ => {}
            }
        }
        return at..at + 1;
    }
    let is_atom = |c: char| !c.is_whitespace() && !"()".contains(c);
    if is_atom(first) {
        let end = line.find(|c: char| !is_atom(c)).unwrap_or(line.len());
        return at..at + end;
    }
    at..at + first.len_utf8()
}

/// The report for `err`: with `source` (its name and text) and a position,
/// the source line and a caret under the span; `color` adds ANSI colors.
///
/// The header is `error[KIND]: MESSAGE`; the location line is
/// `┌─ FILE:LINE:COLUMN`; a hint follows as `= hint: ...`. Without a
/// source, a positioned error still shows `LINE:COLUMN` in its header.
pub fn render(err: &Error, source: Option<(&str, &str)>, color: bool) -> String {
    let mut diag = Diagnostic::error()
        .with_code(err.kind.word())
        .with_message(err.msg.clone());
    let file = source.map(|(name, text)| SimpleFile::new(name.to_string(), text.to_string()));
    let mut notes = vec![];
    match (err.pos, &file) {
        (Some(pos), Some(f)) => {
            let text = f.source();
            let at = offset_of(text, pos);
            let line_start = text[..at].rfind('\n').map_or(0, |k| k + 1);
            let line_end = text[at..].find('\n').map_or(text.len(), |k| at + k);
            if line_end - line_start <= LONG_LINE {
                let mut labels = vec![Label::primary((), span_at(text, at))];
                for (p, what) in &err.labels {
                    let at = offset_of(text, *p);
                    labels.push(Label::secondary((), span_at(text, at)).with_message(what.clone()));
                }
                diag = diag.with_labels(labels);
            } else {
                // a very long line (a generated program): show where, and an
                // excerpt around the column instead of the whole line
                let from = floor_char(text, at.saturating_sub(EXCERPT).max(line_start));
                let to = floor_char(text, (at + EXCERPT).min(line_end));
                notes.push(format!(
                    "at {}:{pos} (line {} is {} characters long): ...{}...",
                    f.name(),
                    pos.line,
                    text[line_start..line_end].chars().count(),
                    &text[from..to]
                ));
            }
        }
        (Some(pos), None) => diag = diag.with_message(format!("{pos}: {}", err.msg)),
        _ => {}
    }
    if let Some(h) = &err.hint {
        notes.push(format!("hint: {h}"));
    }
    diag = diag.with_notes(notes);
    let empty = SimpleFile::new(String::new(), String::new());
    let files = file.as_ref().unwrap_or(&empty);
    let config = Config::default();
    let mut buf = if color {
        termcolor::Buffer::ansi()
    } else {
        termcolor::Buffer::no_color()
    };
    match term::emit_to_write_style(&mut buf, &config, files, &diag) {
        Ok(()) => String::from_utf8_lossy(buf.as_slice()).into_owned(),
        // the renderer failed (a span outside the file): the one-line form
        Err(_) => format!("error: {err}\n"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closest_names() {
        assert_eq!(closest("yy", ["x", "y"]), Some("y"));
        assert_eq!(closest("zz", ["x", "n"]), None);
        assert_eq!(closest("sigmod", ["sigmoid", "sin"]), Some("sigmoid"));
    }

    #[test]
    fn spans() {
        let t = "(fn f ((x R))\n  (frob x))\n";
        let at = offset_of(t, Pos { line: 2, col: 3 });
        assert_eq!(&t[span_at(t, at)], "(frob x)");
        let at = offset_of(t, Pos { line: 2, col: 9 });
        assert_eq!(&t[span_at(t, at)], "x");
        let at = offset_of(t, Pos { line: 9, col: 9 });
        assert_eq!(span_at(t, at), t.len()..t.len());
    }
}

//! The one name supply.
//!
//! A name made by the compiler is a **base** and an **id**, written
//! `base#id`: the base says what it names (`t`, `dx`, `x_bar`, the user's
//! `i`), the id makes it unique. The reader rejects `#`, so such a name never
//! collides with one a user can write. Printed programs never show them:
//! [`crate::front::readable`] renames every binder to its base (or the
//! user's name it stands for), then `base1`, `base2`, ... where taken.

use egg::Symbol;

/// The separator between base and id; the reader does not accept it.
pub const SEP: char = '#';

/// The name with base `base` (its own base if it is already a made name)
/// and id `id`.
pub fn make(base: &str, id: impl std::fmt::Display) -> Symbol {
    Symbol::from(format!("{}{SEP}{id}", self::base(base)))
}

/// The base of a name (the name itself for a user's name).
pub fn base(s: &str) -> &str {
    s.split(SEP).next().unwrap_or(s)
}

/// The numeric id of a made name.
pub fn id(s: &str) -> Option<u64> {
    s.rsplit_once(SEP).and_then(|(_, n)| n.parse().ok())
}

/// Is this a name the compiler made (one a user cannot write)?
pub fn is_made(s: &str) -> bool {
    s.contains(SEP)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bases_and_ids() {
        assert_eq!(base("dx#12"), "dx");
        assert_eq!(id("dx#12"), Some(12));
        assert!(!is_made("i0~x0"));
    }
}

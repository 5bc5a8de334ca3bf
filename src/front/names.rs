//! The one name supply.
//!
//! A name made by the compiler is a **base** and an **id**, written
//! `base#id`: the base says what it names (`t`, `dx`, `x_bar`, the user's
//! `i`), the id makes it unique. The reader rejects `#`, so such a name never
//! collides with one a user can write. Printed programs never show them:
//! [`crate::front::readable`] renames every binder to its base (or the
//! user's name it stands for), then `base1`, `base2`, ... where taken.

use crate::symbol::Symbol;

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

/// The supply of made names every pass draws from: each [`Fresh::name`]
/// hands out the next id. A pass that works on a term made elsewhere starts
/// after the largest id in it ([`crate::front::subst::max_fresh_suffix`]),
/// so names made by an earlier pass never clash with new ones.
#[derive(Clone, Debug, Default)]
pub struct Fresh {
    last: u64,
}

impl Fresh {
    /// A supply whose first name gets id `last + 1`.
    pub fn after(last: u64) -> Fresh {
        Fresh { last }
    }

    /// The largest id handed out so far (or the one it started after).
    pub fn last(&self) -> u64 {
        self.last
    }

    /// Hand out only ids above `last` from now on.
    pub fn raise_to(&mut self, last: u64) {
        self.last = self.last.max(last);
    }

    /// A new made name with the base of `base` (`i` or `i#3` -> `i#7`).
    pub fn name(&mut self, base: &str) -> Symbol {
        self.last += 1;
        make(base, self.last)
    }
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

//! Names: interned strings ordered and hashed by their text.
//!
//! Every name of a program, and every name leaf of the e-graph, is a
//! [`Symbol`]: a pointer into a process-wide table of strings, so it is
//! copied, compared for equality and stored in a node as one word. Unlike a
//! symbol numbered in the order it was first interned, a [`Symbol`] orders
//! (`Ord`) by its text and hashes (`Hash`) a digest of its text alone. The
//! e-graph sorts the nodes of a class, and so its matches and the ties of
//! extraction, by that order: what the compiler derives from a program is a
//! function of the program, whichever programs the process derived before.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::str::FromStr;
use std::sync::{Mutex, OnceLock};

/// One interned name: its text and the digest its `Hash` writes.
struct Entry {
    text: &'static str,
    digest: u64,
}

/// An interned name. Equal texts are the same entry, so equality is a
/// pointer comparison; order is the order of the texts.
#[derive(Clone, Copy)]
pub struct Symbol(&'static Entry);

/// The number of independently locked parts of the table (threads interning
/// at once rarely wait on each other).
const SHARDS: usize = 16;

type Shard = Mutex<HashMap<&'static str, &'static Entry>>;

fn table() -> &'static [Shard; SHARDS] {
    static TABLE: OnceLock<[Shard; SHARDS]> = OnceLock::new();
    TABLE.get_or_init(|| std::array::from_fn(|_| Mutex::new(HashMap::new())))
}

/// FNV-1a over the bytes of a text: the same digest in every process.
fn digest(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

impl Symbol {
    /// The name spelled `s`.
    pub fn new(s: impl AsRef<str>) -> Symbol {
        let s = s.as_ref();
        let digest = digest(s);
        // the table's entries are only ever added, so a shard left
        // poisoned by a panicking thread is still consistent
        let mut shard = table()[(digest as usize) % SHARDS]
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(&entry) = shard.get(s) {
            return Symbol(entry);
        }
        let text: &'static str = Box::leak(s.to_owned().into_boxed_str());
        let entry: &'static Entry = Box::leak(Box::new(Entry { text, digest }));
        shard.insert(text, entry);
        Symbol(entry)
    }

    /// The name's text.
    pub fn as_str(&self) -> &'static str {
        self.0.text
    }
}

impl PartialEq for Symbol {
    fn eq(&self, other: &Symbol) -> bool {
        std::ptr::eq(self.0, other.0)
    }
}

impl Eq for Symbol {}

impl Ord for Symbol {
    fn cmp(&self, other: &Symbol) -> Ordering {
        if self == other {
            Ordering::Equal
        } else {
            self.0.text.cmp(other.0.text)
        }
    }
}

impl PartialOrd for Symbol {
    fn partial_cmp(&self, other: &Symbol) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Hash for Symbol {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(self.0.digest);
    }
}

impl From<&str> for Symbol {
    fn from(s: &str) -> Symbol {
        Symbol::new(s)
    }
}

impl From<String> for Symbol {
    fn from(s: String) -> Symbol {
        Symbol::new(s)
    }
}

impl From<&String> for Symbol {
    fn from(s: &String) -> Symbol {
        Symbol::new(s)
    }
}

impl From<Symbol> for &'static str {
    fn from(s: Symbol) -> &'static str {
        s.as_str()
    }
}

impl FromStr for Symbol {
    type Err = std::convert::Infallible;
    fn from_str(s: &str) -> Result<Symbol, Self::Err> {
        Ok(Symbol::new(s))
    }
}

impl fmt::Debug for Symbol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for Symbol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self.as_str(), f)
    }
}

#[cfg(test)]
mod tests {
    use super::Symbol;

    #[test]
    fn order_and_hash_follow_the_text() {
        // interned in the reverse of their order
        let (z, a) = (Symbol::from("zz_order"), Symbol::from("aa_order"));
        assert!(a < z);
        assert_eq!(Symbol::from("zz_order"), z);
        assert_ne!(a, z);
        let h = |s: Symbol| {
            use std::hash::{Hash, Hasher};
            let mut h = std::collections::hash_map::DefaultHasher::new();
            s.hash(&mut h);
            h.finish()
        };
        assert_eq!(h(z), h(Symbol::from(String::from("zz_order"))));
        assert_eq!(z.as_str(), "zz_order");
    }
}

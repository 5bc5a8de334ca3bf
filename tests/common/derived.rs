//! The corpus (`corpus/*.atl`), optimized and differentiated once for the
//! whole test binary: `derivatives`, `snapshots`, `cheap_gradients` and
//! `compiled` check the same programs, which are derived on first use (on
//! every core) and shared. Deterministic (egg's `deterministic` feature, and
//! a 600 s time limit so that only the node and iteration limits stop a
//! phase): a test reads what it would have computed itself.

use atl_egg::corpus::CorpusProgram;
use atl_egg::derive;
use atl_egg::egraph::Options;
use atl_egg::front::ast::{Program, Type};
use atl_egg::optimizer::Stats;
use atl_egg::Symbol;
use std::path::Path;
use std::sync::OnceLock;

/// The options of every derivation: the defaults (no user sizes, as
/// `atl-egg optimize FILE`), with a 600 s time limit.
pub fn opts() -> Options {
    Options {
        time_limit: std::time::Duration::from_secs(600),
        ..Default::default()
    }
}

/// The corpus's programs, in the order of their file names.
pub fn corpus() -> Vec<CorpusProgram> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
    CorpusProgram::load_dir(&dir).expect("corpus loads")
}

/// One corpus program, optimized, and its derivatives along its `wrt` (all
/// real inputs without one): `grad` and `hvp` for a function returning `R`
/// only.
pub struct Derived {
    pub c: CorpusProgram,
    pub wrt: Vec<Symbol>,
    pub optimize: Program,
    pub grad: Option<Program>,
    pub jvp: Program,
    pub vjp: Program,
    pub hvp: Option<Program>,
    /// The statistics of the phases of each command that made one of the
    /// programs above (`optimize`, `grad`, `jvp`, `vjp`, `hvp`).
    pub stats: Vec<(&'static str, Stats)>,
}

impl Derived {
    /// The statistics of the command `kind`.
    pub fn stats(&self, kind: &str) -> Option<&Stats> {
        self.stats.iter().find(|(k, _)| *k == kind).map(|(_, s)| s)
    }
}

/// The corpus's derivatives, computed on first use (on every core). A
/// derivative that fails panics, naming the program.
pub fn derived() -> &'static [Derived] {
    static DERIVED: OnceLock<Vec<Derived>> = OnceLock::new();
    DERIVED.get_or_init(|| {
        super::par::par_map(&corpus(), |c| {
            let wrt = c.wrt_or_all();
            let scalar = c.program.ret == Type::Real;
            let stats = std::sync::Mutex::new(vec![]);
            let made = |r: atl_egg::Result<derive::Derived>, what: &'static str| match r {
                Ok(d) => {
                    stats.lock().unwrap().push((what, d.stats));
                    d.program
                }
                Err(e) => panic!("{} {what}: {e}", c.name),
            };
            let optimize = match atl_egg::optimizer::optimize(&c.program, &opts()) {
                Ok(o) => {
                    stats.lock().unwrap().push(("optimize", o.stats));
                    o.program
                }
                Err(e) => panic!("{} optimize: {e}", c.name),
            };
            let grad = scalar.then(|| made(derive::grad(&c.program, &wrt, &opts()), "grad"));
            let jvp = made(derive::jvp(&c.program, &wrt, &opts()), "jvp");
            let vjp = made(derive::vjp(&c.program, &wrt, &opts()), "vjp");
            let hvp = scalar.then(|| made(derive::hvp(&c.program, &wrt, &opts()), "hvp"));
            Derived {
                optimize,
                grad,
                jvp,
                vjp,
                hvp,
                stats: stats.into_inner().unwrap(),
                wrt,
                c: c.clone(),
            }
        })
    })
}

/// The derived corpus program named `name`.
pub fn named(name: &str) -> &'static Derived {
    derived()
        .iter()
        .find(|d| d.c.name == name)
        .unwrap_or_else(|| panic!("no corpus program {name}"))
}

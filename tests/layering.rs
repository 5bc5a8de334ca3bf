//! The crate's layers import downwards only.
//!
//! `docs/design.md` gives the order of the top-level modules of `src/`,
//! lowest first. This test reads every source file, collects the modules
//! its code names (`crate::x::...` paths, and `atl_egg::x::...` in the
//! binary), and fails when a module names one above it, or when the
//! modules name each other in a cycle. There is no exception list: a new
//! top-level module must be placed in `LAYERS`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The top-level modules, lowest layer first (as in `docs/design.md`).
/// `lib` is the crate root (`src/lib.rs`), `cli` the binary (`src/main.rs`,
/// `src/cli.rs`, `src/cli_stats.rs`).
const LAYERS: &[&str] = &[
    "symbol",
    "error",
    "limits",
    "rng",
    "stack",
    "diagnostics",
    "front",
    "constraints",
    "semantics",
    "npz",
    "terms",
    "egraph",
    "optimizer",
    "derive",
    "corpus",
    "lower",
    "backend",
    "lib",
    "cli",
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The top-level module a file of `src/` belongs to.
fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).expect("a file under src/");
    let first = rel
        .components()
        .next()
        .expect("a path")
        .as_os_str()
        .to_string_lossy()
        .to_string();
    match first.trim_end_matches(".rs") {
        "main" | "cli" | "cli_stats" => "cli".to_string(),
        m => m.to_string(),
    }
}

/// The code of a file without its comments (doc links are not imports).
fn code(text: &str) -> String {
    text.lines()
        .map(|l| match l.find("//") {
            Some(k) => &l[..k],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The top-level modules named by `prefix::name` paths in `code`.
fn named_after(code: &str, prefix: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for (k, _) in code.match_indices(prefix) {
        let before = code[..k].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let rest = &code[k + prefix.len()..];
        let name: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if !name.is_empty() {
            out.insert(name);
        }
    }
    out
}

/// For each top-level module, the top-level modules it names, with the
/// file that names each.
fn imports() -> BTreeMap<String, BTreeMap<String, String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = vec![];
    rust_files(&src, &mut files);
    let mut out: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    for f in files {
        let from = module_of(&src, &f);
        let text = code(&std::fs::read_to_string(&f).expect("a readable source file"));
        let mut named = named_after(&text, "crate::");
        if from == "cli" {
            named.extend(named_after(&text, "atl_egg::"));
        }
        let entry = out.entry(from.clone()).or_default();
        for to in named {
            if from == "cli" && ["cli", "cli_stats"].contains(&to.as_str()) {
                continue;
            }
            // `atl_egg::parse` and the like name the crate root's items
            let to = if LAYERS.contains(&to.as_str()) && to != "lib" {
                to
            } else {
                "lib".to_string()
            };
            if to != from {
                entry.entry(to).or_insert_with(|| f.display().to_string());
            }
        }
    }
    out
}

fn rank(module: &str) -> usize {
    LAYERS
        .iter()
        .position(|l| *l == module)
        .unwrap_or_else(|| panic!("top-level module `{module}` is not placed in LAYERS"))
}

#[test]
fn every_top_level_module_has_a_layer() {
    for module in imports().keys() {
        rank(module);
    }
}

#[test]
fn no_module_imports_from_a_layer_above_it() {
    let mut upward = vec![];
    for (from, to) in imports() {
        for (target, file) in to {
            if rank(&target) > rank(&from) {
                upward.push(format!("{from} -> {target} (in {file})"));
            }
        }
    }
    assert!(
        upward.is_empty(),
        "imports from a layer above:\n{}",
        upward.join("\n")
    );
}

#[test]
fn top_level_modules_import_each_other_in_no_cycle() {
    let graph = imports();
    // depth-first search for a back edge
    fn visit<'g>(
        m: &'g str,
        graph: &'g BTreeMap<String, BTreeMap<String, String>>,
        state: &mut BTreeMap<&'g str, bool>,
        path: &mut Vec<&'g str>,
    ) -> Option<Vec<String>> {
        match state.get(m) {
            Some(true) => return None,
            Some(false) => {
                let start = path.iter().position(|p| *p == m).expect("on the path");
                let mut cycle: Vec<String> = path[start..].iter().map(|s| s.to_string()).collect();
                cycle.push(m.to_string());
                return Some(cycle);
            }
            None => {}
        }
        state.insert(m, false);
        path.push(m);
        for next in graph.get(m).into_iter().flat_map(|t| t.keys()) {
            if let Some(c) = visit(next, graph, state, path) {
                return Some(c);
            }
        }
        path.pop();
        state.insert(m, true);
        None
    }
    let mut state = BTreeMap::new();
    for m in graph.keys() {
        if let Some(cycle) = visit(m, &graph, &mut state, &mut vec![]) {
            panic!("import cycle: {}", cycle.join(" -> "));
        }
    }
}

#[test]
fn the_scan_sees_imports() {
    // the scan must find real edges, or the tests above pass vacuously
    let graph = imports();
    assert!(graph["derive"].contains_key("egraph"));
    assert!(graph["egraph"].contains_key("terms"));
    assert!(graph["backend"].contains_key("lower"));
    assert!(graph["cli"].contains_key("lib"));
}

//! Times the phases of grad on one file (a diagnostic, not a benchmark).
use std::time::Instant;
fn main() {
    let path = std::env::args().nth(1).expect("file");
    let text = std::fs::read(&path).unwrap();
    let prog = atl_egg::front::parse_program(&text).unwrap();
    let t = Instant::now();
    let g = atl_egg::derive::grad_program(&prog, &[]).unwrap();
    eprintln!(
        "grad_program: {:?}, size {}",
        t.elapsed(),
        atl_egg::front::print::program_to_string(&g).len()
    );
    let t = Instant::now();
    let opts = atl_egg::egraph::Options {
        time_limit: std::time::Duration::from_secs(5),
        ..Default::default()
    };
    let out = atl_egg::egraph::optimize(&g, &opts).unwrap();
    eprintln!("optimize: {:?} {:?}", t.elapsed(), out.stats.phases);
}

//! Diagnostic: run the optimizer's rules on a file and list the costs of
//! the root class's nodes.
fn main() {
    let path = std::env::args().nth(1).expect("file");
    let prog = atl_egg::front::parse_program(&std::fs::read(&path).unwrap()).unwrap();
    let mut extents = std::collections::HashMap::new();
    atl_egg::egraph::runner::collect_extents(&prog.body, &mut extents);
    let mut eg = atl_egg::egraph::analysis::AtlGraph::new(atl_egg::egraph::analysis::AtlAnalysis {
        extents,
        ..Default::default()
    });
    let root = eg.add_expr(&atl_egg::egraph::language::to_rec(&prog.body));
    let runner = egg::Runner::default()
        .with_egraph(eg)
        .run(&atl_egg::egraph::rules::rewrites(&[]));
    let eg = &runner.egraph;
    println!(
        "{:?} nodes {}",
        runner.stop_reason,
        eg.total_number_of_nodes()
    );
    let samples = atl_egg::egraph::runner::extraction_samples(&prog, None);
    let mut wc = atl_egg::egraph::extract::WorkCost::new(eg, &samples);
    let ex = egg::Extractor::new(eg, atl_egg::egraph::extract::WorkCost::new(eg, &samples));
    for class in eg.classes() {
        for n in &class.nodes {
            if let atl_egg::egraph::language::Atl::Iverson(_) = n {
                use egg::CostFunction;
                let c = wc.cost(n, |id| ex.find_best_cost(id));
                if let Some(atl_egg::egraph::extract::Term::Expr(e)) = c.term() {
                    let s = atl_egg::front::print::expr_to_string(&e);
                    if s.len() < 200 {
                        println!("{:?} {}", c.key, s);
                    }
                }
            }
        }
    }
    let _ = root;
}

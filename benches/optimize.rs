//! criterion benchmarks (filled in with the optimizer).
use criterion::{criterion_group, criterion_main, Criterion};

fn parse_corpus(c: &mut Criterion) {
    let mut files: Vec<_> = std::fs::read_dir("corpus")
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.path()).collect())
        .unwrap_or_default();
    files.sort();
    c.bench_function("parse corpus", |b| {
        b.iter(|| {
            for f in &files {
                let text = std::fs::read(f).unwrap();
                let _ = atl_egg::front::parse_program(&text);
            }
        })
    });
}

criterion_group!(benches, parse_corpus);
criterion_main!(benches);

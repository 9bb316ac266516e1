//! Median check time of typical commands (target ≤ 20 µs each on a 2-core machine), and in
//! the same run the floor of any parsed policy: a bare tree-sitter-bash parse of the same
//! command (`policy_floor`; the check's target is ≤ 2× it).
//! Run: `cargo bench --bench policy`.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use std::hint::black_box;
use std::sync::Arc;
use warden::policy::Policy;

const COMMANDS: &[&str] = &[
    "ls -la",
    "cat notes.txt",
    "grep -rn TODO src | sort | uniq -c > todo.txt",
    "head -n 20 notes.txt",
    "find . -name '*.rs' -newer notes.txt",
    "sed -n 's/foo/bar/p' notes.txt",
    "git log --oneline -n 5",
    "cd src && wc -l main.rs",
    "cat /etc/shadow",
    "cat <<'EOF' > out.txt\nhello\nEOF",
];

fn bench_policy(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    std::fs::create_dir_all(ws.join("src")).unwrap();
    std::fs::write(ws.join("notes.txt"), "a TODO\n").unwrap();
    std::fs::write(ws.join("src/main.rs"), "fn main() {}\n").unwrap();
    let policy = Arc::new(Policy::embedded_default());
    let mut checker = policy
        .checker(ws, &[], std::path::Path::new("/root"))
        .unwrap();
    let mut group = c.benchmark_group("policy_check");
    for (i, command) in COMMANDS.iter().enumerate() {
        group.bench_with_input(BenchmarkId::from_parameter(i), command, |b, cmd| {
            b.iter(|| black_box(checker.check(black_box(cmd))))
        });
    }
    group.finish();

    let mut parser = tree_sitter::Parser::new();
    parser
        .set_language(&tree_sitter_bash::LANGUAGE.into())
        .unwrap();
    let mut floor = c.benchmark_group("policy_floor");
    for (i, command) in COMMANDS.iter().enumerate() {
        floor.bench_with_input(BenchmarkId::from_parameter(i), command, |b, cmd| {
            b.iter(|| black_box(parser.parse(black_box(cmd), None)))
        });
    }
    floor.finish();
}

criterion_group!(benches, bench_policy);
criterion_main!(benches);

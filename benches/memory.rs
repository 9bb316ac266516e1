//! The memory index: `memory_search` latency over 100 000 chunks (target: median ≤ 5 ms) and
//! indexing throughput (chunks/s), on a synthetic corpus of daily notes whose words follow a
//! Zipf distribution, like prose. Run: `cargo bench --bench memory`.
//!
//! Besides criterion's numbers it prints the one-off cost of indexing the whole corpus and
//! the median / p95 of 500 individually timed searches.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::hint::black_box;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};
use warden::config::MemoryConfig;
use warden::memory::MemoryIndex;
use warden::policy::PathPolicy;

const TARGET_CHUNKS: usize = 100_000;
/// Lines per daily note: about 100 chunks per file.
const LINES_PER_FILE: usize = 1_600;
const VOCABULARY: usize = 20_000;

struct Corpus {
    words: Vec<String>,
    /// Cumulative Zipf weights over `words`.
    cumulative: Vec<f64>,
    rng: StdRng,
}

impl Corpus {
    fn new() -> Corpus {
        let mut rng = StdRng::seed_from_u64(7);
        const SYLLABLES: &[&str] = &[
            "ka", "lo", "mi", "ren", "sto", "va", "de", "ul", "tor", "an", "pe", "zi", "mar", "qu",
            "bel", "os", "tri", "ne", "ga", "fu",
        ];
        let mut words = Vec::with_capacity(VOCABULARY);
        while words.len() < VOCABULARY {
            let n = rng.random_range(2..=4);
            let word: String = (0..n)
                .map(|_| SYLLABLES[rng.random_range(0..SYLLABLES.len())])
                .collect();
            if !words.contains(&word) {
                words.push(word);
            }
        }
        let mut total = 0.0;
        let cumulative = (1..=VOCABULARY)
            .map(|rank| {
                total += 1.0 / rank as f64;
                total
            })
            .collect();
        Corpus {
            words,
            cumulative,
            rng,
        }
    }

    fn word(&mut self) -> &str {
        let total = *self.cumulative.last().unwrap();
        let x = self.rng.random_range(0.0..total);
        let i = self.cumulative.partition_point(|&c| c < x);
        &self.words[i.min(VOCABULARY - 1)]
    }

    fn note(&mut self) -> String {
        let mut text = String::with_capacity(LINES_PER_FILE * 90);
        for _ in 0..LINES_PER_FILE {
            text.push_str("- ");
            let n = self.rng.random_range(8..16);
            for i in 0..n {
                if i > 0 {
                    text.push(' ');
                }
                let w = self.word().to_string();
                text.push_str(&w);
            }
            text.push('\n');
        }
        text
    }
}

fn open_index(dir: &Path) -> Arc<MemoryIndex> {
    let ws = dir.join("ws");
    std::fs::create_dir_all(ws.join("memory")).unwrap();
    let db = warden::schema::open(&dir.join("warden.db")).unwrap();
    let paths = Arc::new(PathPolicy::new(&ws, &[], &[], Path::new("/root")).unwrap());
    Arc::new(MemoryIndex::new(db, paths, &MemoryConfig::default()).unwrap())
}

/// Daily notes number `from..from + count`, one per day from 2024-01-01.
fn write_notes(corpus: &mut Corpus, ws: &Path, from: usize, count: usize) {
    let first = chrono::NaiveDate::from_ymd_opt(2024, 1, 1).unwrap();
    for i in from..from + count {
        let day = first + chrono::Duration::days(i as i64);
        std::fs::write(ws.join(format!("memory/{day}.md")), corpus.note()).unwrap();
    }
}

fn bench_memory(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut corpus = Corpus::new();

    // The large index, built once.
    let big = tempfile::tempdir().unwrap();
    let index = open_index(big.path());
    let ws = big.path().join("ws");
    let mut files = 0;
    let mut indexed = Duration::ZERO;
    while index.chunk_count().unwrap() < TARGET_CHUNKS {
        write_notes(&mut corpus, &ws, files, 100);
        let started = Instant::now();
        index.sync_files().unwrap();
        indexed += started.elapsed();
        files += 100;
    }
    let chunks = index.chunk_count().unwrap();
    // Steady state: mtimes old enough to be trusted (see index::trusted_mtime).
    std::thread::sleep(Duration::from_millis(2100));
    index.sync_files().unwrap();
    eprintln!(
        "\nindexed {chunks} chunks from {files} files in {:.1} s: {:.0} chunks/s",
        indexed.as_secs_f64(),
        chunks as f64 / indexed.as_secs_f64()
    );

    // Queries of two or three words from the middle of the frequency range.
    let queries: Vec<String> = (0..50)
        .map(|i| {
            let n = 2 + i % 2;
            (0..n)
                .map(|k| corpus.words[100 + (i * 37 + k * 911) % 4000].clone())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect();
    let mut times: Vec<Duration> = Vec::new();
    for i in 0..500 {
        let started = Instant::now();
        let hits = rt
            .block_on(index.search(&queries[i % queries.len()], 6))
            .unwrap();
        times.push(started.elapsed());
        assert!(!hits.is_empty());
    }
    times.sort();
    eprintln!(
        "memory_search over {chunks} chunks: median {:.2} ms, p95 {:.2} ms",
        times[times.len() / 2].as_secs_f64() * 1e3,
        times[times.len() * 95 / 100].as_secs_f64() * 1e3
    );

    let mut group = c.benchmark_group("memory");
    let mut i = 0;
    group.bench_function("search_100k_chunks", |b| {
        b.iter(|| {
            i += 1;
            black_box(rt.block_on(index.search(&queries[i % queries.len()], 6)))
        })
    });
    group.bench_function("sync_unchanged_files", |b| {
        b.iter(|| black_box(index.sync_files().unwrap()))
    });

    // Indexing throughput: 10 notes (about 1000 chunks) into a fresh index per iteration.
    let notes: Vec<String> = (0..10).map(|_| corpus.note()).collect();
    let per_iteration = {
        let dir = tempfile::tempdir().unwrap();
        let fresh = open_index(dir.path());
        for (n, note) in notes.iter().enumerate() {
            std::fs::write(dir.path().join(format!("ws/memory/n{n}.md")), note).unwrap();
        }
        fresh.sync_files().unwrap();
        fresh.chunk_count().unwrap()
    };
    group.throughput(Throughput::Elements(per_iteration as u64));
    group.sample_size(10);
    group.bench_function("index_chunks", |b| {
        b.iter_custom(|iterations| {
            let mut total = Duration::ZERO;
            for _ in 0..iterations {
                let dir = tempfile::tempdir().unwrap();
                let fresh = open_index(dir.path());
                for (n, note) in notes.iter().enumerate() {
                    std::fs::write(dir.path().join(format!("ws/memory/n{n}.md")), note).unwrap();
                }
                let started = Instant::now();
                fresh.sync_files().unwrap();
                total += started.elapsed();
            }
            total
        })
    });
    group.finish();
}

criterion_group!(benches, bench_memory);
criterion_main!(benches);

//! Searching the memory index. Keyword candidates come from FTS5 ranked by bm25 (each query
//! term quoted, so `foo-bar` or `NEAR` are words, not syntax): chunks with all the words, or
//! when those are too few, with any of them. With an embeddings endpoint,
//! vector candidates come from cosine similarity, and the two scores are blended. Without
//! the endpoint, or when it fails, the ranking is keyword-only. Daily notes and compacted
//! conversations lose weight with age (half-life from the config); MEMORY.md does not.

use super::embeddings;
use super::index::MemoryIndex;
use crate::db::DbError;
use rusqlite::params;
use std::collections::HashMap;

/// Chunks without an embedding get one at search time, this many per search at most.
const EMBED_PER_SEARCH: usize = 256;
/// Vector-only candidates below this similarity are noise, not matches.
const MIN_SIMILARITY: f32 = 0.25;
/// Query terms kept.
const MAX_TERMS: usize = 16;
/// A search re-checks all memory files at most this often (results are checked every time).
const FILE_SYNC_INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);

/// Words too common to rank by (dropped unless the query has nothing else).
const STOPWORDS: &[&str] = &[
    "a", "about", "an", "and", "are", "as", "at", "be", "but", "by", "did", "do", "does", "for",
    "from", "had", "has", "have", "he", "her", "his", "how", "i", "if", "in", "is", "it", "its",
    "me", "my", "of", "on", "or", "our", "she", "so", "that", "the", "their", "them", "there",
    "they", "this", "to", "was", "we", "were", "what", "when", "where", "which", "who", "why",
    "will", "with", "you", "your",
];

/// One result.
#[derive(Clone, Debug, PartialEq)]
pub struct Hit {
    /// `MEMORY.md`, `memory/2026-11-21.md`, `session:telegram:42`.
    pub path: String,
    /// Lines for files, message ids for sessions.
    pub start: i64,
    pub end: i64,
    pub score: f64,
    pub text: String,
}

/// The words of `query` as FTS5 terms, each quoted (so `NEAR`, `-` or `"` are words, not
/// syntax); stopwords dropped unless nothing else is left. Empty when it has no words.
pub fn fts_terms(query: &str) -> Vec<String> {
    let mut words: Vec<String> = Vec::new();
    for word in query
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        let word = word.to_lowercase();
        if !words.contains(&word) {
            words.push(word);
        }
    }
    let content: Vec<&String> = words
        .iter()
        .filter(|w| !STOPWORDS.contains(&w.as_str()))
        .collect();
    let chosen: Vec<&String> = if content.is_empty() {
        words.iter().collect()
    } else {
        content
    };
    chosen
        .iter()
        .take(MAX_TERMS)
        .map(|w| format!("\"{}\"", w.replace('"', "\"\"")))
        .collect()
}

/// The weight of a dated source `age_days` old.
pub fn decay(age_days: f64, half_life_days: f64) -> f64 {
    0.5f64.powf(age_days.max(0.0) / half_life_days)
}

struct Candidate {
    /// bm25 turned positive (higher is better).
    keyword: Option<f64>,
    similarity: Option<f32>,
}

/// A ranked hit and, for a file, the size and mtime it was indexed with.
struct Ranked {
    hit: Hit,
    file: Option<(i64, i64)>,
}

impl MemoryIndex {
    /// The best `limit` passages for `query`.
    pub async fn search(&self, query: &str, limit: usize) -> Result<Vec<Hit>, DbError> {
        if let Err(e) = self.sync_files_if_older(FILE_SYNC_INTERVAL) {
            tracing::warn!("memory index sync before search: {e}");
        }
        let limit = limit.clamp(1, 50);
        let query_vector = self.query_vector(query).await;
        let ranked = self.rank(query, query_vector.as_deref(), limit)?;
        // A file changed or deleted since it was indexed: sync now and rank again.
        let stale = ranked.iter().any(|r| {
            r.file
                .is_some_and(|(size, mtime)| !self.file_unchanged(&r.hit.path, size, mtime))
        });
        let ranked = if stale {
            self.sync_files()?;
            self.rank(query, query_vector.as_deref(), limit)?
        } else {
            ranked
        };
        Ok(ranked.into_iter().map(|r| r.hit).collect())
    }

    fn rank(
        &self,
        query: &str,
        query_vector: Option<&[f32]>,
        limit: usize,
    ) -> Result<Vec<Ranked>, DbError> {
        let pool = (limit * 10).max(50);
        let mut candidates: HashMap<i64, Candidate> = HashMap::new();
        // Chunks with all the words first (few, so quick to rank); when that finds too few,
        // chunks with any of them, where bm25 ranks those matching more words higher.
        let terms = fts_terms(query);
        let forms: Vec<String> = match terms.len() {
            0 => Vec::new(),
            1 => terms.clone(),
            _ => vec![terms.join(" AND "), terms.join(" OR ")],
        };
        for (i, fts) in forms.iter().enumerate() {
            let rows = {
                let conn = self.db.conn();
                let mut stmt = conn.prepare_cached(
                    "SELECT rowid, rank FROM memory_fts WHERE memory_fts MATCH ?1
                     ORDER BY rank LIMIT ?2",
                )?;
                let rows = stmt
                    .query_map(params![fts, pool as i64], |r| {
                        Ok((r.get::<_, i64>(0)?, r.get::<_, f64>(1)?))
                    })?
                    .collect::<Result<Vec<_>, _>>()?;
                rows
            };
            if rows.len() < limit && i + 1 < forms.len() {
                continue;
            }
            for (id, rank) in rows {
                let keyword = Some(-rank);
                candidates.insert(
                    id,
                    Candidate {
                        keyword,
                        similarity: None,
                    },
                );
            }
            break;
        }
        if let (Some(qv), Some(embedder)) = (query_vector, &self.embedder) {
            for (id, similarity) in self.nearest(qv, embedder.model(), pool)? {
                candidates
                    .entry(id)
                    .or_insert(Candidate {
                        keyword: None,
                        similarity: None,
                    })
                    .similarity = Some(similarity);
            }
        }
        // bm25 depends on the index size: scale keyword scores to the best one of this query.
        let best_keyword = candidates
            .values()
            .filter_map(|c| c.keyword)
            .fold(0.0f64, f64::max);
        let today = chrono::Local::now().date_naive();
        let model = self.embedder.as_ref().map(|e| e.model().to_string());
        let conn = self.db.conn();
        let mut details = conn.prepare_cached(
            "SELECT s.path, s.day, c.start_line, c.end_line, c.text,
                    c.embedding IS NOT NULL AND c.embedding_model IS ?2,
                    s.kind = 'file', s.size, s.mtime_ns
             FROM memory_chunks c JOIN memory_sources s ON s.key = c.source WHERE c.id = ?1",
        )?;
        let mut ranked = Vec::with_capacity(candidates.len());
        for (id, candidate) in &candidates {
            let row = details.query_row(params![id, model], |r| {
                Ok((
                    Hit {
                        path: r.get(0)?,
                        start: r.get(2)?,
                        end: r.get(3)?,
                        score: 0.0,
                        text: r.get(4)?,
                    },
                    r.get::<_, Option<String>>(1)?,
                    r.get::<_, bool>(5)?,
                    r.get::<_, bool>(6)?.then_some((r.get(7)?, r.get(8)?)),
                ))
            });
            let (mut hit, day, embedded, file) = row?;
            let keyword = match candidate.keyword {
                Some(k) if best_keyword > 0.0 => (k / best_keyword).max(0.0),
                Some(_) => 1.0,
                None => 0.0,
            };
            let relevance = match candidate.similarity {
                Some(s) if candidate.keyword.is_none() && s < MIN_SIMILARITY => continue,
                Some(s) => {
                    let w = self.vector_weight;
                    w * f64::from(s.max(0.0)) + (1.0 - w) * keyword
                }
                // Embedded but not among the nearest: its similarity counts as none.
                None if query_vector.is_some() && embedded => (1.0 - self.vector_weight) * keyword,
                // A chunk the endpoint never embedded is ranked by its keywords alone.
                None => keyword,
            };
            let age = day
                .as_deref()
                .and_then(|d| chrono::NaiveDate::parse_from_str(d, "%Y-%m-%d").ok())
                .map_or(0.0, |d| (today - d).num_days() as f64);
            hit.score = relevance * decay(age, self.half_life_days);
            ranked.push(Ranked { hit, file });
        }
        ranked.sort_by(|a, b| {
            b.hit
                .score
                .total_cmp(&a.hit.score)
                .then(a.hit.path.cmp(&b.hit.path))
                .then(a.hit.start.cmp(&b.hit.start))
        });
        ranked.truncate(limit);
        Ok(ranked)
    }

    /// The query's vector, after embedding chunks that lack one; `None` without an endpoint
    /// or when it fails (keyword-only then).
    async fn query_vector(&self, query: &str) -> Option<Vec<f32>> {
        let embedder = self.embedder.as_ref()?;
        if let Err(e) = self.embed_missing(EMBED_PER_SEARCH).await {
            tracing::warn!("memory index: embedding chunks: {e}");
        }
        match embedder.embed(&[query.to_string()]).await {
            Ok(mut v) => v.pop(),
            Err(e) => {
                tracing::warn!("memory search falls back to keywords: {e}");
                None
            }
        }
    }

    /// Embed up to `max` chunks that have no vector from the configured model.
    pub async fn embed_missing(
        &self,
        max: usize,
    ) -> Result<usize, Box<dyn std::error::Error + Send + Sync>> {
        let Some(embedder) = &self.embedder else {
            return Ok(0);
        };
        let pending: Vec<(i64, String)> = {
            let conn = self.db.conn();
            let mut stmt = conn.prepare_cached(
                "SELECT id, text FROM memory_chunks WHERE embedding_model IS NOT ?1 LIMIT ?2",
            )?;
            let rows = stmt
                .query_map(params![embedder.model(), max as i64], |r| {
                    Ok((r.get(0)?, r.get(1)?))
                })?
                .collect::<Result<Vec<_>, _>>()?;
            rows
        };
        if pending.is_empty() {
            return Ok(0);
        }
        let texts: Vec<String> = pending.iter().map(|(_, t)| t.clone()).collect();
        let vectors = embedder.embed(&texts).await?;
        let conn = self.db.conn();
        let tx = conn.unchecked_transaction()?;
        {
            let mut update = tx.prepare_cached(
                "UPDATE memory_chunks SET embedding = ?2, embedding_model = ?3 WHERE id = ?1",
            )?;
            for ((id, _), vector) in pending.iter().zip(&vectors) {
                update.execute(params![id, embeddings::to_blob(vector), embedder.model()])?;
            }
        }
        tx.commit()?;
        Ok(pending.len())
    }

    /// The `pool` chunks most similar to `query` (a linear scan: personal memory is small).
    fn nearest(&self, query: &[f32], model: &str, pool: usize) -> Result<Vec<(i64, f32)>, DbError> {
        let conn = self.db.conn();
        let mut stmt = conn.prepare_cached(
            "SELECT id, embedding FROM memory_chunks
             WHERE embedding_model = ?1 AND embedding IS NOT NULL",
        )?;
        let rows = stmt.query_map([model], |r| {
            Ok((r.get::<_, i64>(0)?, r.get::<_, Vec<u8>>(1)?))
        })?;
        let mut scored = Vec::new();
        for row in rows {
            let (id, blob) = row?;
            scored.push((id, embeddings::cosine(query, &embeddings::from_blob(&blob))));
        }
        scored.sort_by(|a, b| b.1.total_cmp(&a.1));
        scored.truncate(pool);
        Ok(scored)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terms_are_quoted_and_stopwords_dropped() {
        assert_eq!(
            fts_terms("What is the user's favorite foo-bar_baz?"),
            [
                "\"user\"",
                "\"s\"",
                "\"favorite\"",
                "\"foo\"",
                "\"bar\"",
                "\"baz\""
            ]
        );
        assert_eq!(fts_terms("NEAR AND"), ["\"near\""]);
        assert_eq!(fts_terms("the"), ["\"the\""]);
        assert!(fts_terms(" --- ").is_empty());
    }

    #[test]
    fn decay_halves_per_half_life() {
        assert_eq!(decay(0.0, 30.0), 1.0);
        assert!((decay(30.0, 30.0) - 0.5).abs() < 1e-9);
        assert_eq!(decay(-5.0, 30.0), 1.0);
    }
}

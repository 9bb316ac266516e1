//! Splitting text into the pieces the memory index ranks: about [`CHUNK_CHARS`] characters,
//! on line boundaries, each overlapping the previous one by up to [`OVERLAP_CHARS`] so a
//! passage cut at a boundary is still found whole in one of the two.

/// Target size of a chunk, in characters.
pub const CHUNK_CHARS: usize = 1600;
/// Characters a chunk repeats from the end of the previous one (whole lines).
pub const OVERLAP_CHARS: usize = 320;

/// A chunk and the labels of its first and last line (line numbers for files, message ids
/// for transcripts).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Chunk {
    pub start: i64,
    pub end: i64,
    pub text: String,
}

/// Chunks of a file's text; labels are 1-based line numbers.
pub fn chunk_text(text: &str) -> Vec<Chunk> {
    let lines: Vec<(i64, &str)> = text
        .lines()
        .enumerate()
        .map(|(i, line)| (i as i64 + 1, line))
        .collect();
    chunk_lines(&lines, CHUNK_CHARS, OVERLAP_CHARS)
}

/// Chunks of labelled lines. A line longer than `max_chars` is split into pieces that keep
/// its label; chunks of only blank lines are left out.
pub fn chunk_lines(lines: &[(i64, &str)], max_chars: usize, overlap: usize) -> Vec<Chunk> {
    let max_chars = max_chars.max(1);
    // (label, text, characters counting its newline)
    let mut pieces: Vec<(i64, String, usize)> = Vec::with_capacity(lines.len());
    for &(label, line) in lines {
        let len = line.chars().count();
        if len <= max_chars {
            pieces.push((label, line.to_string(), len + 1));
            continue;
        }
        let chars: Vec<char> = line.chars().collect();
        for part in chars.chunks(max_chars) {
            pieces.push((label, part.iter().collect(), part.len() + 1));
        }
    }
    let mut chunks = Vec::new();
    let mut i = 0;
    while i < pieces.len() {
        // Take lines while they fit (counting the newline), at least one.
        let mut j = i;
        let mut size = 0;
        while j < pieces.len() && (j == i || size + pieces[j].2 <= max_chars + 1) {
            size += pieces[j].2;
            j += 1;
        }
        let slice = &pieces[i..j];
        if slice.iter().any(|p| !p.1.trim().is_empty()) {
            let text: Vec<&str> = slice.iter().map(|p| p.1.as_str()).collect();
            chunks.push(Chunk {
                start: slice[0].0,
                end: slice[slice.len() - 1].0,
                text: text.join("\n"),
            });
        }
        if j == pieces.len() {
            break;
        }
        // The next chunk starts with the last lines of this one that fit the overlap, but
        // always at least one line further on, so the loop ends.
        let mut k = j;
        let mut repeated = 0;
        while k > i + 1 && repeated + pieces[k - 1].2 <= overlap {
            repeated += pieces[k - 1].2;
            k -= 1;
        }
        i = k;
    }
    chunks
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_follow_lines_overlap_and_cover_everything() {
        let text: String = (1..=200)
            .map(|i| format!("line number {i:03} of the notes\n"))
            .collect();
        let chunks = chunk_text(&text);
        assert!(chunks.len() > 3);
        assert_eq!(chunks[0].start, 1);
        assert_eq!(chunks.last().unwrap().end, 200);
        for pair in chunks.windows(2) {
            assert!(pair[0].text.chars().count() <= CHUNK_CHARS);
            // Overlap: the next chunk starts inside the previous one, but further on.
            assert!(pair[1].start > pair[0].start);
            assert!(pair[1].start <= pair[0].end, "{pair:?}");
            let first_line = pair[1].text.lines().next().unwrap();
            assert!(pair[0].text.contains(first_line));
        }
    }

    #[test]
    fn long_lines_are_split_and_blank_chunks_dropped() {
        let long = "x".repeat(50);
        let lines = vec![(1, ""), (2, "   "), (3, long.as_str()), (4, "end")];
        let chunks = chunk_lines(&lines, 20, 0);
        assert_eq!(chunks[0].start, 3, "{chunks:?}");
        assert!(chunks.iter().all(|c| c.text.chars().count() <= 20));
        let last = chunks.last().unwrap();
        assert_eq!((last.end, last.text.as_str()), (4, "xxxxxxxxxx\nend"));
        assert!(chunk_text("").is_empty());
    }
}

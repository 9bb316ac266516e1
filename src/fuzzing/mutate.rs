//! Mutations of known inputs (seeds, the corpus, inputs that reached new programs): splices,
//! insertions of shell syntax, deletions and duplications, at character boundaries.

use rand::rngs::SmallRng;
use rand::seq::IndexedRandom;
use rand::Rng;

/// Fragments that change how bash reads a string.
const SYNTAX: &[&str] = &[
    ";", "|", "&&", "||", "&", "$(", ")", "`", "'", "\"", "\\", "{", "}", "(", "*", "?", "[", "]",
    "~", "..", "/", " -", "--", "=", "\n", "<<", ">&", "<&", "$'\\x41'", "${", "$((", "#", "!",
    "<(", ">(", " ", "\t", "\\\n", "$HOME", "$IFS", "..\\/", "-exec", "-c",
];

/// `other`: an input to splice from.
pub fn mutate(rng: &mut SmallRng, input: &str, other: Option<&str>) -> String {
    let mut text = input.to_string();
    for _ in 0..rng.random_range(1..4) {
        let at = boundary(rng, &text);
        match rng.random_range(0..5) {
            0 => text.insert_str(at, SYNTAX.choose(rng).copied().unwrap_or(";")),
            1 => {
                let end = boundary_after(rng, &text, at);
                text.replace_range(at..end, "");
            }
            2 => {
                let end = boundary_after(rng, &text, at);
                let copy = text[at..end].to_string();
                text.insert_str(end, &copy);
            }
            3 => {
                if let Some(other) = other {
                    let cut = boundary(rng, other);
                    text.truncate(at);
                    text.push_str(&other[cut..]);
                }
            }
            _ => {
                let end = boundary_after(rng, &text, at);
                let replacement = SYNTAX.choose(rng).copied().unwrap_or(" ");
                text.replace_range(at..end, replacement);
            }
        }
    }
    text.truncate(4096.min(text.len()));
    while !text.is_char_boundary(text.len()) {
        text.pop();
    }
    text
}

fn boundary(rng: &mut SmallRng, text: &str) -> usize {
    if text.is_empty() {
        return 0;
    }
    let mut at = rng.random_range(0..=text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

fn boundary_after(rng: &mut SmallRng, text: &str, start: usize) -> usize {
    let mut end = (start + rng.random_range(0..8)).min(text.len());
    while !text.is_char_boundary(end) {
        end += 1;
    }
    end
}

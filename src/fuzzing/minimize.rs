//! Shrinking a failing input while it still fails the same way: whole words first, then
//! characters (delta debugging), with a bound on attempts (the behaviour oracles run programs).

/// The smallest input found for which `fails` still holds, within `budget` attempts.
pub fn minimize(input: &str, budget: usize, mut fails: impl FnMut(&str) -> bool) -> String {
    let mut best = input.to_string();
    let mut attempts = 0;
    // Words, then characters.
    for by_chars in [false, true] {
        let mut chunk = units(&best, by_chars).len() / 2;
        while chunk >= 1 && attempts < budget {
            let parts = units(&best, by_chars);
            let mut start = 0;
            let mut shrunk = false;
            while start < parts.len() && attempts < budget {
                let end = (start + chunk).min(parts.len());
                let candidate: String = parts[..start]
                    .iter()
                    .chain(&parts[end..])
                    .copied()
                    .collect::<Vec<&str>>()
                    .join(if by_chars { "" } else { " " });
                attempts += 1;
                if !candidate.trim().is_empty() && fails(&candidate) {
                    best = candidate;
                    shrunk = true;
                    break;
                }
                start += chunk;
            }
            if !shrunk {
                chunk /= 2;
            }
        }
    }
    best
}

fn units(text: &str, by_chars: bool) -> Vec<&str> {
    if by_chars {
        text.char_indices()
            .map(|(i, c)| &text[i..i + c.len_utf8()])
            .collect()
    } else {
        text.split(' ').collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shrinks_to_what_makes_it_fail() {
        let found = minimize(
            "ls -la src && awk 'BEGIN{system(1)}' notes.txt; echo done",
            500,
            |c| c.contains("system"),
        );
        assert_eq!(found, "system");
        let found = minimize("cat a b c d", 500, |c| {
            c.starts_with("cat") && c.contains('c')
        });
        assert_eq!(found, "cat");
    }
}

//! Splitting a formatted answer into Telegram messages of at most 4096 characters.
//!
//! The HTML is cut into atoms — a tag, an entity (`&amp;`), or one character — and a message
//! never ends inside one. Formatting open at a cut is closed at the end of that part and
//! reopened at the start of the next, so every part is well-formed on its own. Cuts prefer a
//! paragraph break, then a line break, then a space.
//!
//! Length is counted in UTF-16 code units of the raw HTML: Telegram counts the text after
//! parsing entities (in UTF-16), which is never longer, so each part is within the limit.

/// Telegram's limit for one message's text.
pub const MESSAGE_LIMIT: usize = 4096;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Open,
    Close,
    Text,
}

struct Atom<'a> {
    kind: Kind,
    text: &'a str,
    /// The tag name for tags.
    name: &'a str,
    len: usize,
}

fn utf16_len(s: &str) -> usize {
    s.chars().map(char::len_utf16).sum()
}

fn atoms(html: &str) -> Vec<Atom<'_>> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < html.len() {
        let rest = &html[i..];
        let ch = rest.chars().next().unwrap_or(' ');
        let (kind, len) = match ch {
            '<' => match rest.find('>') {
                Some(end) if rest[1..].starts_with('/') => (Kind::Close, end + 1),
                Some(end) => (Kind::Open, end + 1),
                None => (Kind::Text, 1),
            },
            '&' => match super::format::entity_end(rest) {
                Some(end) => (Kind::Text, end + 1),
                None => (Kind::Text, 1),
            },
            _ => (Kind::Text, ch.len_utf8()),
        };
        let text = &rest[..len];
        let name = match kind {
            Kind::Text => "",
            _ => text
                .trim_start_matches(['<', '/'])
                .trim_end_matches('>')
                .split(|c: char| c.is_whitespace())
                .next()
                .unwrap_or(""),
        };
        out.push(Atom {
            kind,
            text,
            name,
            len: utf16_len(text),
        });
        i += len;
    }
    out
}

/// Split `html` (well-formed, as [`super::format`] writes it) into parts of at most `limit`
/// UTF-16 units each. Parts with no visible text are left out.
pub fn split_html(html: &str, limit: usize) -> Vec<String> {
    let atoms = atoms(html);
    if atoms.is_empty() {
        return Vec::new();
    }
    // The open tags (atom indices) after each atom.
    let mut stacks: Vec<Vec<usize>> = Vec::with_capacity(atoms.len());
    let mut stack: Vec<usize> = Vec::new();
    for (k, atom) in atoms.iter().enumerate() {
        match atom.kind {
            Kind::Open => stack.push(k),
            Kind::Close => {
                if let Some(pos) = stack.iter().rposition(|&o| atoms[o].name == atom.name) {
                    stack.truncate(pos);
                }
            }
            Kind::Text => {}
        }
        stacks.push(stack.clone());
    }
    let closing = |open: &[usize]| -> String {
        open.iter()
            .rev()
            .map(|&o| format!("</{}>", atoms[o].name))
            .collect()
    };
    let close_lens: Vec<usize> = stacks.iter().map(|s| utf16_len(&closing(s))).collect();
    let no_stack: Vec<usize> = Vec::new();
    let stack_before = |k: usize| if k == 0 { &no_stack } else { &stacks[k - 1] };

    let mut parts = Vec::new();
    let mut start = 0;
    while start < atoms.len() {
        let reopen: String = stack_before(start).iter().map(|&o| atoms[o].text).collect();
        let mut len = utf16_len(&reopen);
        let mut end = start;
        // Best cut positions (exclusive end index, length there) for paragraph, line, word.
        let mut cuts: [Option<(usize, usize)>; 3] = [None; 3];
        while end < atoms.len() {
            let atom = &atoms[end];
            if len + atom.len + close_lens[end] > limit {
                break;
            }
            len += atom.len;
            end += 1;
            if atom.kind == Kind::Text {
                match atom.text {
                    "\n" if end >= 2 && atoms[end - 2].text == "\n" => {
                        cuts[0] = Some((end, len));
                        cuts[1] = Some((end, len));
                    }
                    "\n" => cuts[1] = Some((end, len)),
                    " " => cuts[2] = Some((end, len)),
                    _ => {}
                }
            }
        }
        let mut cut = if end == atoms.len() {
            end
        } else {
            choose_cut(&cuts, limit).unwrap_or(end)
        };
        if cut <= start {
            // A single atom longer than the limit (cannot happen with this module's output).
            cut = start + 1;
        }
        // Closing tags right after the cut cost nothing: they replace the closing suffix.
        while cut < atoms.len() && atoms[cut].kind == Kind::Close {
            cut += 1;
        }
        let mut part = reopen;
        for atom in &atoms[start..cut] {
            part.push_str(atom.text);
        }
        part.push_str(&closing(&stacks[cut - 1]));
        if has_visible_text(&part) {
            parts.push(part);
        }
        start = cut;
        while start < atoms.len() && atoms[start].text == "\n" {
            start += 1;
        }
    }
    parts
}

/// Paragraph, then line, then word break — each only if the part is at least half full;
/// otherwise the latest break of any kind.
fn choose_cut(cuts: &[Option<(usize, usize)>; 3], limit: usize) -> Option<usize> {
    cuts.iter()
        .flatten()
        .find(|(_, len)| *len >= limit / 2)
        .or_else(|| cuts.iter().flatten().max_by_key(|(end, _)| *end))
        .map(|(end, _)| *end)
}

fn has_visible_text(part: &str) -> bool {
    !super::format::html_to_plain(part).trim().is_empty()
}

#[cfg(test)]
mod tests {
    use super::super::format::{html_to_plain, markdown_to_html};
    use super::*;
    use proptest::prelude::*;

    /// Tags balanced and properly nested; every `&` starts a known entity.
    fn well_formed(part: &str) -> Result<(), String> {
        let mut stack: Vec<&str> = Vec::new();
        for atom in atoms(part) {
            match atom.kind {
                Kind::Open => stack.push(atom.name),
                Kind::Close => match stack.pop() {
                    Some(open) if open == atom.name => {}
                    other => return Err(format!("</{}> closes {other:?}", atom.name)),
                },
                Kind::Text if atom.text.starts_with('&') => {
                    let name = atom.text.trim_start_matches('&').trim_end_matches(';');
                    if !atom.text.ends_with(';')
                        || super::super::format::decode_entity(name).is_none()
                    {
                        return Err(format!("broken entity {:?}", atom.text));
                    }
                }
                Kind::Text if atom.text == "<" || atom.text == ">" => {
                    return Err("raw angle bracket".into())
                }
                Kind::Text => {}
            }
        }
        if stack.is_empty() {
            Ok(())
        } else {
            Err(format!("unclosed {stack:?}"))
        }
    }

    #[test]
    fn short_text_is_one_part() {
        assert_eq!(split_html("<b>hi</b>", 4096), vec!["<b>hi</b>"]);
        assert!(split_html("", 4096).is_empty());
    }

    #[test]
    fn prefers_paragraph_breaks() {
        let a = "a".repeat(60);
        let b = "b".repeat(30);
        let html = format!("{a}\n\n{b} {b}");
        let parts = split_html(&html, 80);
        assert_eq!(parts[0], format!("{a}\n\n"));
        assert_eq!(parts[1], format!("{b} {b}"));
    }

    #[test]
    fn formatting_is_closed_and_reopened_across_a_cut() {
        let html = format!("<b>{} {}</b>", "x".repeat(50), "y".repeat(50));
        let parts = split_html(&html, 70);
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[0], format!("<b>{} </b>", "x".repeat(50)));
        assert_eq!(parts[1], format!("<b>{}</b>", "y".repeat(50)));
    }

    #[test]
    fn entities_are_never_cut() {
        let html = "&amp;".repeat(100);
        for part in split_html(&html, 33) {
            well_formed(&part).unwrap();
            assert!(part.len() <= 33);
        }
    }

    #[test]
    fn long_code_block_is_split_at_lines_with_pre_reopened() {
        let code: String = (0..400).map(|i| format!("line {i} <&>\n")).collect();
        let html = markdown_to_html(&format!("```sh\n{code}```"));
        let parts = split_html(&html, MESSAGE_LIMIT);
        assert!(parts.len() > 1);
        for part in &parts {
            assert!(
                part.starts_with("<pre><code class=\"language-sh\">"),
                "{part}"
            );
            assert!(part.ends_with("</code></pre>"));
            well_formed(part).unwrap();
        }
    }

    fn markdownish() -> impl Strategy<Value = String> {
        let piece = prop_oneof![
            "[a-zA-Z0-9 ]{1,40}",
            Just("\n".to_string()),
            Just("\n\n".to_string()),
            Just("**".to_string()),
            Just("*".to_string()),
            Just("_".to_string()),
            Just("`".to_string()),
            Just("```\n".to_string()),
            Just("<".to_string()),
            Just("&".to_string()),
            Just(">".to_string()),
            Just("~~".to_string()),
            Just("[link](https://example.com/?a=1&b=2)".to_string()),
            Just("é😀".to_string()),
            Just("- item\n".to_string()),
            Just("> quote\n".to_string()),
            Just("# head\n".to_string()),
        ];
        proptest::collection::vec(piece, 0..400).prop_map(|v| v.concat())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        #[test]
        fn every_part_is_within_the_limit_well_formed_and_nothing_is_lost(
            md in markdownish(),
            limit in 120usize..600,
        ) {
            let html = markdown_to_html(&md);
            well_formed(&html).map_err(TestCaseError::fail)?;
            let parts = split_html(&html, limit);
            for part in &parts {
                prop_assert!(utf16_len(part) <= limit, "{} > {limit}: {part}", utf16_len(part));
                well_formed(part).map_err(TestCaseError::fail)?;
                prop_assert!(!html_to_plain(part).trim().is_empty());
            }
            // Only newlines at cuts (and whitespace-only parts) may be dropped.
            let squash = |s: &str| s.chars().filter(|c| !c.is_whitespace()).collect::<String>();
            let joined: String = parts.iter().map(|p| html_to_plain(p)).collect();
            prop_assert_eq!(squash(&joined), squash(&html_to_plain(&html)));
        }
    }
}

//! Text for Slack: the model's markdown is sent as mrkdwn with `&`, `<` and `>` escaped, the
//! three characters Slack reads as control sequences — so no answer can make `<!channel>`,
//! mention `<@U…>` someone, or show a link `<http://evil|harmless>` as something else. Long
//! answers are split into messages of at most [`MESSAGE_LIMIT`] characters, at a paragraph or
//! line where one is near, and a code fence cut by the split is closed and reopened.

/// Slack truncates a message's `text` beyond 40,000 characters and recommends 4,000.
pub const MESSAGE_LIMIT: usize = 4000;

/// `text` with Slack's control characters escaped.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            c => out.push(c),
        }
    }
    out
}

/// The messages `markdown` is sent as: escaped, then split at `limit` characters.
pub fn parts(markdown: &str, limit: usize) -> Vec<String> {
    split(&escape(markdown.trim()), limit)
}

/// Split escaped text into pieces of at most `limit` characters (never inside an entity such
/// as `&amp;`), each piece's code fences balanced.
pub fn split(text: &str, limit: usize) -> Vec<String> {
    const FENCE: &str = "```";
    // Room for a reopened fence at the start and a closing one at the end.
    let budget = limit.saturating_sub(2 * (FENCE.len() + 1)).max(16);
    let mut parts = Vec::new();
    let mut rest = text;
    let mut reopen = false;
    while !rest.is_empty() {
        let cut = cut_at(rest, budget);
        let (head, tail) = rest.split_at(cut);
        let mut part = String::new();
        if reopen {
            part.push_str(FENCE);
            part.push('\n');
        }
        part.push_str(head.trim_end_matches('\n'));
        let open = reopen ^ (head.matches(FENCE).count() % 2 == 1);
        if open && !tail.trim().is_empty() {
            part.push('\n');
            part.push_str(FENCE);
        }
        reopen = open;
        if !part.trim().is_empty() {
            parts.push(part);
        }
        rest = tail.trim_start_matches('\n');
    }
    if parts.is_empty() {
        parts.push(String::new());
    }
    parts
}

/// A byte index to cut `text` at: all of it when it fits, else the last blank line, line end
/// or space in the second half of the budget, else the budget itself — never inside a
/// character or an entity.
fn cut_at(text: &str, budget: usize) -> usize {
    let Some((hard, _)) = text.char_indices().nth(budget) else {
        return text.len();
    };
    let window = &text[..hard];
    let half = window.len() / 2;
    for sep in ["\n\n", "\n", " "] {
        if let Some(at) = window.rfind(sep).filter(|&at| at >= half) {
            return at + sep.len();
        }
    }
    // Do not cut an entity (`&amp;` is at most five bytes).
    match window[window.len().saturating_sub(4)..].rfind('&') {
        Some(back) => window.len().saturating_sub(4) + back,
        None => hard,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_sequences_cannot_be_made() {
        let out = escape("<!channel> hi <@U123> see <http://evil|harmless> & more");
        assert_eq!(
            out,
            "&lt;!channel&gt; hi &lt;@U123&gt; see &lt;http://evil|harmless&gt; &amp; more"
        );
        assert!(!out.contains('<') && !out.contains('>'));
    }

    #[test]
    fn short_text_is_one_part() {
        assert_eq!(parts("hello *world*", MESSAGE_LIMIT), ["hello *world*"]);
    }

    #[test]
    fn long_text_splits_at_lines_within_the_limit_and_loses_nothing() {
        let text: String = (0..400).map(|i| format!("line {i} & more\n")).collect();
        let parts = parts(&text, 500);
        assert!(parts.len() > 5);
        for part in &parts {
            assert!(part.chars().count() <= 500, "{}", part.len());
            assert!(part.ends_with("more"), "cut inside a line: {part:?}");
        }
        let joined = parts.join("\n");
        assert_eq!(joined, escape(text.trim()));
    }

    #[test]
    fn a_cut_code_fence_is_closed_and_reopened() {
        let mut text = String::from("before\n```\n");
        for i in 0..100 {
            text.push_str(&format!("code {i}\n"));
        }
        text.push_str("```\nafter");
        let parts = parts(&text, 300);
        assert!(parts.len() > 2);
        for part in &parts {
            assert_eq!(part.matches("```").count() % 2, 0, "{part:?}");
        }
    }

    #[test]
    fn an_entity_is_never_cut() {
        let text = "&".repeat(100);
        for part in parts(&text, 40) {
            assert!(
                part.starts_with("&amp;") && part.ends_with("&amp;"),
                "{part}"
            );
        }
    }
}

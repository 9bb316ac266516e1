//! Markdown as models write it → the HTML subset Telegram accepts (`<b> <i> <s> <code> <pre>
//! <a> <blockquote>`).
//!
//! Two rules make the output safe to send whatever the model wrote: every piece of text goes
//! through [`escape`] (so a stray `<` or `&` is never markup), and a tag is only ever written
//! as a pair around content that was itself rendered by these rules (so tags are balanced by
//! construction). Anything that does not parse as formatting is shown literally.

/// Escape text for Telegram HTML: `&`, `<`, `>`.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for ch in text.chars() {
        push_escaped(&mut out, ch);
    }
    out
}

/// Escape an attribute value (also `"`).
pub fn escape_attr(text: &str) -> String {
    escape(text).replace('"', "&quot;")
}

fn push_escaped(out: &mut String, ch: char) {
    match ch {
        '&' => out.push_str("&amp;"),
        '<' => out.push_str("&lt;"),
        '>' => out.push_str("&gt;"),
        _ => out.push(ch),
    }
}

/// The text a reader sees in well-formed HTML from this module: tags removed, entities decoded.
/// Used for the plain-text fallback when Telegram still refuses a message's HTML.
pub fn html_to_plain(html: &str) -> String {
    let mut out = String::with_capacity(html.len());
    let mut rest = html;
    while let Some(ch) = rest.chars().next() {
        match ch {
            '<' => match rest.find('>') {
                Some(end) => rest = &rest[end + 1..],
                None => {
                    out.push_str(rest);
                    break;
                }
            },
            '&' => {
                match entity_end(rest).and_then(|e| decode_entity(&rest[1..e]).map(|c| (e, c))) {
                    Some((e, decoded)) => {
                        out.push(decoded);
                        rest = &rest[e + 1..];
                    }
                    None => {
                        out.push('&');
                        rest = &rest[1..];
                    }
                }
            }
            _ => {
                out.push(ch);
                rest = &rest[ch.len_utf8()..];
            }
        }
    }
    out
}

/// The byte index of the `;` ending an entity that starts `rest` (names are short).
pub fn entity_end(rest: &str) -> Option<usize> {
    rest.char_indices()
        .take(12)
        .find(|&(_, c)| c == ';')
        .map(|(i, _)| i)
}

/// The character an entity name (between `&` and `;`) stands for, if Telegram knows it.
pub fn decode_entity(name: &str) -> Option<char> {
    match name {
        "lt" => Some('<'),
        "gt" => Some('>'),
        "amp" => Some('&'),
        "quot" => Some('"'),
        _ => {
            let num = name.strip_prefix('#')?;
            let value = match num.strip_prefix(['x', 'X']) {
                Some(hex) => u32::from_str_radix(hex, 16).ok()?,
                None => num.parse().ok()?,
            };
            char::from_u32(value)
        }
    }
}

/// The mark only warden's own approval requests carry; in the model's text it becomes
/// [`MODEL_LOCK`], so an answer cannot pass for an approval.
pub const APPROVAL_MARK: char = '🔐';
const MODEL_LOCK: &str = "🔒";

/// Render model markdown as Telegram HTML. Links show their real address (`text (url)`), so
/// the model cannot dress a URL carrying data as something else; the approval mark is never
/// the model's.
pub fn markdown_to_html(markdown: &str) -> String {
    let markdown = markdown.replace(APPROVAL_MARK, MODEL_LOCK);
    let lines: Vec<&str> = markdown.lines().collect();
    let mut segments: Vec<String> = Vec::new();
    let mut paragraph: Vec<&str> = Vec::new();
    let flush = |paragraph: &mut Vec<&str>, segments: &mut Vec<String>| {
        if !paragraph.is_empty() {
            segments.push(inline(&paragraph.join("\n"), Ctx::TOP));
            paragraph.clear();
        }
    };
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let trimmed = line.trim_start();
        if let Some((fence, info)) = fence_open(trimmed) {
            flush(&mut paragraph, &mut segments);
            let mut body = Vec::new();
            i += 1;
            while i < lines.len() && !is_fence_close(lines[i].trim_start(), fence) {
                body.push(lines[i]);
                i += 1;
            }
            i += 1; // the closing fence (or the end of an unclosed block)
            segments.push(code_block(info, &body.join("\n")));
            continue;
        }
        if trimmed.starts_with('|') {
            // Telegram has no tables: keep their columns aligned in a monospace block.
            flush(&mut paragraph, &mut segments);
            let mut rows = Vec::new();
            while i < lines.len() && lines[i].trim_start().starts_with('|') {
                rows.push(lines[i].trim());
                i += 1;
            }
            segments.push(format!("<pre>{}</pre>", escape(&rows.join("\n"))));
            continue;
        }
        if trimmed.starts_with('>') {
            flush(&mut paragraph, &mut segments);
            let mut quoted = Vec::new();
            while i < lines.len() && lines[i].trim_start().starts_with('>') {
                let l = lines[i].trim_start()[1..].strip_prefix(' ');
                quoted.push(l.unwrap_or(&lines[i].trim_start()[1..]));
                i += 1;
            }
            let body = inline(&quoted.join("\n"), Ctx::NESTED);
            segments.push(format!("<blockquote>{body}</blockquote>"));
            continue;
        }
        if let Some(rendered) = single_line_block(line) {
            flush(&mut paragraph, &mut segments);
            segments.push(rendered);
        } else if trimmed.is_empty() {
            flush(&mut paragraph, &mut segments);
            segments.push(String::new());
        } else {
            paragraph.push(line);
        }
        i += 1;
    }
    flush(&mut paragraph, &mut segments);
    let joined = segments.join("\n");
    joined.trim_end().trim_start_matches('\n').to_string()
}

/// Headings, list items and rules: blocks that are exactly one line.
fn single_line_block(line: &str) -> Option<String> {
    let trimmed = line.trim_start();
    let indent = &line[..line.len() - trimmed.len()];
    let hashes = trimmed.chars().take_while(|&c| c == '#').count();
    if (1..=6).contains(&hashes) && trimmed[hashes..].starts_with(' ') {
        let text = trimmed[hashes..].trim().trim_end_matches('#').trim_end();
        return Some(format!("<b>{}</b>", inline(text, Ctx::NESTED)));
    }
    let rule_chars: String = trimmed.chars().filter(|c| !c.is_whitespace()).collect();
    if rule_chars.len() >= 3
        && (rule_chars.chars().all(|c| c == '-')
            || rule_chars.chars().all(|c| c == '*')
            || rule_chars.chars().all(|c| c == '_'))
    {
        return Some("———".to_string());
    }
    for bullet in ["- ", "* ", "+ "] {
        if let Some(item) = trimmed.strip_prefix(bullet) {
            return Some(format!("{indent}• {}", inline(item, Ctx::TOP)));
        }
    }
    None
}

/// ```` ``` ```` or `~~~` (three or more) opening a code block, with its info string.
fn fence_open(line: &str) -> Option<(&str, &str)> {
    for ch in ['`', '~'] {
        let n = line.chars().take_while(|&c| c == ch).count();
        if n >= 3 {
            let info = line[n..].trim();
            // A backtick fence's info string cannot contain backticks (that is inline code).
            if ch == '`' && info.contains('`') {
                return None;
            }
            return Some((&line[..n], info));
        }
    }
    None
}

fn is_fence_close(line: &str, fence: &str) -> bool {
    let ch = fence.chars().next().unwrap_or('`');
    let n = line.chars().take_while(|&c| c == ch).count();
    n >= fence.len() && line[n..].trim().is_empty()
}

fn code_block(info: &str, body: &str) -> String {
    let lang: String = info.split_whitespace().next().unwrap_or("").to_string();
    let plain_lang = !lang.is_empty()
        && lang.len() <= 32
        && lang
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_+-#.".contains(c));
    let body = if body.is_empty() { " " } else { body };
    if plain_lang {
        format!(
            "<pre><code class=\"language-{}\">{}</code></pre>",
            escape_attr(&lang),
            escape(body)
        )
    } else {
        format!("<pre>{}</pre>", escape(body))
    }
}

/// Where inline content sits. Telegram refuses code inside other entities, so inside
/// formatting a code span keeps its backticks as plain text; links cannot contain links.
#[derive(Clone, Copy)]
struct Ctx {
    nested: bool,
    in_link: bool,
}

impl Ctx {
    const TOP: Ctx = Ctx {
        nested: false,
        in_link: false,
    };
    const NESTED: Ctx = Ctx {
        nested: true,
        in_link: false,
    };
}

fn inline(text: &str, ctx: Ctx) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len() + 16);
    Scan::new(&chars).render(ctx, 0, &mut out);
    out
}

/// Formatting nested deeper than this is shown as text (bounds the recursion).
const MAX_DEPTH: usize = 12;

/// One run of inline parsing over a slice. A delimiter with no closer is remembered, so a
/// later opener of the same kind fails at once: parsing stays linear per nesting level even
/// for text full of unmatched `*` or backticks. A `[` is tried as a link by scanning up to a
/// few thousand characters ahead; the scans that find none draw on a budget proportional to
/// the text, and once it is spent `[` is text (200 KB of `[` took 7.5 s unoptimized, on the
/// bot's runtime, before).
struct Scan<'a> {
    c: &'a [char],
    /// Backtick run length → the earliest start from which no closing run exists.
    no_code_close: std::collections::HashMap<usize, usize>,
    /// (delimiter, width) → the earliest opener that found no closer.
    no_closer: std::collections::HashMap<(char, usize), usize>,
    /// Characters failed link scans may still look at.
    link_budget: usize,
    /// Characters link scans looked at (for tests of the bound).
    link_steps: usize,
}

/// Failed link scans may look at this many characters per character of text, plus a floor.
const LINK_BUDGET_PER_CHAR: usize = 4;
const LINK_BUDGET_FLOOR: usize = 10_000;

impl<'a> Scan<'a> {
    fn new(c: &'a [char]) -> Scan<'a> {
        Scan {
            c,
            no_code_close: Default::default(),
            no_closer: Default::default(),
            link_budget: LINK_BUDGET_PER_CHAR * c.len() + LINK_BUDGET_FLOOR,
            link_steps: 0,
        }
    }

    fn render(&mut self, ctx: Ctx, depth: usize, out: &mut String) {
        let c = self.c;
        let nested = Ctx {
            nested: true,
            ..ctx
        };
        let mut i = 0;
        while i < c.len() {
            let ch = c[i];
            match ch {
                '\\' if c.get(i + 1).is_some_and(|n| n.is_ascii_punctuation()) => {
                    push_escaped(out, c[i + 1]);
                    i += 2;
                }
                '`' => {
                    let n = run_len(c, i, '`');
                    match self.code_close(i + n, n) {
                        Some(end) => {
                            let content = escape(&code_content(&c[i + n..end]));
                            if ctx.nested {
                                out.push('`');
                                out.push_str(&content);
                                out.push('`');
                            } else {
                                out.push_str("<code>");
                                out.push_str(&content);
                                out.push_str("</code>");
                            }
                            i = end + n;
                        }
                        None => {
                            out.push_str(&"`".repeat(n));
                            i += n;
                        }
                    }
                }
                '[' if !ctx.in_link && depth < MAX_DEPTH && self.link_budget > 0 => {
                    match self.link(i) {
                        Some(link) => {
                            // The text, then the address it really goes to, as plain text (the
                            // client links it): never a label hiding its target.
                            let inner = Ctx {
                                nested: true,
                                in_link: true,
                            };
                            let label: String = c[i + 1..link.text_end].iter().collect();
                            if label.trim() != link.url {
                                Scan::new(&c[i + 1..link.text_end]).render(inner, depth + 1, out);
                                out.push_str(" (");
                                out.push_str(&escape(&link.url));
                                out.push(')');
                            } else {
                                out.push_str(&escape(&link.url));
                            }
                            i = link.end;
                        }
                        None => {
                            out.push('[');
                            i += 1;
                        }
                    }
                }
                '*' | '_' | '~' if depth < MAX_DEPTH => {
                    let n = run_len(c, i, ch);
                    let (tag, width, close) = match (ch, n) {
                        ('~', 1) => ("", 0, None),
                        ('~', _) => ("s", 2, self.closer(i, ch, 2)),
                        (_, 1) => ("i", 1, self.closer(i, ch, 1)),
                        // `**x*` is not bold; it may still be italic.
                        _ => match self.closer(i, ch, 2) {
                            Some(end) => ("b", 2, Some(end)),
                            None => ("i", 1, self.closer(i, ch, 1)),
                        },
                    };
                    match close {
                        Some(end) => {
                            out.push_str(&format!("<{tag}>"));
                            Scan::new(&c[i + width..end]).render(nested, depth + 1, out);
                            out.push_str(&format!("</{tag}>"));
                            i = end + width;
                        }
                        None => {
                            for _ in 0..n {
                                out.push(ch);
                            }
                            i += n;
                        }
                    }
                }
                _ => {
                    push_escaped(out, ch);
                    i += 1;
                }
            }
        }
    }

    /// The start of the backtick run of exactly `n` closing a code span opened before `from`.
    fn code_close(&mut self, from: usize, n: usize) -> Option<usize> {
        if self.no_code_close.get(&n).is_some_and(|&f| from >= f) {
            return None;
        }
        let c = self.c;
        let mut j = from;
        while j < c.len() {
            if c[j] == '`' {
                let m = run_len(c, j, '`');
                if m == n {
                    return Some(j);
                }
                j += m;
            } else {
                j += 1;
            }
        }
        self.no_code_close.insert(n, from);
        None
    }

    /// The index of the delimiter run (`width` copies of `ch`) closing one opened at `open`,
    /// by CommonMark-like flanking rules: the opener is followed and the closer preceded by
    /// non-space; `_` only at word boundaries (so `snake_case_name` stays as is).
    fn closer(&mut self, open: usize, ch: char, width: usize) -> Option<usize> {
        let c = self.c;
        let after_open = *c.get(open + width)?;
        if after_open.is_whitespace() || (ch == '_' && open > 0 && c[open - 1].is_alphanumeric()) {
            return None;
        }
        if self.no_closer.get(&(ch, width)).is_some_and(|&f| open >= f) {
            return None;
        }
        let mut j = open + width + 1;
        while j + width <= c.len() {
            match c[j] {
                '\\' => j += 2,
                '`' => {
                    let n = run_len(c, j, '`');
                    j = self.code_close(j + n, n).map_or(j + n, |e| e + n);
                }
                x if x == ch => {
                    let n = run_len(c, j, ch);
                    let fits = if width == 1 { n == 1 } else { n >= width };
                    let before_ok = !c[j - 1].is_whitespace();
                    let after = c.get(j + width).copied();
                    let boundary_ok = ch != '_' || !after.is_some_and(|a| a.is_alphanumeric());
                    if fits && before_ok && boundary_ok {
                        return Some(j);
                    }
                    j += n;
                }
                _ => j += 1,
            }
        }
        self.no_closer.insert((ch, width), open);
        None
    }

    /// `[text](url)` at `open`, for URL schemes Telegram accepts in links. The characters a
    /// failed attempt looked at are taken from the budget.
    fn link(&mut self, open: usize) -> Option<Link> {
        let mut looked = 0;
        let found = self.find_link(open, &mut looked);
        self.link_steps += looked;
        if found.is_none() {
            self.link_budget = self.link_budget.saturating_sub(looked);
        }
        found
    }

    fn find_link(&mut self, open: usize, looked: &mut usize) -> Option<Link> {
        let c = self.c;
        let mut depth = 0usize;
        let mut j = open;
        let text_end = loop {
            *looked = j - open;
            if j > open + MAX_LINK_TEXT {
                return None;
            }
            match c.get(j)? {
                '\\' => j += 1,
                '`' => {
                    let n = run_len(c, j, '`');
                    j = self.code_close(j + n, n).map_or(j + n - 1, |e| e + n - 1);
                }
                '[' => depth += 1,
                ']' => {
                    depth -= 1;
                    if depth == 0 {
                        break j;
                    }
                }
                _ => {}
            }
            j += 1;
        };
        if text_end == open + 1 || c.get(text_end + 1) != Some(&'(') {
            return None;
        }
        let mut parens = 0usize;
        let mut k = text_end + 2;
        let url_end = loop {
            *looked = k - open;
            if k > text_end + 2 + MAX_URL {
                return None;
            }
            match *c.get(k)? {
                '(' => parens += 1,
                ')' if parens == 0 => break k,
                ')' => parens -= 1,
                x if x.is_whitespace() => return None,
                _ => {}
            }
            k += 1;
        };
        let url: String = c[text_end + 2..url_end].iter().collect();
        let lower = url.to_ascii_lowercase();
        let scheme_ok = ["http://", "https://", "mailto:", "tg://"]
            .iter()
            .any(|s| lower.starts_with(s) && lower.len() > s.len());
        scheme_ok.then_some(Link {
            text_end,
            url,
            end: url_end + 1,
        })
    }
}

fn run_len(c: &[char], at: usize, ch: char) -> usize {
    c[at..].iter().take_while(|&&x| x == ch).count()
}

/// Code span content: one surrounding space is stripped when both sides have one.
fn code_content(c: &[char]) -> String {
    let s: String = c.iter().collect();
    if s.len() >= 2 && s.starts_with(' ') && s.ends_with(' ') && !s.trim().is_empty() {
        s[1..s.len() - 1].to_string()
    } else {
        s
    }
}

struct Link {
    /// Index of the `]` ending the link text.
    text_end: usize,
    url: String,
    /// Index just past the closing `)`.
    end: usize,
}

/// Longest URL put into an `href`; longer ones stay text (a message part must hold a link tag).
const MAX_URL: usize = 2048;
/// Longest link text looked at when searching for the `]`.
const MAX_LINK_TEXT: usize = 1000;

#[cfg(test)]
mod tests {
    use super::*;

    fn html(md: &str) -> String {
        markdown_to_html(md)
    }

    /// Characters the link scans of one top-level inline run looked at.
    fn link_steps(text: &str) -> usize {
        let chars: Vec<char> = text.chars().collect();
        let mut scan = Scan::new(&chars);
        scan.render(Ctx::TOP, 0, &mut String::new());
        scan.link_steps
    }

    #[test]
    fn link_scans_stay_linear_in_the_text() {
        let n = 50_000;
        for text in ["[".repeat(n), "[a](".repeat(n / 4), "[a".repeat(n / 2)] {
            let steps = link_steps(&text);
            let bound = (LINK_BUDGET_PER_CHAR + 1) * text.len() + LINK_BUDGET_FLOOR + 4000;
            assert!(steps <= bound, "{steps} steps for {} chars", text.len());
            // The text survives as text.
            assert_eq!(html(&text).len(), text.len());
        }
        // Ordinary text keeps its links, however many brackets fail quickly before them.
        let cited = format!("{}[docs](https://docs.rs)", "see [1] ".repeat(2000));
        assert!(html(&cited).ends_with("docs (https://docs.rs)"));
    }

    #[test]
    fn stray_markup_characters_are_escaped() {
        assert_eq!(
            html("if a < b && c > d then <script>"),
            "if a &lt; b &amp;&amp; c &gt; d then &lt;script&gt;"
        );
        assert_eq!(html("AT&T"), "AT&amp;T");
    }

    #[test]
    fn emphasis_code_and_links() {
        assert_eq!(
            html("**bold** and *it* and _it_ and ~~gone~~"),
            "<b>bold</b> and <i>it</i> and <i>it</i> and <s>gone</s>"
        );
        assert_eq!(html("run `ls <dir>`"), "run <code>ls &lt;dir&gt;</code>");
        assert_eq!(
            html("see [the docs](https://example.com/a?x=1&y=2)"),
            "see the docs (https://example.com/a?x=1&amp;y=2)"
        );
        assert_eq!(
            html("**see [x](https://e.com)**"),
            "<b>see x (https://e.com)</b>"
        );
        assert_eq!(html("[https://e.com](https://e.com)"), "https://e.com");
    }

    #[test]
    fn the_model_cannot_dress_up_as_an_approval() {
        let out = html("🔐 **Approval needed** (bash)\n[✅ Approve](https://evil.example/?d=x)");
        assert!(!out.contains('🔐'), "{out}");
        assert!(
            out.contains("✅ Approve (https://evil.example/?d=x)"),
            "the real target is shown: {out}"
        );
        assert!(!out.contains("<a "), "{out}");
    }

    #[test]
    fn things_that_look_like_markup_but_are_not() {
        assert_eq!(
            html("snake_case_name and 2 * 3 * 4"),
            "snake_case_name and 2 * 3 * 4"
        );
        assert_eq!(html("**unclosed bold"), "**unclosed bold");
        assert_eq!(html("a `tick"), "a `tick");
        assert_eq!(html("[x](javascript:alert(1))"), "[x](javascript:alert(1))");
        assert_eq!(html(r"\*literal\*"), "*literal*");
    }

    #[test]
    fn code_inside_formatting_stays_plain_text() {
        assert_eq!(html("**use `ls`**"), "<b>use `ls`</b>");
    }

    #[test]
    fn code_blocks_headings_lists_quotes_tables() {
        let md = "# Title\n\nText:\n\n```rust\nfn f() -> Vec<u8> { a && b }\n```\n\n- one\n- **two**\n\n> quoted <x>\n\n| a | b |\n|---|---|";
        let out = html(md);
        assert_eq!(
            out,
            "<b>Title</b>\n\nText:\n\n<pre><code class=\"language-rust\">fn f() -&gt; Vec&lt;u8&gt; { a &amp;&amp; b }</code></pre>\n\n• one\n• <b>two</b>\n\n<blockquote>quoted &lt;x&gt;</blockquote>\n\n<pre>| a | b |\n|---|---|</pre>"
        );
    }

    #[test]
    fn unclosed_code_block_runs_to_the_end() {
        assert_eq!(html("```\na < b"), "<pre>a &lt; b</pre>");
    }

    #[test]
    fn odd_language_names_are_dropped() {
        assert_eq!(html("```\"><script>\nx\n```"), "<pre>x</pre>");
    }

    #[test]
    fn plain_text_round_trip() {
        let md = "**a** < b & `c` [d](https://e.f)";
        assert_eq!(html_to_plain(&html(md)), "a < b & c d (https://e.f)");
        assert_eq!(html_to_plain("&#65;&#x42;&bogus;"), "AB&bogus;");
    }
}

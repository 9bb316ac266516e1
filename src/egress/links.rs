//! Finding the URLs a text or a fetched page contains, so that following them needs no
//! approval: absolute `http(s)://` URLs anywhere in the text, `href`/`src`/`action` values of
//! HTML tags resolved against the page's URL (or its `<base href>`), and strings inside a JSON
//! document. Over-collecting is harmless (every URL found was written by the page's author, not
//! composed by the model); the caller caps how many are kept.

use url::Url;

/// Longest URL remembered (longer ones are not followed without asking).
pub const MAX_URL_LEN: usize = 4096;

/// Absolute http(s) URLs in `text`. A URL followed by punctuation (`see https://x.org/a.`) is
/// returned both with and without it, since either reading appeared in the text.
pub fn absolute_urls(text: &str) -> Vec<String> {
    let lower = text.to_ascii_lowercase();
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(at) = lower[from..].find("http").map(|i| from + i) {
        from = at + 4;
        let rest = &lower[at..];
        if !(rest.starts_with("http://") || rest.starts_with("https://")) {
            continue;
        }
        let end = text[at..]
            .char_indices()
            .find(|&(_, c)| c.is_whitespace() || c.is_control() || "<>\"'`".contains(c))
            .map_or(text.len(), |(i, _)| at + i);
        let raw = &text[at..end];
        from = end;
        if raw.len() > MAX_URL_LEN {
            continue;
        }
        let trimmed = trim_trailing(raw);
        if trimmed
            .split_once("://")
            .is_some_and(|(_, rest)| !rest.is_empty())
        {
            found.push(trimmed.to_string());
        }
        if trimmed != raw {
            found.push(raw.to_string());
        }
    }
    found
}

/// Drop trailing sentence punctuation, and closing brackets the URL did not open.
fn trim_trailing(mut url: &str) -> &str {
    loop {
        let Some(last) = url.chars().last() else {
            return url;
        };
        let unbalanced = |open: char, close: char| {
            last == close && url.matches(close).count() > url.matches(open).count()
        };
        if ".,;:!?".contains(last)
            || unbalanced('(', ')')
            || unbalanced('[', ']')
            || unbalanced('{', '}')
        {
            url = &url[..url.len() - last.len_utf8()];
        } else {
            return url;
        }
    }
}

/// Every link of an HTML page: tag attributes that hold URLs (resolved against `<base href>`
/// or the page's own URL) and absolute URLs anywhere in its text.
pub fn html_links(html: &str, page: &Url) -> Vec<Url> {
    let mut base = page.clone();
    let mut base_set = false;
    let mut links = Vec::new();
    for (tag, attrs) in tags(html) {
        for (name, value) in attrs {
            if !matches!(name.as_str(), "href" | "src" | "action") {
                continue;
            }
            let value = decode_entities(value.trim());
            if value.len() > MAX_URL_LEN {
                continue;
            }
            if tag == "base" && name == "href" && !base_set {
                base_set = true;
                if let Ok(b) = page.join(&value) {
                    base = b;
                }
                continue;
            }
            if let Ok(url) = base.join(&value) {
                if matches!(url.scheme(), "http" | "https") {
                    links.push(url);
                }
            }
        }
    }
    for raw in absolute_urls(&decode_entities(html)) {
        if let Ok(url) = Url::parse(&raw) {
            links.push(url);
        }
    }
    links
}

/// Absolute URLs in the strings of a JSON document (search APIs answer in JSON, often with
/// `\/` escapes that a plain text scan would miss). Not JSON: the text is scanned as it is.
pub fn json_urls(text: &str) -> Vec<String> {
    fn walk(value: &serde_json::Value, out: &mut Vec<String>) {
        match value {
            serde_json::Value::String(s) => out.extend(absolute_urls(s)),
            serde_json::Value::Array(items) => items.iter().for_each(|v| walk(v, out)),
            serde_json::Value::Object(map) => map.values().for_each(|v| walk(v, out)),
            _ => {}
        }
    }
    let mut out = absolute_urls(text);
    if let Ok(value) = serde_json::from_str::<serde_json::Value>(text) {
        walk(&value, &mut out);
    }
    out
}

type Attrs = Vec<(String, String)>;

/// Start tags with their attributes (lowercase names), in document order. A small tokenizer,
/// not a full HTML parser: comments are skipped, quoting is honoured, anything it cannot
/// read is passed over.
fn tags(html: &str) -> Vec<(String, Attrs)> {
    let bytes = html.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(lt) = html[i..].find('<').map(|p| i + p) {
        i = lt + 1;
        if html[lt..].starts_with("<!--") {
            i = html[lt + 4..]
                .find("-->")
                .map_or(html.len(), |p| lt + 4 + p + 3);
            continue;
        }
        let name_end = html[i..]
            .find(|c: char| !c.is_ascii_alphanumeric())
            .map_or(html.len(), |p| i + p);
        if name_end == i {
            continue;
        }
        let tag = html[i..name_end].to_ascii_lowercase();
        let mut j = name_end;
        let mut attrs = Vec::new();
        loop {
            while j < bytes.len() && (bytes[j].is_ascii_whitespace() || bytes[j] == b'/') {
                j += 1;
            }
            if j >= bytes.len() || bytes[j] == b'>' || bytes[j] == b'<' {
                break;
            }
            let name_start = j;
            while j < bytes.len() && !b" \t\r\n\x0c/>=".contains(&bytes[j]) {
                j += 1;
            }
            let name = html[name_start..j].to_ascii_lowercase();
            while j < bytes.len() && bytes[j].is_ascii_whitespace() {
                j += 1;
            }
            if j >= bytes.len() || bytes[j] != b'=' {
                attrs.push((name, String::new()));
                continue;
            }
            j += 1;
            while j < bytes.len() && bytes[j].is_ascii_whitespace() {
                j += 1;
            }
            let value = match bytes.get(j) {
                Some(&q) if q == b'"' || q == b'\'' => {
                    let end = html[j + 1..]
                        .find(q as char)
                        .map_or(html.len(), |p| j + 1 + p);
                    let value = &html[j + 1..end];
                    j = (end + 1).min(html.len());
                    value
                }
                _ => {
                    let start = j;
                    while j < bytes.len() && !bytes[j].is_ascii_whitespace() && bytes[j] != b'>' {
                        j += 1;
                    }
                    &html[start..j]
                }
            };
            attrs.push((name, value.to_string()));
        }
        i = j.max(i);
        out.push((tag, attrs));
    }
    out
}

/// The character references that appear in URLs: `&amp;` and friends, numeric ones.
pub fn decode_entities(text: &str) -> String {
    if !text.contains('&') {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(amp) = rest.find('&') {
        out.push_str(&rest[..amp]);
        rest = &rest[amp..];
        let decoded = rest[1..].find(';').filter(|&p| p <= 10).and_then(|p| {
            let name = &rest[1..1 + p];
            let c = match name {
                "amp" => Some('&'),
                "lt" => Some('<'),
                "gt" => Some('>'),
                "quot" => Some('"'),
                "apos" => Some('\''),
                _ => name
                    .strip_prefix("#x")
                    .or_else(|| name.strip_prefix("#X"))
                    .and_then(|h| u32::from_str_radix(h, 16).ok())
                    .or_else(|| name.strip_prefix('#').and_then(|d| d.parse().ok()))
                    .and_then(char::from_u32),
            }?;
            Some((c, p + 2))
        });
        match decoded {
            Some((c, len)) => {
                out.push(c);
                rest = &rest[len..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absolute_urls_in_prose() {
        let text = "Read https://docs.rs/serde. Also (see https://en.wikipedia.org/wiki/Rust_(language))\n\
                    and [the book](https://doc.rust-lang.org/book/) or <HTTPS://Example.COM/x?a=1&b=2>, \
                    not ftp://x.org or http:// alone; xhttps://glued.example/ counts too.";
        let found = absolute_urls(text);
        for url in [
            "https://docs.rs/serde",
            "https://docs.rs/serde.",
            "https://en.wikipedia.org/wiki/Rust_(language)",
            "https://doc.rust-lang.org/book/",
            "HTTPS://Example.COM/x?a=1&b=2",
            "https://glued.example/",
        ] {
            assert!(found.contains(&url.to_string()), "{url} in {found:?}");
        }
        assert!(!found.iter().any(|u| u.starts_with("ftp")));
        assert!(!found.iter().any(|u| u == "http://"), "{found:?}");
        assert!(
            !found.contains(&"https://en.wikipedia.org/wiki/Rust_(language)".replace(')', "")),
            "a balanced bracket stays"
        );
    }

    #[test]
    fn html_links_resolve_relative_references() {
        let page = Url::parse("https://site.example/docs/intro.html").unwrap();
        let html = r#"<html><head><link rel=stylesheet href=/style.css></head><body>
            <a href="next.html">next</a> <A HREF='../up/?q=a&amp;r=b'>up</A>
            <a href="https://other.example/page#frag">abs</a>
            <a href="mailto:me@x.org">mail</a> <a href="javascript:alert(1)">js</a>
            <!-- <a href="/commented">no</a> -->
            <img src="//cdn.example/i.png"> <form action="/search"></form>
            <p>Text link: https://text.example/t?x=1&amp;y=2.</p>
            </body></html>"#;
        let links: Vec<String> = html_links(html, &page)
            .into_iter()
            .map(String::from)
            .collect();
        for want in [
            "https://site.example/style.css",
            "https://site.example/docs/next.html",
            "https://site.example/up/?q=a&r=b",
            "https://other.example/page#frag",
            "https://cdn.example/i.png",
            "https://site.example/search",
            "https://text.example/t?x=1&y=2",
        ] {
            assert!(links.contains(&want.to_string()), "{want} in {links:?}");
        }
        assert!(!links.iter().any(|l| l.contains("commented")), "{links:?}");
        assert!(!links
            .iter()
            .any(|l| l.starts_with("mailto") || l.starts_with("javascript")));
    }

    #[test]
    fn base_href_changes_the_base() {
        let page = Url::parse("https://a.example/x/y").unwrap();
        let html = r#"<base href="https://b.example/root/"><a href="rel">r</a>"#;
        let links: Vec<String> = html_links(html, &page)
            .into_iter()
            .map(String::from)
            .collect();
        assert!(
            links.contains(&"https://b.example/root/rel".to_string()),
            "{links:?}"
        );
    }

    #[test]
    fn json_strings_are_scanned_unescaped() {
        let json =
            r#"{"results":[{"url":"https:\/\/r1.example\/a"},{"u":"see https://r2.example/b"}]}"#;
        let found = json_urls(json);
        assert!(
            found.contains(&"https://r1.example/a".to_string()),
            "{found:?}"
        );
        assert!(
            found.contains(&"https://r2.example/b".to_string()),
            "{found:?}"
        );
    }

    #[test]
    fn entities_decode() {
        assert_eq!(
            decode_entities("a&amp;b&#38;c&#x26;d&lt;&bogus;&"),
            "a&b&c&d<&bogus;&"
        );
    }

    #[test]
    fn odd_markup_does_not_panic() {
        let page = Url::parse("https://a.example/").unwrap();
        for html in [
            "<",
            "<a",
            "<a href",
            "<a href=",
            "<a href=\"x",
            "<!--",
            "<a b='",
            "é<é>",
        ] {
            let _ = html_links(html, &page);
        }
        let _ = absolute_urls("https://");
        let _ = absolute_urls("http");
    }
}

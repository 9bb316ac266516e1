//! Telegram's HTML parse mode, checked the way the Bot API does enough to refuse what it
//! would refuse: only its tags, properly nested and closed, `pre` holding at most `code`,
//! `code` holding nothing, `a` with an `href`; every `&` an entity it knows; a raw `<` is an
//! error. Returns the visible text.

const TAGS: &[&str] = &[
    "b",
    "strong",
    "i",
    "em",
    "u",
    "ins",
    "s",
    "strike",
    "del",
    "a",
    "code",
    "pre",
    "span",
    "tg-spoiler",
    "blockquote",
    "tg-emoji",
];

fn decode(name: &str) -> Option<char> {
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

/// The visible text of `html`, or the reason Telegram would give for refusing it.
pub fn parse(html: &str) -> Result<String, String> {
    let mut text = String::new();
    let mut stack: Vec<String> = Vec::new();
    let mut rest = html;
    while let Some(ch) = rest.chars().next() {
        match ch {
            '<' => {
                let end = rest.find('>').ok_or_else(|| {
                    format!("unclosed start tag at byte {}", html.len() - rest.len())
                })?;
                let inner = &rest[1..end];
                rest = &rest[end + 1..];
                if let Some(name) = inner.strip_prefix('/') {
                    let name = name.trim().to_ascii_lowercase();
                    match stack.pop() {
                        Some(open) if open == name => {}
                        Some(open) => {
                            return Err(format!(
                                "can't find end tag corresponding to start tag \"{open}\""
                            ))
                        }
                        None => return Err(format!("unexpected end tag \"{name}\"")),
                    }
                    continue;
                }
                let name = inner
                    .split(|c: char| c.is_whitespace())
                    .next()
                    .unwrap_or("")
                    .to_ascii_lowercase();
                if !TAGS.contains(&name.as_str()) {
                    return Err(format!("unsupported start tag \"{name}\""));
                }
                match stack.last().map(String::as_str) {
                    Some("code") => return Err("entities inside code are not allowed".into()),
                    Some("pre") if name != "code" => {
                        return Err("only code may be inside pre".into())
                    }
                    _ => {}
                }
                let attrs = inner[name.len()..].trim();
                if name == "a" && !(attrs.starts_with("href=\"") && attrs.ends_with('"')) {
                    return Err("a tag without a quoted href".into());
                }
                if attrs.contains('<') || attrs.matches('"').count() % 2 != 0 {
                    return Err(format!("bad attributes in \"{name}\""));
                }
                stack.push(name);
            }
            '&' => {
                let end = rest
                    .char_indices()
                    .take(12)
                    .find(|&(_, c)| c == ';')
                    .map(|(i, _)| i)
                    .ok_or("unsupported entity (a bare &)")?;
                let decoded = decode(&rest[1..end])
                    .ok_or_else(|| format!("unsupported entity {:?}", &rest[..=end]))?;
                text.push(decoded);
                rest = &rest[end + 1..];
            }
            _ => {
                text.push(ch);
                rest = &rest[ch.len_utf8()..];
            }
        }
    }
    if let Some(open) = stack.pop() {
        return Err(format!(
            "can't find end tag corresponding to start tag \"{open}\""
        ));
    }
    Ok(text)
}

pub fn utf16_len(s: &str) -> usize {
    s.chars().map(char::len_utf16).sum()
}

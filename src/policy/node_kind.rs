//! A parsed node's kind name without the per-call cost of `Node::kind`, which looks the name up
//! in the grammar, measures the C string and checks it is UTF-8 every time. The names are
//! copied once from the grammar into a table indexed by the node's symbol id (the
//! same id `Node::kind` looks up, aliases included), so every comparison sees the same text.

use std::sync::OnceLock;
use tree_sitter::{Language, Node};

/// The name of `node`'s kind, as `node.kind()` would give it.
pub fn of<'tree>(node: Node<'tree>) -> &'tree str {
    match names().get(usize::from(node.kind_id())) {
        Some(Some(name)) => name,
        _ => node.kind(),
    }
}

fn names() -> &'static [Option<Box<str>>] {
    static NAMES: OnceLock<Vec<Option<Box<str>>>> = OnceLock::new();
    NAMES.get_or_init(|| {
        let language = Language::from(tree_sitter_bash::LANGUAGE);
        (0..language.node_kind_count())
            .map(|id| {
                let id = u16::try_from(id).ok()?;
                language.node_kind_for_id(id).map(Box::from)
            })
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every node of a script that touches most of the grammar, and of one with syntax errors
    /// (ERROR nodes lie outside the table), gets the name `kind()` gives.
    #[test]
    fn the_table_names_every_node_as_tree_sitter_does() {
        let full = r#"for f in a "b c" $(ls); do [[ -n $f && $f != x* ]] && echo "${f%.*}" >> out 2>&1; done
if test -f x; then cat <<'EOF' | grep -c y; elif true; then :; else ! false; fi
while read -r l; do echo $((1 + 2)) <<< "$l"; done < in; a=(1 2) b=x env; { (cd /tmp; ls -la); } |& tee log
"#;
        let broken = "echo ( ; fi done )) <<< | & {";
        let mut parser = tree_sitter::Parser::new();
        parser
            .set_language(&tree_sitter_bash::LANGUAGE.into())
            .unwrap();
        let mut kinds = std::collections::BTreeSet::new();
        for src in [full, broken] {
            let tree = parser.parse(src, None).unwrap();
            let mut cursor = tree.walk();
            'walk: loop {
                let node = cursor.node();
                assert_eq!(of(node), node.kind(), "{node:?}");
                kinds.insert(node.kind().to_string());
                if cursor.goto_first_child() || cursor.goto_next_sibling() {
                    continue;
                }
                while !cursor.goto_next_sibling() {
                    if !cursor.goto_parent() {
                        break 'walk;
                    }
                }
            }
        }
        assert!(kinds.contains("ERROR") && kinds.len() > 60, "{kinds:?}");
    }
}

//! The command policy: parse a bash command string (tree-sitter-bash), build the IR, apply the
//! per-program rules and the path validator, and decide allow / deny / ask with a reason.

pub mod ir;

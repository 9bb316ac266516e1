//! File modes as `chmod` reads them: octal (`644`) or symbolic (`u+x,go-w`, `g=u`, `-w`).
//!
//! Parsed once, by the policy (which refuses any change that could add the setuid, setgid or
//! sticky bit) and again by the executor, which applies the same parse to each file itself on
//! the host backend (the jail's own chmod calls do nothing: Landlock does not confine them).
//! The meaning follows GNU chmod: without `ugoa` the umask's bits are left alone, `X` is
//! execute for directories and for files already executable by someone, `=` on a directory
//! keeps its setuid/setgid bits unless the change names them.

/// Setuid, setgid, sticky.
pub const SPECIAL_BITS: u32 = 0o7000;
const SET_ID_BITS: u32 = 0o6000;
const ALL_BITS: u32 = 0o7777;

/// A parsed mode argument.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ModeChange {
    /// Octal digits; `long` when written with five or more digits (GNU then also clears a
    /// directory's setuid/setgid bits).
    Octal {
        value: u32,
        long: bool,
    },
    Symbolic(Vec<Clause>),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Clause {
    /// The `ugoa` bits the clause names; `None` when it names none (then the umask applies).
    who: Option<u32>,
    actions: Vec<(Op, Perms)>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Add,
    Remove,
    Set,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Perms {
    /// Letters among `rwxXst`.
    Letters(String),
    /// `u`, `g` or `o`: copy that class's current bits.
    Copy(char),
    /// Octal digits after an operator (`-4000`).
    Octal(u32),
}

/// Parse `text` as chmod would, or say why it is not a mode.
pub fn parse(text: &str) -> Result<ModeChange, String> {
    if !text.is_empty() && text.chars().all(|c| c.is_ascii_digit()) {
        let value = u32::from_str_radix(text, 8).map_err(|_| "not an octal mode".to_string())?;
        if value > ALL_BITS {
            return Err("not an octal mode".into());
        }
        return Ok(ModeChange::Octal {
            value,
            long: text.len() > 4,
        });
    }
    let mut clauses = Vec::new();
    for clause in text.split(',') {
        let rest = clause.trim_start_matches(['u', 'g', 'o', 'a']);
        let who_text = &clause[..clause.len() - rest.len()];
        let who = (!who_text.is_empty()).then(|| {
            who_text.chars().fold(0, |bits, c| {
                bits | match c {
                    'u' => 0o4700,
                    'g' => 0o2070,
                    'o' => 0o1007,
                    _ => ALL_BITS,
                }
            })
        });
        if rest.is_empty() || !rest.starts_with(['+', '-', '=']) {
            return Err("not a mode chmod understands".into());
        }
        let mut actions = Vec::new();
        let mut rest = rest;
        while let Some(op) = rest.chars().next() {
            rest = &rest[1..];
            let end = rest.find(['+', '-', '=']).unwrap_or(rest.len());
            let perms = &rest[..end];
            rest = &rest[end..];
            let op = match op {
                '+' => Op::Add,
                '-' => Op::Remove,
                _ => Op::Set,
            };
            let perms = if !perms.is_empty() && perms.chars().all(|c| c.is_ascii_digit()) {
                let value =
                    u32::from_str_radix(perms, 8).map_err(|_| "not an octal mode".to_string())?;
                if value > ALL_BITS {
                    return Err("not an octal mode".into());
                }
                Perms::Octal(value)
            } else if perms.len() == 1 && "ugo".contains(perms) {
                Perms::Copy(perms.chars().next().unwrap_or('u'))
            } else if perms.chars().all(|c| "rwxXst".contains(c)) {
                Perms::Letters(perms.to_string())
            } else {
                return Err("not a mode chmod understands".into());
            };
            actions.push((op, perms));
        }
        clauses.push(Clause { who, actions });
    }
    Ok(ModeChange::Symbolic(clauses))
}

impl ModeChange {
    /// Whether applying this change can set a setuid, setgid or sticky bit on any file.
    pub fn can_add_special_bits(&self) -> bool {
        match self {
            ModeChange::Octal { value, .. } => value & SPECIAL_BITS != 0,
            ModeChange::Symbolic(clauses) => clauses.iter().any(|clause| {
                clause.actions.iter().any(|(op, perms)| {
                    *op != Op::Remove
                        && match perms {
                            Perms::Letters(letters) => letters.contains(['s', 't']),
                            Perms::Octal(value) => value & SPECIAL_BITS != 0,
                            Perms::Copy(_) => false,
                        }
                })
            }),
        }
    }

    /// The permission bits (`& 0o7777`) a file with `old` bits gets.
    pub fn apply(&self, old: u32, is_dir: bool, umask: u32) -> u32 {
        let old = old & ALL_BITS;
        match self {
            ModeChange::Octal { value, long } => {
                if is_dir && !long {
                    value | (old & SET_ID_BITS)
                } else {
                    *value
                }
            }
            ModeChange::Symbolic(clauses) => {
                let mut mode = old;
                for clause in clauses {
                    mode = clause.apply(mode, is_dir, umask);
                }
                mode
            }
        }
    }
}

impl Clause {
    fn apply(&self, mut mode: u32, is_dir: bool, umask: u32) -> u32 {
        // Without `ugoa` the umask's bits are not touched.
        let affected = match self.who {
            Some(bits) => bits,
            None => ALL_BITS & !(umask & 0o777),
        };
        for (op, perms) in &self.actions {
            let (value, mentions_set_id, affected) = match perms {
                Perms::Octal(value) => (*value, value & SET_ID_BITS != 0, ALL_BITS),
                Perms::Copy(class) => {
                    let shift = match class {
                        'u' => 6,
                        'g' => 3,
                        _ => 0,
                    };
                    let bits = (mode >> shift) & 0o7;
                    ((bits << 6 | bits << 3 | bits) & affected, false, affected)
                }
                Perms::Letters(letters) => {
                    let mut bits = 0;
                    for letter in letters.chars() {
                        bits |= match letter {
                            'r' => 0o444,
                            'w' => 0o222,
                            'x' => 0o111,
                            'X' if is_dir || mode & 0o111 != 0 => 0o111,
                            's' => SET_ID_BITS,
                            't' => 0o1000,
                            _ => 0,
                        };
                    }
                    (bits & affected, letters.contains('s'), affected)
                }
            };
            mode = match op {
                Op::Add => mode | value,
                Op::Remove => mode & !value,
                Op::Set => {
                    let mut cleared = affected;
                    if is_dir && !mentions_set_id {
                        cleared &= !SET_ID_BITS;
                    }
                    (mode & !cleared) | value
                }
            };
        }
        mode & ALL_BITS
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn apply(mode: &str, old: u32, is_dir: bool, umask: u32) -> u32 {
        parse(mode).unwrap().apply(old, is_dir, umask)
    }

    #[test]
    fn symbolic_modes_mean_what_gnu_chmod_makes_of_them() {
        // (mode, old, directory, umask, expected) — expectations read off coreutils 9 chmod.
        let cases = [
            ("u+x", 0o644, false, 0o022, 0o744),
            ("+x", 0o644, false, 0o022, 0o755),
            ("+x", 0o644, false, 0o077, 0o744),
            ("+w", 0o444, false, 0o022, 0o644),
            ("a+w", 0o444, false, 0o022, 0o666),
            ("go-w", 0o666, false, 0o022, 0o644),
            ("-w", 0o666, false, 0o022, 0o466),
            ("=r", 0o755, false, 0o022, 0o444),
            ("=w", 0o755, false, 0o022, 0o200),
            ("u=rwx,go=rx", 0o600, false, 0o022, 0o755),
            ("g=u", 0o640, false, 0o022, 0o660),
            ("o=g", 0o750, false, 0o022, 0o755),
            ("a+X", 0o644, false, 0o022, 0o644),
            ("a+X", 0o744, false, 0o022, 0o755),
            ("a+X", 0o600, true, 0o022, 0o711),
            ("u+x,g-w+x", 0o664, false, 0o022, 0o754),
            ("a-st", 0o6755, false, 0o022, 0o755),
            ("u=rw", 0o2775, true, 0o022, 0o2675),
            ("u=rws", 0o755, false, 0o022, 0o4655),
            ("-4000", 0o4755, false, 0o022, 0o755),
            ("=", 0o755, false, 0o022, 0o000),
            ("a=", 0o755, false, 0o022, 0o000),
        ];
        for (mode, old, dir, umask, expected) in cases {
            assert_eq!(
                apply(mode, old, dir, umask),
                expected,
                "chmod {mode} on {old:o} (dir {dir}, umask {umask:03o})"
            );
        }
    }

    #[test]
    fn octal_modes_keep_a_directory_set_id_bits_unless_long() {
        assert_eq!(apply("755", 0o600, false, 0o022), 0o755);
        assert_eq!(apply("0755", 0o2700, true, 0o022), 0o2755);
        assert_eq!(apply("00755", 0o2700, true, 0o022), 0o755);
        assert_eq!(apply("0755", 0o4700, false, 0o022), 0o755);
    }

    #[test]
    fn special_bits_are_seen_in_every_spelling() {
        for adds in [
            "4755", "2755", "1777", "u+s", "g+s", "+t", "a=rws", "u+x,g+s", "+4000",
        ] {
            assert!(parse(adds).unwrap().can_add_special_bits(), "{adds}");
        }
        for harmless in [
            "644",
            "0755",
            "u+x",
            "a-st",
            "-4000",
            "g=u",
            "u=rwx,go=rx",
            "=",
        ] {
            assert!(
                !parse(harmless).unwrap().can_add_special_bits(),
                "{harmless}"
            );
        }
    }

    #[test]
    fn malformed_modes_are_refused() {
        for bad in ["", "u", "x+s", "u+q", "99", "777777", "u+ug", "+8"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}

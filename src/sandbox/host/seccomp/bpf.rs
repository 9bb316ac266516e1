//! Compiling the system call table into a compact classic-BPF seccomp program.
//!
//! Why not a linear list (as seccompiler emits): the kernel emulates a new filter once for every
//! system call number to build its "always allowed" cache, and JIT-compiles it, at every
//! `seccomp()` call — that is, at every spawn. A 1,400-instruction linear chain cost ~1.7 ms per
//! spawn here; this layout costs a small fraction of it.
//!
//! Layout:
//! 1. architecture check (anything but the native one is killed);
//! 2. the number space `0..2^32` is cut into intervals with one action each (runs of allowed
//!    numbers merge into one interval; every gap, the x32 range and everything above the highest
//!    listed number is the default action), found by binary search on the interval starts;
//! 3. a system call with argument rules gets its own interval whose code checks the rules:
//!    allowed if any rule holds (all of its conditions), else the default action.
//!
//! A conditional jump goes straight to its target when that lies within the 255 instructions
//! its 8-bit offset reaches; only the few farther ones (the top of the search tree) become a
//! conditional skip over a `JA` (32-bit offset). Offsets are resolved from labels by growing
//! jumps until every one fits. Each instruction saved is saved at every spawn: the kernel
//! converts, emulates and JIT-compiles the program in every `seccomp()` call.

use std::collections::BTreeMap;

const BPF_LD_W_ABS: u16 = 0x20;
const BPF_ALU_AND_K: u16 = 0x54;
const BPF_JMP_JA: u16 = 0x05;
const BPF_JMP_JEQ_K: u16 = 0x15;
const BPF_JMP_JGE_K: u16 = 0x35;
const BPF_RET_K: u16 = 0x06;

const OFFSET_NR: u32 = 0;
const OFFSET_ARCH: u32 = 4;
const OFFSET_ARGS: u32 = 16;

pub const RET_KILL_PROCESS: u32 = 0x8000_0000;
pub const RET_ALLOW: u32 = 0x7fff_0000;
const RET_ERRNO: u32 = 0x0005_0000;
const RET_USER_NOTIF: u32 = 0x7fc0_0000;

/// The kernel's limit on a filter's length.
const MAX_INSTRUCTIONS: usize = 4096;

/// What happens to one system call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    Allow,
    /// Fail with this errno (EPERM for denials; ENOSYS for clone3).
    Errno(u16),
    /// Ask warden through the filter's listener (`supervisor.rs`); ENOSYS when nobody listens.
    Notify,
    /// Allowed when any rule holds, otherwise the default action.
    Rules(Vec<Rule>),
    /// Allowed when any rule holds, otherwise this errno (0: the call "succeeds" having done
    /// nothing).
    RulesElse(Vec<Rule>, u16),
}

/// Conditions that must all hold.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule(pub Vec<Cond>);

/// A comparison of one argument (0-5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cond {
    arg: u8,
    op: Op,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    /// Low 32 bits equal (the upper half is ignored, as the kernel does for `int` arguments).
    Eq32(u32),
    Ne32(u32),
    MaskedEq32 {
        mask: u32,
        value: u32,
    },
    /// All 64 bits.
    MaskedEq64 {
        mask: u64,
        value: u64,
    },
}

impl Cond {
    pub fn eq32(arg: u8, value: u32) -> Cond {
        Cond {
            arg,
            op: Op::Eq32(value),
        }
    }
    pub fn ne32(arg: u8, value: u32) -> Cond {
        Cond {
            arg,
            op: Op::Ne32(value),
        }
    }
    pub fn masked_eq32(arg: u8, mask: u32, value: u32) -> Cond {
        Cond {
            arg,
            op: Op::MaskedEq32 { mask, value },
        }
    }
    pub fn eq64(arg: u8, value: u64) -> Cond {
        Cond::masked_eq64(arg, u64::MAX, value)
    }
    pub fn masked_eq64(arg: u8, mask: u64, value: u64) -> Cond {
        Cond {
            arg,
            op: Op::MaskedEq64 { mask, value },
        }
    }
}

impl Cond {
    /// (argument, kind, mask, value), for tests comparing with other compilers.
    #[cfg(test)]
    pub fn describe(&self) -> (u8, &'static str, u64, u64) {
        match self.op {
            Op::Eq32(v) => (self.arg, "eq32", u64::from(u32::MAX), u64::from(v)),
            Op::Ne32(v) => (self.arg, "ne32", u64::from(u32::MAX), u64::from(v)),
            Op::MaskedEq32 { mask, value } => {
                (self.arg, "masked32", u64::from(mask), u64::from(value))
            }
            Op::MaskedEq64 { mask, value } => (self.arg, "masked64", mask, value),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Label(usize);

/// A conditional jump's comparison of the accumulator with `k`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Compare {
    Eq,
    Ge,
}

impl Compare {
    fn code(self) -> u16 {
        match self {
            Compare::Eq => BPF_JMP_JEQ_K,
            Compare::Ge => BPF_JMP_JGE_K,
        }
    }
}

/// An instruction before jump offsets are known.
#[derive(Clone, Copy, Debug)]
enum Ins {
    Ld(u32),
    And(u32),
    /// Go to `target` when the comparison's outcome is `when`, else fall through.
    JumpIf {
        compare: Compare,
        k: u32,
        when: bool,
        target: Label,
    },
    Ret(u32),
    Mark(Label),
}

#[derive(Default)]
struct Asm {
    code: Vec<Ins>,
    labels: usize,
}

impl Asm {
    fn label(&mut self) -> Label {
        self.labels += 1;
        Label(self.labels - 1)
    }

    fn push(&mut self, ins: Ins) {
        self.code.push(ins);
    }

    /// Go to `target` when comparing the accumulator with `k` comes out as `when`.
    fn jump_if(&mut self, compare: Compare, k: u32, when: bool, target: Label) {
        self.push(Ins::JumpIf {
            compare,
            k,
            when,
            target,
        });
    }

    fn finish(self) -> Result<Vec<libc::sock_filter>, String> {
        // Which jumps need the long form (a skip over a JA): none at first; a jump only ever
        // grows, so this ends after a few rounds.
        let mut long = vec![false; self.code.len()];
        let position = loop {
            let position = self.positions(&long);
            let mut grew = false;
            for (i, ins) in self.code.iter().enumerate() {
                if let Ins::JumpIf { target, .. } = ins {
                    if !long[i] && position.offset(i, *target)? > usize::from(u8::MAX) {
                        long[i] = true;
                        grew = true;
                    }
                }
            }
            if !grew {
                break position;
            }
        };
        if position.length > MAX_INSTRUCTIONS {
            return Err(format!(
                "the seccomp filter has {} instructions (max {MAX_INSTRUCTIONS})",
                position.length
            ));
        }
        let mut out = Vec::with_capacity(position.length);
        let mut emit = |code, jt, jf, k| out.push(libc::sock_filter { code, jt, jf, k });
        for (i, ins) in self.code.iter().enumerate() {
            match *ins {
                Ins::Mark(_) => {}
                Ins::Ld(offset) => emit(BPF_LD_W_ABS, 0, 0, offset),
                Ins::And(mask) => emit(BPF_ALU_AND_K, 0, 0, mask),
                Ins::JumpIf {
                    compare,
                    k,
                    when,
                    target,
                } => {
                    let offset = position.offset(i, target)?;
                    if long[i] {
                        // The comparison skips the JA unless it comes out as `when`.
                        let (jt, jf) = if when { (0, 1) } else { (1, 0) };
                        emit(compare.code(), jt, jf, k);
                        emit(BPF_JMP_JA, 0, 0, offset as u32);
                    } else {
                        let offset = offset as u8;
                        let (jt, jf) = if when { (offset, 0) } else { (0, offset) };
                        emit(compare.code(), jt, jf, k);
                    }
                }
                Ins::Ret(action) => emit(BPF_RET_K, 0, 0, action),
            }
        }
        Ok(out)
    }

    /// Where every instruction and label lands when the jumps in `long` take two instructions.
    fn positions(&self, long: &[bool]) -> Positions {
        let mut after = Vec::with_capacity(self.code.len());
        let mut label = vec![usize::MAX; self.labels];
        let mut pc = 0;
        for (ins, &long) in self.code.iter().zip(long) {
            match ins {
                Ins::Mark(l) => label[l.0] = pc,
                Ins::JumpIf { .. } if long => pc += 2,
                _ => pc += 1,
            }
            after.push(pc);
        }
        Positions {
            after,
            label,
            length: pc,
        }
    }
}

struct Positions {
    /// The program counter just past each `Ins` (past the JA of a long jump).
    after: Vec<usize>,
    label: Vec<usize>,
    length: usize,
}

impl Positions {
    /// The offset the jump at `Ins` number `i` needs to reach `target`: from the instruction
    /// after the comparison, or after the JA in the long form.
    fn offset(&self, i: usize, target: Label) -> Result<usize, String> {
        let to = self.label[target.0];
        let from = self.after[i];
        if to == usize::MAX || to < from {
            return Err("seccomp filter: jump to an unplaced or earlier label".into());
        }
        Ok(to - from)
    }
}

/// One interval of system call numbers `[start, next start)` and its action.
#[derive(Debug)]
struct Interval<'a> {
    start: u32,
    action: &'a Action,
}

/// Compile `table` for architecture `audit_arch`; unlisted numbers get `default`.
pub fn compile(
    table: &BTreeMap<u32, Action>,
    default: &Action,
    audit_arch: u32,
) -> Result<Vec<libc::sock_filter>, String> {
    if matches!(default, Action::Rules(_) | Action::RulesElse(..)) {
        return Err("the default seccomp action cannot have argument rules".into());
    }
    let intervals = intervals(table, default);
    let mut asm = Asm::default();
    let native = asm.label();
    asm.push(Ins::Ld(OFFSET_ARCH));
    asm.jump_if(Compare::Eq, audit_arch, true, native);
    asm.push(Ins::Ret(RET_KILL_PROCESS));
    asm.push(Ins::Mark(native));
    asm.push(Ins::Ld(OFFSET_NR));
    emit_search(&mut asm, &intervals, default);
    asm.finish()
}

/// Merge consecutive numbers with the same plain action; gaps get the default.
fn intervals<'a>(table: &'a BTreeMap<u32, Action>, default: &'a Action) -> Vec<Interval<'a>> {
    fn push<'a>(out: &mut Vec<Interval<'a>>, start: u32, action: &'a Action) {
        let mergeable = !matches!(action, Action::Rules(_) | Action::RulesElse(..));
        match out.last() {
            Some(last) if mergeable && last.action == action => {}
            _ => out.push(Interval { start, action }),
        }
    }
    let mut out: Vec<Interval<'a>> = Vec::new();
    // The first number not yet covered; None once u32::MAX is covered.
    let mut next = Some(0u32);
    for (&nr, action) in table {
        if let Some(n) = next {
            if nr > n {
                push(&mut out, n, default);
            }
        }
        push(&mut out, nr, action);
        next = nr.checked_add(1);
    }
    if let Some(n) = next {
        push(&mut out, n, default);
    }
    out
}

/// Binary search over interval starts. The accumulator holds the system call number.
fn emit_search(asm: &mut Asm, intervals: &[Interval<'_>], default: &Action) {
    if let [only] = intervals {
        emit_action(asm, only.action, default);
        return;
    }
    let mid = intervals.len() / 2;
    let upper = asm.label();
    asm.jump_if(Compare::Ge, intervals[mid].start, true, upper);
    emit_search(asm, &intervals[..mid], default);
    asm.push(Ins::Mark(upper));
    emit_search(asm, &intervals[mid..], default);
}

fn ret(action: &Action) -> u32 {
    match action {
        Action::Allow => RET_ALLOW,
        Action::Errno(e) => RET_ERRNO | u32::from(*e),
        Action::Notify => RET_USER_NOTIF,
        // Rules never reach here (checked in `compile`, handled in `emit_action`).
        Action::Rules(_) | Action::RulesElse(..) => RET_KILL_PROCESS,
    }
}

fn emit_action(asm: &mut Asm, action: &Action, default: &Action) {
    let (rules, otherwise) = match action {
        Action::Rules(rules) => (rules, ret(default)),
        Action::RulesElse(rules, errno) => (rules, RET_ERRNO | u32::from(*errno)),
        _ => {
            asm.push(Ins::Ret(ret(action)));
            return;
        }
    };
    for Rule(conditions) in rules {
        let next_rule = asm.label();
        for cond in conditions {
            emit_cond(asm, cond, next_rule);
        }
        asm.push(Ins::Ret(RET_ALLOW));
        asm.push(Ins::Mark(next_rule));
    }
    asm.push(Ins::Ret(otherwise));
}

/// Fall through when `cond` holds, jump to `fail` otherwise. Clobbers the accumulator, so
/// rules reload what they compare.
fn emit_cond(asm: &mut Asm, cond: &Cond, fail: Label) {
    let low = OFFSET_ARGS + 8 * u32::from(cond.arg);
    // Little-endian: the low half of an argument comes first.
    let high = low + 4;
    let word = |asm: &mut Asm, offset: u32, mask: u32, value: u32, equal: bool| {
        asm.push(Ins::Ld(offset));
        if mask != u32::MAX {
            asm.push(Ins::And(mask));
        }
        // Fail when the comparison does not come out as wanted.
        asm.jump_if(Compare::Eq, value & mask, !equal, fail);
    };
    match cond.op {
        Op::Eq32(v) => word(asm, low, u32::MAX, v, true),
        Op::Ne32(v) => word(asm, low, u32::MAX, v, false),
        Op::MaskedEq32 { mask, value } => word(asm, low, mask, value, true),
        Op::MaskedEq64 { mask, value } => {
            word(asm, high, (mask >> 32) as u32, (value >> 32) as u32, true);
            word(asm, low, mask as u32, value as u32, true);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_merge_runs_and_fill_gaps() {
        let table = BTreeMap::from([
            (0, Action::Allow),
            (1, Action::Allow),
            (2, Action::Allow),
            (5, Action::Errno(38)),
            (6, Action::Rules(vec![])),
            (7, Action::Allow),
        ]);
        let deny = Action::Errno(1);
        let got: Vec<(u32, &Action)> = intervals(&table, &deny)
            .iter()
            .map(|i| (i.start, i.action))
            .collect();
        assert_eq!(
            got,
            vec![
                (0, &Action::Allow),
                (3, &deny),
                (5, &Action::Errno(38)),
                (6, &Action::Rules(vec![])),
                (7, &Action::Allow),
                (8, &deny),
            ]
        );
    }

    #[test]
    fn jumps_resolve_forward_and_the_size_is_bounded() {
        let table: BTreeMap<u32, Action> =
            (0..400).step_by(2).map(|n| (n, Action::Allow)).collect();
        let prog = compile(&table, &Action::Errno(1), 0xC000_003E).unwrap();
        // 200 allowed singletons and 200 gaps: a comparison and a return per interval, a few
        // JAs where the tree spans more than 255 instructions.
        assert!(prog.len() < 820, "{}", prog.len());
        let mut far = 0;
        for (pc, ins) in prog.iter().enumerate() {
            if ins.code == BPF_JMP_JA {
                assert!(pc + 1 + (ins.k as usize) < prog.len());
                far += 1;
            } else if ins.code & 0x07 == BPF_JMP_JA {
                // A conditional jump (the JMP class): both targets inside the program.
                assert!(pc + 1 + usize::from(ins.jt.max(ins.jf)) < prog.len());
            }
        }
        assert!((1..20).contains(&far), "{far} long jumps");
    }

    #[test]
    fn a_jump_beyond_255_takes_the_long_form_and_lands_where_labelled() {
        let mut asm = Asm::default();
        let far = asm.label();
        let near = asm.label();
        asm.push(Ins::Ld(OFFSET_NR));
        asm.jump_if(Compare::Ge, 7, true, far);
        asm.jump_if(Compare::Eq, 3, false, near);
        for _ in 0..300 {
            asm.push(Ins::Ret(RET_ALLOW));
        }
        asm.push(Ins::Mark(near));
        asm.push(Ins::Ret(RET_KILL_PROCESS));
        asm.push(Ins::Mark(far));
        asm.push(Ins::Ret(RET_ERRNO | 1));
        let prog = asm.finish().unwrap();
        // ld; jge k=7 jt=0 jf=1; ja far; jeq k=3 jt=0 jf=JA to near ... — both too far.
        assert_eq!(
            (prog[1].code, prog[1].jt, prog[1].jf),
            (BPF_JMP_JGE_K, 0, 1)
        );
        assert_eq!(prog[2].code, BPF_JMP_JA);
        assert_eq!(3 + prog[2].k as usize, prog.len() - 1);
        assert_eq!(
            (prog[3].code, prog[3].jt, prog[3].jf),
            (BPF_JMP_JEQ_K, 1, 0)
        );
        assert_eq!(prog[4].code, BPF_JMP_JA);
        assert_eq!(prog[5 + prog[4].k as usize].k, RET_KILL_PROCESS);
        assert_eq!(prog.len(), 5 + 300 + 2);
    }

    #[test]
    fn a_rules_default_is_refused() {
        let err = compile(&BTreeMap::new(), &Action::Rules(vec![]), 0).unwrap_err();
        assert!(err.contains("default"), "{err}");
    }
}

//! `warden policy check`: decide allow / deny / ask for command strings without running them.

use crate::config::home_dir;
use crate::policy::{Checker, Policy, Verdict};
use std::io::{BufRead, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub struct CheckArgs {
    pub policy: Option<PathBuf>,
    pub workspace: PathBuf,
    pub read_roots: Vec<PathBuf>,
    pub json: bool,
    /// `-` for stdin.
    pub batch: Option<PathBuf>,
    pub command: Option<String>,
}

/// Build a checker from a policy file (or the embedded default) for a workspace.
pub fn checker(
    policy: Option<&Path>,
    workspace: &Path,
    read_roots: &[PathBuf],
) -> anyhow::Result<Checker> {
    let policy = Arc::new(Policy::load(policy)?);
    Ok(policy.checker(workspace, read_roots, &home_dir())?)
}

/// Runs the check and returns the process exit code.
pub fn run(args: CheckArgs) -> anyhow::Result<i32> {
    let mut checker = checker(args.policy.as_deref(), &args.workspace, &args.read_roots)?;
    if let Some(batch) = &args.batch {
        return batch_check(&mut checker, batch);
    }
    let Some(command) = args.command else {
        anyhow::bail!("give a command after `--`, or --batch FILE");
    };
    let verdict = checker.check(&command);
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    if args.json {
        writeln!(out, "{}", verdict.to_json())?;
    } else {
        print_human(&mut out, &verdict)?;
    }
    Ok(verdict.decision.exit_code())
}

fn print_human(out: &mut impl Write, verdict: &Verdict) -> std::io::Result<()> {
    writeln!(out, "{}: {}", verdict.decision, verdict.reason)?;
    for command in verdict.script.commands() {
        writeln!(out, "  {}", command.display())?;
    }
    Ok(())
}

/// One command per input line, one JSON decision per output line, same order. An empty line
/// gets a deny line too, so outputs stay aligned with inputs; so does a line that is not valid
/// UTF-8 (it is denied with the reason; the batch goes on).
fn batch_check(checker: &mut Checker, source: &Path) -> anyhow::Result<i32> {
    let mut input: Box<dyn BufRead> = if source == Path::new("-") {
        Box::new(std::io::stdin().lock())
    } else {
        Box::new(std::io::BufReader::new(
            std::fs::File::open(source)
                .map_err(|e| anyhow::anyhow!("cannot read batch file {}: {e}", source.display()))?,
        ))
    };
    let stdout = std::io::stdout();
    let mut out = BufWriter::with_capacity(64 * 1024, stdout.lock());
    let mut raw = Vec::new();
    loop {
        raw.clear();
        if input.read_until(b'\n', &mut raw)? == 0 {
            break;
        }
        if raw.last() == Some(&b'\n') {
            raw.pop();
            if raw.last() == Some(&b'\r') {
                raw.pop();
            }
        }
        let json = match std::str::from_utf8(&raw) {
            Ok(line) => checker.check(line).to_json(),
            Err(e) => serde_json::json!({
                "decision": "deny",
                "reason": format!(
                    "the line is not valid UTF-8 (byte {} of the line): a command must be text",
                    e.valid_up_to()
                ),
                "commands": [],
            }),
        };
        serde_json::to_writer(&mut out, &json)?;
        out.write_all(b"\n")?;
    }
    out.flush()?;
    Ok(0)
}

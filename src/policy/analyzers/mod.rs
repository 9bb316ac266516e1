//! Program-specific argument analysis for the argument languages a TOML rule cannot express:
//! `find` expressions, `sed` scripts, `awk` programs, `git` (global options, subcommands and repository config
//! that would run programs), `tar` (mode letters, archive direction), `chmod` (no setuid) and
//! `interpreter` (a script file from one folder, never inline code), `runner` (the project's
//! scripts and build tools: asked, and run only where the jail confines code), `zip` and
//! `unzip` (archive members checked like the paths they become).

mod awk;
mod chmod;
mod extraction;
mod find;
mod git;
pub mod git_config;
pub mod git_files;
mod git_forms;
mod git_objects;
mod git_repo;
mod git_trees;
mod interpreter;
mod options;
mod runner;
mod sed;
mod tar;
mod tar_reader;
pub mod xargs;
mod zip;
mod zip_reader;

use super::paths::PathPolicy;
use super::rules::{Analysis, AnalyzerKind, ProgramRule};
use super::Denial;
use std::path::Path;

/// What an analyzer may look at besides the arguments.
pub struct AnalyzerContext<'a> {
    pub cwd: &'a Path,
    pub paths: &'a PathPolicy,
    /// An earlier command in the same command string writes files: its effects are not
    /// visible at check time, so analyzers that read configuration from disk must refuse.
    pub earlier_writes: bool,
}

pub fn analyze(
    kind: AnalyzerKind,
    rule: &ProgramRule,
    program: &str,
    args: &[String],
    ctx: &AnalyzerContext,
) -> Result<Analysis, Denial> {
    match kind {
        AnalyzerKind::Chmod => chmod::analyze(rule, program, args),
        AnalyzerKind::Find => find::analyze(program, args),
        AnalyzerKind::Sed => sed::analyze(rule, program, args, ctx),
        AnalyzerKind::Git => git::analyze(rule, program, args, ctx),
        AnalyzerKind::Tar => tar::analyze(rule, program, args, ctx),
        AnalyzerKind::Interpreter => interpreter::analyze(rule, program, args, ctx),
        AnalyzerKind::Runner => runner::analyze(rule, program, args),
        AnalyzerKind::Zip => zip::zip(rule, program, args),
        AnalyzerKind::Awk => awk::analyze(rule, program, args, ctx.cwd),
        AnalyzerKind::Unzip => zip::unzip(program, args, ctx),
        AnalyzerKind::Xargs => xargs::analyze(program, args),
    }
}

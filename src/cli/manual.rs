//! `warden completions SHELL` and `warden man`: generated from the clap definition in
//! [`super::args`], so they list exactly the flags the binary takes.

use super::args::Cli;
use clap::CommandFactory;
use std::path::Path;

/// The completion script for `shell` on stdout.
pub fn completions(shell: clap_complete::Shell) {
    let mut command = Cli::command();
    clap_complete::generate(shell, &mut command, "warden", &mut std::io::stdout());
}

/// `warden.1` on stdout, or with `dir` one page per command there (`warden-chat.1`, …).
pub fn man(dir: Option<&Path>) -> anyhow::Result<i32> {
    let command = Cli::command();
    match dir {
        None => {
            clap_mangen::Man::new(command).render(&mut std::io::stdout())?;
        }
        Some(dir) => {
            std::fs::create_dir_all(dir)?;
            write_pages(&command, "warden", dir)?;
            println!("man pages written to {}", dir.display());
        }
    }
    Ok(0)
}

fn write_pages(command: &clap::Command, name: &str, dir: &Path) -> anyhow::Result<()> {
    let mut text = Vec::new();
    clap_mangen::Man::new(command.clone())
        .title(name.to_uppercase())
        .render(&mut text)?;
    std::fs::write(dir.join(format!("{name}.1")), text)?;
    for sub in command.get_subcommands().filter(|s| !s.is_hide_set()) {
        write_pages(sub, &format!("{name}-{}", sub.get_name()), dir)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_line_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn every_visible_command_gets_a_page() {
        let dir = tempfile::tempdir().unwrap();
        write_pages(&Cli::command(), "warden", dir.path()).unwrap();
        for page in [
            "warden.1",
            "warden-chat.1",
            "warden-policy-explain.1",
            "warden-init.1",
        ] {
            let text = std::fs::read_to_string(dir.path().join(page)).unwrap();
            assert!(text.contains(".TH"), "{page}: {text}");
        }
        assert!(!dir.path().join("warden-agent-worker.1").exists());
    }
}

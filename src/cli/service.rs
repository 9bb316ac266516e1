//! `warden service install|uninstall`: `warden bot` as a systemd user unit
//! (`~/.config/systemd/user/warden-bot.service`), hardened as far as a user manager allows.
//! For a system unit (more isolation: a read-only system, private /tmp) see
//! `templates/warden.service` and the README.

use crate::config::home_dir;
use std::path::{Path, PathBuf};

/// The unit's file name.
pub const UNIT: &str = "warden-bot.service";

const TEMPLATE: &str = include_str!("../../templates/warden-bot.user.service");

#[derive(Debug, clap::Subcommand)]
pub enum ServiceCommand {
    /// Write the user unit for `warden bot` (never over an existing one without --force).
    Install {
        /// Print the unit instead of writing it.
        #[arg(long)]
        print: bool,
        /// Replace an existing unit.
        #[arg(long)]
        force: bool,
    },
    /// Remove the user unit (stop it first: `systemctl --user disable --now warden-bot`).
    Uninstall,
}

/// Where user units live: `$XDG_CONFIG_HOME/systemd/user`, else ~/.config/systemd/user.
fn unit_dir() -> PathBuf {
    std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| home_dir().join(".config"))
        .join("systemd/user")
}

/// The unit text that runs `warden` (an absolute path) with `config`.
pub fn unit(warden: &Path, config: Option<&Path>) -> String {
    let mut exec = systemd_quote(&warden.to_string_lossy());
    if let Some(config) = config {
        exec.push_str(" --config ");
        exec.push_str(&systemd_quote(&config.to_string_lossy()));
    }
    exec.push_str(" bot");
    TEMPLATE.replace("{{EXEC}}", &exec)
}

/// A word for ExecStart=: quoted when it holds spaces, `%` and `\` escaped.
fn systemd_quote(word: &str) -> String {
    let escaped = word
        .replace('\\', "\\\\")
        .replace('%', "%%")
        .replace('"', "\\\"");
    if escaped.contains(char::is_whitespace) {
        format!("\"{escaped}\"")
    } else {
        escaped
    }
}

pub fn run(command: ServiceCommand, config: Option<&Path>) -> anyhow::Result<i32> {
    let path = unit_dir().join(UNIT);
    match command {
        ServiceCommand::Install { print, force } => {
            // The front binary (`warden`), beside which warden-bot and warden-full are found.
            let warden = super::front::full_binary()?.with_file_name("warden");
            let config = config.map(std::path::absolute).transpose()?;
            let text = unit(&warden, config.as_deref());
            if print {
                print!("{text}");
                return Ok(0);
            }
            if path.exists() && !force {
                anyhow::bail!(
                    "{} exists: pass --force to replace it (or --print to see the new one)",
                    path.display()
                );
            }
            std::fs::create_dir_all(unit_dir())?;
            std::fs::write(&path, text)?;
            println!("Wrote {}. Start it with:", path.display());
            println!(
                "  systemctl --user daemon-reload && systemctl --user enable --now warden-bot"
            );
            println!("  loginctl enable-linger \"$USER\"   # keep it running after logout");
            Ok(0)
        }
        ServiceCommand::Uninstall => match std::fs::remove_file(&path) {
            Ok(()) => {
                println!(
                    "Removed {}; run `systemctl --user daemon-reload`.",
                    path.display()
                );
                Ok(0)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                eprintln!("warden: no {} to remove", path.display());
                Ok(1)
            }
            Err(e) => Err(anyhow::anyhow!("removing {}: {e}", path.display())),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_unit_runs_the_bot_hardened_with_the_given_config() {
        let text = unit(
            Path::new("/opt/my tools/warden"),
            Some(Path::new("/home/a/100%.toml")),
        );
        assert!(
            text.contains("ExecStart=\"/opt/my tools/warden\" --config /home/a/100%%.toml bot"),
            "{text}"
        );
        for line in [
            "NoNewPrivileges=yes",
            "UMask=0077",
            "WantedBy=default.target",
        ] {
            assert!(text.contains(line), "{line}");
        }
        assert!(!text.contains("{{"), "{text}");
        assert!(
            !text.contains("\nSystemCallFilter="),
            "the jail needs its syscalls"
        );
    }
}

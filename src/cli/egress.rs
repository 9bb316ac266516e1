//! `warden egress list|rm`: the hosts chats allowed with "Always for this host" (the
//! `[egress.hosts]` rules live in the config file, and are listed too).

use crate::config::Config;
use crate::egress::{Grants, HostRules};
use anyhow::Context;

/// Exit code when `rm` found nothing to remove.
pub const EXIT_NOTHING: i32 = 1;

pub enum Action {
    List {
        json: bool,
    },
    Remove {
        host: String,
        session: Option<String>,
    },
}

pub fn run(config: &Config, action: Action) -> anyhow::Result<i32> {
    let db = crate::schema::open_in(&config.data_dir)
        .with_context(|| format!("opening the database in {}", config.data_dir.display()))?;
    let grants = Grants::new(db);
    match action {
        Action::List { json } => {
            let stored = grants.list()?;
            // Checked at load; listed as written.
            HostRules::parse(&config.egress.hosts).map_err(anyhow::Error::msg)?;
            if json {
                let out = serde_json::json!({
                    "config": config.egress.hosts,
                    "chats": stored,
                });
                println!("{out}");
                return Ok(0);
            }
            if config.egress.hosts.is_empty() {
                println!("No [egress.hosts] rules in the config.");
            } else {
                println!("[egress.hosts] in the config:");
                for (host, rule) in &config.egress.hosts {
                    println!("  {host:?} = {rule:?}");
                }
            }
            if stored.is_empty() {
                println!("No hosts allowed from a chat.");
            } else {
                println!("Allowed from a chat (\"Always for this host\"), exactly that host:");
                for g in &stored {
                    println!(
                        "  {}  {}  {}  (by {}, {})",
                        g.session,
                        g.host,
                        crate::lasting::describe(g.expires_at.as_deref()),
                        g.granted_by,
                        g.created_at
                    );
                }
            }
            Ok(0)
        }
        Action::Remove { host, session } => {
            let removed = grants.remove(&host, session.as_deref())?;
            if removed == 0 {
                eprintln!("warden: no chat allowed {host}; nothing removed");
                return Ok(EXIT_NOTHING);
            }
            println!(
                "Removed {removed} rule{} for {host}: fetching from it asks again.",
                if removed == 1 { "" } else { "s" }
            );
            Ok(0)
        }
    }
}

//! `warden approvals list|rm`: the commands chats approved with "Always in this chat", each
//! with its scope and expiry (expired rules are dropped, not listed); the hosts allowed with
//! "Always for this host" are `warden egress list|rm`. `warden approvals suggest` is in
//! [`super::suggest`].

use crate::config::Config;
use crate::lasting;
use crate::tools::approval_rules::ApprovalRules;
use anyhow::Context;

/// Exit code when `rm` found nothing to remove.
pub const EXIT_NOTHING: i32 = 1;

pub enum Action {
    List { json: bool, session: Option<String> },
    Remove { id: i64, session: Option<String> },
}

pub fn run(config: &Config, action: Action) -> anyhow::Result<i32> {
    let db = crate::schema::open_in(&config.data_dir)
        .with_context(|| format!("opening the database in {}", config.data_dir.display()))?;
    let rules = ApprovalRules::new(db);
    match action {
        Action::List { json, session } => {
            let stored = rules.list(session.as_deref())?;
            if json {
                println!("{}", serde_json::json!({ "rules": stored }));
                return Ok(0);
            }
            if stored.is_empty() {
                println!("No command is approved \"Always in this chat\": every ask asks.");
                return Ok(0);
            }
            println!("Approved \"Always in this chat\" (warden approvals rm ID revokes):");
            for rule in &stored {
                println!(
                    "  #{}  {}  {}  {}  (by {}, {})",
                    rule.id,
                    rule.session,
                    rule.shown,
                    lasting::describe(rule.expires_at.as_deref()),
                    rule.granted_by,
                    rule.created_at
                );
                println!("       scope: {}", rule.scope());
                println!("       asked because: {}", rule.reasons.join("; "));
            }
            Ok(0)
        }
        Action::Remove { id, session } => {
            if !rules.remove(id, session.as_deref())? {
                eprintln!("warden: no approval rule #{id}; nothing removed");
                return Ok(EXIT_NOTHING);
            }
            println!("Removed approval rule #{id}: that command asks again.");
            Ok(0)
        }
    }
}

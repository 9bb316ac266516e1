//! `warden chat`'s slash commands, answered at the terminal without a model call: `/help`,
//! `/model`, `/new`, `/sessions`, `/resume`, `/approvals`, `/trust`, `/exit`. An unknown
//! `/word` is
//! reported, not sent to the model.

use crate::app::App;
use crate::tools::approval_rules::ApprovalRules;
use anyhow::Context;

/// Every command, for `/help` and completion.
pub const NAMES: &[&str] = &[
    "/help",
    "/model",
    "/new",
    "/sessions",
    "/resume",
    "/approvals",
    "/trust",
    "/exit",
    "/quit",
];

const HELP: &str = "\
/help              this list
/model [NAME]      the model in use; with NAME, switch to it (this chat only)
/new               start a new conversation (the old one stays: /sessions)
/sessions          the terminal's conversations, newest first
/resume KEY|N      continue a conversation from /sessions
/approvals         commands approved \"always\" (in every chat), with their expiry
/trust             what made this conversation untrusted (a page, a file…); trust it again
/exit, Ctrl-D      quit (Ctrl-C clears the line; twice at an empty prompt quits)

Enter sends; end a line with \\ (or open a ``` block) to write several lines.
Ctrl-C during a run stops it. Up/Down walk the history.";

/// What the REPL works with; `/model` replaces the app, `/new` and `/resume` the session.
pub struct State {
    pub app: App,
    pub session: String,
}

/// After a slash command.
pub enum Next {
    Continue,
    Quit,
}

/// The prefix of every terminal session's key.
const PREFIX: &str = "terminal:";

impl State {
    /// The first lines of a chat: model, workspace, and which conversation goes on (the
    /// most recent terminal one, unless `fresh`).
    pub fn banner(&mut self, fresh: bool) -> anyhow::Result<String> {
        if fresh {
            self.new_session()?;
        } else if let Some(latest) = self.app.agent.sessions().list(PREFIX)?.into_iter().next() {
            self.session = latest.key;
        }
        let messages = self.app.agent.sessions().len(&self.session)?;
        let conversation = if messages == 0 {
            "a new conversation".to_string()
        } else {
            format!(
                "continuing {} ({messages} messages; /new starts another)",
                self.session
            )
        };
        Ok(format!(
            "warden chat — {} — workspace {}\n{conversation} · /help for commands · Ctrl-D quits",
            self.model(),
            self.app.paths.workspace().display()
        ))
    }

    /// Switch to a new, empty conversation.
    fn new_session(&mut self) -> anyhow::Result<()> {
        self.session = format!("{PREFIX}{}", chrono::Local::now().format("%Y%m%d-%H%M%S"));
        // The same second twice: start that one over rather than mix two conversations.
        self.app.agent.sessions().reset(&self.session)?;
        Ok(())
    }

    /// `model (provider)` of the first provider, or what is missing.
    fn model(&self) -> String {
        match crate::llm::chosen(&self.app.config.llm).first() {
            Some(first) => format!(
                "model {} ({})",
                first.settings.model,
                crate::llm::kind_name(first.kind)
            ),
            None => "no model configured".into(),
        }
    }
}

/// Answer `line` (which starts with `/`).
pub async fn handle(state: &mut State, line: &str) -> anyhow::Result<Next> {
    let (command, argument) = match line.split_once(char::is_whitespace) {
        Some((command, rest)) => (command, rest.trim()),
        None => (line, ""),
    };
    match command {
        "/help" => eprintln!("{HELP}"),
        "/exit" | "/quit" => return Ok(Next::Quit),
        "/model" if argument.is_empty() => eprintln!("{}", state.model()),
        "/model" => switch_model(state, argument).await?,
        "/new" => {
            state.new_session()?;
            eprintln!("(new conversation {})", state.session);
        }
        "/sessions" => list_sessions(state)?,
        "/resume" => resume(state, argument)?,
        "/approvals" => list_approvals(state)?,
        "/trust" => trust(state)?,
        other => eprintln!("unknown command {other}: /help lists them (a message to the model does not start with /)"),
    }
    Ok(Next::Continue)
}

async fn switch_model(state: &mut State, model: &str) -> anyhow::Result<()> {
    let mut config = state.app.config.clone();
    config.llm.model_override = Some(model.to_string());
    // Building opens the database and sandboxes: not on the async threads.
    let built = tokio::task::block_in_place(|| App::build(config));
    match built {
        Ok(app) => {
            let old = std::mem::replace(&mut state.app, app);
            old.shutdown().await;
            eprintln!("now {}", state.model());
        }
        Err(e) => eprintln!("cannot switch to {model}: {e:#}"),
    }
    Ok(())
}

fn list_sessions(state: &State) -> anyhow::Result<()> {
    let sessions = state.app.agent.sessions().list(PREFIX)?;
    if sessions.is_empty() {
        eprintln!("no conversations yet");
    }
    for (n, s) in sessions.iter().enumerate() {
        let current = if s.key == state.session {
            " (current)"
        } else {
            ""
        };
        eprintln!(
            "{:>3}. {}  {} messages, last {}{current}",
            n + 1,
            s.key,
            s.messages,
            s.active_at
        );
    }
    Ok(())
}

fn resume(state: &mut State, which: &str) -> anyhow::Result<()> {
    let sessions = state.app.agent.sessions().list(PREFIX)?;
    let chosen = match which.parse::<usize>() {
        Ok(n) if n >= 1 => sessions.get(n - 1),
        _ => sessions.iter().find(|s| s.key == which),
    };
    match chosen {
        Some(s) => {
            state.session = s.key.clone();
            eprintln!("continuing {} ({} messages)", s.key, s.messages);
        }
        None => {
            eprintln!("no such conversation {which:?}; these are:");
            list_sessions(state)?;
        }
    }
    Ok(())
}

fn list_approvals(state: &State) -> anyhow::Result<()> {
    let rules = ApprovalRules::new(state.app.db.clone())
        .list(None)
        .context("reading the approval rules")?;
    if rules.is_empty() {
        eprintln!("no command is approved for a while or for good: every `ask` asks");
    }
    for rule in &rules {
        eprintln!(
            "  #{}  {}  {}  {}  (by {}, {})",
            rule.id,
            rule.session,
            rule.shown,
            crate::lasting::describe(rule.expires_at.as_deref()),
            rule.granted_by,
            rule.created_at
        );
    }
    if !rules.is_empty() {
        eprintln!("`warden approvals rm ID` revokes one.");
    }
    Ok(())
}

/// `/trust`: what tainted this conversation, cleared.
fn trust(state: &State) -> anyhow::Result<()> {
    let untrusted = &state.app.config.trust.untrusted_paths;
    let cleared = state
        .app
        .agent
        .sessions()
        .trust(&state.session, untrusted)
        .context("trusting the conversation")?;
    if cleared.is_empty() {
        eprintln!("this conversation has read nothing untrusted: nothing to clear");
        return Ok(());
    }
    eprintln!("this conversation had read untrusted content from:");
    for source in cleared {
        eprintln!("  {source}");
    }
    eprintln!(
        "it is trusted again: memory writes, new cron jobs and links the model composes ask \
         only as in a clean conversation"
    );
    Ok(())
}

//! The configured MCP servers of one warden process and their lifecycle: a server is started
//! on the first call that needs it (only as granted: the same content hash, and only the tools
//! the user saw), restarted with a growing wait when it dies, stopped when idle and at
//! shutdown, and killed with every process it started when a call gets no answer in time.
//! Every start, refusal and stop is written to the audit log as `mcp:NAME`.

use super::client::{self, Connection};
use super::config::McpConfig;
use super::definition::{ServerDef, ServerKind};
use super::grants::{McpGrant, McpGrantStatus, McpGrants, ToolDesc};
use super::stdio::{JailedServer, StartError};
use crate::audit::{self, AuditDecision, AuditEntry};
use crate::db::Database;
use crate::locks::lock;
use crate::skills::settings::SkillSettings;
use crate::tools::approval::Approver;
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// The first wait before starting a server that died again; doubles per death.
const FIRST_BACKOFF: Duration = Duration::from_secs(1);
/// The audit log's session for what the command line does.
const PROBE_SESSION: &str = "cli";
/// How often idle servers are looked for.
const REAP_EVERY: Duration = Duration::from_secs(5);

/// A tool call's outcome.
pub enum CallOutcome {
    /// The server answered (`is_error`: the tool said it failed).
    Answered {
        text: String,
        is_error: bool,
    },
    /// Not called: why, as a denial (grant, policy, approval) or a failure.
    Refused(String),
    Failed(String),
}

/// Every configured server of this process.
pub struct McpServers {
    settings: Arc<SkillSettings>,
    config: McpConfig,
    db: Arc<Database>,
    slots: BTreeMap<String, Arc<Slot>>,
    closed: CancellationToken,
    reaper: AtomicBool,
    /// Itself, for the idle reaper (which must not keep it alive).
    me: Weak<McpServers>,
}

struct Slot {
    name: String,
    state: tokio::sync::Mutex<State>,
    last_used: Mutex<Instant>,
    in_flight: AtomicUsize,
    /// Counts starts, so a late timeout never stops a newer instance.
    generation: AtomicU64,
}

#[derive(Default)]
struct State {
    live: Option<Live>,
    /// Deaths in a row (reset by a call that succeeds).
    deaths: u32,
    /// Not before this instant (after a death).
    retry_at: Option<Instant>,
    /// The session whose run started it (for the audit rows of its stop).
    session: String,
}

impl State {
    /// One more death in a row: the next start waits longer.
    fn died(&mut self) {
        self.deaths += 1;
        self.retry_at = Some(Instant::now() + backoff(self.deaths));
    }
}

struct Live {
    connection: Connection,
    process: Option<JailedServer>,
    generation: u64,
    started: Instant,
}

/// Why a server is stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum StopReason {
    Idle,
    Shutdown,
    Hung,
    Revoked,
}

impl StopReason {
    fn describe(self) -> &'static str {
        match self {
            StopReason::Idle => "stopped after being idle",
            StopReason::Shutdown => "stopped at shutdown",
            StopReason::Hung => "killed: it did not answer in time",
            StopReason::Revoked => "stopped: its grant no longer holds",
        }
    }
}

impl McpServers {
    pub fn new(
        config: &McpConfig,
        settings: Arc<SkillSettings>,
        db: Arc<Database>,
    ) -> Arc<McpServers> {
        let slots = config
            .servers
            .iter()
            .filter(|(_, server)| server.enabled())
            .map(|(name, _)| {
                let slot = Slot {
                    name: name.clone(),
                    state: tokio::sync::Mutex::new(State::default()),
                    last_used: Mutex::new(Instant::now()),
                    in_flight: AtomicUsize::new(0),
                    generation: AtomicU64::new(0),
                };
                (name.clone(), Arc::new(slot))
            })
            .collect();
        Arc::new_cyclic(|me| McpServers {
            settings,
            config: config.clone(),
            db,
            slots,
            closed: CancellationToken::new(),
            reaper: AtomicBool::new(false),
            me: me.clone(),
        })
    }

    pub fn config(&self) -> &McpConfig {
        &self.config
    }

    pub fn settings(&self) -> &SkillSettings {
        &self.settings
    }

    /// The server as it is on disk now.
    pub fn load(&self, name: &str) -> Result<ServerDef, String> {
        let config = self
            .config
            .servers
            .get(name)
            .ok_or_else(|| format!("there is no MCP server {name:?} in [mcp.servers]"))?;
        ServerDef::load(name, config, &self.settings.bounds, self.settings.backend)
    }

    /// The tools to offer the model: for every enabled server with a grant, the tools the
    /// user saw when granting (calls check that the grant still holds).
    pub fn granted_tools(&self) -> Vec<(String, ToolDesc)> {
        let grants = McpGrants::new(&self.db);
        let mut out = Vec::new();
        for name in self.slots.keys() {
            match grants.get(name) {
                Ok(Some(grant)) => out.extend(grant.tools.into_iter().map(|t| (name.clone(), t))),
                Ok(None) => tracing::info!(
                    server = %name,
                    "MCP server not granted: its tools are not offered (warden mcp grant {name})"
                ),
                Err(e) => tracing::warn!(server = %name, "reading the MCP grant failed: {e}"),
            }
        }
        out
    }

    /// Call `tool` on `server`, starting it first if needed.
    pub async fn call(
        &self,
        server: &str,
        tool: &str,
        arguments: serde_json::Map<String, serde_json::Value>,
        session: &str,
        approver: &dyn Approver,
        cancel: &CancellationToken,
    ) -> CallOutcome {
        let Some(slot) = self.slots.get(server) else {
            return CallOutcome::Refused(format!("there is no MCP server {server:?}"));
        };
        slot.in_flight.fetch_add(1, Ordering::SeqCst);
        let outcome = self
            .call_in(slot, tool, arguments, session, approver, cancel)
            .await;
        *lock(&slot.last_used) = Instant::now();
        slot.in_flight.fetch_sub(1, Ordering::SeqCst);
        outcome
    }

    async fn call_in(
        &self,
        slot: &Arc<Slot>,
        tool: &str,
        arguments: serde_json::Map<String, serde_json::Value>,
        session: &str,
        approver: &dyn Approver,
        cancel: &CancellationToken,
    ) -> CallOutcome {
        let (peer, generation, tripped) = {
            let mut state = slot.state.lock().await;
            if let Err(outcome) = self.ensure_live(slot, &mut state, session, approver).await {
                return outcome;
            }
            // ensure_live leaves a live server, or returned the reason there is none.
            let Some(live) = state.live.as_ref() else {
                return CallOutcome::Failed(format!("MCP server {} is not running", slot.name));
            };
            if !live.connection.offers(tool) {
                return CallOutcome::Refused(format!(
                    "the MCP server {} has no granted tool {tool:?} (it offers: {}); a tool that \
                     appeared or changed after the grant needs `warden mcp grant {0}`",
                    slot.name,
                    live.connection.tool_names().join(", ")
                ));
            }
            (
                live.connection.peer(),
                live.generation,
                live.connection.tripped(),
            )
        };
        let timeout = Duration::from_secs(self.config.call_timeout_secs);
        let call = client::call_tool(&peer, tool, arguments, self.config.max_result_chars);
        let result = tokio::select! {
            result = tokio::time::timeout(timeout, call) => result,
            _ = cancel.cancelled() => return CallOutcome::Failed("cancelled".into()),
            exceeded = tripped.wait() => Ok(Err(exceeded.to_string())),
        };
        match result {
            Ok(Ok((text, is_error))) => {
                slot.state.lock().await.deaths = 0;
                CallOutcome::Answered { text, is_error }
            }
            Ok(Err(e)) => {
                // The connection broke: the server died, wrote something unreadable, or more
                // than a message may hold.
                let mut state = slot.state.lock().await;
                let cut = state.live.as_ref().and_then(|l| l.connection.cut());
                let why = format!("the call to {tool} failed: {}", cut.unwrap_or(e));
                if state
                    .live
                    .as_ref()
                    .is_some_and(|l| l.generation == generation)
                {
                    self.note_death(slot, &mut state, &why).await;
                }
                CallOutcome::Failed(format!("MCP server {}: {why}", slot.name))
            }
            Err(_) => {
                let mut state = slot.state.lock().await;
                if let Some(live) = state.live.take_if(|l| l.generation == generation) {
                    let detail = format!(
                        "{tool} got no answer within {} s (mcp.call_timeout_secs)",
                        timeout.as_secs()
                    );
                    self.stop_live(slot, &state.session, live, StopReason::Hung, &detail)
                        .await;
                }
                CallOutcome::Failed(format!(
                    "the MCP server {} did not answer {tool} within {} s and was killed with \
                     every process it started",
                    slot.name,
                    timeout.as_secs()
                ))
            }
        }
    }

    /// A live, granted server in `state`, or why not.
    async fn ensure_live(
        &self,
        slot: &Arc<Slot>,
        state: &mut State,
        session: &str,
        approver: &dyn Approver,
    ) -> Result<(), CallOutcome> {
        if let Some(live) = &state.live {
            match live.process.as_ref().and_then(JailedServer::ended) {
                None if !live.connection.is_closed() => return Ok(()),
                ended => {
                    let why = ended
                        .map(|e| e.describe())
                        .or_else(|| live.connection.cut())
                        .unwrap_or_else(|| "its connection closed".into());
                    self.note_death(slot, state, &why).await;
                }
            }
        }
        if self.closed.is_cancelled() {
            return Err(CallOutcome::Failed("warden is shutting down".into()));
        }
        if state.deaths > self.config.max_restarts {
            return Err(CallOutcome::Failed(format!(
                "the MCP server {} died {} times in a row and is not started again until \
                 warden restarts (see the log for its stderr)",
                slot.name, state.deaths
            )));
        }
        if let Some(at) = state.retry_at {
            // Backoff after a death: wait it out (short: seconds).
            tokio::time::sleep_until(at.into()).await;
        }
        self.start(slot, state, session, approver).await
    }

    async fn start(
        &self,
        slot: &Arc<Slot>,
        state: &mut State,
        session: &str,
        approver: &dyn Approver,
    ) -> Result<(), CallOutcome> {
        let started = Instant::now();
        let audit = |decision: AuditDecision, reason: &str| {
            self.audit(session, &slot.name, "start", decision, reason, started)
        };
        let (def, granted) = match self.load(&slot.name).and_then(|def| self.check_grant(def)) {
            Ok(granted) => granted,
            Err(why) => {
                audit(AuditDecision::Deny, &why);
                return Err(CallOutcome::Refused(why));
            }
        };
        let opened = self
            .open(&slot.name, &def, &granted.tools, session, approver)
            .await;
        let (connection, process) = match opened {
            Ok(opened) => opened,
            Err(StartError::Refused(why)) => {
                audit(AuditDecision::Deny, &why);
                return Err(CallOutcome::Refused(why));
            }
            Err(StartError::Failed(why)) => {
                let why = format!("the MCP server {} could not be started: {why}", slot.name);
                audit(AuditDecision::Error, &why);
                state.died();
                return Err(CallOutcome::Failed(why));
            }
        };
        let mut reason = format!("started ({})", def.summary());
        if let Some(process) = &process {
            if process.approved {
                reason.push_str("; the user approved its command");
            }
        }
        if let Some(note) = connection.withheld_note() {
            reason.push_str(&format!("; {note}"));
        }
        let decision = match process.as_ref().is_some_and(|p| p.approved) {
            true => AuditDecision::Approved,
            false => AuditDecision::Allow,
        };
        audit(decision, &reason);
        tracing::info!(server = %slot.name, "{reason}");
        let generation = slot.generation.fetch_add(1, Ordering::SeqCst) + 1;
        state.live = Some(Live {
            connection,
            process,
            generation,
            started,
        });
        state.retry_at = None;
        state.session = session.to_string();
        self.start_reaper();
        Ok(())
    }

    /// Start a server without a grant — only to read the tools it offers, for the user's
    /// review — and stop it again. Its command must be allowed outright (nobody is asked).
    pub async fn probe(&self, name: &str) -> Result<(ServerDef, Vec<ToolDesc>), String> {
        let started = Instant::now();
        let def = self.load(name)?;
        let opened = self
            .open(
                name,
                &def,
                &[],
                PROBE_SESSION,
                &crate::tools::approval::NoApprover,
            )
            .await;
        let (connection, process) = match opened {
            Ok(opened) => opened,
            Err(failure) => {
                let why = match failure {
                    StartError::Refused(why) => format!("the MCP server {name} is refused: {why}"),
                    StartError::Failed(why) => {
                        format!("the MCP server {name} could not be started for review: {why}")
                    }
                };
                self.audit(
                    PROBE_SESSION,
                    name,
                    "probe",
                    AuditDecision::Deny,
                    &why,
                    started,
                );
                return Err(why);
            }
        };
        let tools = connection.live_tools().to_vec();
        let stopped = connection.close_and_stop(process, true).await;
        let mut reason = format!("started for review and stopped: {} tool(s)", tools.len());
        for event in stopped.iter().flat_map(|s| &s.egress) {
            reason.push_str(&format!("; {event}"));
        }
        self.audit(
            PROBE_SESSION,
            name,
            "probe",
            AuditDecision::Allow,
            &reason,
            started,
        );
        Ok((def, tools))
    }

    /// The grant must hold for exactly this content; returns it with the server.
    fn check_grant(&self, def: ServerDef) -> Result<(ServerDef, McpGrant), String> {
        let status = McpGrants::new(&self.db)
            .status(&def.name, &def.hash)
            .map_err(|e| format!("reading the MCP server's grant failed: {e}"))?;
        match status {
            McpGrantStatus::Granted(grant) => Ok((def, grant)),
            McpGrantStatus::NotGranted => Err(format!(
                "the MCP server {} is not granted: review what it runs and may do with `warden \
                 mcp tools {0}` and grant it with `warden mcp grant {0}`",
                def.name
            )),
            McpGrantStatus::Changed(grant) => Err(format!(
                "the MCP server {} changed since it was granted (granted {} for {}, now {}): its \
                 command, manifest or files were edited; it is not started until you review and \
                 grant it again with `warden mcp grant {0}`",
                def.name,
                crate::skills::grants::short_time(&grant.granted_at),
                crate::skills::tree::short_hash(&grant.hash),
                crate::skills::tree::short_hash(&def.hash)
            )),
        }
    }

    /// Start the process (stdio) or reach the endpoint (HTTP) and speak MCP with it, within
    /// `mcp.call_timeout_secs`.
    async fn open(
        &self,
        name: &str,
        def: &ServerDef,
        granted: &[ToolDesc],
        session: &str,
        approver: &dyn Approver,
    ) -> Result<(Connection, Option<JailedServer>), StartError> {
        let timeout = Duration::from_secs(self.config.call_timeout_secs);
        tokio::time::timeout(
            timeout,
            self.open_now(name, def, granted, session, approver),
        )
        .await
        .unwrap_or_else(|_| {
            Err(StartError::Failed(format!(
                "it did not finish starting within {} s (mcp.call_timeout_secs)",
                timeout.as_secs()
            )))
        })
    }

    async fn open_now(
        &self,
        name: &str,
        def: &ServerDef,
        granted: &[ToolDesc],
        session: &str,
        approver: &dyn Approver,
    ) -> Result<(Connection, Option<JailedServer>), StartError> {
        match &def.kind {
            ServerKind::Stdio(stdio) => {
                let mut process =
                    JailedServer::start(name, stdio, &self.settings, session, approver).await?;
                let (Some(read), Some(write)) = (process.stdout.take(), process.stdin.take())
                else {
                    return Err(StartError::Failed("its pipes are gone".into()));
                };
                match Connection::over_pipes(read, write, granted, name).await {
                    Ok(connection) => Ok((connection, Some(process))),
                    Err(StartError::Refused(why)) => {
                        process.stop(false).await;
                        Err(StartError::Refused(why))
                    }
                    Err(StartError::Failed(why)) => {
                        let stopped = process.stop(false).await;
                        let mut why = format!("it did not speak MCP: {why}");
                        if let Some(line) = stopped.last_stderr.last() {
                            why.push_str(&format!(" (its last words: {line})"));
                        }
                        Err(StartError::Failed(why))
                    }
                }
            }
            ServerKind::Http(http) => {
                let connection = Connection::over_http(http, &self.settings, granted, name).await?;
                Ok((connection, None))
            }
        }
    }

    /// The server went away: record why and when it may start again.
    async fn note_death(&self, slot: &Slot, state: &mut State, why: &str) {
        let Some(live) = state.live.take() else {
            return;
        };
        state.died();
        let mut reason = format!("died: {why}");
        let cut = live.connection.cut();
        // Gracefully: a server whose connection broke is usually exiting; let it say how.
        let stopped = live.connection.close_and_stop(live.process, true).await;
        if let Some(stopped) = &stopped {
            if let Some(ended) = &stopped.ended {
                reason = format!("died: {}", ended.describe());
                if let Some(cut) = cut {
                    reason.push_str(&format!(" after warden closed its connection: {cut}"));
                }
            }
            if let Some(line) = stopped.last_stderr.last() {
                reason.push_str(&format!("; its last words on stderr: {line}"));
            }
            for event in &stopped.egress {
                reason.push_str(&format!("; {event}"));
            }
        }
        tracing::warn!(server = %slot.name, "{reason}");
        self.audit(
            &state.session,
            &slot.name,
            "stop",
            AuditDecision::Error,
            &reason,
            live.started,
        );
    }

    async fn stop_live(
        &self,
        slot: &Slot,
        session: &str,
        live: Live,
        why: StopReason,
        detail: &str,
    ) {
        let graceful = why != StopReason::Hung;
        let stopped = live.connection.close_and_stop(live.process, graceful).await;
        let mut reason = why.describe().to_string();
        if !detail.is_empty() {
            reason.push_str(&format!(" ({detail})"));
        }
        if let Some(stopped) = stopped {
            if let Some(ended) = stopped.ended.filter(|e| !e.killed || e.leftovers > 0) {
                reason.push_str(&format!("; it {}", ended.describe()));
            }
            for event in stopped.egress {
                reason.push_str(&format!("; {event}"));
            }
        }
        let decision = match why {
            StopReason::Hung => AuditDecision::Error,
            _ => AuditDecision::Allow,
        };
        tracing::info!(server = %slot.name, "{reason}");
        self.audit(session, &slot.name, "stop", decision, &reason, live.started);
    }

    /// Stop every server (warden is stopping); later calls fail.
    pub async fn shutdown(&self) {
        self.closed.cancel();
        for slot in self.slots.values() {
            self.stop_slot(slot, StopReason::Shutdown).await;
        }
    }

    /// Stop a running server whose grant was revoked.
    pub async fn stop(&self, name: &str) {
        if let Some(slot) = self.slots.get(name) {
            self.stop_slot(slot, StopReason::Revoked).await;
        }
    }

    /// Stop the slot's server if one runs.
    async fn stop_slot(&self, slot: &Slot, why: StopReason) {
        let mut state = slot.state.lock().await;
        if let Some(live) = state.live.take() {
            self.stop_live(slot, &state.session, live, why, "").await;
        }
    }

    /// Once per process: a task stopping servers idle for `mcp.idle_secs`.
    fn start_reaper(&self) {
        if self.reaper.swap(true, Ordering::SeqCst) {
            return;
        }
        let me = self.me.clone();
        let idle = Duration::from_secs(self.config.idle_secs);
        let closed = self.closed.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = closed.cancelled() => return,
                    _ = tokio::time::sleep(REAP_EVERY.min(idle)) => {}
                }
                let Some(servers) = me.upgrade() else {
                    return;
                };
                for slot in servers.slots.values() {
                    let quiet = slot.in_flight.load(Ordering::SeqCst) == 0
                        && lock(&slot.last_used).elapsed() >= idle;
                    // A busy slot (a call starting it) is looked at next time.
                    let Some(mut state) = quiet.then(|| slot.state.try_lock().ok()).flatten()
                    else {
                        continue;
                    };
                    if let Some(live) = state.live.take() {
                        let detail = format!("{} s without calls (mcp.idle_secs)", idle.as_secs());
                        servers
                            .stop_live(slot, &state.session, live, StopReason::Idle, &detail)
                            .await;
                    }
                }
            }
        });
    }

    fn audit(
        &self,
        session: &str,
        name: &str,
        event: &str,
        decision: AuditDecision,
        reason: &str,
        since: Instant,
    ) {
        let entry = AuditEntry {
            session: if session.is_empty() {
                "mcp".into()
            } else {
                session.to_string()
            },
            tool: format!("mcp:{name}"),
            input: json!({ "event": event }).to_string(),
            decision,
            reason: crate::redact::redact(reason),
            exit_code: None,
            duration_ms: since.elapsed().as_millis() as u64,
            network: None,
        };
        if let Err(e) = audit::record(&self.db, &entry) {
            tracing::error!("audit log write failed for mcp:{name}: {e}");
        }
    }
}

fn backoff(deaths: u32) -> Duration {
    FIRST_BACKOFF * 2u32.saturating_pow(deaths.saturating_sub(1).min(6))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_and_is_capped() {
        assert_eq!(backoff(1), Duration::from_secs(1));
        assert_eq!(backoff(2), Duration::from_secs(2));
        assert_eq!(backoff(4), Duration::from_secs(8));
        assert_eq!(backoff(50), Duration::from_secs(64));
    }
}

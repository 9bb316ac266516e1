//! The real `warden bot` with a scripted model, the fake Bot API and the fake web (its names
//! mapped by `[egress.resolve]`), HOME in a temporary folder; answers are the messages that
//! start with `result:`.

use super::fake_llm::{FakeLlm, Request, Turn};
use super::fake_telegram::FakeTelegram;
use super::fake_web::FakeWeb;
use super::warden_bot::{BotEnv, BotProcess, OWNER, TOKEN};
use std::time::Duration;

pub const WAIT: Duration = Duration::from_secs(30);

pub struct WebBot {
    pub tg: FakeTelegram,
    pub web: FakeWeb,
    pub llm: FakeLlm,
    pub bot: BotProcess,
    pub home: tempfile::TempDir,
}

impl WebBot {
    /// Started and polling; nothing has run.
    pub async fn start(script: fn(&Request) -> Turn) -> WebBot {
        WebBot::start_with(script, "").await
    }

    /// [`WebBot::start`] with `config` added to the config file.
    pub async fn start_with(script: fn(&Request) -> Turn, config: &str) -> WebBot {
        WebBot::start_with_web(script, |_| config.to_string()).await
    }

    /// [`WebBot::start`] with config made knowing the fake web (its address).
    pub async fn start_with_web(
        script: fn(&Request) -> Turn,
        config: impl FnOnce(&FakeWeb) -> String,
    ) -> WebBot {
        let tg = FakeTelegram::start(TOKEN).await;
        let llm = FakeLlm::anthropic_with(script).await;
        let web = FakeWeb::start().await;
        let home = tempfile::tempdir().unwrap();
        let env = BotEnv::new(home.path(), tg.api_url(), llm.base_url());
        env.write_config(&format!("{}{}", web.resolve_toml(), config(&web)));
        let bot = BotProcess::start(&env);
        tg.wait_for_calls("getUpdates", 1, WAIT).await;
        WebBot {
            tg,
            web,
            llm,
            bot,
            home,
        }
    }

    /// The `n`-th answer in the owner's chat (from 1), as shown.
    pub async fn answer(&self, n: usize) -> String {
        let answers = |t: &FakeTelegram| -> Vec<String> {
            t.messages_to(OWNER)
                .into_iter()
                .filter(|m| m.visible.starts_with("result:"))
                .map(|m| m.visible)
                .collect()
        };
        self.tg
            .wait_until("the answer", WAIT, |t| answers(t).len() >= n)
            .await;
        answers(&self.tg)[n - 1].clone()
    }
}

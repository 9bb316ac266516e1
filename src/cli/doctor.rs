//! `warden doctor [--json] [--offline] [--sandbox]`: whether the setup works (config, model,
//! Telegram, binaries, workspace; each failure with its fix) and what this machine's sandbox
//! supports. Exit 0 when everything checked works, 1 when something does not.

use std::path::Path;

#[derive(Debug, clap::Args)]
pub struct DoctorArgs {
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// Check this policy file instead of the config's `policy`.
    #[arg(long, value_name = "FILE")]
    pub policy: Option<std::path::PathBuf>,
    /// Contact nothing: no test request to the model, no Telegram token check.
    #[arg(long)]
    pub offline: bool,
    /// Only the sandbox: what the kernel (and Docker) support and which backend is used.
    #[arg(long)]
    pub sandbox: bool,
}

pub fn run(args: DoctorArgs, config_path: Option<&Path>) -> i32 {
    let (mut config, config_check) = crate::doctor::setup::load(config_path);
    // Whatever a check logs, the configured secrets are redacted from it.
    for secret in config.secrets() {
        crate::redact::register(secret.expose());
    }
    if args.policy.is_some() {
        config.policy = args.policy;
    }
    let mut report = crate::doctor::collect(&config);
    if !args.sandbox {
        report.setup.push(config_check);
        report
            .setup
            .extend(crate::doctor::setup::checks(&config, args.offline));
    }
    if args.json {
        match serde_json::to_string_pretty(&report) {
            Ok(json) => println!("{json}"),
            Err(e) => {
                eprintln!("warden: cannot encode the report: {e}");
                return 1;
            }
        }
    } else {
        print!("{}", report.render());
    }
    if report.healthy() {
        0
    } else {
        1
    }
}

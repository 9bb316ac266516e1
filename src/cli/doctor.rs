//! `warden doctor [--json]`: what this machine supports and which backend warden will use.
//! Exit 0 when that backend can run commands, 1 when it cannot.

use super::EXIT_USAGE;
use std::path::Path;

#[derive(Debug, clap::Args)]
pub struct DoctorArgs {
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// Check this policy file instead of the config's `policy`.
    #[arg(long, value_name = "FILE")]
    pub policy: Option<std::path::PathBuf>,
}

pub fn run(args: DoctorArgs, config_path: Option<&Path>) -> i32 {
    let config = match super::load_config(config_path) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("warden: {e:#}");
            return EXIT_USAGE;
        }
    };
    let mut config = config;
    if args.policy.is_some() {
        config.policy = args.policy;
    }
    let report = crate::doctor::collect(&config);
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
    if report.usable {
        0
    } else {
        1
    }
}

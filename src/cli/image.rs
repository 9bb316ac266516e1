//! `warden image build [NAME]`: build `warden-sandbox:NAME` for the Docker backend from
//! `sandbox-images/NAME/` (or `--dir`, or the copy built into warden), streaming the build log.
//! Exit 0 built, 1 build failed, 2 usage/config error.

use super::EXIT_USAGE;
use crate::sandbox::docker::{connect, image};
use std::path::{Path, PathBuf};

#[derive(Debug, clap::Args)]
pub struct ImageArgs {
    #[command(subcommand)]
    pub command: ImageCommand,
}

#[derive(Debug, clap::Subcommand)]
pub enum ImageCommand {
    /// Build warden-sandbox:NAME (no registry needed for `minimal`).
    Build {
        /// The image folder's name under sandbox-images/.
        #[arg(default_value = "minimal")]
        name: String,
        /// Build from this folder instead of ./sandbox-images/NAME or the built-in copy.
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
}

pub fn run(args: ImageArgs, config_path: Option<&Path>) -> i32 {
    let config = match super::load_config(config_path) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("warden: {e:#}");
            return EXIT_USAGE;
        }
    };
    let ImageCommand::Build { name, dir } = args.command;
    let context = match image::Context::locate(&name, dir.as_deref()) {
        Ok(context) => context,
        Err(e) => {
            eprintln!("warden: {e}");
            return 1;
        }
    };
    let runtime = match super::sandbox::runtime() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("warden: cannot start the async runtime: {e}");
            return 1;
        }
    };
    runtime.block_on(async {
        let docker = match connect::connect(&config.sandbox.docker.socket).await {
            Ok(docker) => docker,
            Err(e) => {
                eprintln!("warden: {e}");
                return 1;
            }
        };
        let tag = image::tag(&context.name);
        eprintln!("building {tag} from {}", context.origin);
        let mut log = |line: &str| eprint!("{line}");
        match image::build(&docker, &context, &mut log).await {
            Ok(id) => {
                println!("{tag} {id}");
                0
            }
            Err(e) => {
                eprintln!("warden: {e}");
                1
            }
        }
    })
}

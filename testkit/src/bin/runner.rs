//! `runner NN …`: `cargo xtask run NN …` without the rest of xtask (see the runner's cli.rs).
//! lab/stages runs it: built with `--no-default-features`, it needs only the crate's
//! library, clap (which the steps use too) and std, so a fresh machine builds it in seconds
//! after the steps.

use clap::Parser;

fn main() -> std::process::ExitCode {
    testkit::runner::cli::main(&testkit::runner::cli::RunnerCli::parse().args)
}

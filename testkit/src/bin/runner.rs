//! `runner NN …`: `cargo xtask run NN …` without the rest of xtask (see the runner's cli.rs).
//! lab/stages runs it: built with `--no-default-features`, it needs only the crate's
//! library and std, so a fresh machine builds it in seconds after the steps.

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    testkit::runner::cli::main(&args)
}

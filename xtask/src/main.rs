//! `cargo xtask …`: the subcommands of the library's crate doc, dispatched (`cli.rs` names
//! them; each parses the rest of its command line itself).

mod cli;

use std::process::ExitCode;

use clap::Parser;
use cli::{Cli, Command, BENCH_USAGE};
use xtask::{bench, book, exercise, grade, new_step};

fn main() -> ExitCode {
    let Some(command) = Cli::parse().command else {
        // Bare `cargo xtask`: the list of subcommands, as bare `cargo` prints its own.
        return match <Cli as clap::CommandFactory>::command().print_help() {
            Ok(()) => ExitCode::SUCCESS,
            Err(_) => ExitCode::FAILURE, // stdout closed: nothing to tell
        };
    };
    let (_, args) = command.split();
    match &command {
        Command::Bench(_) => bench_main(args),
        Command::Book(_) => book::main(args),
        Command::Exercise(_) => exercise::main(args),
        Command::Grade(_) => grade::main(args),
        Command::Run(_) => testkit::runner::cli::main(args),
        Command::NewStep(_) => new_step::main(args),
    }
}

/// `bench WHAT RAW`: the text on stdout.
fn bench_main(args: &[String]) -> ExitCode {
    let result = match args {
        [what, raw] => bench::run(what, raw),
        _ => Err(format!("usage: {BENCH_USAGE}")),
    };
    match result {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("xtask bench: {e}");
            ExitCode::from(2)
        }
    }
}

//! `cargo xtask …`: the subcommands of the library's crate doc, dispatched (`cli.rs` names
//! them; those it does not parse parse the rest of their command line themselves).

mod cli;

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use cli::{Cli, Command};
use xtask::{bench, book, exercise, grade, new_step};

fn main() -> ExitCode {
    let Some(command) = Cli::parse().command else {
        // Bare `cargo xtask`: the list of subcommands, as bare `cargo` prints its own.
        return match <Cli as clap::CommandFactory>::command().print_help() {
            Ok(()) => ExitCode::SUCCESS,
            Err(_) => ExitCode::FAILURE, // stdout closed: nothing to tell
        };
    };
    match &command {
        Command::Bench(a) => bench_main(a),
        Command::Book(a) => book::main(a.check),
        Command::Exercise(a) => exercise::main(&a.command),
        Command::Grade(a) => grade::main(&a.command),
        Command::Run(a) => testkit::runner::cli::main(a),
        Command::NewStep(a) => {
            let request = match (&a.remove, &a.bin, a.roles) {
                (Some(bin), ..) => new_step::Request::Remove(bin),
                (None, Some(bin), Some(roles)) => {
                    new_step::Request::Add { bin, roles: roles.roles().word(), base: a.base.as_deref() }
                }
                // clap asks for both without --remove: not reached.
                _ => {
                    eprintln!("xtask new-step: NN_name and ROLES, or --remove NN_name");
                    return ExitCode::from(2);
                }
            };
            new_step::main(&request)
        }
        Command::Steps(a) => steps_main(a),
        Command::PairLine(a) => {
            match xtask::pair_line::swap(a.connect.as_deref(), a.port, Duration::from_secs(a.timeout), &a.line) {
                Ok(theirs) => {
                    println!("{theirs}");
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("xtask pair-line: {e}");
                    ExitCode::FAILURE
                }
            }
        }
    }
}

/// `steps [--roles R] [--field FACT]...`: a line per step, its bin and the facts asked for.
fn steps_main(a: &cli::StepsArgs) -> ExitCode {
    let steps = match testkit::load_steps() {
        Ok(steps) => steps,
        Err(e) => {
            eprintln!("xtask steps: {e}");
            return ExitCode::FAILURE;
        }
    };
    let yes = |b: bool| if b { "yes" } else { "no" }.to_string();
    for s in steps.iter().filter(|s| a.roles.is_none_or(|r| r.roles() == s.roles)) {
        let mut line = vec![s.bin.clone()];
        for field in &a.fields {
            match field {
                cli::Field::Roles => line.push(s.roles.word().into()),
                cli::Field::Base => line.push(s.base.clone().unwrap_or_else(|| "-".into())),
                cli::Field::C => line.push(s.c.clone().unwrap_or_else(|| "-".into())),
                cli::Field::CPeer => line.push(yes(s.c_peer)),
                cli::Field::TwoHostsC => line.push(yes(s.two_hosts_c)),
                cli::Field::TwoHosts => line.extend(s.two_hosts.iter().cloned()),
            }
        }
        println!("{}", line.join(" "));
    }
    ExitCode::SUCCESS
}

/// `bench WHAT RAW`: the text on stdout.
fn bench_main(a: &cli::BenchArgs) -> ExitCode {
    match bench::run(a.what.word(), &a.raw) {
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

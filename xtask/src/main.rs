//! `cargo xtask …`: the subcommands of the library's crate doc, dispatched.

use std::process::ExitCode;

use xtask::{bench, book, exercise, new_step, run};

const USAGE: &str =
    "usage: cargo xtask bench table|sweep-table|sweep-plot RAW | cargo xtask book [--check] | cargo xtask exercise … | \
     cargo xtask run NN [--peer ours|c|rping] [--wrap CMD] … [-- FLAGS…] | \
     cargo xtask new-step NN_name alone|pair|cm [--base NN] | cargo xtask new-step --remove NN_name";

fn main() -> ExitCode {
    let owned: Vec<String> = std::env::args().skip(1).collect();
    match owned.first().map(String::as_str) {
        Some("exercise") => return exercise::main(&owned[1..]),
        Some("book") => return book::main(&owned[1..]),
        Some("run") => return run::main(&owned[1..]),
        Some("new-step") => return new_step::main(&owned[1..]),
        _ => {}
    }
    let args: Vec<&str> = owned.iter().map(String::as_str).collect();
    let result = match args[..] {
        ["bench", what, raw] => bench::run(what, raw),
        ["-h" | "--help"] | ["help"] => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        _ => Err(format!("unknown arguments {args:?}\n{USAGE}")),
    };
    match result {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("xtask: {e}");
            ExitCode::from(2)
        }
    }
}

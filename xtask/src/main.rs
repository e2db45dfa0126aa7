//! rdma-dissect's own tooling, run as `cargo xtask …` (an alias in `.cargo/config.toml`).
//!
//! ```text
//! cargo xtask bench table RAW         the headline table of a lab/bench run (Markdown)
//! cargo xtask bench sweep-table RAW   a sweep's table, its fits and rxe's cost per packet
//! cargo xtask bench sweep-plot RAW    a sweep's three-panel plot (SVG)
//! cargo xtask exercise …              the classroom kit: a student's copy of a stage, and
//!                                     grading it on the device (see exercise.rs)
//! ```
//!
//! `lab/bench` runs the tools in the lab VM and writes RAW (`target/bench/raw.tsv`); what
//! is computed from it lives here, with unit tests, and prints on stdout. `lab/exercise`
//! and `lab/check` run the exercise kit.

mod bench;
mod exercise;

use std::process::ExitCode;

const USAGE: &str = "usage: cargo xtask bench table|sweep-table|sweep-plot RAW | cargo xtask exercise …";

fn main() -> ExitCode {
    let owned: Vec<String> = std::env::args().skip(1).collect();
    if owned.first().map(String::as_str) == Some("exercise") {
        return exercise::main(&owned[1..]);
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

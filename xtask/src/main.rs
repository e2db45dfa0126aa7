//! rdma-dissect's own tooling, run as `cargo xtask …` (an alias in `.cargo/config.toml`).
//!
//! ```text
//! cargo xtask bench table RAW         the headline table of a lab/bench run (Markdown)
//! cargo xtask bench sweep-table RAW   a sweep's table, its fits and rxe's cost per packet
//! cargo xtask bench sweep-plot RAW    a sweep's three-panel plot (SVG)
//! ```
//!
//! `lab/bench` runs the tools in the lab VM and writes RAW (`target/bench/raw.tsv`); what
//! is computed from it lives here, with unit tests, and prints on stdout.

mod bench;

use std::process::ExitCode;

const USAGE: &str = "usage: cargo xtask bench table|sweep-table|sweep-plot RAW";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
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

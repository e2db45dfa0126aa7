//! The front door: which subcommand, in clap derive, and the rest of the command line handed
//! to it untouched.
//!
//! `exercise`, `grade`, `steps` and `pair-line` have their arguments in clap derive too
//! (`exercise/cli.rs`, `grade/cli.rs`); the others still parse their own (`run`, `bench`, …
//! in their modules), and this layer only names them, so `cargo xtask` and `cargo xtask --help` list
//! them and `cargo xtask SUB --help` shows SUB's usage. The usage lines here repeat what each
//! subcommand prints when its arguments are wrong; `tests/front_door.rs` checks that they
//! agree.

use clap::{Args, Parser, Subcommand, ValueEnum};

/// rdma-dissect's own tooling: the benchmark's tables, the book's generated files, the
/// classroom kit and the grader, running steps, adding steps.
#[derive(Parser, Debug)]
#[command(name = "cargo xtask", bin_name = "cargo xtask")]
// Bare `cargo xtask` prints this help on stdout and exits 0, as bare `cargo` does: it is a
// question ("what is there?"), not a mistake. An unknown subcommand is one: exit 2.
#[command(subcommand_required = false, arg_required_else_help = false)]
#[command(after_help = "`cargo xtask SUB --help` shows SUB's usage; xtask/src/lib.rs says where each one lives.")]
pub struct Cli {
    /// What to do; `None` for bare `cargo xtask`.
    #[command(subcommand)]
    pub command: Option<Command>,
}

/// The subcommands, each with the arguments it parses itself.
#[derive(Subcommand, Debug, PartialEq)]
pub enum Command {
    /// The benchmark's tables and plot, from a lab/bench run's RAW file
    #[command(override_usage = BENCH_USAGE)]
    Bench(Rest),
    /// The book's generated files: write them, or name the stale ones (--check)
    #[command(override_usage = "cargo xtask book [--check]")]
    Book(Rest),
    /// The classroom kit: a student's copy of a stage, and grading it on the device
    Exercise(xtask::exercise::ExerciseArgs),
    /// A class's hand-ins graded in one lab VM boot, and the reports gradebooks take
    Grade(xtask::grade::GradeArgs),
    /// Step NN in its roles on the device: the server, then its client
    // The runner answers `run --help` itself (testkit/src/runner/cli.rs), so the flag is
    // its; `cargo xtask help run` shows this.
    #[command(disable_help_flag = true)]
    #[command(override_usage = "cargo xtask run NN [--peer ours|c|rping] [--as server|client] [--server WHO] \
[--client WHO] [--wrap CMD] [--server-wrap CMD] [--client-wrap CMD] [--server-flags FLAGS] [--client-flags FLAGS] \
[--ours-flags FLAGS] [--bin-dir DIR] [--port P] [--timeout S] [--out DIR] [--host ADDR] [--live] [-- FLAGS...]")]
    Run(Rest),
    /// Add a step: everything steps/list.txt implies, as a skeleton (or --remove one)
    #[command(override_usage = "cargo xtask new-step NN_name alone|pair|cm [--base NN]
       cargo xtask new-step --remove NN_name")]
    NewStep(Rest),
    /// The steps of steps/list.txt, one a line, with the facts asked for (for scripts)
    Steps(StepsArgs),
    /// lab/pair-check's exchange: send the other VM a line over TCP, print the one it sends
    PairLine(PairLineArgs),
}

/// `cargo xtask pair-line`'s arguments.
#[derive(Args, Debug, PartialEq)]
pub struct PairLineArgs {
    /// Be the client of HOST (the other VM); without it, the server
    #[arg(long, value_name = "HOST")]
    pub connect: Option<String>,
    /// The TCP port the server listens on
    #[arg(long)]
    pub port: u16,
    /// Seconds to wait for the other side, at most
    #[arg(long, default_value_t = 60)]
    pub timeout: u64,
    /// What to send (under 128 bytes)
    pub line: String,
}

/// `cargo xtask steps`'s arguments: which steps, which of their facts.
#[derive(Args, Debug, PartialEq)]
pub struct StepsArgs {
    /// Only the steps that run with these roles
    #[arg(long, value_enum)]
    pub roles: Option<RolesArg>,
    /// A fact to print after each step's bin, in the order given; two-hosts is words, none
    /// or several, so put it last
    #[arg(long = "field", value_enum, value_name = "FACT")]
    pub fields: Vec<Field>,
}

/// steps/list.txt's roles, as `--roles` takes them.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq)]
pub enum RolesArg {
    Alone,
    Pair,
    Cm,
}

impl RolesArg {
    /// testkit's name for them.
    pub fn roles(self) -> testkit::Roles {
        match self {
            RolesArg::Alone => testkit::Roles::Alone,
            RolesArg::Pair => testkit::Roles::Pair,
            RolesArg::Cm => testkit::Roles::Cm,
        }
    }
}

/// The facts `cargo xtask steps --field` prints (steps/list.txt's header says what each is).
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq)]
pub enum Field {
    /// alone, pair or cm
    Roles,
    /// the step it is built on, or `-`
    Base,
    /// its C tool, or `-`
    C,
    /// `yes` if the C tool can be our program's peer
    CPeer,
    /// `yes` if lab/pair-test pairs it with the C tool (or rping) too
    TwoHostsC,
    /// the flags lab/pair-test gives both sides (words; none for the defaults)
    TwoHosts,
}

/// `cargo xtask bench`'s usage (its arguments are parsed in `main.rs`).
pub const BENCH_USAGE: &str = "cargo xtask bench table|sweep-table|sweep-plot RAW";

/// The rest of the command line after the subcommand, as it was given: options and all.
#[derive(Args, Debug, PartialEq)]
pub struct Rest {
    /// Passed to the subcommand as they are (see Usage)
    // trailing_var_arg: after the first value everything is the subcommand's, `--help`
    // and `--` included; allow_hyphen_values: so is a first value that starts with `-`
    // (`new-step --remove`), unless it is `-h`/`--help`, which clap answers.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, value_name = "ARGS")]
    pub args: Vec<String>,
}

impl Command {
    /// The subcommand's name, as typed, and its arguments.
    pub fn split(&self) -> (&'static str, &[String]) {
        match self {
            Command::Bench(r) => ("bench", &r.args),
            Command::Book(r) => ("book", &r.args),
            Command::Exercise(_) => ("exercise", &[]),
            Command::Grade(_) => ("grade", &[]),
            Command::Run(r) => ("run", &r.args),
            Command::NewStep(r) => ("new-step", &r.args),
            Command::Steps(_) => ("steps", &[]),
            Command::PairLine(_) => ("pair-line", &[]),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn parse(line: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("xtask").chain(line.iter().copied()))
    }

    fn sub(line: &[&str]) -> (&'static str, Vec<String>) {
        let cli = parse(line).unwrap_or_else(|e| panic!("{line:?}: {e}"));
        let command = cli.command.unwrap_or_else(|| panic!("{line:?}: no subcommand"));
        let (name, args) = command.split();
        (name, args.to_vec())
    }

    #[test]
    fn the_help_lists_every_subcommand_with_its_line() {
        let cli = Cli::command();
        let help = cli.clone().render_help().to_string();
        for sub in cli.get_subcommands() {
            let about = sub.get_about().map(ToString::to_string).unwrap_or_default();
            assert!(!about.is_empty(), "`{}` has no one-line description", sub.get_name());
            let line = help.lines().find(|l| l.trim_start().starts_with(&format!("{} ", sub.get_name())));
            assert!(line.is_some_and(|l| l.contains(&about)), "the help has no line for `{}`:\n{help}", sub.get_name());
        }
        let names: Vec<&str> = cli.get_subcommands().map(|s| s.get_name()).collect();
        assert_eq!(names, ["bench", "book", "exercise", "grade", "run", "new-step", "steps", "pair-line"]);
    }

    #[test]
    fn bare_is_no_subcommand_and_not_an_error() {
        assert!(parse(&[]).unwrap().command.is_none());
    }

    #[test]
    fn an_unknown_subcommand_is_an_error_that_names_it() {
        let e = parse(&["serve", "--port", "1"]).unwrap_err();
        assert_eq!(e.kind(), clap::error::ErrorKind::InvalidSubcommand);
        assert_eq!(e.exit_code(), 2);
        assert!(e.to_string().contains("'serve'"), "{e}");
    }

    #[test]
    fn arguments_pass_through_as_given_dashes_included() {
        let owned = |a: &[&str]| a.iter().map(ToString::to_string).collect::<Vec<_>>();
        assert_eq!(sub(&["new-step", "--remove", "13_x"]), ("new-step", owned(&["--remove", "13_x"])));
        assert_eq!(sub(&["book", "--check"]), ("book", owned(&["--check"])));
        assert_eq!(sub(&["book"]), ("book", vec![]));
        let run = ["05", "--peer", "c", "--client-wrap", "lab/impair --netem 'loss 5%' --", "--", "-s", "--help"];
        let line = [&["run"][..], &run].concat();
        assert_eq!(sub(&line), ("run", owned(&run)));
        // After the first argument, `--help` is the subcommand's to read, as before.
        assert_eq!(sub(&["new-step", "13_x", "--help"]), ("new-step", owned(&["13_x", "--help"])));
    }

    #[test]
    fn help_after_a_subcommand_is_its_usage_except_run_which_answers_itself() {
        for name in ["bench", "book", "exercise", "grade", "new-step"] {
            for flag in ["--help", "-h"] {
                let e = parse(&[name, flag]).unwrap_err();
                assert_eq!(e.kind(), clap::error::ErrorKind::DisplayHelp, "{name} {flag}");
                assert_eq!(e.exit_code(), 0, "{name} {flag}");
                assert!(e.to_string().contains(&format!("cargo xtask {name} ")), "{name} {flag}: {e}");
            }
        }
        assert_eq!(sub(&["run", "--help"]), ("run", vec!["--help".to_string()]));
        assert_eq!(sub(&["run", "-h"]), ("run", vec!["-h".to_string()]));
    }

    #[test]
    fn clap_finds_nothing_wrong_with_the_definition() {
        Cli::command().debug_assert();
    }
}

//! The front door: every subcommand and its arguments, in clap derive, so `cargo xtask` and
//! `cargo xtask --help` list them and `cargo xtask SUB --help` says what each argument is.
//! The ones with many live beside their code: `exercise/cli.rs`, `grade/cli.rs`, and the
//! runner's (`cargo xtask run`) in `testkit/src/runner/cli.rs`, which its `runner` binary
//! shares.

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
    Bench(BenchArgs),
    /// The book's generated files: write them, or name the stale ones (--check)
    Book(BookArgs),
    /// The classroom kit: a student's copy of a stage, and grading it on the device
    Exercise(xtask::exercise::ExerciseArgs),
    /// A class's hand-ins graded in one lab VM boot, and the reports gradebooks take
    Grade(xtask::grade::GradeArgs),
    /// Step NN in its roles on the device: the server, then its client
    Run(Box<testkit::runner::cli::RunArgs>),
    /// Add a step: everything steps/list.txt implies, as a skeleton (or --remove one)
    NewStep(NewStepArgs),
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

/// `cargo xtask bench`'s arguments.
#[derive(Args, Debug, PartialEq)]
pub struct BenchArgs {
    /// What to render on stdout
    #[arg(value_enum)]
    pub what: BenchOutput,
    /// A lab/bench run's raw.tsv
    pub raw: String,
}

/// What `cargo xtask bench` renders.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq)]
pub enum BenchOutput {
    /// The headline table (markdown)
    Table,
    /// The sweep's table (markdown)
    SweepTable,
    /// The sweep's plot (SVG)
    SweepPlot,
}

impl BenchOutput {
    /// The word `bench::run` takes.
    pub fn word(self) -> &'static str {
        match self {
            BenchOutput::Table => "table",
            BenchOutput::SweepTable => "sweep-table",
            BenchOutput::SweepPlot => "sweep-plot",
        }
    }
}

/// `cargo xtask book`'s arguments.
#[derive(Args, Debug, PartialEq)]
pub struct BookArgs {
    /// Write nothing: name each generated file that is not as generated, exit 1 if any is
    #[arg(long)]
    pub check: bool,
}

/// `cargo xtask new-step`'s arguments: a step to add, or one to remove.
#[derive(Args, Debug, PartialEq)]
pub struct NewStepArgs {
    /// The new step, NN_name: NN the next number, name the stage's file
    #[arg(required_unless_present = "remove", value_name = "NN_name")]
    pub bin: Option<String>,
    /// How it runs (steps/list.txt's roles)
    #[arg(value_enum, required_unless_present = "remove")]
    pub roles: Option<RolesArg>,
    /// The step it is built on (without it, the last one that runs alike)
    #[arg(long, value_name = "NN")]
    pub base: Option<String>,
    /// Remove step NN_name instead (the last one, added with new-step)
    #[arg(long, value_name = "NN_name", conflicts_with_all = ["bin", "roles", "base"])]
    pub remove: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn parse(line: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("xtask").chain(line.iter().copied()))
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
    fn run_takes_the_runners_arguments_dashes_included() {
        let run = ["05", "--peer", "c", "--client-wrap", "lab/impair --netem 'loss 5%' --", "--", "-s", "--help"];
        let Some(Command::Run(a)) = parse(&[&["run"][..], &run].concat()).unwrap().command else { panic!("not run") };
        assert_eq!((a.step.as_str(), a.peer.as_deref()), ("05", Some("c")));
        assert_eq!(a.client_wrap.as_deref(), Some("lab/impair --netem 'loss 5%' --"));
        assert_eq!(a.flags, ["-s", "--help"]);
    }

    #[test]
    fn new_step_is_a_step_and_its_roles_or_a_removal() {
        let added =
            NewStepArgs { bin: Some("13_x".into()), roles: Some(RolesArg::Cm), base: Some("10".into()), remove: None };
        assert_eq!(parse(&["new-step", "13_x", "cm", "--base", "10"]).unwrap().command, Some(Command::NewStep(added)));
        let removed = NewStepArgs { bin: None, roles: None, base: None, remove: Some("13_x".into()) };
        assert_eq!(parse(&["new-step", "--remove", "13_x"]).unwrap().command, Some(Command::NewStep(removed)));
        for wrong in
            [&["new-step", "13_x"][..], &["new-step", "13_x", "ring"], &["new-step", "13_x", "cm", "--remove", "13_x"]]
        {
            assert_eq!(parse(wrong).unwrap_err().exit_code(), 2, "{wrong:?}");
        }
    }

    #[test]
    fn bench_and_book_take_words_of_their_own() {
        let bench = BenchArgs { what: BenchOutput::SweepPlot, raw: "raw.tsv".into() };
        assert_eq!(parse(&["bench", "sweep-plot", "raw.tsv"]).unwrap().command, Some(Command::Bench(bench)));
        assert_eq!(parse(&["bench", "plot", "raw.tsv"]).unwrap_err().kind(), clap::error::ErrorKind::InvalidValue);
        assert_eq!(parse(&["book", "--check"]).unwrap().command, Some(Command::Book(BookArgs { check: true })));
        assert_eq!(parse(&["book", "--chek"]).unwrap_err().exit_code(), 2);
    }

    #[test]
    fn help_after_a_subcommand_is_its_usage() {
        for name in ["bench", "book", "exercise", "grade", "run", "new-step"] {
            for flag in ["--help", "-h"] {
                let e = parse(&[name, flag]).unwrap_err();
                assert_eq!(e.kind(), clap::error::ErrorKind::DisplayHelp, "{name} {flag}");
                assert_eq!(e.exit_code(), 0, "{name} {flag}");
                assert!(e.to_string().contains(&format!("cargo xtask {name} ")), "{name} {flag}: {e}");
            }
        }
    }

    #[test]
    fn clap_finds_nothing_wrong_with_the_definition() {
        Cli::command().debug_assert();
    }
}

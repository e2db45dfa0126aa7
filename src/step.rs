//! What every step binary shares: its command line.
//!
//! A step names its flag group and its break cases once, and parses them with [`Cli`]:
//!
//! ```no_run
//! use rdma_dissect::breakit::Case;
//! use rdma_dissect::step::Cli;
//!
//! type Args = rdma_dissect::cli::PingpongArgs;
//! const CASES: &[Case<Args>] = &rdma_dissect::breakit::modify_qp_rtr::CASES;
//! const ABOUT: &str = "Step 05 of ibv_rc_pingpong: exchange LID/QPN/PSN/GID over TCP, then INIT→RTR";
//!
//! let Cli { args, brk, .. } = Cli::<Args>::parse(ABOUT, "05_modify_qp_rtr", CASES);
//! ```
//!
//! The command is the group's flags, then flags of the step's own (`X`, such as 09's
//! `--bw`; most steps have none), then `--break`, hidden on a step without cases so that
//! every step has the same shape. It is built at run time rather than derived per step
//! because `--break`'s values are the step's own `CASES`: one builder serves every step,
//! where a derived struct was the same twelve lines in each.

use clap::parser::ValueSource;
use clap::{Arg, Args, Command, FromArgMatches};

use crate::breakit::{self, Case, Choice};
use crate::cli::StepArgs;
use crate::trace;

/// A step's parsed command line: its flag group, its own flags, and `--break`.
pub struct Cli<A: 'static, X = NoFlags> {
    /// The flag group (`OpenArgs` … `PingpongArgs`).
    pub args: A,
    /// Flags of this step alone ([`NoFlags`] for a step that has none).
    pub own: X,
    /// `--break`: a case to run, or `help`.
    pub brk: Option<Choice<A>>,
}

/// The flags of a step that has none of its own.
#[derive(Args, Debug, Clone, Copy, PartialEq, Eq)]
pub struct NoFlags {}

impl<A: StepArgs + Send + Sync, X: Args + FromArgMatches> Cli<A, X> {
    /// Parses the process's arguments as step `bin`'s, whose `--help` begins with `about`.
    /// Like clap's derived `Parser::parse`, it prints help or an error and exits by itself.
    pub fn parse(about: &'static str, bin: &str, cases: &'static [Case<A>]) -> Self {
        // A flag group's doc comment becomes the command's about when it is added (a
        // derived `Args` sets it): the step's own words go on last.
        let command = X::augment_args(A::augment_args(Command::new(env!("CARGO_PKG_NAME"))));
        // An environment variable set to "" counts as unset (src/cli/mod.rs, DeviceArgs):
        // `RDMA_GID_INDEX= 05_modify_qp_rtr` runs without a GID.
        let command = command.mut_args(|arg| match arg.get_env() {
            Some(var) if std::env::var_os(var).is_some_and(|v| v.is_empty()) => arg.env(None),
            _ => arg,
        });
        let command = command.about(about).after_help(A::after_help(bin)).arg(
            Arg::new("break")
                .long("break")
                .value_name("CASE")
                .help("Make one of this step's characteristic mistakes on purpose (`--break help` lists them)")
                .value_parser(breakit::parser(cases))
                .hide(cases.is_empty()),
        );
        let mut matches = command.clone().get_matches();
        let fail = |e: clap::Error| -> ! { e.format(&mut command.clone()).exit() };
        let help = matches!(matches.get_one::<Choice<A>>("break"), Some(Choice::Help));
        if !help {
            trace_env_defaults(&command, &matches);
        }
        let args = A::from_arg_matches_mut(&mut matches).unwrap_or_else(|e| fail(e));
        let own = X::from_arg_matches_mut(&mut matches).unwrap_or_else(|e| fail(e));
        let brk = matches.remove_one::<Choice<A>>("break");
        Cli { args, own, brk }
    }
}

/// One trace line for each flag whose value came from its environment variable, so a run
/// says why it used a device, port or GID index nobody typed:
///
/// ```text
/// getenv                      RDMA_GID_INDEX=1 flag=-g
/// ```
fn trace_env_defaults(command: &Command, matches: &clap::ArgMatches) {
    for arg in command.get_arguments() {
        let Some(var) = arg.get_env() else { continue };
        if matches.value_source(arg.get_id().as_str()) != Some(ValueSource::EnvVariable) {
            continue;
        }
        let value = std::env::var_os(var).unwrap_or_default();
        let flag = arg.get_short().map_or_else(|| format!("--{}", arg.get_id()), |c| format!("-{c}"));
        trace::event("getenv").kv(&var.to_string_lossy(), value.to_string_lossy()).kv("flag", flag).emit();
    }
}

//! `cargo xtask grade`'s subcommands and their arguments, in clap derive: the front door
//! (`src/cli.rs`) takes them as they are, so `cargo xtask grade --help` lists them and
//! `cargo xtask grade SUB --help` says what each argument is. lab/grade, lab/submit, the
//! Gradescope autograder and the grader itself (`grade bounded`, for every run) call them.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Args, Subcommand};

/// `cargo xtask grade SUB …`.
#[derive(Args, Debug, PartialEq)]
pub struct GradeArgs {
    #[command(subcommand)]
    pub command: GradeCommand,
}

/// One subcommand each; "(host)" runs on the instructor's machine, "(VM)" as root in the
/// lab VM (lab/grade runs both).
#[derive(Subcommand, Debug, PartialEq)]
pub enum GradeCommand {
    /// A hand-in's manifest on stdout: each exercise file of EXERCISES and its SHA-256 (lab/submit)
    Manifest {
        /// The directory of exercise files (NN_step.rs)
        exercises: PathBuf,
        /// The account, host, time and commit the manifest records: the student's claims,
        /// shown in the reports as such, never trusted
        account: String,
        host: String,
        time: String,
        commit: String,
    },
    /// (host) Take the hand-ins each SUBMISSION holds into CLASS, named by where they came from
    Intake {
        /// The class's directory (grade/mod.rs says what it holds); made if missing
        class: PathBuf,
        /// The class's roster (CSV): who may hand in, and Moodle's emails for the report
        #[arg(long, value_name = "ROSTER.csv")]
        roster: Option<PathBuf>,
        /// Moodle's grading worksheet, which names the folders of its download
        #[arg(long, value_name = "WORKSHEET.csv")]
        moodle_worksheet: Option<PathBuf>,
        /// A hand-in archive, a directory of them, Moodle's download zip or a git remote
        #[arg(required = true, value_name = "SUBMISSION")]
        submissions: Vec<String>,
    },
    /// (host) The hand-ins not graded yet, and a crate per step of STEPS to build them in
    Prepare {
        class: PathBuf,
        /// Steps to grade: `all`, or NNs joined by commas
        steps: String,
    },
    /// (host) Those crates built from the reference's stages, with their dependencies
    Prebuild { class: PathBuf },
    /// (host) The hand-ins' files built, each sealed and bounded
    Build {
        class: PathBuf,
        /// Seconds each build may take (default 60)
        #[arg(long, value_name = "N")]
        build_seconds: Option<u64>,
    },
    /// (VM) Grade CLASS's students, building there what the host could not
    Vm {
        class: PathBuf,
        /// Seconds each build in the VM may take (default 300)
        #[arg(long, value_name = "N")]
        build_seconds: Option<u64>,
    },
    /// (VM) One run of PROGRAM as UID, sealed, bounded by SECONDS: what the grader starts
    Bounded {
        uid: u32,
        seconds: u64,
        program: PathBuf,
        /// PROGRAM's arguments, as they are
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<OsString>,
    },
    /// JUnit per student, moodle.csv and Gradescope's results.json, in CLASS/reports
    Report { class: PathBuf },
    /// A synthetic class of N hand-ins in OUT (of step 05, or every step) and their intended verdicts
    Synth {
        out: PathBuf,
        n: usize,
        /// Every step, not only 05
        #[arg(long)]
        every_step: bool,
    },
    /// CLASS's verdicts against the INTENDED ones `synth` wrote
    Verify { class: PathBuf, intended: PathBuf },
    /// Gradescope's autograder: the student's name from METADATA, RESULTS as results.json
    GradescopeStudent { metadata: PathBuf, results: Option<PathBuf> },
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser, Debug)]
    struct Top {
        #[command(flatten)]
        grade: GradeArgs,
    }

    fn parse(line: &[&str]) -> Result<GradeCommand, clap::Error> {
        Top::try_parse_from(std::iter::once("grade").chain(line.iter().copied())).map(|t| t.grade.command)
    }

    #[test]
    fn options_go_anywhere_among_the_submissions() {
        let GradeCommand::Intake { class, roster, moodle_worksheet, submissions } =
            parse(&["intake", "c", "a.tar.gz", "--roster", "r.csv", "dir/"]).unwrap()
        else {
            panic!("not intake")
        };
        assert_eq!((class, roster, moodle_worksheet), ("c".into(), Some("r.csv".into()), None));
        assert_eq!(submissions, ["a.tar.gz", "dir/"]);
        let e = parse(&["intake", "c"]).unwrap_err();
        assert_eq!((e.kind(), e.exit_code()), (clap::error::ErrorKind::MissingRequiredArgument, 2));
    }

    #[test]
    fn bounded_passes_the_programs_arguments_as_they_are() {
        let line = ["bounded", "64001", "8", "/run/p", "-d", "rxe0", "--timeout", "5", "--", "-x"];
        let GradeCommand::Bounded { uid, seconds, program, args } = parse(&line).unwrap() else {
            panic!("not bounded")
        };
        assert_eq!((uid, seconds, program), (64001, 8, "/run/p".into()));
        assert_eq!(args, ["-d", "rxe0", "--timeout", "5", "--", "-x"].map(OsString::from));
        assert_eq!(parse(&["bounded", "root", "8", "/p"]).unwrap_err().kind(), clap::error::ErrorKind::ValueValidation);
    }

    #[test]
    fn numbers_and_flags() {
        assert_eq!(
            parse(&["build", "c", "--build-seconds", "90"]).unwrap(),
            GradeCommand::Build { class: "c".into(), build_seconds: Some(90) }
        );
        assert_eq!(parse(&["vm", "c"]).unwrap(), GradeCommand::Vm { class: "c".into(), build_seconds: None });
        assert_eq!(
            parse(&["synth", "o", "30", "--every-step"]).unwrap(),
            GradeCommand::Synth { out: "o".into(), n: 30, every_step: true }
        );
        assert_eq!(parse(&["synth", "o", "thirty"]).unwrap_err().kind(), clap::error::ErrorKind::ValueValidation);
        assert_eq!(parse(&["report", "c", "extra"]).unwrap_err().kind(), clap::error::ErrorKind::UnknownArgument);
        assert_eq!(parse(&[]).unwrap_err().exit_code(), 2);
    }
}

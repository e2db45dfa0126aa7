//! `cargo xtask exercise`'s subcommands and their arguments, in clap derive: the front door
//! (`src/cli.rs`) takes them as they are, so `cargo xtask exercise --help` lists them and
//! `cargo xtask exercise SUB --help` says what each argument is. lab/exercise and lab/check
//! call them (the module doc of exercise/mod.rs says what each does).

use std::path::PathBuf;

use clap::builder::NonEmptyStringValueParser;
use clap::{Args, Subcommand};

/// `cargo xtask exercise SUB …`.
#[derive(Args, Debug, PartialEq)]
pub struct ExerciseArgs {
    #[command(subcommand)]
    pub command: ExerciseCommand,
}

/// One subcommand each. NN is a step's number (`05`, or `5`, or its bin).
#[derive(Subcommand, Debug, PartialEq)]
pub enum ExerciseCommand {
    /// Write step NN's exercise to OUT: its stage with holes as todo!()
    Generate {
        /// Whose variant the exercise asks for (its header says which values)
        #[arg(long = "as", value_name = "NAME", value_parser = NonEmptyStringValueParser::new())]
        student: Option<String>,
        nn: String,
        out: PathBuf,
    },
    /// Print NAME's variant of step NN
    Variant {
        #[arg(long = "as", value_name = "NAME", value_parser = NonEmptyStringValueParser::new())]
        student: String,
        nn: String,
    },
    /// List step NN's holes: name, line, hint
    Holes { nn: String },
    /// Print step NN's binary and stage file
    Path { nn: String },
    /// Make (or bring up to date) the crate that builds BIN with STUDENT in place of STAGE_FILE
    Crate {
        bin: String,
        /// The stage's file in the project, src/stages/…
        stage_file: String,
        /// The student's file
        student: PathBuf,
    },
    /// Run each BIN (step NN built from SOURCE) on the device beside the reference, and compare
    Grade {
        /// Append each verdict to FILE
        #[arg(long, value_name = "FILE")]
        results: Option<PathBuf>,
        /// Whose variant the reference's trace is held to
        #[arg(long = "as", value_name = "NAME", value_parser = NonEmptyStringValueParser::new())]
        student: Option<String>,
        /// NN BIN SOURCE, once per step to check
        #[arg(required = true, value_name = "NN BIN SOURCE")]
        cases: Vec<String>,
    },
    /// Start FILE as an empty results file (--start), or append a failed verdict reached before grading
    Verdict {
        #[arg(long, value_name = "FILE")]
        results: PathBuf,
        /// Make FILE an empty results file
        #[arg(long, conflicts_with_all = ["nn", "message"])]
        start: bool,
        #[arg(required_unless_present = "start")]
        nn: Option<String>,
        /// The failure's report; `-`: read it from stdin
        #[arg(required_unless_present = "start", allow_hyphen_values = true)]
        message: Option<String>,
    },
    /// Write the verdicts in RESULTS as JUnit XML to OUT
    Junit { out: PathBuf, results: PathBuf },
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::error::ErrorKind;
    use clap::Parser;

    #[derive(Parser, Debug)]
    struct Top {
        #[command(flatten)]
        exercise: ExerciseArgs,
    }

    fn parse(line: &[&str]) -> Result<ExerciseCommand, clap::Error> {
        Top::try_parse_from(std::iter::once("exercise").chain(line.iter().copied())).map(|t| t.exercise.command)
    }

    #[test]
    fn grade_takes_its_cases_with_the_options_anywhere() {
        let line = ["grade", "--results", "r.tsv", "05", "b", "s.rs", "--as", "ada", "06", "c", "t.rs"];
        let ExerciseCommand::Grade { results, student, cases } = parse(&line).unwrap() else { panic!("not grade") };
        assert_eq!((results, student), (Some("r.tsv".into()), Some("ada".into())));
        assert_eq!(cases, ["05", "b", "s.rs", "06", "c", "t.rs"]);
        assert_eq!(parse(&["grade"]).unwrap_err().kind(), ErrorKind::MissingRequiredArgument);
    }

    #[test]
    fn verdict_is_start_or_a_step_and_its_message() {
        assert_eq!(
            parse(&["verdict", "--results", "r", "--start"]).unwrap(),
            ExerciseCommand::Verdict { results: "r".into(), start: true, nn: None, message: None }
        );
        assert_eq!(
            parse(&["verdict", "--results", "r", "05", "-"]).unwrap(),
            ExerciseCommand::Verdict {
                results: "r".into(),
                start: false,
                nn: Some("05".into()),
                message: Some("-".into())
            }
        );
        let said = parse(&["verdict", "--results", "r", "05", "--- not built"]).unwrap();
        assert!(matches!(said, ExerciseCommand::Verdict { message: Some(m), .. } if m == "--- not built"));
        assert_eq!(parse(&["verdict", "--results", "r", "05"]).unwrap_err().kind(), ErrorKind::MissingRequiredArgument);
        assert_eq!(
            parse(&["verdict", "--results", "r", "--start", "05", "x"]).unwrap_err().kind(),
            ErrorKind::ArgumentConflict
        );
    }

    #[test]
    fn variant_needs_a_name() {
        assert_eq!(parse(&["variant", "05"]).unwrap_err().kind(), ErrorKind::MissingRequiredArgument);
        assert_eq!(parse(&["variant", "--as", "", "05"]).unwrap_err().kind(), ErrorKind::InvalidValue);
        assert_eq!(
            parse(&["generate", "--as", "ada", "05", "o.rs"]).unwrap(),
            ExerciseCommand::Generate { student: Some("ada".into()), nn: "05".into(), out: "o.rs".into() }
        );
    }
}

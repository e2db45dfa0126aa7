//! The classroom kit behind `lab/exercise` and `lab/check`: makes a student's copy of a
//! stage with its key lines taken out, and grades a student's step on the device against
//! the reference.
//!
//! ```text
//! cargo xtask exercise …   (lab/exercise and lab/check run the built binary, target/debug/xtask)
//! exercise generate [--as NAME] NN OUT
//!                                    write step NN's exercise (its stage, holes as todo!()),
//!                                    with NAME's variant in its header
//! exercise variant --as NAME NN      print NAME's variant of step NN (see `variant`)
//! exercise holes NN                  list step NN's holes: name, line, hint
//! exercise path NN                   print step NN's binary and stage file
//! exercise crate BIN STAGE_FILE STUDENT
//!                                    make (or bring up to date) the crate that builds BIN
//!                                    with STUDENT in place of STAGE_FILE; print its directory
//!                                    and the name of its BIN (exercise-BIN)
//! exercise grade [--results FILE] [--as NAME] NN BIN SOURCE ...
//!                                    run BIN (step NN built from SOURCE) on the device in its
//!                                    real roles, next to the reference, and compare (with
//!                                    NAME's variant applied to the reference's trace); with
//!                                    --results, append each verdict to FILE
//! exercise verdict --results FILE --start
//!                                    make FILE an empty results file
//! exercise verdict --results FILE NN MESSAGE
//!                                    append to FILE the failed verdict NN MESSAGE, one reached
//!                                    before grading (MESSAGE `-`: read it from stdin)
//! exercise junit OUT RESULTS         write the verdicts in RESULTS as JUnit XML to OUT
//! ```
//!
//! **Holes** are marked in the real `src/stages/*.rs`, so an exercise never drifts from the
//! code it teaches. A hole is an mdBook anchor whose name starts with `hole_`, with the
//! hint on its first line:
//!
//! ```text
//!     // ANCHOR: hole_min_rnr_timer HOLE: the RNR timer code the peer waits ...
//!     min_rnr_timer: 12,
//!     // ANCHOR_END: hole_min_rnr_timer
//! ```
//!
//! mdBook drops every `ANCHOR:` line from the listings it includes, so the students' book
//! shows only the code, and the instructor's guide can quote each hole's answer by name.
//! The generator replaces a hole by what compiles in its place: `field: todo!("hint"),` for
//! a struct field, `let x: T = todo!("hint");` for a `let` (the marker says `HOLE(T)`, since
//! a `todo!()` has no type to infer from), `todo!("hint");` for statements, and, for the
//! `| IBV_QP_…` lines of a mask (a `const` cannot panic), nothing but a `// TODO` comment.
//!
//! **Grading** runs the student's binary in each of the step's runs (both roles for 05–09,
//! against the C `ibv_rc_pingpong` for 05–08 and the reference 09 for 09), then the
//! reference binary in the same runs, redacts both traces with the tests' own redaction
//! (`testkit`: what the device reports and what each run picks become placeholders),
//! and reports the first line that differs in the terms of the trace: which verb, which
//! attribute or mask bit, expected and got, and which section of the book to reread.
//!
//! **Variants** (`variant`): for steps 03–06, each student's exercise asks for values of its
//! own where the verbs allow any, said in the exercise's header; grading expects the
//! reference's trace with those values in their fields. A copy of the stage fails.
//!
//! One file a part: `holes` (the student's copy of a stage), `variant` (each student's
//! values), `student_crate` (the crate it is built in), `run` (running a step on the
//! device), `compare` (grading against the reference) and `report` (the verdicts for
//! graders); this file names the steps.

use testkit as common;

mod cli;
mod compare;
mod holes;
mod report;
mod run;
mod student_crate;
mod variant;

pub use cli::{ExerciseArgs, ExerciseCommand};
use compare::grade_cmd;
pub(crate) use compare::{grade, ReferenceRuns};
pub(crate) use holes::exercise_text;
use holes::{generate_cmd, holes_cmd};
pub(crate) use report::{append_result, junit_errors_xml, junit_xml, parse_results, Verdict};
use report::{junit_cmd, verdict_cmd};
pub(crate) use run::{DEADLINE, PEER_TIMEOUT};
pub(crate) use student_crate::{class_crate, class_workspace};
use student_crate::{exercise_bin, exercise_crate};
pub(crate) use variant::Variant;

use std::path::PathBuf;
use std::process::ExitCode;

/// Who runs opposite the student's program in a pair step (an `alone` step has no partner).
#[derive(Clone, Copy, PartialEq)]
enum Partner {
    /// The step's C tool (steps/list.txt's `c=`: Debian's `ibv_rc_pingpong`, …).
    C,
    /// Our reference step: the C tool cannot be the step's peer (`no-c-peer`, or none), or
    /// the list says `graded-with-ours`.
    Reference,
    /// Debian's `rping` (a `cm` step: rdma_cm and rping's protocol).
    Rping,
}

/// One step's exercise: where its stage lives, how it is run, where the book explains it.
#[derive(Clone)]
struct Exercise {
    nn: String,
    bin: String,
    stage: String,
    /// Who runs opposite it: none for an `alone` step.
    partner: Option<Partner>,
    /// Its C peer waits for a ping-pong the step never does (the list's `c-outlasts`): what
    /// it prints after ours has gone is not checked.
    c_outlasts: bool,
    /// It connects with rdma_cm and takes rping's flags (10).
    cm: bool,
    /// The argument sets it runs with (after the device's `-d -i -g`), the list's `grade=`;
    /// a pair step's in both roles (see [`run::runs`]).
    runs: Vec<Vec<String>>,
}

/// The step `nn` as the grader runs it, from steps/list.txt (through testkit): a pair step
/// against its C tool in both roles, or against the reference when the C tool cannot be
/// its peer; a `cm` step against rping.
fn step(nn: &str) -> Result<Exercise, String> {
    let listed = common::step(nn)?;
    let partner = match (listed.pair, listed.cm) {
        (true, true) => Some(Partner::Rping),
        (true, false) if listed.graded_with_c => Some(Partner::C),
        (true, false) => Some(Partner::Reference),
        _ => None,
    };
    Ok(Exercise {
        nn: listed.nn().to_string(),
        bin: listed.bin.clone(),
        stage: listed.stage().to_string(),
        partner,
        c_outlasts: listed.graded_with_c && listed.c_outlasts,
        cm: listed.cm,
        runs: listed.grade.clone(),
    })
}

/// The project, found from the current directory (lab/check and lab/exercise run the
/// tool from it).
pub(crate) fn root() -> Result<PathBuf, String> {
    common::find_root()
}

/// Where the reference's steps are: built by `cargo build` beside the debug tool,
/// `target/debug/`. The class grader runs a release build of the tool (lab/grade: under
/// emulation its runner and its `grade bounded`, started for every run, are much slower
/// in debug: the instructor's guide, "What a class costs"), and grades against the same debug steps the students' own
/// checks run.
pub(crate) fn reference_dir() -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| format!("the tool's own path: {e}"))?;
    let dir = exe.parent().ok_or("the tool's own path has no directory")?;
    Ok(match dir.file_name() {
        Some(name) if name == "release" => dir.with_file_name("debug"),
        _ => dir.to_path_buf(),
    })
}

/// `exercise variant --as NAME NN`: NAME's values for step NN, as the exercise's header
/// says them.
fn variant_cmd(nn: &str, name: &str) -> Result<(), String> {
    let step = step(nn)?;
    match Variant::of(name, &step.nn) {
        Some(v) => v.header().iter().for_each(|l| println!("{}", l.strip_prefix("// ").unwrap_or(l))),
        None => println!("step {} has no variant: rc_pingpong's values are everyone's answer", step.nn),
    }
    Ok(())
}

/// `exercise SUB …`.
pub fn main(command: &ExerciseCommand) -> ExitCode {
    let result = match command {
        ExerciseCommand::Generate { student, nn, out } => generate_cmd(nn, out, student.as_deref()),
        ExerciseCommand::Variant { student, nn } => variant_cmd(nn, student),
        ExerciseCommand::Holes { nn } => holes_cmd(nn),
        ExerciseCommand::Path { nn } => step(nn).map(|s| println!("{} src/stages/{}.rs", s.bin, s.stage)),
        ExerciseCommand::Crate { bin, stage_file, student } => {
            // Where cargo builds: lab/check runs this from the project, as it runs cargo.
            root()
                .and_then(|root| {
                    let target =
                        std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from);
                    exercise_crate(&root, &target, bin, stage_file, student)
                })
                .map(|dir| println!("{} {}", dir.display(), exercise_bin(bin)))
        }
        ExerciseCommand::Grade { results, student, cases } if cases.len() % 3 == 0 => {
            return grade_cmd(cases, results.as_deref(), student.as_deref());
        }
        ExerciseCommand::Grade { cases, .. } => {
            Err(format!("grade takes its cases as NN BIN SOURCE, three words each; got {}", cases.len()))
        }
        ExerciseCommand::Verdict { results, start: true, .. } => verdict_cmd(results, None),
        ExerciseCommand::Verdict { results, nn, message, .. } => match (nn, message) {
            (Some(nn), Some(message)) => verdict_cmd(results, Some((nn, message))),
            _ => Err("verdict takes --start, or NN and MESSAGE".into()),
        },
        ExerciseCommand::Junit { out, results } => junit_cmd(out, results),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("exercise: {e}");
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_come_from_the_list() {
        let s = step("5").unwrap();
        assert_eq!((s.nn.as_str(), s.bin.as_str(), s.stage.as_str()), ("05", "05_modify_qp_rtr", "modify_qp_rtr"));
        assert!(s.partner == Some(Partner::C) && s.c_outlasts && s.runs == [Vec::<String>::new()]);
        assert!(step("01").unwrap().partner.is_none());
        assert!(step("09_rdma_write").unwrap().partner == Some(Partner::Reference));
        let s = step("08").unwrap();
        assert!(!s.c_outlasts && s.runs.len() == 2 && s.runs[1] == ["-e", "-n", "100", "-r", "8"]);
        let cm = step("10").unwrap();
        assert!(cm.partner == Some(Partner::Rping) && cm.cm, "step 10 is graded against rping");
        assert_eq!(step("12").unwrap().runs.len(), 2);
        assert!(step("99").err().unwrap().contains("no step `99`"));
    }
}

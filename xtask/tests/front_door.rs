//! `cargo xtask`'s front door (src/cli.rs) as a command: bare, it lists the subcommands;
//! each answers `--help`, those with subcommands of their own list theirs.

use std::path::{Path, PathBuf};
use std::process::Command;

fn project() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

/// (exit code, stdout, stderr) of `xtask ARGS…`, run in the project.
fn xtask(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_xtask")).args(args).current_dir(project()).output().unwrap();
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code().unwrap_or(-1), text(&out.stdout), text(&out.stderr))
}

#[test]
fn bare_prints_the_list_and_an_unknown_subcommand_is_exit_2() {
    let (code, out, err) = xtask(&[]);
    assert_eq!((code, err.as_str()), (0, ""), "bare `cargo xtask`");
    for sub in ["bench", "book", "exercise", "grade", "run", "new-step"] {
        assert!(out.lines().any(|l| l.trim_start().starts_with(&format!("{sub} "))), "no `{sub}` in:\n{out}");
    }
    let (code, out, err) = xtask(&["no-such-command"]);
    assert_eq!((code, out.as_str()), (2, ""));
    assert!(err.contains("unrecognized subcommand 'no-such-command'"), "{err}");
}

#[test]
fn help_and_dash_h_after_a_subcommand_exit_0_with_its_usage() {
    for sub in ["bench", "book", "exercise", "grade", "run", "new-step"] {
        for flag in ["--help", "-h"] {
            let (code, out, _) = xtask(&[sub, flag]);
            assert_eq!(code, 0, "{sub} {flag}");
            assert!(out.contains(&format!("cargo xtask {sub} ")), "{sub} {flag}:\n{out}");
        }
    }
}

/// `SUB --help` lists each of `subs`, and `SUB S --help` answers for each: the subcommands
/// whose arguments are clap's.
fn lists_and_answers(sub: &str, subs: &[&str]) {
    let (code, help, _) = xtask(&[sub, "--help"]);
    assert_eq!(code, 0, "{sub} --help");
    for s in subs {
        assert!(help.lines().any(|l| l.trim_start().starts_with(&format!("{s} "))), "no `{s}` in:\n{help}");
        let (code, out, _) = xtask(&[sub, s, "--help"]);
        assert_eq!(code, 0, "{sub} {s} --help");
        assert!(out.contains(&format!("cargo xtask {sub} {s} ")), "{sub} {s} --help:\n{out}");
    }
}

#[test]
fn exercise_lists_its_subcommands_and_each_answers_help() {
    lists_and_answers("exercise", &["generate", "variant", "holes", "path", "crate", "grade", "verdict", "junit"]);
    // Cases come in threes: anything else is named, exit 2.
    let (code, _, err) = xtask(&["exercise", "grade", "05", "bin"]);
    assert_eq!(code, 2);
    assert!(err.contains("NN BIN SOURCE, three words each; got 2"), "{err}");
}

#[test]
fn grade_lists_its_subcommands_and_each_answers_help() {
    let subs = [
        "manifest",
        "intake",
        "prepare",
        "prebuild",
        "build",
        "vm",
        "bounded",
        "report",
        "synth",
        "verify",
        "gradescope-student",
    ];
    lists_and_answers("grade", &subs);
    // Wrong arguments: clap's message, naming what is missing, and exit 2.
    let (code, _, err) = xtask(&["grade", "build"]);
    assert_eq!(code, 2);
    assert!(err.contains("<CLASS>"), "{err}");
}

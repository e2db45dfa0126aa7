//! `cargo xtask grade …`: a class's hand-ins graded against the reference, in one lab VM
//! boot, with reports a gradebook takes. `lab/grade` drives it; `lab/submit` makes the
//! hand-ins (see `handin`).
//!
//! ```text
//! grade manifest EXERCISES ACCOUNT HOST TIME COMMIT   a hand-in's manifest (lab/submit)
//! grade intake CLASS SUBMISSION…                      (host) the hand-ins, named by where
//!                                                     they came from (intake.rs)
//! grade prepare CLASS STEPS                           (host) the hand-ins not graded yet,
//!                                                     and a crate per step to build them in
//! grade prebuild CLASS                                (host) those crates with the
//!                                                     reference's stages, and their dependencies
//! grade build CLASS [--build-seconds N]               (host) build the hand-ins' files, each
//!                                                     sealed, bounded by N s (default 60)
//! grade vm CLASS [--build-seconds N]                  (root, in the lab VM) grade them, student
//!                                                     by student (building there what the host
//!                                                     could not, N s each, default 300)
//! grade bounded UID SECONDS PROGRAM ARGS…             (root, in the VM) one sealed, bounded run
//! grade report CLASS                                  JUnit per student, moodle.csv,
//!                                                     Gradescope's results.json
//! grade synth OUT N [--every-step]                    a synthetic class of N hand-ins (of step
//!                                                     05, or every step) and their intended
//!                                                     verdicts (synth.rs)
//! grade verify CLASS INTENDED                         its verdicts, as intended?
//! ```
//!
//! CLASS is a directory: `incoming/NAME/` the hand-ins as handed in (`grade intake` takes
//! them; `origin/NAME` says from where and when), `students/NAME/handin.tsv` what the
//! grader took (files and their SHA-256; why it refused one, and what each is a copy of:
//! see `vet`), `handed/` each different file once (named by its SHA-256), `build/` a crate
//! per graded step that each file is built in, in turn, `target/` their builds,
//! `cargo-home/` the last build's own, `bins/` the programs built from the files,
//! `built/KEY.log` what a build that failed said, `build.log` the compiler's messages,
//! `results/NAME.tsv` the verdicts (a student is graded once: what is there is kept, so an
//! interrupted grading resumes), `reports/`.
//!
//! A student's verdicts come only from what the grader ran here; nothing a student hands
//! in besides the exercise files is read (their own `lab/check --junit` is a self-check).

mod build;
mod cli;
mod gradescope;
mod handin;
mod intake;
mod moodle;
mod reports;
mod sandbox;
mod synth;
mod vet;
mod vm;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use crate::exercise::{self, class_crate, class_workspace};
pub use cli::{GradeArgs, GradeCommand};

fn io(path: &Path) -> impl Fn(std::io::Error) -> String + '_ {
    move |e| format!("{}: {e}", path.display())
}

/// The students in CLASS/incoming, by name.
fn students(class: &Path) -> Result<Vec<String>, String> {
    let incoming = class.join("incoming");
    let mut names = Vec::new();
    for entry in std::fs::read_dir(&incoming).map_err(io(&incoming))? {
        let name = entry.map_err(io(&incoming))?.file_name().to_string_lossy().into_owned();
        if !intake::valid_name(&name) {
            return Err(format!("{}: {}", incoming.join(&name).display(), intake::NAME_RULE));
        }
        names.push(name);
    }
    names.sort();
    Ok(names)
}

/// The steps graded (CLASS/steps.txt, one bin name a line).
fn graded_steps(class: &Path) -> Result<Vec<testkit::Step>, String> {
    let path = class.join("steps.txt");
    let text = std::fs::read_to_string(&path).map_err(io(&path))?;
    let wanted: Vec<&str> = text.lines().filter(|l| !l.is_empty()).collect();
    Ok(testkit::load_steps()?.into_iter().filter(|s| wanted.contains(&s.bin.as_str())).collect())
}

/// The name of a hand-in's file of step `bin` in CLASS (`handed/KEY.rs`, `bins/KEY`), after
/// its SHA-256: hand-ins of the same file share one build and one run (a class's untouched
/// templates, a copied answer).
fn file_key(sha256: &str, bin: &str) -> String {
    format!("sha256-{}-{bin}", &sha256[..16.min(sha256.len())])
}

/// Whether, in the library, only other stages and break-it cases name `stage`: then the
/// step's own code is the one way into it, and a student's file can be a module of the
/// step's binary (see [`class_crate`]), the library's stage the exercise's holes. Where
/// other code names it (the CLI takes stage 01's types, rping's code calls stage 07's and
/// 10's), that code would reach the holes: the student's file takes the stage's place in
/// the library, which each build then compiles again. Comments do not count; a word that
/// only looks like the stage's name does, which costs time, never a verdict.
fn only_stages_use(project: &Path, stage: &str) -> Result<bool, String> {
    fn sources(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), String> {
        for entry in std::fs::read_dir(dir).map_err(io(dir))? {
            let path = entry.map_err(io(dir))?.path();
            if path.is_dir() {
                sources(&path, out)?;
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
        Ok(())
    }
    let src = project.join("src");
    let mut files = Vec::new();
    sources(&src, &mut files)?;
    let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
    for file in files.iter().filter(|f| !f.starts_with(src.join("stages")) && !f.starts_with(src.join("breakit"))) {
        let text = std::fs::read_to_string(file).map_err(io(file))?;
        for line in text.lines().filter(|l| !l.trim_start().starts_with("//")) {
            let named = line
                .match_indices(stage)
                .any(|(at, _)| !word(line[..at].chars().next_back()) && !word(line[at + stage.len()..].chars().next()));
            if named {
                return Ok(false);
            }
        }
    }
    Ok(true)
}

/// Where a file handed in for `step` is built, one after the other: a module of the step's
/// crate's binary, or its library's stage (see [`only_stages_use`]).
fn student_file(class: &Path, step: &testkit::Step) -> PathBuf {
    let (krate, file) = (class.join("build").join(&step.bin), format!("{}.rs", step.stage()));
    let module = krate.join("student");
    if module.is_dir() {
        module.join(file)
    } else {
        krate.join("src/stages").join(file)
    }
}

/// The package of the class's workspace that builds step `bin`, and its binary's name
/// (`grade-BIN`): no student's name, so none is in another's compiler messages.
fn step_package(bin: &str) -> String {
    format!("rdma-dissect-grade-{bin}")
}

/// The SHA-256 of the file of step `bin` to build, from a students/NAME/handin.tsv's
/// key-values: none when there is none, or the grader refused it (see [`vet`]).
fn file_sha(handin: &[(String, String)], bin: &str) -> Option<String> {
    if vet::refused(handin, bin).is_some() {
        return None;
    }
    handin
        .iter()
        .find_map(|(k, v)| (k == "file").then(|| v.strip_prefix(&format!("{bin}\t"))).flatten())
        .map(String::from)
}

fn done(class: &Path, name: &str) -> bool {
    class.join("results").join(format!("{name}.tsv")).is_file()
}

/// The key-value lines of a students/NAME/handin.tsv or origin/NAME file.
fn key_values(path: &Path) -> Vec<(String, String)> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines().filter_map(|l| l.split_once('\t')).map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// `grade prepare CLASS STEPS`: takes every hand-in not graded yet, writes what was taken
/// (students/NAME/handin.tsv: with each file, why it is refused, or its tokens' key and
/// whether it is the reference's, see [`vet`]), each different file not refused (handed/),
/// and the workspace of a crate per step that builds them, each crate with the reference's
/// stage until `grade prebuild` has built it. STEPS is `all` or step numbers separated by commas. Prints how many
/// different files there are to build.
fn prepare_cmd(class: &Path, steps: &str) -> Result<(), String> {
    let project = exercise::root()?;
    let all = testkit::load_steps()?;
    let chosen: Vec<&testkit::Step> = if steps == "all" {
        all.iter().collect()
    } else {
        let mut chosen = Vec::new();
        for nn in steps.split(',') {
            let nn = if nn.len() == 1 { format!("0{nn}") } else { nn.to_string() };
            chosen.push(all.iter().find(|s| s.nn() == nn).ok_or_else(|| format!("no step `{nn}` to grade"))?);
        }
        chosen
    };
    let known = vet::known(&project, &chosen)?;
    let list: String = chosen.iter().map(|s| format!("{}\n", s.bin)).collect();
    std::fs::write(class.join("steps.txt"), list).map_err(io(class))?;
    let (mut keys, mut crates, mut pending) = (Vec::new(), Vec::new(), 0);
    let handed = class.join("handed");
    std::fs::create_dir_all(&handed).map_err(io(&handed))?;
    let names = students(class)?;
    for name in &names {
        if done(class, name) {
            continue;
        }
        pending += 1;
        let handin = class.join("incoming").join(name);
        let dir = class.join("students").join(name);
        std::fs::create_dir_all(&dir).map_err(io(&dir))?;
        let mut record = String::new();
        let origin = key_values(&class.join("origin").join(name));
        for (key, value) in &origin {
            let _ = writeln!(record, "{key}\t{value}");
        }
        // A hand-in `grade intake` refused is that student's failure, with the reason.
        if let Some((_, why)) = origin.iter().find(|(k, _)| k == "refused") {
            let _ = writeln!(record, "handin_error\t{why}");
            std::fs::write(dir.join("handin.tsv"), record).map_err(io(&dir))?;
            continue;
        }
        match std::fs::read_to_string(handin.join("manifest.txt"))
            .map_err(|e| e.to_string())
            .and_then(|t| handin::Manifest::parse(&t))
        {
            Ok(m) => {
                for (key, value) in
                    [("account", m.account), ("host", m.host), ("time", m.time), ("started_from", m.commit)]
                {
                    let _ = writeln!(record, "claimed_{key}\t{value}");
                }
            }
            Err(e) => {
                let _ = writeln!(record, "manifest_error\tmanifest.txt: {e}");
            }
        }
        match handin::exercise_files(&handin.join("exercises")) {
            Ok(files) => {
                for f in files.iter() {
                    let _ = writeln!(record, "file\t{}\t{}", f.bin, f.sha256);
                    if !chosen.iter().any(|s| s.bin == f.bin) {
                        continue;
                    }
                    let bytes = std::fs::read(&f.path).map_err(io(&f.path))?;
                    if !vet::take(&known, &f.bin, &bytes, &mut record) {
                        continue;
                    }
                    let key = file_key(&f.sha256, &f.bin);
                    if keys.contains(&key) {
                        continue;
                    }
                    let copy = handed.join(format!("{key}.rs"));
                    std::fs::copy(&f.path, &copy).map_err(io(&f.path))?;
                    keys.push(key);
                    if !crates.contains(&f.bin) {
                        crates.push(f.bin.clone());
                    }
                }
            }
            Err(e) => {
                let _ = writeln!(record, "handin_error\t{e}");
            }
        }
        std::fs::write(dir.join("handin.tsv"), record).map_err(io(&dir))?;
    }
    for step in chosen.iter().filter(|s| crates.contains(&s.bin)) {
        let stage_file = format!("src/stages/{}.rs", step.stage());
        let krate = class.join("build").join(&step.bin);
        let (hollow, student) = if only_stages_use(&project, step.stage())? {
            (Some(exercise::exercise_text(step.nn())?), krate.join("student").join(format!("{}.rs", step.stage())))
        } else {
            (None, krate.join(&stage_file))
        };
        class_crate(&project, &krate, "grade-", &step.bin, &stage_file, hollow.as_deref(), &student)?;
    }
    class_workspace(&project, &class.join("build"), &crates)?;
    println!("{} students, {pending} to grade, {} different files to build", names.len(), keys.len());
    Ok(())
}

/// The compiler's messages about `student`, a file built as step `bin` in `build` (CLASS/
/// build, where cargo runs: it names a module of the library by its path from there, one
/// of a binary by the absolute path), with the student's own file named as they know it.
fn build_errors(log: &str, build: &Path, student: &Path, bin: &str) -> String {
    let mine = format!("exercises/{bin}.rs");
    let mut out = log.replace(&student.display().to_string(), &mine);
    if let Ok(relative) = student.strip_prefix(build) {
        out = out.replace(&relative.display().to_string(), &mine);
    }
    let out = out.replace(&format!("{bin}/"), "");
    if out.trim().is_empty() {
        "(the compiler said nothing about this file: see the class's build.log)".into()
    } else {
        out.trim_end().to_string()
    }
}

/// The different files of the students not graded yet, each once, with its step: what
/// `grade build` builds and `grade vm` runs.
fn pending_files(class: &Path) -> Result<Vec<(String, testkit::Step)>, String> {
    let steps = graded_steps(class)?;
    let mut files: Vec<(String, testkit::Step)> = Vec::new();
    for name in students(class)?.into_iter().filter(|n| !done(class, n)) {
        let handin = key_values(&class.join("students").join(name).join("handin.tsv"));
        for step in &steps {
            if let Some(sha) = file_sha(&handin, &step.bin) {
                let key = file_key(&sha, &step.bin);
                if !files.iter().any(|(k, _)| *k == key) {
                    files.push((key, step.clone()));
                }
            }
        }
    }
    Ok(files)
}

/// The grader's version: the crate's, and the project's commit it was built from.
fn grader_version(project: &Path) -> String {
    let git = |args: &[&str]| Command::new("git").arg("-C").arg(project).args(args).output().ok();
    let commit = git(&["rev-parse", "--short=12", "HEAD"])
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    let dirty = git(&["diff", "--quiet", "HEAD"]).is_some_and(|o| !o.status.success());
    match commit {
        Some(c) => format!("xtask {} at {c}{}", env!("CARGO_PKG_VERSION"), if dirty { "-dirty" } else { "" }),
        None => format!("xtask {} (not a git checkout)", env!("CARGO_PKG_VERSION")),
    }
}

/// `grade SUB …`.
pub fn main(command: &GradeCommand) -> ExitCode {
    // Absolute: cargo runs in CLASS/build, and relative paths would move with it.
    let abs = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf());
    let done = |r: Result<(), String>| r.map(|()| ExitCode::SUCCESS);
    let result = match command {
        GradeCommand::Manifest { exercises, account, host, time, commit } => {
            done(handin::manifest_cmd(exercises, account, host, time, commit))
        }
        GradeCommand::Intake { class, roster, moodle_worksheet, submissions } => {
            done(intake::intake_cmd(&abs(class), roster.as_deref(), moodle_worksheet.as_deref(), submissions))
        }
        GradeCommand::Prepare { class, steps } => done(prepare_cmd(&abs(class), steps)),
        GradeCommand::Prebuild { class } => done(build::prebuild_cmd(&abs(class))),
        GradeCommand::Build { class, build_seconds } => {
            let limits = sandbox::Limits { seconds: build_seconds.unwrap_or(sandbox::BUILD.seconds), ..sandbox::BUILD };
            done(build::build_cmd(&abs(class), &limits))
        }
        GradeCommand::Vm { class, build_seconds } => {
            let seconds = build_seconds.unwrap_or(sandbox::VM_BUILD.seconds);
            vm::vm_cmd(&abs(class), &sandbox::Limits { seconds, ..sandbox::VM_BUILD })
        }
        GradeCommand::Bounded { uid, seconds, program, args } => {
            sandbox::bounded_cmd(*uid, *seconds, program, args).map(|code| ExitCode::from(code.clamp(0, 255) as u8))
        }
        GradeCommand::Report { class } => {
            exercise::root().and_then(|project| done(reports::report_cmd(&abs(class), &grader_version(&project))))
        }
        GradeCommand::Synth { out, n, every_step } => done(synth::synth_cmd(&abs(out), *n, *every_step)),
        GradeCommand::Verify { class, intended } => done(synth::verify_cmd(&abs(class), &abs(intended))),
        GradeCommand::GradescopeStudent { metadata, results } => {
            done(gradescope::student_cmd(&abs(metadata), results.as_deref()))
        }
    };
    result.unwrap_or_else(|e| {
        eprintln!("grade: {e}");
        ExitCode::from(2)
    })
}

//! `cargo xtask grade …`: a class's hand-ins graded against the reference, in one lab VM
//! boot, with reports a gradebook takes. `lab/grade` drives it; `lab/submit` makes the
//! hand-ins (see `handin`).
//!
//! ```text
//! grade manifest EXERCISES ACCOUNT HOST TIME COMMIT   a hand-in's manifest (lab/submit)
//! grade prepare CLASS STEPS                           (host) the hand-ins not graded yet,
//!                                                     as crates of one workspace
//! grade prebuild CLASS                                (host) the dependencies they share,
//!                                                     from the reference's crate
//! grade vm CLASS                                      (root, in the lab VM) build them and
//!                                                     grade them, student by student
//! grade bounded UID MAX SECONDS PROGRAM ARGS…         (root, in the VM) one bounded run
//! grade report CLASS                                  JUnit per student, moodle.csv,
//!                                                     Gradescope's results.json
//! grade synth OUT N                                   a synthetic class of N hand-ins and
//!                                                     their intended verdicts (synth.rs)
//! grade verify CLASS INTENDED                         its verdicts, as intended?
//! ```
//!
//! CLASS is a directory: `incoming/NAME/` the hand-ins as handed in (lab/grade unpacks
//! them; `origin/NAME` says from where), `students/NAME/handin.tsv` what the grader took
//! (files and their SHA-256), `build/` and `target/` the students' crates (one per
//! different file, named by its SHA-256) and their builds, `results/NAME.tsv` the
//! verdicts (a student is graded once: what is there is kept, so an interrupted grading
//! resumes), `reports/`.
//!
//! A student's verdicts come only from what the grader ran here; nothing a student hands
//! in besides the exercise files is read (their own `lab/check --junit` is a self-check).

mod handin;
mod reports;
mod sandbox;
mod synth;

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::Instant;

use crate::exercise::{self, append_result, class_crate, class_workspace, ReferenceRuns, DEADLINE};

/// A student's name in CLASS (a directory, a cargo package and binary name part); it
/// starts with a letter or digit, so it is never [`REFERENCE`].
fn valid_name(name: &str) -> bool {
    name.len() <= 64
        && name.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// The crate of the class's workspace that lab/grade builds on the host, before the VM:
/// the reference's, so the dependencies the students' crates share are built once, from
/// trusted code. It is out of the workspace, and its sources gone, before the students'
/// build.
const REFERENCE: &str = "_reference";

fn io(path: &Path) -> impl Fn(std::io::Error) -> String + '_ {
    move |e| format!("{}: {e}", path.display())
}

/// The students in CLASS/incoming, by name.
fn students(class: &Path) -> Result<Vec<String>, String> {
    let incoming = class.join("incoming");
    let mut names = Vec::new();
    for entry in std::fs::read_dir(&incoming).map_err(io(&incoming))? {
        let name = entry.map_err(io(&incoming))?.file_name().to_string_lossy().into_owned();
        if !valid_name(&name) {
            return Err(format!("{}: a student's name is letters, digits, - and _", incoming.join(&name).display()));
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

/// The crate a hand-in's file is built in, named after the file's SHA-256: hand-ins of the
/// same file share one crate and one build (a class's untouched templates, a copied
/// answer), and no student's name is in another's compiler messages.
fn crate_dir(sha256: &str) -> String {
    format!("sha256-{}", &sha256[..16.min(sha256.len())])
}

/// The workspace member (`DIR/BIN`) that builds the file of SHA-256 `sha256` as step `bin`.
fn member(sha256: &str, bin: &str) -> String {
    format!("{}/{bin}", crate_dir(sha256))
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
/// (students/NAME/handin.tsv) and its crates, and the workspace that builds them all.
/// STEPS is `all` or step numbers separated by commas. Prints how many crates there are to
/// build.
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
    let list: String = chosen.iter().map(|s| format!("{}\n", s.bin)).collect();
    std::fs::write(class.join("steps.txt"), list).map_err(io(class))?;
    let (mut members, mut pending) = (Vec::new(), 0);
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
        for (key, value) in key_values(&class.join("origin").join(name)) {
            let _ = writeln!(record, "{key}\t{value}");
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
                    let Some(step) = chosen.iter().find(|s| s.bin == f.bin) else { continue };
                    let member = member(&f.sha256, &f.bin);
                    if members.contains(&member) {
                        continue;
                    }
                    let stage_file = format!("src/stages/{}.rs", step.stage());
                    class_crate(
                        &project,
                        &class.join("build").join(&member),
                        &format!("{}-", crate_dir(&f.sha256)),
                        &f.bin,
                        &stage_file,
                        &f.path,
                    )?;
                    members.push(member);
                }
            }
            Err(e) => {
                let _ = writeln!(record, "handin_error\t{e}");
            }
        }
        std::fs::write(dir.join("handin.tsv"), record).map_err(io(&dir))?;
    }
    if let Some(step) = chosen.first().filter(|_| !members.is_empty()) {
        let stage_file = format!("src/stages/{}.rs", step.stage());
        let member = format!("{REFERENCE}/{}", step.bin);
        class_crate(
            &project,
            &class.join("build").join(&member),
            "reference-",
            &step.bin,
            &stage_file,
            &project.join(&stage_file),
        )?;
        members.push(member);
    }
    class_workspace(&project, &class.join("build"), &members)?;
    println!("{} students, {pending} to grade, {} crates to build", names.len(), members.len().saturating_sub(1));
    Ok(())
}

/// The compiler's messages about one crate (`NAME/BIN/…` paths), with the student's own
/// file named as they know it.
fn build_errors(log: &str, member: &str, stage_file: &str, bin: &str) -> String {
    let mut out = String::new();
    for block in log.split("\n\n") {
        if block.contains(&format!("{member}/")) {
            out += &block
                .replace(&format!("{member}/{stage_file}"), &format!("exercises/{bin}.rs"))
                .replace(&format!("{member}/"), "");
            out += "\n\n";
        }
    }
    if out.is_empty() {
        "(the compiler said nothing about this crate: see the class's build/build.log)".into()
    } else {
        out.trim_end().to_string()
    }
}

/// Sets up `cargo` to build the class: the toolchain's own cargo and rustc (no rustup
/// proxy), the cargo home's registry, CLASS/target, nothing else from the environment. The host's build of the reference's crate and the VM's of
/// the students' run the same way, so the dependencies built on the host are the ones the
/// students' crates use.
fn class_env(cargo: &mut Command, class: &Path, tools: &sandbox::Toolchain) -> Result<(), String> {
    let home = class.join("home");
    for dir in [&class.join("target"), &home] {
        std::fs::create_dir_all(dir).map_err(io(dir))?;
    }
    cargo
        .env_clear()
        .env("PATH", format!("{}:/usr/local/bin:/usr/bin:/bin", tools.bin.display()))
        .env("HOME", &home)
        .env("CARGO_HOME", &tools.cargo_home)
        .env("CARGO_TARGET_DIR", class.join("target"))
        .env("CARGO_TERM_COLOR", "never")
        .current_dir(class.join("build"));
    Ok(())
}

/// `grade prebuild CLASS` (host): builds the reference's crate of the class's workspace,
/// and with it every dependency the students' crates share, from trusted code, natively.
fn prebuild_cmd(class: &Path) -> Result<(), String> {
    let tools = sandbox::Toolchain::find()?;
    let reference = class.join("build").join(REFERENCE);
    let bin = std::fs::read_dir(&reference)
        .map_err(io(&reference))?
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .next()
        .ok_or_else(|| format!("{}: no crate to build", reference.display()))?;
    let mut cargo = Command::new(tools.bin.join("cargo"));
    class_env(&mut cargo, class, &tools)?;
    let status = cargo
        .args(["build", "--offline", "--bins", "--quiet", "--package", &format!("rdma-dissect-reference-{bin}")])
        .status()
        .map_err(|e| format!("cargo: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("the reference's crate did not build ({status}): see the messages above"))
    }
}

/// Builds every crate of CLASS/build as [`sandbox::BUILD_UID`]: one cargo run, keeping on
/// past a crate that does not compile. The log is CLASS/build/build.log.
fn build_class(class: &Path) -> Result<String, String> {
    let (build, target) = (class.join("build"), class.join("target"));
    let home = class.join("home");
    let tools = sandbox::Toolchain::find()?;
    for dir in [&target, &home] {
        std::fs::create_dir_all(dir).map_err(io(dir))?;
    }
    // The reference's crate made the dependencies on the host: out it goes (see REFERENCE).
    let members: Vec<String> = std::fs::read_dir(&build)
        .map_err(io(&build))?
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .filter(|n| valid_name(n))
        .flat_map(|n| {
            let dir = build.join(&n);
            std::fs::read_dir(dir)
                .into_iter()
                .flatten()
                .filter_map(move |e| e.ok().map(|e| format!("{n}/{}", e.file_name().to_string_lossy())))
        })
        .collect();
    let project = exercise::root()?;
    class_workspace(&project, &build, &members)?;
    let reference = build.join(REFERENCE);
    if reference.exists() {
        std::fs::remove_dir_all(&reference).map_err(io(&reference))?;
    }
    for path in [&tools.bin, &tools.cargo_home.join("registry/src"), class] {
        sandbox::let_through(path)?;
    }
    sandbox::open_cargo_home(&tools.cargo_home)?;
    for dir in [&build, &target, &home] {
        sandbox::set_writable(dir, true)?;
    }
    let mut cargo = sandbox::as_student(sandbox::BUILD_UID, &tools.bin.join("cargo"));
    class_env(&mut cargo, class, &tools)?;
    let out = cargo
        .args(["build", "--offline", "--keep-going", "--bins", "--quiet"])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cargo: {e}"));
    // The process bound is the students' programs'; the build's rustc threads count too.
    for dir in [&build, &target, &home] {
        sandbox::set_writable(dir, false)?;
    }
    let out = out?;
    let log = String::from_utf8_lossy(&out.stderr).into_owned();
    std::fs::write(build.join("build.log"), &log).map_err(io(&build))?;
    Ok(log)
}

/// The exit status of `grade vm` when the reference itself failed: the device or the lab
/// is broken, and lab/grade boots again rather than fail a student.
const INFRASTRUCTURE: u8 = 3;

/// `grade vm CLASS` (root, in the lab VM): builds the pending students' crates, then
/// grades them one after the other, each as an account of its own.
fn vm_cmd(class: &Path) -> Result<ExitCode, String> {
    testkit::require_device();
    let project = exercise::root()?;
    let reference_dir =
        std::env::current_exe().map_err(|e| e.to_string())?.parent().expect("in a directory").to_path_buf();
    let steps = graded_steps(class)?;
    let pending: Vec<String> = students(class)?.into_iter().filter(|n| !done(class, n)).collect();
    if pending.is_empty() {
        return Ok(ExitCode::SUCCESS);
    }
    sandbox::hide_sources(&project)?;
    let start = Instant::now();
    eprintln!("grade: building {} students' crates in the VM ...", pending.len());
    let log = build_class(class)?;
    eprintln!("grade: built in {:.0} s", start.elapsed().as_secs_f64());
    let wrappers = class.join("sandbox");
    std::fs::create_dir_all(&wrappers).map_err(io(&wrappers))?;
    let results = class.join("results");
    std::fs::create_dir_all(&results).map_err(io(&results))?;
    let mut references: Vec<ReferenceRuns> = Vec::new();
    // The verdict of each crate run, by member, and whose it was: a file handed in by
    // several students is one program (one crate, built once), run once. Runs dominate
    // a class whose files repeat (see the instructor's guide, "What a class costs").
    let mut graded: HashMap<String, (Result<String, String>, String)> = HashMap::new();
    for (i, name) in pending.iter().enumerate() {
        let uid = sandbox::FIRST_RUN_UID + i as u32;
        let handin = key_values(&class.join("students").join(name).join("handin.tsv"));
        let handin_error = handin.iter().find(|(k, _)| k == "handin_error").map(|(_, v)| v.clone());
        let partial = results.join(format!("{name}.tsv.partial"));
        let _ = std::fs::remove_file(&partial);
        for step in &steps {
            let t = Instant::now();
            let sha = handin
                .iter()
                .find_map(|(k, v)| (k == "file").then(|| v.strip_prefix(&format!("{}\t", step.bin))).flatten());
            let member = member(sha.unwrap_or_default(), &step.bin);
            let exe = class.join("target/debug").join(format!("{}-{}", crate_dir(sha.unwrap_or_default()), step.bin));
            let mut same_as = None;
            let verdict = if let Some(e) = &handin_error {
                Err(format!("the hand-in could not be taken: {e}"))
            } else if sha.is_none() {
                Err(format!("not handed in: there is no exercises/{}.rs", step.bin))
            } else if !exe.is_file() {
                let stage_file = format!("src/stages/{}.rs", step.stage());
                Err(format!(
                    "exercises/{}.rs does not compile:\n{}",
                    step.bin,
                    build_errors(&log, &member, &stage_file, &step.bin)
                ))
            } else if let Some((verdict, first)) = graded.get(&member) {
                same_as = Some(first.clone());
                verdict.clone()
            } else {
                let at = match references.iter().position(|r| r.nn() == step.nn()) {
                    Some(at) => at,
                    None => {
                        let reference = reference_dir.join(&step.bin);
                        references.push(ReferenceRuns::new(step.nn(), &reference.to_string_lossy())?);
                        references.len() - 1
                    }
                };
                let wrapper = wrappers.join(format!("{name}-{}", step.bin));
                sandbox::wrapper(&wrapper, uid, DEADLINE.as_secs() - 5, &exe)?;
                let verdict = exercise::grade(
                    &mut references[at],
                    &wrapper.to_string_lossy(),
                    &format!("exercises/{}.rs", step.bin),
                );
                sandbox::kill_all(uid);
                if let Err(report) = &verdict {
                    if report.starts_with("the REFERENCE failed") {
                        eprintln!("grade: {report}");
                        return Ok(ExitCode::from(INFRASTRUCTURE));
                    }
                }
                graded.insert(member.clone(), (verdict.clone(), name.clone()));
                verdict
            };
            let seconds = t.elapsed().as_secs_f64();
            let word = if verdict.is_ok() { "pass" } else { "FAIL" };
            let same = same_as.map_or(String::new(), |first| format!(", the same file as {first}'s: not run again"));
            eprintln!("grade: [{}/{}] {name} {} {word} ({seconds:.1} s{same})", i + 1, pending.len(), step.nn());
            append_result(&partial, step.nn(), &verdict, seconds).map_err(io(&partial))?;
        }
        let final_path = results.join(format!("{name}.tsv"));
        if steps.is_empty() {
            std::fs::write(&partial, "").map_err(io(&partial))?;
        }
        std::fs::rename(&partial, &final_path).map_err(io(&final_path))?;
    }
    eprintln!("grade: {} students graded in {:.0} s", pending.len(), start.elapsed().as_secs_f64());
    Ok(ExitCode::SUCCESS)
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

/// `grade ARGS…`.
pub fn main(args: &[String]) -> ExitCode {
    // Absolute: cargo runs in CLASS/build, and relative paths would move with it.
    let class = |i: usize| std::path::absolute(&args[i]).unwrap_or_else(|_| PathBuf::from(&args[i]));
    let result = match args.first().map(String::as_str) {
        Some("manifest") => handin::manifest_cmd(&args[1..]).map(|()| ExitCode::SUCCESS),
        Some("prepare") if args.len() == 3 => prepare_cmd(&class(1), &args[2]).map(|()| ExitCode::SUCCESS),
        Some("prebuild") if args.len() == 2 => prebuild_cmd(&class(1)).map(|()| ExitCode::SUCCESS),
        Some("vm") if args.len() == 2 => vm_cmd(&class(1)),
        Some("bounded") => sandbox::bounded_cmd(&args[1..]).map(|code| ExitCode::from(code.clamp(0, 255) as u8)),
        Some("report") if args.len() == 2 => exercise::root()
            .and_then(|project| reports::report_cmd(&class(1), &grader_version(&project)).map(|()| ExitCode::SUCCESS)),
        Some("synth") if args.len() == 3 => match args[2].parse() {
            Ok(n) => synth::synth_cmd(&class(1), n).map(|()| ExitCode::SUCCESS),
            Err(_) => Err(format!("not a number of students: {}", args[2])),
        },
        Some("verify") if args.len() == 3 => synth::verify_cmd(&class(1), &class(2)).map(|()| ExitCode::SUCCESS),
        _ => Err("usage: grade manifest EXERCISES ACCOUNT HOST TIME COMMIT | grade prepare CLASS STEPS | \
                  grade prebuild CLASS | grade vm CLASS | grade bounded UID MAX_OUTPUT SECONDS PROGRAM [ARGS...] | grade report CLASS | \
                  grade synth OUT N | grade verify CLASS INTENDED"
            .into()),
    };
    result.unwrap_or_else(|e| {
        eprintln!("grade: {e}");
        ExitCode::from(2)
    })
}

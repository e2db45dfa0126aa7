//! Building the class's files: the step crates from trusted code on the host (`grade
//! prebuild`), then each student's file in the VM, sealed and bounded (see `sandbox`).

use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use super::sandbox::{self, Ended, Limits, View};
use super::{graded_steps, io, student_file};
use crate::exercise;

/// What cargo is told, beside its arguments: the toolchain's own cargo and rustc (no rustup
/// proxy), the cargo home's registry, CLASS/target, nothing else. The host's build of the
/// reference and the VM's of the students' see the same paths and variables, so the
/// dependencies built on the host are the ones the students' builds use.
fn cargo_env(tools: &sandbox::Toolchain, class: &Path, home: &Path) -> Vec<(&'static str, OsString)> {
    vec![
        ("PATH", format!("{}:/usr/bin:/bin", tools.bin.display()).into()),
        ("HOME", home.into()),
        ("CARGO_HOME", tools.cargo_home.clone().into()),
        ("CARGO_TARGET_DIR", class.join("target").into()),
        ("CARGO_TERM_COLOR", "never".into()),
    ]
}

/// `cargo build` of step `bin`'s program in the class's workspace, offline.
fn cargo_build(bin: &str) -> Vec<OsString> {
    ["build", "--offline", "--bins", "--quiet", "--package", &super::step_package(bin)].map(OsString::from).to_vec()
}

/// `grade prebuild CLASS` (host): builds each step's crate of the class's workspace,
/// natively, from trusted code: the dependencies and the library the students' builds
/// share, and, with the reference's stage as the student's file, the binary whose
/// incremental state their builds start from (and the proof that the reference builds that
/// way). Then that copy of the reference's stage goes: none is left for the students' code
/// in the VM.
pub(super) fn prebuild_cmd(class: &Path) -> Result<(), String> {
    let tools = sandbox::Toolchain::find()?;
    let home = class.join("home");
    for dir in [&class.join("target"), &home] {
        std::fs::create_dir_all(dir).map_err(io(dir))?;
    }
    for step in graded_steps(class)? {
        let krate = class.join("build").join(&step.bin);
        if !krate.is_dir() {
            continue;
        }
        let (project, student) = (exercise::root()?, student_file(class, &step));
        let reference = project.join(format!("src/stages/{}.rs", step.stage()));
        std::fs::copy(&reference, &student).map_err(io(&reference))?;
        let status = Command::new(tools.bin.join("cargo"))
            .env_clear()
            .envs(cargo_env(&tools, class, &home))
            .args(cargo_build(&step.bin))
            .current_dir(class.join("build"))
            .status()
            .map_err(|e| format!("cargo: {e}"));
        std::fs::remove_file(&student).map_err(io(&student))?;
        let status = status?;
        if !status.success() {
            return Err(format!(
                "{} did not build as a student's file of {} ({status}): see the messages above",
                reference.display(),
                step.bin
            ));
        }
    }
    Ok(())
}

/// What the builder says of a file built: its key, and the compiler's messages (or the
/// bound it hit) when it did not compile.
pub(super) type Built = (String, Option<String>);

/// The view a student's build sees: the system, the toolchain and the registry read-only,
/// a cargo home of its own, the class's step crates and their build directory (where it
/// writes, as [`sandbox::BUILD_UID`]), no network. Not the project, not the reference's
/// programs, not the hand-ins. The class's other step crates are there (cargo loads the
/// whole workspace), and with them the stages they keep whole; a file cannot read them,
/// as [`super::vet`] refuses every way to read a file at compile time.
fn build_view(tools: &sandbox::Toolchain, class: &Path, cargo_home: &Path) -> View {
    let mut view = View::system()
        .ro(&tools.sysroot)
        .rw_at(cargo_home, &tools.cargo_home)
        .ro(&tools.cargo_home.join("registry"))
        .rw(&class.join("build"))
        .rw(&class.join("target"))
        .no_network()
        .chdir(&class.join("build"));
    for (key, value) in cargo_env(tools, class, Path::new("/tmp")) {
        view.env(key, value);
    }
    view
}

/// Builds each file of `files` (its key in CLASS/handed and its step) as
/// [`sandbox::BUILD_UID`] in [`build_view`], one after the other in its step's crate, the
/// file its binary's stage module (each build compiles the binary again, not the library)
/// or its library's stage: incremental compilation reuses what the file does not touch.
/// Each build is bounded by `limits` (its time, its memory, its messages): a build that
/// hits one is that file's failure, and the next goes on. A program built goes to
/// CLASS/bins/KEY, and `built` hears of each file as it is done, while the students built
/// before are run; it stops early when `stop` is set. Every message is appended to
/// CLASS/build.log.
pub(super) fn build_files(
    class: &Path,
    files: &[(String, &testkit::Step)],
    limits: &Limits,
    built: std::sync::mpsc::Sender<Built>,
    stop: &AtomicBool,
) -> Result<(), String> {
    let (build, target, bins) = (class.join("build"), class.join("target"), class.join("bins"));
    let tools = sandbox::Toolchain::find()?;
    if bins.exists() {
        std::fs::remove_dir_all(&bins).map_err(io(&bins))?;
    }
    for dir in [&target, &bins] {
        std::fs::create_dir_all(dir).map_err(io(dir))?;
    }
    // The build's account owns what it writes, in the VM's memory (the host's builds, the
    // dependencies and the reference's, are where it starts; what it makes need not
    // outlive the VM: the programs are copied to CLASS/bins): the students' programs, run
    // meanwhile as accounts of their own and in views without these, cannot reach them.
    for dir in [&build, &target] {
        sandbox::in_memory(dir)?;
        sandbox::give(dir, sandbox::BUILD_UID)?;
    }
    // Each build's cargo home is new: cargo writes its locks and caches there, and nothing
    // one build left is read by the next.
    let cargo_home = PathBuf::from("/run/grade/cargo-home");
    let log_path = class.join("build.log");
    let mut log = String::new();
    for (i, (key, step)) in files.iter().enumerate() {
        if stop.load(Ordering::SeqCst) {
            break;
        }
        let t = Instant::now();
        let handed = class.join("handed").join(format!("{key}.rs"));
        std::fs::copy(&handed, student_file(class, step)).map_err(io(&handed))?;
        if cargo_home.exists() {
            std::fs::remove_dir_all(&cargo_home).map_err(io(&cargo_home))?;
        }
        std::fs::create_dir_all(&cargo_home).map_err(io(&cargo_home))?;
        sandbox::give(&cargo_home, sandbox::BUILD_UID)?;
        // At the lowest priority: the students' runs, side by side, come first.
        let mut args: Vec<OsString> = vec!["-n".into(), "19".into(), tools.bin.join("cargo").into()];
        args.extend(cargo_build(&step.bin));
        let argv = build_view(&tools, class, &cargo_home).command(sandbox::BUILD_UID, Path::new("nice"), &args);
        let mut messages = Vec::new();
        let ended = sandbox::bounded(&argv, &format!("build-{key}"), limits, std::io::sink(), &mut messages)?;
        sandbox::kill_all(sandbox::BUILD_UID);
        let messages = String::from_utf8_lossy(&messages).into_owned();
        let _ = writeln!(log, "== {key}\n{messages}");
        std::fs::write(&log_path, &log).map_err(io(&log_path))?;
        let errors = match ended.bound(limits) {
            Some(why) => Some(format!("the build was stopped: {why}\n{messages}")),
            None if ended == Ended::Status(0) => {
                let program = target.join("debug").join(format!("grade-{}", step.bin));
                std::fs::copy(&program, bins.join(key)).map_err(io(&program))?;
                None
            }
            None => Some(messages),
        };
        let verdict = match &errors {
            None => "",
            Some(e) if e.starts_with("the build was stopped") => ", stopped by its bound",
            Some(_) => ", does not compile",
        };
        eprintln!("grade: [{}/{}] built {key} ({:.1} s{verdict})", i + 1, files.len(), t.elapsed().as_secs_f64());
        if built.send((key.clone(), errors)).is_err() {
            break;
        }
    }
    Ok(())
}

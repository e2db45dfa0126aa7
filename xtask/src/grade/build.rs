//! Building the class's files, on the host: the step crates from trusted code (`grade
//! prebuild`), then each student's file, sealed and bounded (`grade build`, see
//! `sandbox`): natively, since under the VM's emulation a build takes tens of times as
//! long (the instructor's guide, "What a class costs").

use std::ffi::OsString;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use super::sandbox::{self, Ended, Fence, Limits, View, Who};
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

/// `cargo build` of steps `bins`' programs in the class's workspace, offline.
fn cargo_build<'a>(bins: impl IntoIterator<Item = &'a str>) -> Vec<OsString> {
    let mut args: Vec<OsString> = ["build", "--offline", "--bins", "--quiet"].map(OsString::from).into();
    for bin in bins {
        args.extend(["--package".into(), super::step_package(bin).into()]);
    }
    args
}

/// `grade prebuild CLASS` (host): builds each step's crate of the class's workspace,
/// natively, from trusted code, in one cargo run (its jobs in parallel): the dependencies
/// and the library the students' builds share, and, with the reference's stage as the
/// student's file, the binary whose incremental state their builds start from (and the
/// proof that the reference builds that way). Then those copies of the reference's stages
/// go: none is left for the students' builds to find.
pub(super) fn prebuild_cmd(class: &Path) -> Result<(), String> {
    let tools = sandbox::Toolchain::find()?;
    let home = class.join("home");
    for dir in [&class.join("target"), &home] {
        std::fs::create_dir_all(dir).map_err(io(dir))?;
    }
    let project = exercise::root()?;
    let (mut placed, mut bins) = (Vec::new(), Vec::new());
    for step in graded_steps(class)? {
        if !class.join("build").join(&step.bin).is_dir() {
            continue;
        }
        let (reference, student) =
            (project.join(format!("src/stages/{}.rs", step.stage())), student_file(class, &step));
        let copied = std::fs::copy(&reference, &student).map_err(io(&reference));
        placed.push(student);
        copied?;
        bins.push(step.bin);
    }
    let status = match placed.is_empty() {
        true => None,
        false => Some(
            Command::new(tools.bin.join("cargo"))
                .env_clear()
                .envs(cargo_env(&tools, class, &home))
                .args(cargo_build(bins.iter().map(String::as_str)))
                .current_dir(class.join("build"))
                .status()
                .map_err(|e| format!("cargo: {e}")),
        ),
    };
    for student in &placed {
        std::fs::remove_file(student).map_err(io(student))?;
    }
    match status.transpose()? {
        Some(status) if !status.success() => {
            Err(format!("the reference's stages did not build as students' files ({status}): see the messages above"))
        }
        _ => Ok(()),
    }
}

/// The view a student's build sees: the system, the toolchain and the registry read-only,
/// a cargo home of its own, the class's step crates and their build directory (where it
/// writes), no network. Not the project, not the reference's programs, not the hand-ins.
/// The class's other step crates are there (cargo loads the whole workspace), and with
/// them the stages they keep whole; a file cannot read them, as `vet` refuses every way
/// to read a file at compile time.
/// `lent`: where bubblewrap finds the toolchain and the registry (see [`lend_tools`]); they
/// are bound at their own paths.
fn build_view(tools: &sandbox::Toolchain, lent: &[PathBuf; 2], class: &Path, cargo_home: &Path) -> View {
    let [sysroot, registry] = lent;
    let mut view = View::system()
        .ro_at(sysroot, &tools.sysroot)
        .rw_at(cargo_home, &tools.cargo_home)
        .ro_at(registry, &tools.cargo_home.join("registry"))
        .rw(&class.join("build"))
        .rw(&class.join("target"))
        .no_network()
        .chdir(&class.join("build"));
    for (key, value) in cargo_env(tools, class, Path::new("/tmp")) {
        view.env(key, value);
    }
    view
}

/// Where the build's account finds the toolchain and the registry, for [`build_view`] to
/// bind at their own paths. On the host, where they are: the instructor's own account
/// builds. In the VM, mounted again under /run/grade: there they are the host's, under
/// root's home (rustup's default), which the build's account may not enter.
fn lend_tools(tools: &sandbox::Toolchain, place: Place) -> Result<[PathBuf; 2], String> {
    let own = [tools.sysroot.clone(), tools.cargo_home.join("registry")];
    if place == Place::Host {
        return Ok(own);
    }
    let lent = [PathBuf::from("/run/grade/toolchain"), PathBuf::from("/run/grade/registry")];
    for (dir, at) in own.iter().zip(&lent) {
        sandbox::lend(dir, at)?;
    }
    Ok(lent)
}

/// Where the build of file `key` left what it said (CLASS/built/KEY.log); its program, when
/// it built, is CLASS/bins/KEY.
fn log_of(class: &Path, key: &str) -> PathBuf {
    class.join("built").join(format!("{key}.log"))
}

/// CLASS/host-builds: whether this host builds the students' files while the lab VM runs
/// those already built (lab/grade starts both at once). `grade build` writes its first line,
/// `host` or `vm` (it cannot: the VM builds them); the VM adds `references` when it has made
/// the reference's runs (see [`build_cmd`]); lab/grade adds `ended STATUS` when `grade
/// build` has ended, however it ended.
fn host_builds_file(class: &Path) -> PathBuf {
    class.join("host-builds")
}

/// Whether the host builds the files beside the VM (see [`host_builds_file`]).
pub(super) fn host_builds(class: &Path) -> bool {
    std::fs::read_to_string(host_builds_file(class)).is_ok_and(|t| t.lines().next() == Some("host"))
}

/// Says the lab VM has made the reference's runs, when the host builds the files (see
/// [`host_builds_file`]).
pub(super) fn say_references_made(class: &Path) -> Result<(), String> {
    if !host_builds(class) {
        return Ok(());
    }
    let path = host_builds_file(class);
    let mut file = std::fs::OpenOptions::new().append(true).open(&path).map_err(io(&path))?;
    file.write_all(b"references\n").map_err(io(&path))
}

/// Whether the lab VM has made the reference's runs (see [`host_builds_file`]).
fn references_made(class: &Path) -> bool {
    std::fs::read_to_string(host_builds_file(class)).is_ok_and(|t| t.lines().any(|l| l == "references"))
}

/// Whether the host's builds have ended (see [`host_builds_file`]).
pub(super) fn host_ended(class: &Path) -> bool {
    std::fs::read_to_string(host_builds_file(class)).is_ok_and(|t| t.lines().any(|l| l.starts_with("ended ")))
}

/// Writes `text` to `path` whole or not at all (a temporary file, renamed): the VM reads
/// what the host builds while it builds.
fn write_whole(path: &Path, text: &[u8]) -> Result<(), String> {
    let part = path.with_extension("part");
    std::fs::write(&part, text).map_err(io(&part))?;
    std::fs::rename(&part, path).map_err(io(path))
}

/// What the build of file `key` said: `None` when it built, else the compiler's messages,
/// or the bound it hit (`the build was stopped: …`).
pub(super) fn built(class: &Path, key: &str) -> Result<Option<String>, String> {
    if class.join("bins").join(key).is_file() {
        return Ok(None);
    }
    let log = log_of(class, key);
    std::fs::read_to_string(&log).map(Some).map_err(|e| format!("{key} was not built ({}: {e})", log.display()))
}

/// Where the students' files are built.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Place {
    /// This host, natively, each build in a user namespace of its own.
    Host,
    /// The lab VM, as root, each build as [`sandbox::BUILD_UID`] in a cgroup, under
    /// emulation: where the host cannot make a user namespace.
    Vm,
}

/// `grade build CLASS [--build-seconds N]` (host): builds the files of the students not
/// graded yet ([`build_files`]) on this host, or, when it cannot give a build a user
/// namespace of its own, says so and leaves them to `grade vm`; says which in
/// CLASS/host-builds first.
pub(super) fn build_cmd(class: &Path, limits: &Limits) -> Result<(), String> {
    if let Err(why) = sandbox::user_namespaces() {
        eprintln!(
            "grade: this machine cannot give a build a user namespace of its own ({why}): the lab VM \
             builds the files instead, each sealed as its runs are, under emulation (7-60 s a file)"
        );
        return write_whole(&host_builds_file(class), b"vm\n");
    }
    write_whole(&host_builds_file(class), b"host\n")?;
    // The builds wait for the reference's runs: beside them, even at the lowest priority,
    // they would slow those runs under emulation, and their times set every bound.
    while !references_made(class) {
        std::thread::sleep(Duration::from_millis(200));
    }
    build_files(class, limits, Place::Host)
}

/// Builds each different file of the students not graded yet ([`super::pending_files`]),
/// one after the other in its step's crate, the file its binary's stage module (each build
/// compiles the binary again, not the library) or its library's stage: incremental
/// compilation reuses what the file does not touch. Each build is sealed in [`build_view`]
/// and bounded by `limits` (its time, its memory, its messages): a build that hits one is
/// that file's failure, and the next goes on. A program built goes to CLASS/bins/KEY; the
/// messages to CLASS/built/KEY.log and, all of them, CLASS/build.log. A file built before
/// (by the host, or by an interrupted grading) is not built again.
pub(super) fn build_files(class: &Path, limits: &Limits, place: Place) -> Result<(), String> {
    let files: Vec<_> =
        super::pending_files(class)?.into_iter().filter(|(key, _)| built(class, key).is_err()).collect();
    if files.is_empty() {
        return Ok(());
    }
    let tools = sandbox::Toolchain::find()?;
    let lent = lend_tools(&tools, place)?;
    let (bins, logs) = (class.join("bins"), class.join("built"));
    for dir in [&bins, &logs] {
        std::fs::create_dir_all(dir).map_err(io(dir))?;
    }
    // Each build's cargo home is new: cargo writes its locks and caches there, and nothing
    // one build left is read by the next.
    let cargo_home = match place {
        Place::Host => class.join("cargo-home"),
        Place::Vm => PathBuf::from("/run/grade/cargo-home"),
    };
    if place == Place::Vm {
        // The build's account owns what it writes, in the VM's memory (the host's builds,
        // the dependencies and the reference's, are where it starts; the programs are
        // copied to CLASS/bins).
        for dir in [class.join("build"), class.join("target")] {
            sandbox::in_memory(&dir)?;
            sandbox::give(&dir, sandbox::BUILD_UID)?;
        }
    }
    let log_path = class.join("build.log");
    let mut log = std::fs::OpenOptions::new().create(true).append(true).open(&log_path).map_err(io(&log_path))?;
    let start = Instant::now();
    for (i, (key, step)) in files.iter().enumerate() {
        let t = Instant::now();
        let handed = class.join("handed").join(format!("{key}.rs"));
        std::fs::copy(&handed, student_file(class, step)).map_err(io(&handed))?;
        if cargo_home.exists() {
            std::fs::remove_dir_all(&cargo_home).map_err(io(&cargo_home))?;
        }
        std::fs::create_dir_all(&cargo_home).map_err(io(&cargo_home))?;
        let view = build_view(&tools, &lent, class, &cargo_home);
        let (cargo, args) = (tools.bin.join("cargo"), cargo_build([step.bin.as_str()]));
        let mut messages = Vec::new();
        let ended = match place {
            Place::Host => {
                let sealed = view.command(Who::Mapped(sandbox::BUILD_UID), &cargo, &args);
                sandbox::bounded(&sealed, Fence::Rlimit, limits, std::io::sink(), &mut messages)?
            }
            Place::Vm => {
                sandbox::give(&cargo_home, sandbox::BUILD_UID)?;
                let sealed = view.command(Who::Account(sandbox::BUILD_UID), &cargo, &args);
                let name = format!("build-{}", std::process::id());
                let ended = sandbox::bounded(&sealed, Fence::Cgroup(&name), limits, std::io::sink(), &mut messages)?;
                sandbox::kill_all(sandbox::BUILD_UID);
                ended
            }
        };
        let messages = String::from_utf8_lossy(&messages).into_owned();
        let _ = writeln!(log, "== {key}\n{messages}");
        // bubblewrap says why it could not make the view, and exits 1; cargo, whatever the
        // file, exits 101 when a build fails. The lab's failure, not the student's.
        if ended == Ended::Status(1) && messages.starts_with("bwrap: ") {
            return Err(format!("a build's sandbox could not be made: {}", messages.trim_end()));
        }
        let (record, verdict) = match ended.bound(limits) {
            Some(why) => (Some(format!("the build was stopped: {why}\n{messages}")), ", stopped by its bound"),
            None if ended == Ended::Status(0) => {
                let (program, part) =
                    (class.join("target/debug").join(format!("grade-{}", step.bin)), bins.join(format!("{key}.part")));
                std::fs::copy(&program, &part).map_err(io(&program))?;
                std::fs::rename(&part, bins.join(key)).map_err(io(&part))?;
                (None, "")
            }
            None => (Some(messages), ", does not compile"),
        };
        if let Some(record) = record {
            write_whole(&log_of(class, key), record.as_bytes())?;
        }
        eprintln!("grade: [{}/{}] built {key} ({:.1} s{verdict})", i + 1, files.len(), t.elapsed().as_secs_f64());
    }
    eprintln!("grade: {} files built in {:.0} s", files.len(), start.elapsed().as_secs_f64());
    Ok(())
}

//! The classroom kit behind `lab/exercise` and `lab/check`: makes a student's copy of a
//! stage with its key lines taken out, and grades a student's step on the device against
//! the reference.
//!
//! ```text
//! cargo xtask exercise …   (lab/exercise and lab/check run the built binary, target/debug/xtask)
//! exercise generate NN OUT           write step NN's exercise (its stage, holes as todo!())
//! exercise holes NN                  list step NN's holes: name, line, hint
//! exercise path NN                   print step NN's binary and stage file
//! exercise crate BIN STAGE_FILE STUDENT
//!                                    make (or bring up to date) the crate that builds BIN
//!                                    with STUDENT in place of STAGE_FILE; print its directory
//!                                    and the name of its BIN (exercise-BIN)
//! exercise grade [--results FILE] NN BIN SOURCE ...
//!                                    run BIN (step NN built from SOURCE) on the device in its
//!                                    real roles, next to the reference, and compare; with
//!                                    --results, append each verdict to FILE
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

use testkit as common;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode};
use std::time::{Duration, Instant};

use common::Picks;
use rdma_dissect::role::Role;

/// Who runs opposite the student's program in a pair step (01–04 have no partner).
#[derive(Clone, Copy, PartialEq)]
enum Partner {
    /// Debian's C `ibv_rc_pingpong` (05–08).
    C,
    /// Our reference step (09: its address message is ours, the C tool cannot be its peer).
    Reference,
    /// Debian's `rping` (10: rdma_cm and rping's protocol).
    Rping,
}

/// One step's exercise: where its stage lives, how it is run, where the book explains it.
struct Step {
    nn: String,
    bin: String,
    stage: String,
    /// Who runs opposite it: none for 01–04.
    partner: Option<Partner>,
    /// It connects with rdma_cm and takes rping's flags (10).
    cm: bool,
    /// The argument sets it runs with (after the device's `-d -i -g`); each pair step runs
    /// each set twice, the student's program as the server and then as the client.
    runs: Runs,
}

/// Argument sets: one run (or, for a pair step, one run in each role) per set.
type Runs = &'static [&'static [&'static str]];

/// The argument sets of a step checked with the defaults alone.
const DEFAULT_RUNS: Runs = &[&[]];

/// The steps (steps/list.txt, through testkit) are checked with their defaults, a pair step
/// against the C tool in both roles, except for what this table says: more argument sets,
/// or another partner.
const SPECIAL: [(&str, Option<Partner>, Runs); 4] = [
    ("03_reg_mr", None, &[&[], &["-s", "100"]]),
    // -e: the completion channel; -s 16: a size that goes inline on rxe0 (max_inline_data 16).
    ("04_create_qp", None, &[&[], &["-e", "-s", "16"]]),
    // -r 8 makes the loop refill its receives; -e exercises the completion channel.
    ("08_poll_cq", None, &[&["-n", "100", "-r", "8"], &["-e", "-n", "100", "-r", "8"]]),
    // Its address message is ours (78 bytes): the C tool cannot be its peer.
    ("09_rdma_write", Some(Partner::Reference), DEFAULT_RUNS),
];

fn step(nn: &str) -> Result<Step, String> {
    let nn = if nn.len() == 1 { format!("0{nn}") } else { nn.to_string() };
    let listed = common::steps().into_iter().find(|s| s.nn() == nn || s.bin == nn);
    let listed = listed.ok_or_else(|| format!("no step `{nn}`: give a step number 01..10 (e.g. `05`)"))?;
    let special = SPECIAL.iter().find(|(bin, ..)| *bin == listed.bin);
    let default_partner = match (listed.pair, listed.cm) {
        (true, true) => Some(Partner::Rping),
        (true, false) => Some(Partner::C),
        _ => None,
    };
    Ok(Step {
        nn: listed.nn().to_string(),
        bin: listed.bin.clone(),
        stage: listed.stage().to_string(),
        partner: special.and_then(|s| s.1).or(default_partner),
        cm: listed.cm,
        runs: special.map_or(DEFAULT_RUNS, |s| s.2),
    })
}

fn root() -> PathBuf {
    common::root()
}

/// `exercise ARGS…`.
pub fn main(args: &[String]) -> ExitCode {
    let result = match args.first().map(String::as_str) {
        Some("generate") if args.len() == 3 => generate_cmd(&args[1], Path::new(&args[2])),
        Some("holes") if args.len() == 2 => holes_cmd(&args[1]),
        Some("path") if args.len() == 2 => step(&args[1]).map(|s| println!("{} src/stages/{}.rs", s.bin, s.stage)),
        Some("crate") if args.len() == 4 => {
            // Where cargo builds: lab/check runs this from the project, as it runs cargo.
            let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root().join("target"), PathBuf::from);
            exercise_crate(&root(), &target, &args[1], &args[2], Path::new(&args[3]))
                .map(|dir| println!("{} {}", dir.display(), exercise_bin(&args[1])))
        }
        Some("grade") if args.len() >= 6 && args[1] == "--results" && (args.len() - 3) % 3 == 0 => {
            return grade_cmd(&args[3..], Some(Path::new(&args[2])));
        }
        Some("grade") if args.len() >= 4 && (args.len() - 1) % 3 == 0 => {
            return grade_cmd(&args[1..], None);
        }
        Some("junit") if args.len() == 3 => junit_cmd(Path::new(&args[1]), Path::new(&args[2])),
        _ => Err("usage: exercise generate NN OUT | exercise holes NN | exercise path NN | \
                  exercise crate BIN STAGE_FILE STUDENT | exercise grade [--results FILE] NN BIN SOURCE [NN BIN SOURCE ...] | exercise junit OUT RESULTS"
            .into()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("exercise: {e}");
            ExitCode::from(2)
        }
    }
}

// ---------------------------------------------------------------------------------------
// The exercise: the stage with its holes
// ---------------------------------------------------------------------------------------

/// One hole of a stage.
struct Hole {
    name: String,
    /// The binding's type, for a `let` hole (`HOLE(T)`).
    ty: Option<String>,
    hint: String,
    /// The answer: the lines between the markers.
    lines: Vec<String>,
    /// 1-based line of the first answer line in the stage file.
    line: usize,
}

enum Piece {
    Line(String),
    Hole(Hole),
}

/// Splits a stage's source into plain lines and holes.
fn parse(src: &str, file: &str) -> Result<Vec<Piece>, String> {
    let mut pieces = Vec::new();
    let mut lines = src.lines().enumerate();
    while let Some((i, line)) = lines.next() {
        let Some(rest) = line.trim_start().strip_prefix("// ANCHOR: hole_") else {
            pieces.push(Piece::Line(line.to_string()));
            continue;
        };
        let (name, marker) = rest.split_once(' ').unwrap_or((rest, ""));
        let name = format!("hole_{name}");
        let (ty, hint) = if let Some(m) = marker.strip_prefix("HOLE(") {
            let (ty, hint) =
                m.split_once("): ").ok_or_else(|| format!("{file}:{}: `HOLE(TYPE): hint` expected", i + 1))?;
            (Some(ty.to_string()), hint)
        } else {
            let hint = marker
                .strip_prefix("HOLE: ")
                .ok_or_else(|| format!("{file}:{}: `// ANCHOR: {name} HOLE: hint` expected", i + 1))?;
            (None, hint)
        };
        let end = format!("// ANCHOR_END: {name}");
        let mut body = Vec::new();
        loop {
            match lines.next() {
                Some((_, l)) if l.trim() == end => break,
                Some((_, l)) if l.contains("ANCHOR") => {
                    return Err(format!("{file}: an anchor line inside {name}: holes do not nest"))
                }
                Some((_, l)) => body.push(l.to_string()),
                None => return Err(format!("{file}: {name} has no `{end}`")),
            }
        }
        if body.iter().all(|l| l.trim().is_empty()) {
            return Err(format!("{file}: {name} is empty"));
        }
        pieces.push(Piece::Hole(Hole { name, ty, hint: hint.to_string(), lines: body, line: i + 2 }));
    }
    Ok(pieces)
}

/// The stage file of `step`, its path relative to the project, and its holes.
fn stage_source(step: &Step) -> Result<(String, String), String> {
    let rel = format!("src/stages/{}.rs", step.stage);
    let text = std::fs::read_to_string(root().join(&rel)).map_err(|e| format!("{rel}: {e}"))?;
    Ok((rel, text))
}

/// A string literal's body: `todo!` takes a format string, so braces are doubled too.
fn literal(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"").replace('{', "{{").replace('}', "}}")
}

/// What compiles in place of `hole`: see the module doc.
fn fill(hole: &Hole, file: &str) -> Result<Vec<String>, String> {
    let first = &hole.lines[0];
    let indent = &first[..first.len() - first.trim_start().len()];
    let first = first.trim();
    let last = hole.lines.last().unwrap().trim_end();
    let todo = format!("todo!(\"{}\")", literal(&hole.hint));
    if first.starts_with('|') {
        return Ok(vec![format!("{indent}// TODO({}): {}", hole.name, hole.hint)]);
    }
    if let Some(rest) = first.strip_prefix("let ") {
        let (pat, _) =
            rest.split_once(" = ").ok_or_else(|| format!("{file}: {}: `let PAT = …` expected", hole.name))?;
        let ty = hole.ty.as_ref().ok_or_else(|| {
            format!("{file}: {} is a `let`: its marker must name the type, `HOLE(TYPE): hint`", hole.name)
        })?;
        return Ok(vec![format!("{indent}let {pat}: {ty} = {todo};")]);
    }
    let field = first
        .split_once(": ")
        .filter(|(name, _)| !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'));
    if let (Some((name, _)), true) = (field, last.ends_with(',')) {
        return Ok(vec![format!("{indent}{name}: {todo},")]);
    }
    if last.ends_with(';') || last.ends_with('}') {
        return Ok(vec![format!("{indent}{todo};")]);
    }
    Ok(vec![format!("{indent}{todo}")])
}

/// The student's copy of `step`'s stage.
fn generate(step: &Step) -> Result<String, String> {
    let (rel, text) = stage_source(step)?;
    let pieces = parse(&text, &rel)?;
    let holes = pieces.iter().filter(|p| matches!(p, Piece::Hole(_))).count();
    if holes == 0 {
        return Err(format!("{rel} has no holes (// ANCHOR: hole_… HOLE: …)"));
    }
    let mut out = Vec::new();
    let mut header_done = false;
    for piece in &pieces {
        match piece {
            Piece::Line(l) => {
                if !header_done && !l.starts_with("//!") {
                    header_done = true;
                    out.push(String::new());
                    out.push(format!(
                        "// EXERCISE {}: this is {rel} with {holes} pieces taken out. Fill in every todo!() —",
                        step.nn
                    ));
                    out.push(
                        "// its message says what belongs there — and the `// TODO(hole_…)` lines, then run".into(),
                    );
                    out.push(format!(
                        "// `lab/check {}`: it builds the crate with this file in place of {rel}",
                        step.nn
                    ));
                    out.push(format!(
                        "// and runs step {} on the RDMA device next to the reference. `lab/exercise {} --reset`",
                        step.bin, step.nn
                    ));
                    out.push("// starts over. The chapter of the book explains every line.".into());
                    out.push(
                        "#![allow(unreachable_code, unused_variables, unused_mut, unused_imports, dead_code)]".into(),
                    );
                }
                out.push(l.clone());
            }
            Piece::Hole(h) => out.extend(fill(h, &rel)?),
        }
    }
    Ok(out.join("\n") + "\n")
}

fn generate_cmd(nn: &str, out: &Path) -> Result<(), String> {
    let text = generate(&step(nn)?)?;
    std::fs::write(out, text).map_err(|e| format!("{}: {e}", out.display()))
}

fn holes_cmd(nn: &str) -> Result<(), String> {
    let step = step(nn)?;
    let (rel, text) = stage_source(&step)?;
    for piece in parse(&text, &rel)? {
        if let Piece::Hole(h) = piece {
            println!("{}\t{rel}:{}\t{}", h.name, h.line, h.hint);
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// The crate a student's stage is built in
// ---------------------------------------------------------------------------------------

/// What the copy links besides `src/`: the step binaries.
const LINKED: [&str; 1] = ["steps"];

/// The tables of the project's manifest the copy leaves out: the tests' dependencies and
/// targets. The copy builds the library and one step, and cargo resolves dev-dependencies
/// even for that; testkit's dependency on the crate, by its package name, would find no
/// such package in the copy. The profiles stay: with the project's profiles and features,
/// the copy's dependencies are the very builds `cargo build --bins` made in the project's
/// target directory, which the copy shares — an exercise's first check compiles the crate,
/// not its dependencies again.
const LEFT_OUT: [&str; 2] = ["[dev-dependencies]", "[[test]]"];

/// The name of step `bin` built from a student's file. Copies and project share one target
/// directory, so the copy's steps must not be uplifted to `target/debug/<bin>` over the
/// reference's.
fn exercise_bin(bin: &str) -> String {
    format!("exercise-{bin}")
}

/// A copy of the crate at `project` whose `stage_file` (`src/stages/<stage>.rs`) is the
/// student's file, in `target/exercise/<bin>`: every other file a symlink to the real one,
/// so the copy follows the project. The copies build in the project's target directory, so
/// a check after an edit rebuilds only the library and the step; their steps are named by
/// [`exercise_bin`]. Each copy is a package of its own
/// name (cargo would otherwise take the nine copies for one package and reuse one copy's
/// library for another's) whose library keeps the name rdma_dissect. The student's file is
/// copied, not linked, whenever it changed: a new mtime is what tells cargo to rebuild,
/// whichever file LAB_EXERCISES points at. Files that have not changed are not rewritten,
/// so cargo rebuilds nothing for them.
fn exercise_crate(
    project: &Path,
    target: &Path,
    bin: &str,
    stage_file: &str,
    student: &Path,
) -> Result<PathBuf, String> {
    let krate = target.join("exercise").join(bin);
    std::fs::create_dir_all(krate.join("src/stages")).map_err(io_error(&krate))?;
    // The copy is a workspace of its own: the project's [workspace] without its members,
    // keeping [workspace.lints].
    let manifest = project.join("Cargo.toml");
    let mut toml = String::new();
    let (mut left_out, mut in_bin) = (false, false);
    for line in std::fs::read_to_string(&manifest).map_err(io_error(&manifest))?.lines() {
        if line.starts_with('[') {
            left_out = LEFT_OUT.iter().any(|table| line.starts_with(table));
            in_bin = line == "[[bin]]";
        }
        if left_out {
            continue;
        }
        if line == "name = \"rdma-dissect\"" {
            toml += &format!("name = \"rdma-dissect-exercise-{bin}\"\n");
        } else if let Some(name) = line.strip_prefix("name = \"").and_then(|n| n.strip_suffix('"')).filter(|_| in_bin) {
            toml += &format!("name = \"{}\"\n", exercise_bin(name));
        } else if !line.starts_with("members = ") {
            toml += &format!("{line}\n");
        }
    }
    toml += "\n# lab/check: a copy for one exercise.\n[lib]\nname = \"rdma_dissect\"\npath = \"src/lib.rs\"\n";
    write_if_changed(&krate.join("Cargo.toml"), toml.as_bytes())?;
    let lock = project.join("Cargo.lock");
    write_if_changed(&krate.join("Cargo.lock"), &std::fs::read(&lock).map_err(io_error(&lock))?)?;
    for name in LINKED {
        link(&project.join(name), &krate.join(name))?;
    }
    let src = project.join("src");
    for entry in std::fs::read_dir(&src).map_err(io_error(&src))? {
        let name = entry.map_err(io_error(&src))?.file_name();
        if name != "stages" {
            link(&src.join(&name), &krate.join("src").join(&name))?;
        }
    }
    let stages = project.join("src/stages");
    for entry in std::fs::read_dir(&stages).map_err(io_error(&stages))? {
        let name = entry.map_err(io_error(&stages))?.file_name();
        if Path::new(&name).extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let copy = krate.join("src/stages").join(&name);
        if Path::new("src/stages").join(&name) == Path::new(stage_file) {
            if copy.is_symlink() {
                std::fs::remove_file(&copy).map_err(io_error(&copy))?;
            }
            if std::fs::read(student).ok() != std::fs::read(&copy).ok() {
                std::fs::copy(student, &copy).map_err(io_error(student))?;
            }
        } else {
            link(&stages.join(&name), &copy)?;
        }
    }
    Ok(krate)
}

/// An I/O error as a message naming the file.
fn io_error(path: &Path) -> impl Fn(std::io::Error) -> String + '_ {
    move |e| format!("{}: {e}", path.display())
}

/// Writes `bytes` to `path` unless it holds them already (its mtime then stays).
fn write_if_changed(path: &Path, bytes: &[u8]) -> Result<(), String> {
    if std::fs::read(path).ok().as_deref() == Some(bytes) {
        return Ok(());
    }
    std::fs::write(path, bytes).map_err(io_error(path))
}

/// `ln -sfn to at`: `at` becomes a symlink to `to`, whatever file or link was there.
fn link(to: &Path, at: &Path) -> Result<(), String> {
    if std::fs::read_link(at).is_ok_and(|old| old == to) {
        return Ok(());
    }
    if at.symlink_metadata().is_ok() {
        std::fs::remove_file(at).map_err(io_error(at))?;
    }
    std::os::unix::fs::symlink(to, at).map_err(|e| format!("{} → {}: {e}", at.display(), to.display()))
}

// ---------------------------------------------------------------------------------------
// Running a step on the device
// ---------------------------------------------------------------------------------------

/// How long one program may take before it is killed and the check fails.
const DEADLINE: Duration = Duration::from_secs(60);
/// Our programs give up waiting for their peer after this (`--timeout`).
const PEER_TIMEOUT: &str = "10";

/// What one process did.
struct Ran {
    /// What it was, for messages: `your 05_modify_qp_rtr`, `ibv_rc_pingpong`.
    what: String,
    stdout: String,
    stderr: String,
    /// None when it was killed (it did not finish in time, or it was a C peer we stop).
    status: Option<i32>,
}

fn spawn(program: &str, args: &[String], line_buffered: bool) -> Child {
    let cmd = if line_buffered {
        // The C tool's stdout is a pipe, so stdio buffers it whole; we may have to kill it
        // (05–07 stop before its ping-pong ends) and still want its address lines.
        let mut c = Command::new("stdbuf");
        c.arg("-oL").arg(program);
        c
    } else {
        Command::new(program)
    };
    common::spawn_as(cmd, program, args)
}

/// When the peer must be done once ours has exited: at `deadline` when ours exited 0,
/// within a second when it failed. The peer of a program that failed (a hole's panic, an
/// error) waits for a partner that is gone — rc_pingpong and rping wait for ever — and the
/// verdict is ours' failure whatever the peer does; a second lets it print what it saw.
fn grace(ours: &Ran, deadline: Instant) -> Instant {
    if ours.status == Some(0) {
        deadline
    } else {
        deadline.min(Instant::now() + Duration::from_secs(1))
    }
}

/// Waits for `child` until `deadline`, then kills it.
fn finish(child: Child, what: &str, deadline: Instant) -> Ran {
    finish_when(child, what, deadline, |_| false)
}

/// [`finish`], but kills `child` as soon as its stdout so far is `enough`.
fn finish_when(child: Child, what: &str, deadline: Instant, enough: impl Fn(&[u8]) -> bool) -> Ran {
    let (status, stdout, stderr) = common::wait_or_kill_when(child, deadline, enough);
    Ran {
        what: what.to_string(),
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
        status: status.and_then(|s| s.code()),
    }
}

/// One run of a step: ours (the program under test) and, for 05–09, the peer.
struct RunResult {
    ours: Ran,
    peer: Option<Ran>,
    /// Ours: the server, the client, or (`None`) the one process.
    side: Option<Role>,
    /// e.g. "as the server, ibv_rc_pingpong as the client, -n 100"
    label: String,
}

fn run_once(step: &Step, program: &str, reference: &str, extra: &[&str], side: Option<Role>) -> RunResult {
    let dev = common::device_args();
    let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
    let flags = if extra.is_empty() { String::new() } else { format!(", {}", extra.join(" ")) };
    let ours_name = format!("your {}", step.bin);
    let Some(partner) = step.partner else {
        let args: Vec<String> = dev.iter().chain(&extra).cloned().collect();
        let ours = finish(spawn(program, &args, false), &ours_name, Instant::now() + DEADLINE);
        return RunResult { ours, peer: None, side, label: format!("alone{flags}") };
    };
    if partner == Partner::Rping {
        return run_cm(step, program, &extra, side);
    }
    let port = common::tcp_port().to_string();
    let (peer_program, peer_name) = match partner {
        Partner::C => ("ibv_rc_pingpong".to_string(), "ibv_rc_pingpong".to_string()),
        _ => (reference.to_string(), format!("the reference {}", step.bin)),
    };
    let mut ours_args: Vec<String> = dev.clone();
    ours_args.extend(["-p".to_string(), port.clone(), "--timeout".into(), PEER_TIMEOUT.into()]);
    ours_args.extend(extra.iter().cloned());
    let mut peer_args: Vec<String> = dev.clone();
    peer_args.extend(["-p".to_string(), port.clone()]);
    if partner == Partner::Reference {
        peer_args.extend(["--timeout".into(), PEER_TIMEOUT.into()]);
    }
    peer_args.extend(extra.iter().cloned());
    let c_peer = partner == Partner::C;
    let deadline = Instant::now() + DEADLINE;
    let (server, client) = match side {
        Some(Role::Server) => {
            peer_args.push("127.0.0.1".into());
            let s = spawn(program, &ours_args, false);
            (s, (peer_program.clone(), peer_args, c_peer))
        }
        _ => {
            ours_args.push("127.0.0.1".into());
            let s = spawn(&peer_program, &peer_args, c_peer);
            (s, (program.to_string(), ours_args, false))
        }
    };
    let mut server = server;
    while !common::listening(port.parse().unwrap()) && Instant::now() < deadline {
        if server.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let client = spawn(&client.0, &client.1, client.2);
    let (ours_child, peer_child) = if side == Some(Role::Server) { (server, client) } else { (client, server) };
    let ours = finish(ours_child, &ours_name, deadline);
    // Steps 05–07 end before rc_pingpong's ping-pong does: the C peer would wait forever
    // for messages that never come. It has done its part once ours has exited and it has
    // printed the peer's address (after the exchange; its loop prints nothing), and it
    // gets a second for that.
    let peer = if c_peer && step.nn.as_str() < "08" {
        let printed =
            |out: &[u8]| out.split(|&b| b == b'\n').rev().skip(1).any(|l| l.starts_with(b"  remote address:"));
        finish_when(peer_child, &peer_name, Instant::now() + Duration::from_secs(1), printed)
    } else {
        finish(peer_child, &peer_name, grace(&ours, deadline))
    };
    let label = match side {
        Some(Role::Server) => format!("as the server, {peer_name} as the client{flags}"),
        _ => format!("as the client, {peer_name} as the server{flags}"),
    };
    RunResult { ours, peer: Some(peer), side, label }
}

/// A run of a step that connects with rdma_cm (10) against Debian's rping, with rping's
/// flags: the server first, the client once the server's id listens, three validated pings.
fn run_cm(step: &Step, program: &str, extra: &[String], side: Option<Role>) -> RunResult {
    let flags = if extra.is_empty() { String::new() } else { format!(", {}", extra.join(" ")) };
    let (addr, port) = (common::cm::cm_addr(), common::tcp_port());
    let common_args =
        ["-a".to_string(), addr.clone(), "-p".into(), port.to_string(), "-C".into(), "3".into(), "-V".into()];
    let args = |role: Role, ours: bool| -> Vec<String> {
        let mut a = vec![if role == Role::Server { "-s" } else { "-c" }.to_string()];
        a.extend(common_args.iter().cloned());
        if ours {
            a.extend(["--timeout".into(), PEER_TIMEOUT.into()]);
            a.extend(extra.iter().cloned());
        }
        a
    };
    let ours_role = side.unwrap_or(Role::Client);
    let (ours_name, peer_name) = (format!("your {}", step.bin), "rping".to_string());
    let deadline = Instant::now() + DEADLINE;
    let (server_args, server_ours) =
        if ours_role == Role::Server { (args(Role::Server, true), true) } else { (args(Role::Server, false), false) };
    let mut server = spawn(if server_ours { program } else { common::cm::RPING }, &server_args, false);
    while !common::cm::cm_listening(&addr, port) && Instant::now() < deadline {
        if server.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let client = if server_ours {
        spawn(common::cm::RPING, &args(Role::Client, false), false)
    } else {
        spawn(program, &args(Role::Client, true), false)
    };
    let (ours_child, peer_child) = if server_ours { (server, client) } else { (client, server) };
    let ours = finish(ours_child, &ours_name, deadline);
    let mut peer = finish(peer_child, &peer_name, grace(&ours, deadline));
    // rping reports a normal end on stderr ("server DISCONNECT EVENT..."): with status 0,
    // that is not a failure.
    if peer.status == Some(0) {
        peer.stderr.clear();
    }
    let label = format!("as the {}, rping as the {}{flags}", ours_role.label(), ours_role.peer().label());
    RunResult { ours, peer: Some(peer), side, label }
}

/// The runs of `step`, in a fixed order: each argument set, in each role a pair step has.
fn runs(step: &Step) -> Vec<(&'static [&'static str], Option<Role>)> {
    let sides: &[Option<Role>] =
        if step.partner.is_none() { &[None] } else { &[Some(Role::Server), Some(Role::Client)] };
    step.runs.iter().flat_map(|&extra| sides.iter().map(move |&side| (extra, side))).collect()
}

// ---------------------------------------------------------------------------------------
// Comparing with the reference
// ---------------------------------------------------------------------------------------

/// The C tool prints no `ibv_create_qp` line: its QPN is in its `local address:` line.
/// Said the way our trace says it, the redaction can name it `[QPN:server]`/`[QPN:client]`.
fn with_c_qpn(text: &str) -> String {
    let qpn = text.lines().find_map(|l| {
        let rest = l.strip_prefix("  local address:")?;
        let at = rest.find("QPN ")?;
        Some(rest[at + 4..].split(',').next()?.trim().to_string())
    });
    match qpn {
        Some(q) => format!("{text}ibv_create_qp qp_num={q}\n"),
        None => text.to_string(),
    }
}

/// Our side's and the peer's stdout, redacted as the snapshots are.
fn redacted(run: &RunResult, c_peer: bool, cm: bool) -> (String, Option<String>) {
    let dev = common::device();
    let ours = &run.ours.stdout;
    let Some(peer) = &run.peer else {
        return (common::redact(ours, None, &Picks::alone(ours), dev), None);
    };
    let peer_text = if c_peer { with_c_qpn(&peer.stdout) } else { peer.stdout.clone() };
    let (server, client) =
        if run.side == Some(Role::Server) { (ours.clone(), peer_text) } else { (peer_text, ours.clone()) };
    let picks = Picks::pair(&server, &client);
    let peer_side = run.side.map(Role::peer);
    // A step on rdma_cm (10) also shows what only the CM does.
    let redact = |text: &str, side| {
        let text = common::redact(text, side, &picks, dev);
        if cm {
            common::cm::redact_cm_values(&text, dev)
        } else {
            text
        }
    };
    (redact(ours, run.side), Some(redact(&peer.stdout, peer_side)))
}

/// A trace line as label (the verb or mask-bit column, or the whole line) and its fields.
struct Parsed {
    label: String,
    fields: Vec<(String, String)>,
}

fn parse_line(line: &str) -> Parsed {
    let tokens: Vec<&str> = line.split_whitespace().collect();
    let first_kv = tokens.iter().position(|t| t.contains('='));
    match first_kv {
        None => Parsed { label: line.trim().to_string(), fields: vec![] },
        Some(i) => {
            let mut fields = Vec::new();
            for t in &tokens[i..] {
                match t.split_once('=') {
                    Some((k, v)) => fields.push((k.to_string(), v.to_string())),
                    None => fields.push(("state change".to_string(), t.to_string())),
                }
            }
            Parsed { label: tokens[..i].join(" "), fields }
        }
    }
}

/// The event line a trace line belongs to (itself, or the last unindented line before it).
fn event_of(lines: &[&str], i: usize) -> String {
    lines[..=i.min(lines.len().saturating_sub(1))]
        .iter()
        .rev()
        .find(|l| !l.starts_with(' '))
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

/// The mask bits (`IBV_QP_…` detail lines) of the event block that starts at `start`.
fn mask_bits(lines: &[&str], start: usize) -> Vec<String> {
    lines[start + 1..].iter().take_while(|l| l.starts_with("  IBV_QP_")).map(|l| parse_line(l).label).collect()
}

/// The section of the book to reread for a difference at `what` (a label and key).
fn reread(step: &Step, what: &str) -> String {
    let table: &[(&str, &str, &str)] = &[
        ("dest_qp_num", "05_modify_qp_rtr", "Break it › --break wrong-dest-qpn"),
        ("is_global", "05_modify_qp_rtr", "Break it › --break no-grh"),
        ("grh.dgid", "05_modify_qp_rtr", "Break it › --break no-grh"),
        ("sgid_index", "05_modify_qp_rtr", "Break it › --break bad-gid-index"),
        ("sq_psn", "06_modify_qp_rts", "Break it › --break wrong-sq-psn"),
        ("INIT→RTS", "06_modify_qp_rts", "Break it › --break rts-from-init"),
        ("ibv_reg_mr", "03_reg_mr", "What this stage does, and why"),
        ("cqe", "04_create_qp", "Break it › --break cq-too-small"),
        ("byte_len", "07_post_send", "Break it › --break recv-too-small"),
        ("wr.rdma", "09_rdma_write", "Break it › --break wrong-rkey"),
        ("imm_data", "09_rdma_write", "What this stage does, and why"),
    ];
    let (chapter, section) =
        table.iter().find(|(needle, _, _)| what.contains(needle)).map(|(_, c, s)| (*c, *s)).unwrap_or_else(|| {
            let section = if what.starts_with("mask ") && step.nn == "05" {
                "Break it › --break missing-attr"
            } else {
                "What this stage does, and why"
            };
            (step.bin.as_str(), section)
        });
    format!("book chapter {} (book/src/{chapter}.md), section “{section}”", &chapter[..2])
}

/// The first difference between the reference's lines and the student's, explained; None
/// when they are the same.
fn first_difference(step: &Step, expected: &str, got: &str) -> Option<String> {
    let e: Vec<&str> = expected.lines().collect();
    let g: Vec<&str> = got.lines().collect();
    let i = (0..e.len().max(g.len())).find(|&i| e.get(i) != g.get(i))?;
    let mut msg = String::new();
    match (e.get(i), g.get(i)) {
        (Some(want), None) => {
            let _ = writeln!(msg, "the trace stops early, in {}", event_of(&e, i));
            let _ = writeln!(msg, "    expected next: {want}");
            let _ = writeln!(msg, "    got:           (nothing more)");
            let _ = write!(msg, "  reread: {}", reread(step, want));
        }
        (None, Some(extra)) => {
            let _ = writeln!(msg, "the trace goes on where the reference's ends");
            let _ = writeln!(msg, "    expected:      (nothing more)");
            let _ = write!(msg, "    got:           {extra}\n  reread: {}", reread(step, extra));
        }
        (Some(want), Some(have)) => {
            let (pw, ph) = (parse_line(want), parse_line(have));
            let event = event_of(&e, i);
            if pw.label == ph.label {
                let mut what = Vec::new();
                for (k, v) in &pw.fields {
                    match ph.fields.iter().find(|(hk, _)| hk == k) {
                        Some((_, hv)) if hv != v => what.push(format!("{k}: expected {v}, got {hv}")),
                        None => what.push(format!("{k}: expected {v}, got nothing")),
                        _ => {}
                    }
                }
                for (k, v) in &ph.fields {
                    if !pw.fields.iter().any(|(wk, _)| wk == k) {
                        what.push(format!("{k}: not expected, got {v}"));
                    }
                }
                let place = if want.starts_with("  IBV_QP_") {
                    format!("in {event}, attribute {}", pw.label)
                } else if want.starts_with(' ') {
                    format!("in {event}, {}", pw.label)
                } else {
                    format!("in {}", pw.label)
                };
                let key = what.first().and_then(|w| w.split(':').next()).unwrap_or("").to_string();
                let _ = writeln!(
                    msg,
                    "{place}: {}",
                    if what.is_empty() { "the line differs".into() } else { what.join("; ") }
                );
                let _ = writeln!(msg, "    expected: {want}");
                let _ = writeln!(msg, "    got:      {have}");
                let _ = write!(msg, "  reread: {}", reread(step, &format!("{} {key} {event}", pw.label)));
            } else if want.starts_with("  IBV_QP_") || have.starts_with("  IBV_QP_") {
                // Lines before i are equal: the event line both blocks start at is the same.
                let start = (0..i).rev().find(|&j| !e[j].starts_with(' ')).unwrap_or(0);
                let (ebits, gbits) = (mask_bits(&e, start), mask_bits(&g, start));
                let missing: Vec<&String> = ebits.iter().filter(|b| !gbits.contains(b)).collect();
                let extra: Vec<&String> = gbits.iter().filter(|b| !ebits.contains(b)).collect();
                let mut parts = Vec::new();
                if !missing.is_empty() {
                    parts.push(format!(
                        "the mask lacks {}",
                        missing.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
                    ));
                }
                if !extra.is_empty() {
                    parts.push(format!(
                        "the mask has {} too, which the reference does not set",
                        extra.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
                    ));
                }
                if parts.is_empty() {
                    parts.push("the same mask bits, in another order".into());
                }
                let _ = writeln!(msg, "in {event}: {}", parts.join("; "));
                let _ = writeln!(msg, "    expected mask: {}", ebits.join(" | "));
                let _ = writeln!(msg, "    got mask:      {}", gbits.join(" | "));
                let _ = write!(msg, "  reread: {}", reread(step, &format!("mask {event}")));
            } else {
                let _ = writeln!(msg, "expected {} here, got {}", pw.label, ph.label);
                let _ = writeln!(msg, "    expected: {want}");
                let _ = writeln!(msg, "    got:      {have}");
                let _ = write!(msg, "  reread: {}", reread(step, &format!("{} {}", pw.label, event)));
            }
        }
        (None, None) => unreachable!(),
    }
    Some(msg)
}

/// The part of a failed program's stderr worth showing: a `todo!()` left in, or the error.
fn why_it_failed(ran: &Ran, step: &Step, source: &str) -> Option<String> {
    let stage_file = format!("src/stages/{}.rs", step.stage);
    if let Some(at) = ran.stderr.find("panicked at ") {
        let rest = &ran.stderr[at + "panicked at ".len()..];
        let (place, message) = rest.split_once(":\n").unwrap_or((rest, ""));
        let message = message.lines().next().unwrap_or("");
        let place = match place.rsplit_once(&stage_file) {
            Some((_, line_col)) => format!("{source}{line_col}"),
            None => place.to_string(),
        };
        if let Some(hint) = message.strip_prefix("not yet implemented: ") {
            return Some(format!("a hole is still empty, at {place}:\n    todo!(\"{hint}\")"));
        }
        return Some(format!("{} panicked at {place}: {message}", ran.what));
    }
    match ran.status {
        None => Some(format!(
            "{} did not finish within {} s and was stopped{}",
            ran.what,
            DEADLINE.as_secs(),
            if ran.stderr.trim().is_empty() { String::new() } else { format!("; it said:\n{}", indent(&ran.stderr)) }
        )),
        Some(0) if ran.stderr.trim().is_empty() => None,
        Some(code) => Some(format!("{} exited with status {code}; it said:\n{}", ran.what, indent(&ran.stderr))),
    }
}

fn indent(text: &str) -> String {
    text.trim_end().lines().map(|l| format!("    {l}\n")).collect::<String>().trim_end().to_string()
}

/// Grades one step: Ok(summary) when every run matches the reference, Err(report) at the
/// first difference.
fn grade(step: &Step, program: &str, reference: &str, source: &str) -> Result<String, String> {
    let c_peer = step.partner == Some(Partner::C);
    let runs = runs(step);
    let mut lines = 0;
    // Run by run, the student's program and then the reference: the first difference ends
    // the check, so a step that fails in its first run does not wait through the others.
    for (n, &(extra, side)) in runs.iter().enumerate() {
        let t = &run_once(step, program, reference, extra, side);
        let r = &run_once(step, reference, reference, extra, side);
        let run = format!("run {} of {} ({}{})", n + 1, runs.len(), "your step ", t.label);
        if let Some(why) =
            why_it_failed(&r.ours, step, "src/stages/").or_else(|| {
                r.peer.as_ref().and_then(|p| {
                    if c_peer && step.nn.as_str() < "08" {
                        None
                    } else {
                        why_it_failed(p, step, "")
                    }
                })
            })
        {
            return Err(format!(
                "the REFERENCE failed in {run}: the device or the lab is broken, not your code\n  {why}"
            ));
        }
        let (rt, rp) = redacted(r, c_peer, step.cm);
        let (tt, tp) = redacted(t, c_peer, step.cm);
        let failed = why_it_failed(&t.ours, step, source);
        if let Some(diff) = first_difference(step, &rt, &tt) {
            let mut report = format!("{run}: your trace differs from the reference's\n  {diff}");
            if let Some(why) = failed {
                report = format!("{run}: {why}\n  first difference from the reference's trace: {diff}");
            }
            return Err(report);
        }
        if let Some(why) = failed {
            return Err(format!("{run}: same trace as the reference, but {why}"));
        }
        let peer_checked = !(c_peer && step.nn.as_str() < "08");
        if let (Some(rp), Some(tp), true) = (&rp, &tp, peer_checked) {
            let peer = t.peer.as_ref().unwrap();
            if let Some(why) = why_it_failed(peer, step, "") {
                return Err(format!("{run}: your trace matches, but the peer failed: {why}"));
            }
            if let Some(diff) = first_difference(step, rp, tp) {
                return Err(format!(
                    "{run}: your trace matches, but the peer ({}) saw something else than with the reference:\n  {diff}",
                    peer.what
                ));
            }
        }
        lines += rt.lines().count();
    }
    Ok(format!("{} runs, {lines} trace lines, all as the reference's", runs.len()))
}

fn grade_cmd(cases: &[String], results: Option<&Path>) -> ExitCode {
    common::require_device();
    // The reference steps are built beside this binary (target/debug/).
    let reference_dir = std::env::current_exe().unwrap().parent().unwrap().to_path_buf();
    let mut failed = 0;
    for case in cases.chunks(3) {
        let (nn, program, source) = (&case[0], &case[1], &case[2]);
        let step = match step(nn) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("exercise: {e}");
                return ExitCode::from(2);
            }
        };
        let reference = reference_dir.join(&step.bin);
        let dev = common::device();
        println!("== check {} ({source}) on {} port {} GID index {}", step.nn, dev.name, dev.port, dev.gid_index);
        let start = Instant::now();
        let verdict = grade(&step, program, &reference.to_string_lossy(), source);
        let seconds = start.elapsed().as_secs_f64();
        match &verdict {
            Ok(summary) => println!("PASS {}: {summary} ({seconds:.1} s)", step.nn),
            Err(report) => {
                failed += 1;
                println!("FAIL {}: {report}", step.nn);
            }
        }
        if let Some(file) = results {
            if let Err(e) = append_result(file, &step.nn, &verdict, seconds) {
                eprintln!("exercise: cannot write the verdict to {}: {e}", file.display());
                return ExitCode::from(2);
            }
        }
    }
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

// ---------------------------------------------------------------------------------------
// Verdicts for graders: a results file, and JUnit XML made from it
// ---------------------------------------------------------------------------------------

/// Appends one verdict to `file` as a line `NN<TAB>pass|fail<TAB>seconds<TAB>message`, the
/// message with `\` and newlines escaped. `lab/check` writes the verdicts it reaches before
/// grading (no exercise file, a file that does not compile) in the same format.
fn append_result(file: &Path, nn: &str, verdict: &Result<String, String>, seconds: f64) -> std::io::Result<()> {
    use std::io::Write as _;
    let (kind, message) = match verdict {
        Ok(summary) => ("pass", summary),
        Err(report) => ("fail", report),
    };
    let message = message.replace('\\', "\\\\").replace('\n', "\\n");
    let mut f = std::fs::OpenOptions::new().create(true).append(true).open(file)?;
    writeln!(f, "{nn}\t{kind}\t{seconds:.3}\t{message}")
}

/// One verdict read back from a results file.
struct Verdict {
    nn: String,
    passed: bool,
    seconds: f64,
    message: String,
}

fn parse_results(text: &str) -> Result<Vec<Verdict>, String> {
    text.lines()
        .filter(|l| !l.is_empty())
        .map(|line| {
            let mut cols = line.splitn(4, '\t');
            let (nn, kind, seconds, message) = (cols.next(), cols.next(), cols.next(), cols.next());
            let (Some(nn), Some(kind @ ("pass" | "fail")), Some(seconds), Some(message)) = (nn, kind, seconds, message)
            else {
                return Err(format!("not a verdict line: {line:?}"));
            };
            let seconds = seconds.parse().map_err(|_| format!("not a number of seconds: {line:?}"))?;
            let mut unescaped = String::new();
            let mut chars = message.chars();
            while let Some(c) = chars.next() {
                match (c, c == '\\') {
                    (_, true) => match chars.next() {
                        Some('n') => unescaped.push('\n'),
                        Some(other) => unescaped.push(other),
                        None => unescaped.push('\\'),
                    },
                    (c, false) => unescaped.push(c),
                }
            }
            Ok(Verdict { nn: nn.to_string(), passed: kind == "pass", seconds, message: unescaped })
        })
        .collect()
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// The verdicts as JUnit XML, the format GitHub Classroom's, Gradescope's and Jenkins's
/// JUnit readers take: one `<testcase>` per step checked, named by its binary; a failed
/// one carries a `<failure>` whose `message` is the report's first two lines (the run and
/// the first difference) and whose text is the whole report.
fn junit_xml(verdicts: &[Verdict]) -> String {
    let failures = verdicts.iter().filter(|v| !v.passed).count();
    let total: f64 = verdicts.iter().map(|v| v.seconds).sum();
    let mut xml = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let counts = format!("tests=\"{}\" failures=\"{failures}\" errors=\"0\" time=\"{total:.3}\"", verdicts.len());
    let _ = writeln!(xml, "<testsuites name=\"lab/check\" {counts}>");
    let _ = writeln!(xml, "  <testsuite name=\"lab/check\" {counts}>");
    for v in verdicts {
        let name = step(&v.nn).map_or(v.nn.clone(), |s| s.bin);
        let _ = write!(
            xml,
            "    <testcase classname=\"lab.check\" name=\"{}\" time=\"{:.3}\"",
            xml_escape(&name),
            v.seconds
        );
        if v.passed {
            let _ = writeln!(xml, "/>");
        } else {
            // The report's first two lines: which run, and the first difference.
            let first: Vec<&str> = v.message.lines().take(2).map(str::trim).collect();
            let first = first.join(" ");
            let _ = writeln!(xml, ">");
            let _ = writeln!(
                xml,
                "      <failure message=\"{}\" type=\"lab.check\">{}</failure>",
                xml_escape(&first),
                xml_escape(&v.message)
            );
            let _ = writeln!(xml, "    </testcase>");
        }
    }
    xml.push_str("  </testsuite>\n</testsuites>\n");
    xml
}

fn junit_cmd(out: &Path, results: &Path) -> Result<(), String> {
    let text = std::fs::read_to_string(results).map_err(|e| format!("{}: {e}", results.display()))?;
    let verdicts = parse_results(&text)?;
    std::fs::write(out, junit_xml(&verdicts)).map_err(|e| format!("{}: {e}", out.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_special_steps_are_listed_steps() {
        let listed: Vec<String> = common::steps().into_iter().map(|s| s.bin).collect();
        for (bin, ..) in SPECIAL {
            assert!(listed.iter().any(|l| l == bin), "SPECIAL names `{bin}`, which steps/list.txt does not list");
        }
    }

    #[test]
    fn the_exercise_crate_is_the_project_but_for_the_students_stage() {
        let tmp = std::env::temp_dir().join(format!("xtask-exercise-crate-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        let (project, target) = (tmp.join("project"), tmp.join("target"));
        for dir in ["src/stages", "src/breakit", "steps", "tests", "examples", "testkit", "xtask"] {
            std::fs::create_dir_all(project.join(dir)).unwrap();
        }
        let toml = "[package]\nname = \"rdma-dissect\"\n\n[workspace]\nmembers = [\"testkit\", \"xtask\"]\n\n\
                    [dev-dependencies]\ntestkit = { path = \"testkit\" }\n\n[[test]]\nname = \"t\"\n\n\
                    [[bin]]\nname = \"02_b\"\npath = \"steps/02_b.rs\"\n\n\
                    [profile.dev.package.regex-syntax]\nopt-level = 3\n";
        for (file, text) in [
            ("Cargo.toml", toml),
            ("Cargo.lock", "# lock\n"),
            ("src/lib.rs", "pub mod stages;\n"),
            ("src/stages/mod.rs", "pub mod a;\npub mod b;\n"),
            ("src/stages/a.rs", "// a\n"),
            ("src/stages/b.rs", "// b\n"),
            ("src/stages/notes.txt", "not a stage\n"),
            ("student.rs", "// mine\n"),
        ] {
            std::fs::write(project.join(file), text).unwrap();
        }
        let student = project.join("student.rs");
        let krate = exercise_crate(&project, &target, "02_b", "src/stages/b.rs", &student).unwrap();
        assert_eq!(krate, target.join("exercise/02_b"));
        assert_eq!(
            std::fs::read_to_string(krate.join("Cargo.toml")).unwrap(),
            "[package]\nname = \"rdma-dissect-exercise-02_b\"\n\n[workspace]\n\n\
             [[bin]]\nname = \"exercise-02_b\"\npath = \"steps/02_b.rs\"\n\n\
             [profile.dev.package.regex-syntax]\nopt-level = 3\n\n\
             # lab/check: a copy for one exercise.\n[lib]\nname = \"rdma_dissect\"\npath = \"src/lib.rs\"\n"
        );
        assert_eq!(std::fs::read_to_string(krate.join("Cargo.lock")).unwrap(), "# lock\n");
        for left_out in ["tests", "examples", "testkit", "xtask"] {
            assert!(!krate.join(left_out).exists(), "{left_out}: the tests' part of the package");
        }
        for linked in ["steps", "src/lib.rs", "src/breakit", "src/stages/mod.rs", "src/stages/a.rs"] {
            assert_eq!(std::fs::read_link(krate.join(linked)).unwrap(), project.join(linked), "{linked}");
        }
        let stage = krate.join("src/stages/b.rs");
        assert!(!stage.is_symlink() && std::fs::read_to_string(&stage).unwrap() == "// mine\n");
        assert!(!krate.join("src/stages/notes.txt").exists(), "only the .rs files of src/stages/");
        // Again, unchanged: nothing is rewritten, so cargo has nothing to rebuild.
        let mtime = |p: &Path| std::fs::metadata(p).unwrap().modified().unwrap();
        let (toml_mtime, stage_mtime) = (mtime(&krate.join("Cargo.toml")), mtime(&stage));
        std::thread::sleep(Duration::from_millis(20));
        exercise_crate(&project, &target, "02_b", "src/stages/b.rs", &student).unwrap();
        assert_eq!((mtime(&krate.join("Cargo.toml")), mtime(&stage)), (toml_mtime, stage_mtime));
        // The student's file changed: its copy follows.
        std::fs::write(&student, "// mine, better\n").unwrap();
        exercise_crate(&project, &target, "02_b", "src/stages/b.rs", &student).unwrap();
        assert_eq!(std::fs::read_to_string(&stage).unwrap(), "// mine, better\n");
        std::fs::remove_dir_all(&tmp).unwrap();
    }

    #[test]
    fn steps_come_from_the_list() {
        let s = step("5").unwrap();
        assert_eq!((s.nn.as_str(), s.bin.as_str(), s.stage.as_str()), ("05", "05_modify_qp_rtr", "modify_qp_rtr"));
        assert!(s.partner == Some(Partner::C) && s.runs == DEFAULT_RUNS);
        assert!(step("01").unwrap().partner.is_none());
        assert!(step("09_rdma_write").unwrap().partner == Some(Partner::Reference));
        assert_eq!(step("08").unwrap().runs.len(), 2);
        let cm = step("10").unwrap();
        assert!(cm.partner == Some(Partner::Rping) && cm.cm, "step 10 is graded against rping");
        assert!(step("11").err().unwrap().contains("no step `11`"));
    }
}

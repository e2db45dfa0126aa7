//! The lab VM as the sandbox: students' code is built and run there only, as accounts of
//! their own, each run bounded in time, output and processes.
//!
//! The VM shares the host's root read-only and the project read-write (lab/run). In it,
//! the grader (root) hides the project's sources (a tmpfs over `src/`, `book/`,
//! `exercises/`: only the VM sees it), so neither a build nor a run can read the reference's
//! answer there; the crates the students' files are built in are copies whose library
//! holds the exercise's holes, or the student's file, in place of the stage. The students'
//! builds run as [`BUILD_UID`], writing only to the VM's memory, each student's programs as
//! a uid of their own, none of them the host user that owns the project, the reference or
//! the reports.

use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The account every student's build runs as in the VM.
pub(crate) const BUILD_UID: u32 = 64000;
/// Student `i` (of this grading run) runs as `FIRST_RUN_UID + i`.
pub(crate) const FIRST_RUN_UID: u32 = 64001;
/// At most this many processes (and threads) per student program: a fork bomb stops here.
const MAX_PROCS: u32 = 64;
/// At most this much output (stdout and stderr together) per student program; a trace is
/// a few KiB.
pub(crate) const MAX_OUTPUT: usize = 1 << 20;

/// What the grader hides from the students' code in the VM: where the reference's answers
/// and the instructor's guide are.
const HIDDEN: [&str; 3] = ["src", "book", "exercises"];

fn run(cmd: &mut Command) -> Result<(), String> {
    let status = cmd.status().map_err(|e| format!("{cmd:?}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{cmd:?}: {status}"))
    }
}

/// Hides the project's sources from everything that runs after, in this VM only.
pub(crate) fn hide_sources(project: &Path) -> Result<(), String> {
    for dir in HIDDEN {
        let path = project.join(dir);
        if path.is_dir() {
            run(Command::new("mount").args(["-t", "tmpfs", "-o", "ro,size=4k,mode=0555", "hidden"]).arg(&path))?;
        }
    }
    Ok(())
}

/// Keeps what is written under `dir` in the VM's memory, for the rest of this boot: an
/// overlay at the same path, `dir` below (read over the project's 9p share), the VM's
/// `/run` (a tmpfs) above. A build writes thousands of small files (incremental
/// compilation's state); over the share each is a round trip to the host, in memory it is
/// not. `metacopy=on`: a `chown` (see [`give`]) copies a file's metadata up, not its data.
/// What is written there is gone when the VM stops.
pub(crate) fn in_memory(dir: &Path) -> Result<(), String> {
    let lower = dir.to_str().filter(|d| !d.contains([',', ':', '\\'])).ok_or_else(|| {
        format!("{}: a path with `,`, `:` or `\\` cannot be an overlay's (mount's options)", dir.display())
    })?;
    let name = dir.file_name().and_then(|n| n.to_str()).ok_or_else(|| format!("{}: no name", dir.display()))?;
    let (upper, work) = (format!("/run/grade/{name}/upper"), format!("/run/grade/{name}/work"));
    for d in [&upper, &work] {
        std::fs::create_dir_all(d).map_err(|e| format!("{d}: {e}"))?;
    }
    run(Command::new("mount")
        .args(["-t", "overlay", "overlay", "-o"])
        .arg(format!("lowerdir={lower},upperdir={upper},workdir={work},metacopy=on"))
        .arg(dir))
}

/// Makes `uid` the owner of `dir` and everything below it (in the VM's memory: see
/// [`in_memory`]), so that account, and no other but root, may write there.
pub(crate) fn give(dir: &Path, uid: u32) -> Result<(), String> {
    run(Command::new("chown").arg("-R").arg(format!("{uid}:{uid}")).arg(dir))
}

/// Lets `uid`s other than the owner reach `path`: `o+x` on each directory above it that
/// lacks it (a home directory is 0700 on Debian). Above the project that is the VM's own
/// throw-away copy of the host's root; inside the project it is the project's.
pub(crate) fn let_through(path: &Path) -> Result<(), String> {
    for dir in path.ancestors().skip(1) {
        let Ok(meta) = dir.metadata() else { continue };
        let mode = meta.permissions().mode();
        if mode & 0o001 == 0 {
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode | 0o001))
                .map_err(|e| format!("chmod o+x {}: {e}", dir.display()))?;
        }
    }
    Ok(())
}

/// Lets the build's account use the cargo home in this VM: cargo takes its lock files
/// there. The VM's root filesystem is a throw-away copy: the host's cargo home is not
/// touched.
pub(crate) fn open_cargo_home(cargo_home: &Path) -> Result<(), String> {
    let chmod = |path: &Path, mode: u32| {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
            .map_err(|e| format!("chmod {mode:o} {}: {e}", path.display()))
    };
    chmod(cargo_home, 0o777)?;
    for entry in std::fs::read_dir(cargo_home).map_err(|e| format!("{}: {e}", cargo_home.display()))?.flatten() {
        if entry.file_type().is_ok_and(|t| t.is_file()) {
            chmod(&entry.path(), 0o666)?;
        }
    }
    Ok(())
}

/// Ends every process of `uid` (what a fork bomb left behind). `kill -1` as that account
/// signals exactly its processes.
pub(crate) fn kill_all(uid: u32) {
    let _ = Command::new("setpriv")
        .args(["--reuid", &uid.to_string(), "--regid", &uid.to_string(), "--clear-groups", "kill", "-KILL", "-1"])
        .stderr(Stdio::null())
        .status();
}

/// A command that runs `program args` as `uid`, at most [`MAX_PROCS`] processes, no core
/// file, no file written larger than 16 MiB.
pub(crate) fn as_student(uid: u32, program: &Path) -> Command {
    let mut cmd = Command::new("prlimit");
    cmd.arg(format!("--nproc={MAX_PROCS}")).args(["--core=0", "--fsize=16777216", "--", "setpriv"]);
    cmd.args(["--reuid", &uid.to_string(), "--regid", &uid.to_string(), "--clear-groups", "--"]).arg(program);
    cmd
}

/// A shell script at `at` that runs `program` bounded as `uid` (through `grade bounded`):
/// what the exercise grader runs in place of the student's binary.
pub(crate) fn wrapper(at: &Path, uid: u32, seconds: u64, program: &Path) -> Result<(), String> {
    let tool = std::env::current_exe().map_err(|e| format!("where is this grader? {e}"))?;
    let quote = |p: &Path| format!("'{}'", p.display().to_string().replace('\'', "'\\''"));
    let script = format!(
        "#!/bin/sh\nexec {} grade bounded {uid} {MAX_OUTPUT} {seconds} {} \"$@\"\n",
        quote(&tool),
        quote(program)
    );
    std::fs::write(at, script).map_err(|e| format!("{}: {e}", at.display()))?;
    std::fs::set_permissions(at, std::fs::Permissions::from_mode(0o755)).map_err(|e| format!("{}: {e}", at.display()))
}

/// Copies `from` to `to` until `budget` (shared by stdout and stderr) is spent, then sets
/// `flooded` and stops reading: the program's next write fails.
fn pump(mut from: impl Read, mut to: impl Write, budget: Arc<AtomicUsize>, flooded: Arc<AtomicBool>) {
    let mut buf = [0u8; 8192];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let left = budget.load(Ordering::SeqCst);
        budget.fetch_sub(n.min(left), Ordering::SeqCst);
        let _ = to.write_all(&buf[..n.min(left)]);
        let _ = to.flush();
        if n > left {
            flooded.store(true, Ordering::SeqCst);
            return;
        }
    }
}

/// `grade bounded UID MAX_OUTPUT SECONDS PROGRAM ARGS…` (root, in the VM): runs PROGRAM as
/// UID with its output passed through; stops it, and every process of UID, when it has
/// written more than MAX_OUTPUT bytes or run SECONDS, and says which on stderr. Exits
/// with its status (124 for the time, 125 for the output, 128+N for signal N).
pub(crate) fn bounded_cmd(args: &[String]) -> Result<i32, String> {
    let [uid, max, seconds, program, rest @ ..] = args else {
        return Err("usage: grade bounded UID MAX_OUTPUT SECONDS PROGRAM [ARGS...]".into());
    };
    let number = |s: &str| s.parse::<u64>().map_err(|_| format!("not a number: {s}"));
    let (uid, max, seconds) = (number(uid)? as u32, number(max)? as usize, number(seconds)?);
    let mut child = as_student(uid, Path::new(program))
        .args(rest)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start {program}: {e}"))?;
    let (budget, flooded) = (Arc::new(AtomicUsize::new(max)), Arc::new(AtomicBool::new(false)));
    let out = child.stdout.take().expect("piped");
    let err = child.stderr.take().expect("piped");
    let threads = [
        {
            let (b, f) = (budget.clone(), flooded.clone());
            std::thread::spawn(move || pump(out, std::io::stdout(), b, f))
        },
        {
            let (b, f) = (budget.clone(), flooded.clone());
            std::thread::spawn(move || pump(err, std::io::stderr(), b, f))
        },
    ];
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let status = loop {
        if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
            break Some(status);
        }
        if flooded.load(Ordering::SeqCst) || Instant::now() > deadline {
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    // Its children may hold the pipes open: they go first, then the pipes end.
    kill_all(uid);
    let _ = child.kill();
    let _ = child.wait();
    for t in threads {
        let _ = t.join();
    }
    use std::os::unix::process::ExitStatusExt;
    Ok(match status {
        _ if flooded.load(Ordering::SeqCst) => {
            eprintln!("\n[grader] stopped: more than {max} bytes of output (the grader's bound)");
            125
        }
        None => {
            eprintln!("\n[grader] stopped: still running after {seconds} s (the grader's bound)");
            124
        }
        Some(s) => match (s.code(), s.signal()) {
            (Some(code), _) => code,
            (None, Some(sig)) => {
                eprintln!("\n[grader] the program was killed by signal {sig}");
                128 + sig
            }
            _ => 125,
        },
    })
}

/// Where cargo and the registry it builds from are, for the build's account.
pub(crate) struct Toolchain {
    pub(crate) bin: PathBuf,
    pub(crate) cargo_home: PathBuf,
}

impl Toolchain {
    /// The toolchain the grader itself was started with (`rustc --print sysroot`, not
    /// rustup's proxies, which want a writable home) and the cargo home's registry.
    pub(crate) fn find() -> Result<Toolchain, String> {
        let out = Command::new("rustc").args(["--print", "sysroot"]).output().map_err(|e| format!("rustc: {e}"))?;
        let sysroot = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        let cargo_home = std::env::var_os("CARGO_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")));
        let cargo_home = cargo_home.ok_or("neither CARGO_HOME nor HOME is set")?;
        Ok(Toolchain { bin: sysroot.join("bin"), cargo_home })
    }
}

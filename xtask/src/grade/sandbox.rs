//! The sandbox: students' code is built on the host and run in the lab VM, each build and
//! each run sealed in a view of its own and bounded.
//!
//! The host, and the VM that shares its root read-only and the project read-write
//! (lab/run), hold the reference's binaries, the instructor's answers, the other students'
//! files and the cargo home: reachable as they are, a student's program could read, exec
//! or overwrite each (each was tried). So nothing a student wrote runs in that view. Each
//! build and each run gets a mount namespace of its own, made by bubblewrap (Debian's
//! `bubblewrap`), holding the system's programs and libraries read-only and only what that
//! process needs besides (see [`View`]), with its own `/tmp` and `/dev/shm`, and its own
//! PID, IPC and UTS namespaces: it sees no other process, and its System V IPC objects go
//! with it. It is bounded in time and output ([`bounded`]), and in memory and processes:
//! - a build, on the host ([`Who::Mapped`]): in a user namespace of its own, as an account
//!   that owns nothing outside, with no network, its address space bounded (`prlimit`);
//!   where the host cannot make one (a chroot, a container), in the VM as a run is;
//! - a run, in the VM ([`Who::Account`]): as an account of its own (started as it, in a
//!   user namespace of its own, no new privileges), in a cgroup whose memory (its `/tmp`
//!   and `/dev/shm` included) and process counts are bounded, all of it killed at once
//!   when it hits a bound.

use std::ffi::OsString;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The account every student's build runs as, in its user namespace on the host.
pub(crate) const BUILD_UID: u32 = 64000;
/// The `j`th file of this grading run (student by student, step by step) runs as
/// `FIRST_RUN_UID + j`.
pub(crate) const FIRST_RUN_UID: u32 = 64001;

/// What one sandboxed process may use.
pub(crate) struct Limits {
    /// Wall-clock seconds.
    pub(crate) seconds: u64,
    /// Bytes of memory: in the VM, the cgroup's `memory.max` (its `/tmp` and `/dev/shm`
    /// included); on the host, each process's address space (`RLIMIT_AS`).
    pub(crate) memory: u64,
    /// Processes and threads at once, in the VM (`pids.max`): a fork bomb stops here. (On
    /// the host only a build runs, and it runs nothing of the student's: rustc evaluates
    /// constants, it runs no code.)
    pub(crate) pids: u32,
    /// Bytes of output, stdout and stderr together; a trace is a few KiB.
    pub(crate) output: usize,
}

/// A student's program, run opposite its peer: a ping-pong needs a few MiB.
pub(crate) const RUN: Limits = Limits { seconds: 0, memory: 256 << 20, pids: 64, output: 1 << 20 };
/// A student's build: cargo and rustc compiling one step's program, natively (seconds at
/// most; the address space is generous because rustc's threads reserve far more than
/// they use); the compiler's messages about one file.
pub(crate) const BUILD: Limits = Limits { seconds: 60, memory: 2 << 30, pids: 256, output: 256 << 10 };
/// The same build in the lab VM, where the host cannot make it a user namespace: half the
/// VM's memory, and the time emulation needs (the guide's "What a class costs").
pub(crate) const VM_BUILD: Limits = Limits { seconds: 300, memory: 1 << 30, ..BUILD };

/// How a bounded process ended.
#[derive(Debug, PartialEq)]
pub(crate) enum Ended {
    Status(i32),
    Signal(i32),
    /// Still running after its seconds.
    Time,
    /// More output than its bound.
    Output,
    /// Killed by the kernel for its cgroup's memory bound.
    Memory,
}

impl Ended {
    /// The grader's words for a bound the process hit, or `None` when it ended by itself.
    pub(crate) fn bound(&self, limits: &Limits) -> Option<String> {
        match self {
            Ended::Time => Some(format!("still running after {} s (the grader's bound)", limits.seconds)),
            Ended::Output => Some(format!("more than {} bytes of output (the grader's bound)", limits.output)),
            Ended::Memory => Some(format!("more than {} MiB of memory (the grader's bound)", limits.memory >> 20)),
            Ended::Status(_) | Ended::Signal(_) => None,
        }
    }
}

/// The filesystem a sandboxed process sees, as bubblewrap's arguments: the system's
/// programs and libraries read-only, a `/dev` with only the harmless devices, its own
/// `/proc`, `/tmp` and `/dev/shm`, no environment; then what [`View::ro`], [`View::rw`]
/// and [`View::dev`] add, each at the path it has in the VM (a build reuses the host's
/// incremental state only where every path is the same). No home directory, no project,
/// no `/run`.
pub(crate) struct View {
    args: Vec<OsString>,
    /// The directories made to hold what is bound (see [`View::bind`]).
    made: Vec<PathBuf>,
}

impl View {
    pub(crate) fn system() -> View {
        let mut view = View { args: Vec::new(), made: Vec::new() };
        view.arg("--ro-bind").arg("/usr").arg("/usr");
        // Debian's merged /usr makes these links; an older root has directories.
        for top in ["/bin", "/sbin", "/lib", "/lib64"] {
            match std::fs::read_link(top) {
                Ok(target) => view.arg("--symlink").arg(target).arg(top),
                Err(_) if Path::new(top).is_dir() => view.arg("--ro-bind").arg(top).arg(top),
                Err(_) => &mut view,
            };
        }
        // The dynamic linker's cache, `cc` (an alternatives link), and where libibverbs
        // finds its providers: system files, none of them the project's.
        for etc in ["/etc/ld.so.cache", "/etc/alternatives", "/etc/libibverbs.d"].map(Path::new) {
            if etc.exists() {
                view = view.ro(etc);
            }
        }
        view.arg("--dev").arg("/dev").arg("--proc").arg("/proc");
        for tmp in ["/tmp", "/dev/shm"] {
            view.arg("--perms").arg("1777").arg("--tmpfs").arg(tmp);
        }
        for flag in ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--die-with-parent", "--new-session"] {
            view.arg(flag);
        }
        view.arg("--clearenv").env("PATH", "/usr/bin:/bin").env("HOME", "/tmp");
        view
    }

    fn arg(&mut self, arg: impl Into<OsString>) -> &mut View {
        self.args.push(arg.into());
        self
    }

    /// `from` from the VM at `at`, read-write or read-only. The directories above `at` are
    /// made 0755 first: bubblewrap would copy each one's mode from the VM's, and a bind
    /// under `/root` (0700, the toolchain's) would be out of the account's reach.
    fn bind(mut self, flag: &str, from: &Path, at: &Path) -> View {
        let above: Vec<PathBuf> = at.ancestors().skip(1).filter(|a| a.parent().is_some()).map(PathBuf::from).collect();
        for dir in above.into_iter().rev() {
            if !self.made.contains(&dir) {
                self.arg("--perms").arg("0755").arg("--dir").arg(&dir);
                self.made.push(dir);
            }
        }
        self.arg(flag).arg(from).arg(at);
        self
    }

    /// `path`, read-only.
    pub(crate) fn ro(self, path: &Path) -> View {
        self.bind("--ro-bind", path, path)
    }

    /// `path`, read-write (for what the account owns: see [`give`]).
    pub(crate) fn rw(self, path: &Path) -> View {
        self.bind("--bind", path, path)
    }

    /// `from` from the VM, read-write, at `at`.
    pub(crate) fn rw_at(self, from: &Path, at: &Path) -> View {
        self.bind("--bind", from, at)
    }

    /// `from`, read-only, at `at`.
    pub(crate) fn ro_at(self, from: &Path, at: &Path) -> View {
        self.bind("--ro-bind", from, at)
    }

    /// The device files under `path` (`/dev/infiniband`).
    pub(crate) fn dev(mut self, path: &Path) -> View {
        self.arg("--dev-bind").arg(path).arg(path);
        self
    }

    /// No network at all: not even loopback.
    pub(crate) fn no_network(mut self) -> View {
        self.arg("--unshare-net");
        self
    }

    pub(crate) fn env(&mut self, key: &str, value: impl Into<OsString>) -> &mut View {
        self.arg("--setenv").arg(key).arg(value)
    }

    pub(crate) fn chdir(mut self, dir: &Path) -> View {
        self.arg("--chdir").arg(dir);
        self
    }

    /// `program args…` in this view as `who`: bubblewrap in a user namespace of its own,
    /// where `who`'s uid is the process's, mapped to the same uid outside.
    pub(crate) fn command(&self, who: Who, program: &Path, args: &[OsString]) -> Sealed {
        let (Who::Account(uid) | Who::Mapped(uid)) = who;
        let id = uid.to_string();
        let mut argv: Vec<OsString> =
            ["bwrap", "--unshare-user", "--uid", &id, "--gid", &id].map(OsString::from).into();
        argv.extend(self.args.iter().cloned());
        argv.push("--".into());
        argv.push(program.into());
        argv.extend(args.iter().cloned());
        Sealed { argv, who }
    }
}

/// A sandboxed command line ([`View::command`]) and who starts it.
pub(crate) struct Sealed {
    argv: Vec<OsString>,
    who: Who,
}

/// Who a sandboxed process runs as.
#[derive(Clone, Copy)]
pub(crate) enum Who {
    /// `uid` of the machine: in the VM, where the grader is root and each student has an
    /// account of their own. The grader starts bubblewrap as that account, with no
    /// supplementary group (what `setuid` from root does in Rust's `Command`), so nothing
    /// in the sandbox is root even for a moment; bubblewrap's user namespace gives it no
    /// capability outside, and `no_new_privs` (bubblewrap sets it) keeps a set-user-ID
    /// program from lending it one.
    Account(u32),
    /// `uid` of a user namespace of its own, mapped to whoever runs the grader (bubblewrap
    /// unprivileged: an instructor's own account will do), with no capability: on the host.
    Mapped(u32),
}

/// Where the grader's cgroups are.
const CGROUPS: &str = "/sys/fs/cgroup";

/// Makes the cgroup v2 hierarchy ready for [`bounded`]: mounted (the lab VM's init does not
/// mount it), the memory and pids controllers given to `grade/`, where each sandboxed
/// process gets a cgroup of its own.
pub(crate) fn cgroups() -> Result<(), String> {
    let root = Path::new(CGROUPS);
    if !root.join("cgroup.controllers").exists() {
        run(Command::new("mount").args(["-t", "cgroup2", "cgroup2", CGROUPS]))?;
    }
    let write = |path: PathBuf, what: &str| std::fs::write(&path, what).map_err(|e| format!("{}: {e}", path.display()));
    write(root.join("cgroup.subtree_control"), "+memory +pids")?;
    let grade = root.join("grade");
    std::fs::create_dir_all(&grade).map_err(|e| format!("{}: {e}", grade.display()))?;
    write(grade.join("cgroup.subtree_control"), "+memory +pids")
}

/// One process's cgroup: made with its bounds, emptied and removed when dropped.
struct Cgroup {
    path: PathBuf,
}

impl Cgroup {
    fn new(name: &str, limits: &Limits) -> Result<Cgroup, String> {
        let path = Path::new(CGROUPS).join("grade").join(name);
        let _ = std::fs::remove_dir(&path);
        std::fs::create_dir(&path).map_err(|e| format!("{}: {e} (was `grade vm`'s setup skipped?)", path.display()))?;
        let cgroup = Cgroup { path };
        // No swap in the lab VM; said anyway, so the bound is the memory's wherever this runs.
        for (file, value) in [
            ("memory.max", limits.memory.to_string()),
            ("memory.swap.max", "0".into()),
            ("pids.max", limits.pids.to_string()),
        ] {
            let path = cgroup.path.join(file);
            if path.exists() {
                std::fs::write(&path, value).map_err(|e| format!("{}: {e}", path.display()))?;
            }
        }
        Ok(cgroup)
    }

    /// Starts `cmd` in this cgroup: this process moves in, starts it (a child is born in
    /// its parent's cgroup), and moves back to where it was (a process stays in its cgroup
    /// until someone who may write there moves it: the child and its children cannot). The
    /// few pages this process touches meanwhile stay charged to the cgroup. One `sh` less
    /// than a shell that joins and then execs, which under emulation is ≈ 0.1 s a run.
    fn spawn(&self, cmd: &mut Command) -> Result<Child, String> {
        let write = |dir: &Path, pid: &str| {
            let procs = dir.join("cgroup.procs");
            std::fs::write(&procs, pid).map_err(|e| format!("{}: {e}", procs.display()))
        };
        let home = std::fs::read_to_string("/proc/self/cgroup").map_err(|e| format!("/proc/self/cgroup: {e}"))?;
        let home = home.lines().find_map(|l| l.strip_prefix("0::")).ok_or("/proc/self/cgroup: not cgroup v2")?;
        let home = Path::new(CGROUPS).join(home.trim_start_matches('/'));
        let pid = std::process::id().to_string();
        write(&self.path, &pid)?;
        let child = cmd.spawn().map_err(|e| format!("cannot start bwrap: {e}"));
        write(&home, &pid)?;
        child
    }

    /// Every process in it, at once (`cgroup.kill`, Linux 5.14): what a fork bomb or a
    /// program's children left behind too.
    fn kill(&self) {
        let _ = std::fs::write(self.path.join("cgroup.kill"), "1");
    }

    fn oom_killed(&self) -> bool {
        let events = std::fs::read_to_string(self.path.join("memory.events")).unwrap_or_default();
        events.lines().any(|l| l.strip_prefix("oom_kill ").is_some_and(|n| n.trim() != "0"))
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        self.kill();
        // A killed process leaves its cgroup when it has exited: a moment.
        for _ in 0..200 {
            if std::fs::remove_dir(&self.path).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// Copies `from` to `to` until `budget` (shared by stdout and stderr) is spent, then sets
/// `flooded` and stops reading: the program's next write blocks, until it is killed.
fn pump(mut from: impl Read, mut to: impl Write, budget: &AtomicUsize, flooded: &AtomicBool) {
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

/// How a bounded process is held to its memory and processes.
pub(crate) enum Fence<'a> {
    /// A cgroup of its own, named so (the VM: see [`cgroups`]).
    Cgroup(&'a str),
    /// `RLIMIT_AS` on each process (the host, whose cgroups the grader may not own).
    Rlimit,
}

/// Runs `sealed` (a [`View::command`]) within `fence`, bounded by `limits`: its stdout and
/// stderr go to `out` and `err` until the output bound; when it hits a bound, it and
/// everything it started are killed (its cgroup at once; else bubblewrap, whose PID
/// namespace dies with it).
pub(crate) fn bounded(
    sealed: &Sealed,
    fence: Fence,
    limits: &Limits,
    out: impl Write + Send,
    err: impl Write + Send,
) -> Result<Ended, String> {
    let cgroup = match fence {
        Fence::Cgroup(name) => Some(Cgroup::new(name, limits)?),
        Fence::Rlimit => None,
    };
    let argv = &sealed.argv;
    let mut cmd = match &cgroup {
        Some(_) => Command::new(&argv[0]),
        None => {
            let mut cmd = Command::new("prlimit");
            cmd.arg(format!("--as={}", limits.memory)).args(["--core=0", "--"]).arg(&argv[0]);
            cmd
        }
    };
    cmd.args(&argv[1..]).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    if let Who::Account(uid) = sealed.who {
        use std::os::unix::process::CommandExt;
        cmd.uid(uid).gid(uid);
    }
    let mut child = match &cgroup {
        // Born in the cgroup: everything from bubblewrap on is in it.
        Some(cgroup) => cgroup.spawn(&mut cmd)?,
        None => cmd.spawn().map_err(|e| format!("cannot start bwrap: {e}"))?,
    };
    let (stdout, stderr) = (child.stdout.take().expect("piped"), child.stderr.take().expect("piped"));
    let (budget, flooded) = (AtomicUsize::new(limits.output), AtomicBool::new(false));
    let deadline = Instant::now() + Duration::from_secs(limits.seconds);
    let status = std::thread::scope(|scope| {
        // Each pump says when it has stopped: its pipe closed (the process has most likely
        // exited) or the output bound was hit. The waiting below wakes then, not at a tick.
        let (stopped, pumps) = std::sync::mpsc::channel();
        let (budget, flooded, also_stopped) = (&budget, &flooded, stopped.clone());
        scope.spawn(move || {
            pump(stdout, out, budget, flooded);
            let _ = stopped.send(());
        });
        scope.spawn(move || {
            pump(stderr, err, budget, flooded);
            let _ = also_stopped.send(());
        });
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break Ok(Some(status)),
                Err(e) => break Err(e.to_string()),
                Ok(None) => {}
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if flooded.load(Ordering::SeqCst) || left.is_zero() {
                break Ok(None);
            }
            // Both pumps gone (the channel is closed) and the process not reaped yet: it is
            // exiting, or it closed its pipes and runs on. Either way, look again shortly.
            if pumps.recv_timeout(left.min(Duration::from_millis(100))).is_err() {
                std::thread::sleep(left.min(Duration::from_millis(5)));
            }
        };
        // Its children may hold the pipes open: they go, then the pumps end.
        if let Some(cgroup) = &cgroup {
            cgroup.kill();
        }
        let _ = child.kill();
        let _ = child.wait();
        status
    })?;
    use std::os::unix::process::ExitStatusExt;
    Ok(match status {
        _ if flooded.load(Ordering::SeqCst) => Ended::Output,
        None => Ended::Time,
        Some(_) if cgroup.as_ref().is_some_and(Cgroup::oom_killed) => Ended::Memory,
        Some(s) => match (s.code(), s.signal()) {
            (Some(code), _) => Ended::Status(code),
            (None, Some(sig)) => Ended::Signal(sig),
            _ => Ended::Signal(0),
        },
    })
}

fn run(cmd: &mut Command) -> Result<(), String> {
    let status = cmd.status().map_err(|e| format!("{cmd:?}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{cmd:?}: {status}"))
    }
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

/// Mounts `dir` again at `at` (made if missing), in the VM, for an account that cannot
/// reach `dir` where it is: bubblewrap, started as that account, binds it from `at`.
pub(crate) fn lend(dir: &Path, at: &Path) -> Result<(), String> {
    std::fs::create_dir_all(at).map_err(|e| format!("{}: {e}", at.display()))?;
    run(Command::new("mount").arg("--bind").arg(dir).arg(at))
}

/// Makes `uid` the owner of `dir` and everything below it (in the VM's memory: see
/// [`in_memory`]), so that account, and no other but root, may write there.
pub(crate) fn give(dir: &Path, uid: u32) -> Result<(), String> {
    run(Command::new("chown").arg("-R").arg(format!("{uid}:{uid}")).arg(dir))
}

/// Whether bubblewrap can give a process a user namespace of its own here, or why not: a
/// chroot cannot (the kernel refuses), nor, by default, a Docker container (its seccomp
/// profile) or a kernel that forbids unprivileged user namespaces.
pub(crate) fn user_namespaces() -> Result<(), String> {
    let out = Command::new("bwrap")
        .args(["--unshare-user", "--ro-bind", "/", "/", "--", "/bin/true"])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("bwrap: {e} (Debian's bubblewrap; lab/setup --tests installs it)"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("bwrap: {}", String::from_utf8_lossy(&out.stderr).trim()))
    }
}

/// Whether a student's program can be run here as it is graded (in the VM, as root): one
/// run of `/usr/bin/true`, sealed and bounded as every run is, as the first run account.
/// Where the kernel refuses that account a user namespace, or bubblewrap is missing, every
/// run would fail as if the student's program had: the grader says so instead, and grades
/// no one.
pub(crate) fn sealed_runs() -> Result<(), String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let out = Command::new(exe)
        .args(["grade", "bounded", &FIRST_RUN_UID.to_string(), "5", "/usr/bin/true"])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("grade bounded: {e}"))?;
    kill_all(FIRST_RUN_UID);
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "a student's program cannot be run sealed in this VM (`grade bounded {FIRST_RUN_UID} 5 /usr/bin/true`, {}): {}; \
             no one was graded",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Ends every process of `uid` (what a program left behind outside its cgroup: nothing,
/// unless the grader has a bug). `kill -1`, started as that account, signals exactly its
/// processes (Linux spares the caller).
pub(crate) fn kill_all(uid: u32) {
    use std::os::unix::process::CommandExt;
    let _ = Command::new("kill").args(["-KILL", "-1"]).uid(uid).gid(uid).stderr(Stdio::null()).status();
}

/// The environment a student's program gets from the grader's, besides PATH and HOME:
/// the device it is told to use and how to print; nothing of the grader's own.
const PASSED_ENV: [&str; 5] = ["NO_COLOR", "RDMA_DEVICE", "RDMA_IB_PORT", "RDMA_GID_INDEX", "RUST_BACKTRACE"];

/// `grade bounded UID SECONDS PROGRAM ARGS…` (root, in the VM): runs PROGRAM as UID in a
/// view of its own — the system, the RDMA devices and sysfs (libibverbs finds its devices
/// there), PROGRAM itself, nothing else — with its output passed through, within [`RUN`]'s
/// bounds and SECONDS; says on stderr which bound stopped it. Exits with its status (124
/// for the time, 125 for the output or the memory, 128+N for signal N).
pub(crate) fn bounded_cmd(uid: u32, seconds: u64, program: &Path, args: &[OsString]) -> Result<i32, String> {
    let limits = Limits { seconds, ..RUN };
    let mut view = View::system().ro(Path::new("/sys")).ro(program);
    if Path::new("/dev/infiniband").is_dir() {
        view = view.dev(Path::new("/dev/infiniband"));
    }
    for key in PASSED_ENV {
        if let Some(value) = std::env::var_os(key) {
            view.env(key, value);
        }
    }
    let sealed = view.command(Who::Account(uid), program, args);
    let name = format!("run-{uid}-{}", std::process::id());
    // Everything it started is in its cgroup, killed when `bounded` returns; the grader ends
    // what UID has left anyway once the file's runs are over (see `kill_all`).
    let ended = bounded(&sealed, Fence::Cgroup(&name), &limits, std::io::stdout(), std::io::stderr())?;
    if let Some(why) = ended.bound(&limits) {
        eprintln!("\n[grader] stopped: {why}");
    }
    Ok(match ended {
        Ended::Status(code) => code,
        Ended::Signal(sig) => {
            eprintln!("\n[grader] the program was killed by signal {sig}");
            128 + sig
        }
        Ended::Time => 124,
        Ended::Output | Ended::Memory => 125,
    })
}

/// Where cargo and the registry it builds from are, for the build's account.
pub(crate) struct Toolchain {
    /// The toolchain's directory (`bin/cargo`, `bin/rustc`, `lib/`).
    pub(crate) sysroot: PathBuf,
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
        Ok(Toolchain { bin: sysroot.join("bin"), sysroot, cargo_home })
    }
}

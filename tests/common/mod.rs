//! What the device tests share: the device to use, running step binaries with a bounded
//! wait, server/client pairs, and the one redaction table for snapshots.

#![allow(dead_code)] // each test file uses a different subset

use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Every value the device or the run picks, behind its key, and what it becomes in a
/// snapshot. The trace puts each such value behind its own key (see `src/trace.rs`), so
/// one rule per key is enough.
pub const FILTERS: &[(&str, &str)] = &[
    (r"\b(qp_num|dest_qp_num)=0x[0-9a-f]{6}", "$1=[QPN]"),
    (r"\b(rq_psn|sq_psn)=0x[0-9a-f]{6}", "$1=[PSN]"),
    (r"QPN 0x[0-9a-f]{6}", "QPN [QPN]"),
    (r"PSN 0x[0-9a-f]{6}", "PSN [PSN]"),
    (r"\b(lkey|sge\.lkey)=0x[0-9a-f]{8}", "$1=[LKEY]"),
    (r"\b(rkey|wr\.rdma\.rkey)=0x[0-9a-f]{8}", "$1=[RKEY]"),
    (r"RKEY 0x[0-9a-f]{8}", "RKEY [RKEY]"),
    (r"\b(addr|sge\.addr|wr\.rdma\.remote_addr)=0x[0-9a-f]{16}", "$1=[ADDR]"),
    (r"ADDR 0x[0-9a-f]{16}", "ADDR [ADDR]"),
    (r"\b(guid|node_guid)=0x[0-9a-f]{16}", "$1=[GUID]"),
    (r"\bport=\d+", "port=[PORT]"),
    (r"\bnevents=\d+", "nevents=[COUNT]"),
    // 08's watchdog says how far the ping-pong got when the peer fell silent.
    (r"after \d+ of (\d+) sends and \d+ of (\d+) receives", "after [COUNT] of $1 sends and [COUNT] of $2 receives"),
    // Kernel counters the two-host lessons print (tests/two_hosts.rs): how many times
    // something failed or was retried depends on time; whether it did (0 or not) does not.
    (r"\b(sent_pkts|send_err|completer_retry_err|FragFails|OutDestUnreachs)=[1-9]\d*", "$1=[COUNT]"),
    (r"in \d+\.\d+ seconds = \d+\.\d+ ", "in [TIME] seconds = [RATE] "),
];

/// Runs `f` with the shared filter table applied to snapshots.
pub fn with_filters(f: impl FnOnce()) {
    let mut settings = insta::Settings::clone_current();
    for (regex, replacement) in FILTERS {
        settings.add_filter(regex, *replacement);
    }
    settings.set_prepend_module_to_snapshot(true);
    settings.bind(f);
}

/// Device tests share one machine's device and its CPUs: a busy-polling ping-pong needs
/// both vCPUs of the lab VM, so they run one at a time (tests in one binary are threads).
pub fn device_lock() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    let guard = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    require_device();
    guard
}

/// Panics (the test fails, it is not skipped) when this machine has no RDMA device.
pub fn require_device() {
    let dir = Path::new("/sys/class/infiniband");
    let any = std::fs::read_dir(dir).map(|mut d| d.next().is_some()).unwrap_or(false);
    assert!(any, "no RDMA device: run `lab/test` or `lab/run cargo test`");
}

/// `-d <RDMA_DEVICE>` when the variable is set (default: the binaries' own first device),
/// then `-g <RDMA_GID_INDEX>` (default 1, the lab's IPv4-mapped RoCE v2 GID).
pub fn device_args() -> Vec<String> {
    let mut args = Vec::new();
    if let Ok(dev) = std::env::var("RDMA_DEVICE") {
        args.extend(["-d".to_string(), dev]);
    }
    let gid = std::env::var("RDMA_GID_INDEX").unwrap_or_else(|_| "1".into());
    args.extend(["-g".to_string(), gid]);
    args
}

/// How long one program may run before the test kills it and fails.
pub const TIMEOUT: Duration = Duration::from_secs(90);

/// Spawns `program` with `args`, stdout and stderr captured.
pub fn spawn(program: &str, args: &[String]) -> Child {
    Command::new(program)
        .args(args)
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {program}: {e}"))
}

/// Waits for `child` at most until `deadline`; kills it and panics after that.
pub fn wait(mut child: Child, what: &str, deadline: Instant) -> Output {
    // Drain the pipes on threads so a chatty child cannot block on a full pipe.
    let mut out = child.stdout.take().expect("stdout piped");
    let mut err = child.stderr.take().expect("stderr piped");
    let out_t = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = out.read_to_end(&mut v);
        v
    });
    let err_t = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = err.read_to_end(&mut v);
        v
    });
    let status = loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            let stdout = String::from_utf8_lossy(&out_t.join().unwrap()).into_owned();
            let stderr = String::from_utf8_lossy(&err_t.join().unwrap()).into_owned();
            panic!("{what} did not finish in time and was killed\n--- stdout\n{stdout}--- stderr\n{stderr}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Output { status, stdout: out_t.join().unwrap(), stderr: err_t.join().unwrap() }
}

/// Runs one program to completion (bounded by [`TIMEOUT`]).
pub fn run(program: &str, args: &[String]) -> Output {
    wait(spawn(program, args), program, Instant::now() + TIMEOUT)
}

/// Runs a server and a client (both bounded by [`TIMEOUT`]); the client retries its
/// connect until the server listens, so they can start together.
pub fn run_pair(
    server: &str,
    server_args: &[String],
    client: &str,
    client_args: &[String],
) -> (Output, Output) {
    let deadline = Instant::now() + TIMEOUT;
    let s = spawn(server, server_args);
    // The C client does not retry a refused connect: start it only once the server listens.
    let port = port_of(server_args);
    while !listening(port) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let c = spawn(client, client_args);
    let client_out = wait(c, "client", deadline);
    let server_out = wait(s, "server", deadline);
    (server_out, client_out)
}

/// Panics with both outputs unless the program exited 0 with an empty stderr.
pub fn assert_ok(what: &str, out: &Output) {
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "{what} failed ({})\n--- stdout\n{}--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The args as owned strings.
pub fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// stdout as text.
pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The `-p` value of an argument list (rc_pingpong's default 18515 without one).
fn port_of(args: &[String]) -> u16 {
    args.iter()
        .position(|a| a == "-p")
        .and_then(|i| args.get(i + 1))
        .and_then(|p| p.parse().ok())
        .unwrap_or(18515)
}

/// True when some socket listens on TCP `port` (state 0A in /proc/net/tcp{,6}); checking
/// this way does not consume the server's one accept.
fn listening(port: u16) -> bool {
    let needle = format!(":{port:04X} ");
    ["/proc/net/tcp", "/proc/net/tcp6"].iter().any(|file| {
        std::fs::read_to_string(file).is_ok_and(|text| {
            text.lines().any(|l| {
                let cols: Vec<&str> = l.split_whitespace().collect();
                cols.len() > 3 && format!("{} ", cols[1]).ends_with(&needle) && cols[3] == "0A"
            })
        })
    })
}

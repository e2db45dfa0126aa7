//! Bad input, end to end: every wrong flag, absent or misbehaving peer, dead peer and Ctrl-C
//! runs the real step binaries and must end in a clear message on stderr, a non-zero exit,
//! no panic, and bounded time (issue 5, "Bad input").
//!
//! What is *not* repeated here: the flag parsers' unit tests (`src/cli/`) and the
//! exchange against fake peers at the library level (`tests/no_device/wire.rs`). These tests run the
//! binaries, so they also check that every error reaches stderr explained, through
//! `error::main`, and that nothing hangs or panics on the way.
//!
//! They need an RDMA device (the binaries open it before anything else) and fail without
//! one: run them with `lab/test` or `lab/run cargo test --test device bad_input::`. They run one at a
//! time (`device_lock`), because the dead-peer and Ctrl-C cases measure how long a process
//! takes to go, and a busy-polling ping-pong needs both of the lab VM's vCPUs.

use testkit as common;

use common::device_lock;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, ExitStatus};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

const S01: &str = env!("CARGO_BIN_EXE_01_open_device");
const S03: &str = env!("CARGO_BIN_EXE_03_reg_mr");
const S05: &str = env!("CARGO_BIN_EXE_05_modify_qp_rtr");
const S08: &str = env!("CARGO_BIN_EXE_08_poll_cq");

/// How long a step may take to refuse a bad flag or a missing device: it exits at once, but
/// a debug binary starting under the lab VM's emulated CPU on a busy host can take seconds.
const PROMPT: Duration = Duration::from_secs(30);

/// Slack on top of a `--timeout` for start-up and teardown (same reason as [`PROMPT`]).
const MARGIN: Duration = Duration::from_secs(15);

/// A well-formed 52-byte rc_pingpong address: LID 0, QPN 0x11, PSN 1, GID ::ffff:192.0.2.1.
const DEST: &[u8; 52] = b"0000:000011:000001:00000000000000000000ffffc0000201\0";

// ---------------------------------------------------------------------------------------
// Running a step and looking at what it said
// ---------------------------------------------------------------------------------------

/// A running step whose stdout and stderr are collected as they come, so a test can wait
/// for a line (e.g. "remote address:") before it acts.
struct Running {
    what: String,
    child: Child,
    out: Arc<Mutex<Vec<u8>>>,
    err: Arc<Mutex<Vec<u8>>>,
    readers: Vec<JoinHandle<()>>,
}

/// How a step ended.
struct Ended {
    what: String,
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

impl Ended {
    fn dump(&self) -> String {
        format!("{} ({})\n--- stdout\n{}--- stderr\n{}", self.what, self.status, self.stdout, self.stderr)
    }
}

fn start(program: &str, args: &[&str]) -> Running {
    let mut child = common::spawn(program, &args.iter().map(|a| a.to_string()).collect::<Vec<_>>());
    let out = Arc::new(Mutex::new(Vec::new()));
    let err = Arc::new(Mutex::new(Vec::new()));
    let mut readers = Vec::new();
    for (pipe, sink) in [
        (Box::new(child.stdout.take().unwrap()) as Box<dyn Read + Send>, Arc::clone(&out)),
        (Box::new(child.stderr.take().unwrap()), Arc::clone(&err)),
    ] {
        readers.push(thread::spawn(move || {
            let mut pipe = pipe;
            let mut buf = [0u8; 4096];
            while let Ok(n) = pipe.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        }));
    }
    let name = program.rsplit('/').next().unwrap_or(program);
    Running { what: format!("{name} {}", args.join(" ")), child, out, err, readers }
}

impl Running {
    fn stdout(&self) -> String {
        String::from_utf8_lossy(&self.out.lock().unwrap()).into_owned()
    }

    fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.err.lock().unwrap()).into_owned()
    }

    /// Waits until stdout contains `needle`; panics (after killing the step) if the step
    /// exits first or `within` passes.
    fn wait_for_stdout(&mut self, needle: &str, within: Duration) {
        let deadline = Instant::now() + within;
        while !self.stdout().contains(needle) {
            let exited = self.child.try_wait().unwrap().is_some();
            if exited || Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!(
                    "{}: {} before printing {needle:?}\n--- stdout\n{}--- stderr\n{}",
                    self.what,
                    if exited { "exited" } else { "timed out" },
                    self.stdout(),
                    self.stderr()
                );
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    #[allow(unsafe_code, reason = "kill(2) is a C call")]
    fn signal(&self, sig: libc::c_int) {
        let pid = self.child.id() as libc::pid_t;
        // SAFETY: kill(2) has no memory-safety preconditions; pid is our own child, not
        // yet reaped, so it cannot name another process.
        assert_eq!(unsafe { libc::kill(pid, sig) }, 0, "kill({pid}, {sig})");
    }

    /// Waits at most `within` for the step to end; kills it and panics after that.
    fn end(mut self, within: Duration) -> Ended {
        let deadline = Instant::now() + within;
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!(
                    "{} did not end within {within:?} and was killed\n--- stdout\n{}--- stderr\n{}",
                    self.what,
                    self.stdout(),
                    self.stderr()
                );
            }
            thread::sleep(Duration::from_millis(10));
        };
        for r in self.readers.drain(..) {
            r.join().unwrap();
        }
        Ended { what: self.what.clone(), status, stdout: self.stdout(), stderr: self.stderr() }
    }
}

impl Drop for Running {
    /// A test that panics half-way must not leave a busy-polling step behind.
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Runs a step to its end, bounded by `within`.
fn run(program: &str, args: &[&str], within: Duration) -> Ended {
    start(program, args).end(within)
}

/// The step failed the way every error should: exited (not killed by a signal) with a
/// non-zero status, said `error:` and every one of `needles` on stderr, and did not panic.
fn assert_explained(end: &Ended, needles: &[&str]) {
    assert!(end.status.code().is_some_and(|c| c != 0), "expected a non-zero exit: {}", end.dump());
    assert!(!end.stderr.contains("panicked"), "a panic is not an explanation: {}", end.dump());
    assert!(end.stderr.starts_with("error: "), "stderr should start with the error: {}", end.dump());
    for needle in needles {
        assert!(end.stderr.contains(needle), "stderr should say {needle:?}: {}", end.dump());
    }
}

/// `-d <device> -i <port>`, the device every test uses (`testkit`).
fn device() -> Vec<String> {
    let dev = common::device();
    vec!["-d".into(), dev.name.clone(), "-i".into(), dev.port.to_string()]
}

/// `device()` and `-g <GID index>`.
fn dev_gid() -> Vec<String> {
    common::device_args()
}

/// `dev_gid()` followed by `extra`, as the `&str` list [`start`] takes.
fn with<'a>(base: &'a [String], extra: &[&'a str]) -> Vec<&'a str> {
    base.iter().map(String::as_str).chain(extra.iter().copied()).collect()
}

// ---------------------------------------------------------------------------------------
// Bad flags: device, port, GID, MTU, size, iters
// ---------------------------------------------------------------------------------------

#[test]
fn unknown_device_lists_the_devices_there_are() {
    let _d = device_lock();
    let end = run(S01, &["-d", "nosuch"], PROMPT);
    assert_explained(&end, &["finding RDMA device 'nosuch'", "this host has:", &common::device().name, "-d "]);
}

#[test]
fn port_0_is_refused() {
    let _d = device_lock();
    let name = common::device().name.clone();
    let end = run(S01, &["-d", &name, "-i", "0"], PROMPT);
    assert_explained(&end, &["port 0 does not exist", "numbered from 1"]);
}

#[test]
fn port_past_phys_port_cnt() {
    let _d = device_lock();
    let dev = common::device();
    let past = dev.port_past_end().to_string();
    let end = run(S01, &["-d", &dev.name, "-i", &past], PROMPT);
    assert_explained(
        &end,
        &[&format!("using port {past} of"), &format!("{} port(s)", dev.port_past_end() - 1), "-i 1"],
    );
}

#[test]
fn gid_index_past_the_table() {
    let _d = device_lock();
    // The table's length as ibv_devinfo reports it (rxe: 1024).
    let len = common::device().gid_tbl_len();
    let past = len.to_string();
    let dev = device();
    let end = run(S01, &with(&dev, &["-g", &past]), PROMPT);
    assert_explained(
        &end,
        &[&format!("GID index {past} is past the end"), &format!("{len} entries"), "pass an index that holds a GID: "],
    );
}

#[test]
fn gid_index_of_an_empty_entry() {
    let _d = device_lock();
    // The first entry ibv_devinfo lists no GID for: in the lab, index 2 (0 is fe80::, 1 is
    // ::ffff:192.0.2.1).
    let empty = common::device().empty_gid_index().to_string();
    let dev = device();
    let end = run(S01, &with(&dev, &["-g", &empty]), PROMPT);
    assert_explained(&end, &[&format!("GID entry {empty} is empty"), "pass an index that holds a GID"]);
}

#[test]
fn mtu_not_in_the_allowed_set() {
    let _d = device_lock();
    let base = dev_gid();
    let end = run(S05, &with(&base, &["-m", "300"]), PROMPT);
    assert_explained(&end, &["MTU 300 is not an InfiniBand path MTU", "256, 512, 1024, 2048 or 4096"]);
}

#[test]
fn size_0() {
    let _d = device_lock();
    let base = dev_gid();
    let end = run(S03, &with(&base, &["-s", "0"]), PROMPT);
    assert_explained(&end, &["size 0", "at least 1 byte"]);
}

/// A `/proc/meminfo` value in bytes.
fn meminfo(key: &str) -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .unwrap_or_else(|| panic!("{key} in /proc/meminfo"))
        * 1024
}

#[test]
fn size_larger_than_memory_can_register() {
    let _d = device_lock();
    // Registration pins the buffer in RAM, so it must fit in the memory there is, and in
    // what is available. The step must refuse both before allocating: an over-committed
    // allocation that is then filled and pinned draws the OOM killer, which leaves no
    // message at all (that is what a 2000000000-byte -s did in the 2 GiB lab VM).
    let total = meminfo("MemTotal");
    let max = u64::from(u32::MAX); // the largest -s there is: a SEND's length is 32 bits
    let base = dev_gid();

    let end = run(S03, &with(&base, &["-s", "4294967295"]), PROMPT);
    if max > total {
        assert_explained(
            &end,
            &["allocating a 4294967295-byte buffer", "more than this machine's memory", "smaller -s"],
        );
    } else {
        // A machine with more than 4 GiB may really register 4 GiB; it must not panic.
        assert!(!end.stderr.contains("panicked"), "{}", end.dump());
    }

    // Just under MemTotal: fits the machine, not what is available (the kernel's own
    // memory alone is more than a page). Only expressible where MemTotal fits in -s.
    let size = (total - 4096).to_string();
    if total - 4096 <= max {
        let end = run(S03, &with(&base, &["-s", &size]), PROMPT);
        assert_explained(
            &end,
            &[&format!("allocating a {size}-byte buffer"), "more than the memory available now", "smaller -s"],
        );
    }
}

#[test]
fn registering_past_the_locked_memory_limit_names_the_limit() {
    let _d = device_lock();
    // A student is not root: ibv_reg_mr pins the buffer and the kernel charges it to
    // RLIMIT_MEMLOCK, which root escapes (CAP_IPC_LOCK). So run 03 as nobody, with the old
    // 64 KiB default limit, and register 1 MiB: ENOMEM, and the error must say it is the
    // limit, and how to raise it.
    // A copy in the temp dir: the project may lie under a directory nobody cannot enter.
    let copy = std::env::temp_dir().join(format!("03_reg_mr-as-nobody-{}", std::process::id()));
    std::fs::copy(S03, &copy).unwrap();
    let program = format!("ulimit -l 64 && exec {} {} -s 1048576", copy.display(), dev_gid().join(" "));
    let args = ["--reuid=65534", "--regid=65534", "--clear-groups", "sh", "-c", &program];
    let end = run("setpriv", &args, PROMPT);
    let _ = std::fs::remove_file(&copy);
    assert_explained(
        &end,
        &[
            "ibv_reg_mr(length 1048576",
            "ENOMEM",
            "RLIMIT_MEMLOCK, 64 KiB",
            "ulimit -l",
            "CAP_IPC_LOCK (root, normally) is exempt",
        ],
    );
}

#[test]
fn iters_0() {
    let _d = device_lock();
    let base = dev_gid();
    let end = run(S08, &with(&base, &["-n", "0", "127.0.0.1"]), PROMPT);
    assert_explained(&end, &["iters 0", "at least 1"]);
}

// ---------------------------------------------------------------------------------------
// The TCP side channel, against fake peers
// ---------------------------------------------------------------------------------------

/// A fake server on `port` (bound before this returns, so the step's client can connect at
/// once): accepts one client and hands the connection to `f`.
fn fake_server(port: u16, f: impl FnOnce(TcpStream) + Send + 'static) -> JoinHandle<()> {
    let listener = TcpListener::bind(("127.0.0.1", port)).unwrap_or_else(|e| panic!("bind {port}: {e}"));
    thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        f(stream)
    })
}

/// A fake client: connects to the step's server on `port` once it is up (retrying while
/// refused) and hands the connection to `f`.
fn fake_client(port: u16, f: impl FnOnce(TcpStream) + Send + 'static) -> JoinHandle<()> {
    thread::spawn(move || {
        let deadline = Instant::now() + PROMPT;
        let stream = loop {
            match TcpStream::connect(("127.0.0.1", port)) {
                Ok(s) => break s,
                Err(_) if Instant::now() < deadline => thread::sleep(Duration::from_millis(20)),
                Err(e) => panic!("the step's server never listened on {port}: {e}"),
            }
        };
        f(stream)
    })
}

/// Reads the step's 52-byte address, as a server does before it answers.
fn read_dest(s: &mut TcpStream) {
    let mut buf = [0u8; 52];
    s.read_exact(&mut buf).expect("the step's 52-byte address");
}

/// The step as a client of a fake server on `port`, with `--timeout 2`.
fn client_of_fake(program: &str, port: u16, f: impl FnOnce(TcpStream) + Send + 'static) -> Ended {
    let fake = fake_server(port, f);
    let base = dev_gid();
    let p = port.to_string();
    let end = run(program, &with(&base, &["-p", &p, "--timeout", "2", "127.0.0.1"]), Duration::from_secs(2) + MARGIN);
    fake.join().unwrap();
    end
}

/// The step as the server of a fake client, with `--timeout 2`.
fn server_of_fake(program: &str, port: u16, f: impl FnOnce(TcpStream) + Send + 'static) -> Ended {
    let base = dev_gid();
    let p = port.to_string();
    let step = start(program, &with(&base, &["-p", &p, "--timeout", "2"]));
    let fake = fake_client(port, f);
    let end = step.end(Duration::from_secs(2) + MARGIN);
    fake.join().unwrap();
    end
}

#[test]
fn nothing_listening_on_the_server_port() {
    let _d = device_lock();
    let base = dev_gid();
    let port = common::tcp_port().to_string();
    let end = run(S05, &with(&base, &["-p", &port, "--timeout", "2", "127.0.0.1"]), Duration::from_secs(2) + MARGIN);
    assert_explained(&end, &[&format!("nothing is listening on 127.0.0.1:{port}"), "start the server first"]);
}

#[test]
fn server_that_accepts_and_says_nothing() {
    let _d = device_lock();
    let end = client_of_fake(S05, common::tcp_port(), |mut s| {
        // Hold the connection open, silent, until the client gives up and closes it.
        let _ = s.read_to_end(&mut Vec::new());
    });
    assert_explained(&end, &["connected but sent nothing for 2 s", "--timeout"]);
}

#[test]
fn client_that_connects_and_says_nothing() {
    let _d = device_lock();
    let end = server_of_fake(S05, common::tcp_port(), |mut s| {
        let _ = s.read_to_end(&mut Vec::new());
    });
    assert_explained(&end, &["connected but sent nothing for 2 s"]);
}

#[test]
fn server_sending_garbage() {
    let _d = device_lock();
    let end = client_of_fake(S05, common::tcp_port(), |mut s| {
        read_dest(&mut s);
        s.write_all(&[b'?'; 52]).unwrap();
        let _ = s.read_to_end(&mut Vec::new());
    });
    assert_explained(&end, &["not in rc_pingpong's format", "received \"????"]);
}

#[test]
fn client_sending_garbage() {
    let _d = device_lock();
    let end = server_of_fake(S08, common::tcp_port(), |mut s| {
        // 52 bytes, so it is a whole message in the wrong format (not a short one).
        let mut msg = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".to_vec();
        msg.resize(52, b'-');
        s.write_all(&msg).unwrap();
        let _ = s.read_to_end(&mut Vec::new());
    });
    assert_explained(&end, &["not in rc_pingpong's format", "GET / HTTP/1.1"]);
}

#[test]
fn server_sending_a_short_message_and_closing() {
    let _d = device_lock();
    let end = client_of_fake(S05, common::tcp_port(), |mut s| {
        read_dest(&mut s);
        s.write_all(&DEST[..20]).unwrap();
    });
    assert_explained(&end, &["closed the connection after 20 of the 52 bytes"]);
}

#[test]
fn client_sending_a_short_message_and_closing() {
    let _d = device_lock();
    let end = server_of_fake(S08, common::tcp_port(), |mut s| {
        s.write_all(&DEST[..31]).unwrap();
    });
    assert_explained(&end, &["closed the connection after 31 of the 52 bytes"]);
}

#[test]
fn server_sending_an_over_long_message() {
    let _d = device_lock();
    let end = client_of_fake(S05, common::tcp_port(), |mut s| {
        read_dest(&mut s);
        let mut msg = DEST.to_vec();
        msg.extend_from_slice(b"and more");
        s.write_all(&msg).unwrap();
        let _ = s.read_to_end(&mut Vec::new());
    });
    assert_explained(&end, &["sent more than the 52 bytes", "\"and more\""]);
}

#[test]
fn client_sending_a_09_message_to_an_08_server() {
    let _d = device_lock();
    // 09_rdma_write's 78-byte address (rkey and buffer address appended) is over-long for
    // steps 05-08; the error says which step the peer probably is.
    let end = server_of_fake(S08, common::tcp_port(), |mut s| {
        let mut msg = DEST[..51].to_vec();
        msg.extend_from_slice(b":00001234:00007f0012345000\0");
        assert_eq!(msg.len(), 78);
        s.write_all(&msg).unwrap();
        let _ = s.read_to_end(&mut Vec::new());
    });
    assert_explained(&end, &["sent more than the 52 bytes", "09_rdma_write"]);
}

#[test]
fn server_closing_at_once() {
    let _d = device_lock();
    let end = client_of_fake(S05, common::tcp_port(), drop);
    assert_explained(&end, &["closed the connection before"]);
}

#[test]
fn client_closing_before_done() {
    let _d = device_lock();
    // A well-formed address, so the real server connects its QP (RTR, RTS) and answers;
    // then the fake client goes away instead of sending "done".
    let end = server_of_fake(S08, common::tcp_port(), |mut s| {
        s.write_all(DEST).unwrap();
        read_dest(&mut s);
    });
    assert_explained(&end, &["closed the connection before sending its 5-byte \"done\" message"]);
}

// ---------------------------------------------------------------------------------------
// A peer killed in the middle of the ping-pong
// ---------------------------------------------------------------------------------------

/// Starts 08 server and client for a long ping-pong, waits until both are in the timed
/// loop plus a second, kills one with SIGKILL, and checks that the survivor gives up with
/// an explained error within `--timeout` and a margin.
fn kill_mid_pingpong(kill_server: bool, events: bool, port: u16) {
    let _d = device_lock();
    // As short as the fake peers' (below): the survivor's wait is most of the test's time.
    const TIMEOUT: u64 = 2;
    let base = dev_gid();
    let p = port.to_string();
    let t = TIMEOUT.to_string();
    let mut common = vec!["-p", p.as_str(), "-n", "1000000", "--timeout", t.as_str()];
    if events {
        common.push("-e");
    }
    let mut server = start(S08, &with(&base, &common));
    common.push("127.0.0.1");
    let mut client = start(S08, &with(&base, &common));
    server.wait_for_stdout("remote address:", PROMPT);
    client.wait_for_stdout("remote address:", PROMPT);
    thread::sleep(Duration::from_secs(1));

    let (victim, survivor) = if kill_server { (server, client) } else { (client, server) };
    victim.signal(libc::SIGKILL);
    let killed_at = Instant::now();
    let victim = victim.end(PROMPT);
    assert_eq!(victim.status.signal(), Some(libc::SIGKILL), "{}", victim.dump());

    let end = survivor.end(Duration::from_secs(TIMEOUT) + MARGIN);
    let took = killed_at.elapsed();
    assert!(end.stdout.contains("remote address:"), "{}", end.dump());
    assert_explained(&end, &[]);
    // Whichever the survivor was doing when its peer died: waiting for a receive (no
    // completion), or a SEND that is never acknowledged (retry exceeded on an HCA; on rxe,
    // where retry_cnt 7 retries forever, no completion either), or flushed.
    assert!(
        [
            &format!("no completion for {TIMEOUT} s"),
            "IBV_WC_RETRY_EXC_ERR",
            "retry counter exceeded",
            "IBV_WC_WR_FLUSH_ERR",
            "flushed"
        ]
        .iter()
        .any(|n| end.stderr.contains(n)),
        "the survivor should report the dead peer: {}",
        end.dump()
    );
    if end.stderr.contains("no completion") {
        assert!(end.stderr.to_lowercase().contains("the peer stopped"), "{}", end.dump());
    }
    eprintln!("survivor ended {took:.1?} after the kill (--timeout {TIMEOUT})");
}

#[test]
fn server_killed_mid_pingpong() {
    kill_mid_pingpong(true, false, common::tcp_port());
}

#[test]
fn client_killed_mid_pingpong() {
    kill_mid_pingpong(false, false, common::tcp_port());
}

#[test]
fn server_killed_mid_pingpong_with_events() {
    kill_mid_pingpong(true, true, common::tcp_port());
}

#[test]
fn client_killed_mid_pingpong_with_events() {
    kill_mid_pingpong(false, true, common::tcp_port());
}

// ---------------------------------------------------------------------------------------
// Ctrl-C
// ---------------------------------------------------------------------------------------

/// How fast Ctrl-C must end a step.
const CTRL_C: Duration = Duration::from_secs(2);

/// Sends SIGINT and checks the step is gone within [`CTRL_C`], killed by that signal (the
/// default disposition, as for rc_pingpong: the kernel tears down every verbs object).
fn ctrl_c(step: Running) {
    step.signal(libc::SIGINT);
    let sent = Instant::now();
    let end = step.end(PROMPT);
    let took = sent.elapsed();
    assert!(took < CTRL_C, "Ctrl-C took {took:?}: {}", end.dump());
    assert!(!end.status.success(), "{}", end.dump());
    assert!(!end.stderr.contains("panicked"), "{}", end.dump());
}

#[test]
fn ctrl_c_while_the_server_waits_for_its_client() {
    let _d = device_lock();
    let base = dev_gid();
    let port = common::tcp_port().to_string();
    let mut server = start(S08, &with(&base, &["-p", &port]));
    server.wait_for_stdout("local address:", PROMPT);
    thread::sleep(Duration::from_millis(500)); // in accept by now
    ctrl_c(server);
}

fn interrupt_mid_pingpong(events: bool, port: u16) {
    let _d = device_lock();
    let base = dev_gid();
    let p = port.to_string();
    let mut common = vec!["-p", p.as_str(), "-n", "1000000"];
    if events {
        common.push("-e");
    }
    let mut server = start(S08, &with(&base, &common));
    common.push("127.0.0.1");
    let mut client = start(S08, &with(&base, &common));
    server.wait_for_stdout("remote address:", PROMPT);
    client.wait_for_stdout("remote address:", PROMPT);
    thread::sleep(Duration::from_secs(1));
    ctrl_c(client);
    ctrl_c(server);
}

#[test]
fn ctrl_c_mid_pingpong() {
    interrupt_mid_pingpong(false, common::tcp_port());
}

#[test]
fn ctrl_c_mid_pingpong_with_events() {
    interrupt_mid_pingpong(true, common::tcp_port());
}

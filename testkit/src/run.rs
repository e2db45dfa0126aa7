//! Running programs with a bounded wait: one alone, or a server and a client.

use std::io::Read;
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long one program may run before the test kills it and fails.
pub const TIMEOUT: Duration = Duration::from_secs(90);

/// Spawns `program` with `args`, stdout and stderr captured.
pub fn spawn(program: &str, args: &[String]) -> Child {
    spawn_as(Command::new(program), program, args)
}

/// Spawns `cmd` (which runs `program`, perhaps through a wrapper such as `stdbuf`) with
/// `args` added, stdout and stderr captured, no colour and no stdin.
///
/// Without `RDMA_DEVICE`, `RDMA_IB_PORT` and `RDMA_GID_INDEX`: the steps take them as the
/// defaults of `-d`, `-i` and `-g` and then add a `getenv` line to their trace. The lab VM
/// and the classroom image export them, so a case that leaves a flag out on purpose (no
/// `-g`) would otherwise trace, and do, something else there than in its snapshot. The
/// tests pass what they mean as flags (`device_args`).
pub fn spawn_as(mut cmd: Command, program: &str, args: &[String]) -> Child {
    cmd.args(args)
        .env("NO_COLOR", "1")
        .env_remove("RDMA_DEVICE")
        .env_remove("RDMA_IB_PORT")
        .env_remove("RDMA_GID_INDEX")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {program}: {e}"))
}

/// Waits for `child` until `deadline` and kills it then: its exit status (`None` when it
/// had to be killed), stdout and stderr. The pipes are drained on threads, so a chatty
/// child cannot block on a full pipe.
pub fn wait_or_kill(child: Child, deadline: Instant) -> (Option<std::process::ExitStatus>, Vec<u8>, Vec<u8>) {
    wait_or_kill_when(child, deadline, |_| false)
}

/// [`wait_or_kill`], but kills `child` as soon as its stdout so far is `enough`: for a peer
/// that has printed all it will and would otherwise wait for ever.
pub fn wait_or_kill_when(
    mut child: Child,
    deadline: Instant,
    enough: impl Fn(&[u8]) -> bool,
) -> (Option<std::process::ExitStatus>, Vec<u8>, Vec<u8>) {
    let mut out = child.stdout.take().expect("stdout piped");
    let mut err = child.stderr.take().expect("stderr piped");
    let stdout = Arc::new(Mutex::new(Vec::new()));
    let out_t = {
        let stdout = Arc::clone(&stdout);
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            loop {
                match out.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => stdout.lock().unwrap().extend_from_slice(&buf[..n]),
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
        })
    };
    let err_t = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = err.read_to_end(&mut v);
        v
    });
    let status = loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            break Some(status);
        }
        if Instant::now() > deadline || enough(&stdout.lock().unwrap()) {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    out_t.join().unwrap();
    let stdout = std::mem::take(&mut *stdout.lock().unwrap());
    (status, stdout, err_t.join().unwrap())
}

/// Waits for `child` at most until `deadline`; kills it and panics after that.
pub fn wait(child: Child, what: &str, deadline: Instant) -> Output {
    let (status, stdout, stderr) = wait_or_kill(child, deadline);
    let Some(status) = status else {
        panic!(
            "{what} did not finish in time and was killed\n--- stdout\n{}--- stderr\n{}",
            String::from_utf8_lossy(&stdout),
            String::from_utf8_lossy(&stderr)
        );
    };
    Output { status, stdout, stderr }
}

/// Runs one program to completion (bounded by [`TIMEOUT`]).
pub fn run(program: &str, args: &[String]) -> Output {
    wait(spawn(program, args), program, Instant::now() + TIMEOUT)
}

/// Runs a server and a client (both bounded by [`TIMEOUT`]); the client retries its
/// connect until the server listens, so they can start together.
pub fn run_pair(server: &str, server_args: &[String], client: &str, client_args: &[String]) -> (Output, Output) {
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
    args.iter().position(|a| a == "-p").and_then(|i| args.get(i + 1)).and_then(|p| p.parse().ok()).unwrap_or(18515)
}

/// True when some socket listens on TCP `port` (state 0A in /proc/net/tcp{,6}); checking
/// this way does not consume the server's one accept (and the C client does not retry a
/// refused connect, so the exercise grader waits for this too).
pub fn listening(port: u16) -> bool {
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

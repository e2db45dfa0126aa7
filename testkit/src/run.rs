//! Running one program with a bounded wait (a step in its roles: [`crate::runner`]).

use std::io::Read;
use std::process::{Child, Command, Output, Stdio};
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
fn wait_or_kill(mut child: Child, deadline: Instant) -> (Option<std::process::ExitStatus>, Vec<u8>, Vec<u8>) {
    let drain = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            let _ = pipe.read_to_end(&mut v);
            v
        })
    };
    let out_t = drain(Box::new(child.stdout.take().expect("stdout piped")));
    let err_t = drain(Box::new(child.stderr.take().expect("stderr piped")));
    let status = loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            break Some(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    (status, out_t.join().unwrap(), err_t.join().unwrap())
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

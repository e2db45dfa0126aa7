//! Running a step on the device: the student's program, the reference, their peers.

use std::process::{Child, Command};
use std::time::{Duration, Instant};

use rdma_dissect::role::Role;
use testkit as common;

use super::{Partner, Step};

/// How long one program may take before it is killed and the check fails.
pub(crate) const DEADLINE: Duration = Duration::from_secs(60);
/// Our programs give up waiting for their peer after this (`--timeout`).
const PEER_TIMEOUT: &str = "10";

/// What one process did.
pub(super) struct Ran {
    /// What it was, for messages: `your 05_modify_qp_rtr`, `ibv_rc_pingpong`.
    pub(super) what: String,
    pub(super) stdout: String,
    pub(super) stderr: String,
    /// None when it was killed (it did not finish in time, or it was a C peer we stop).
    pub(super) status: Option<i32>,
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
pub(super) struct RunResult {
    pub(super) ours: Ran,
    pub(super) peer: Option<Ran>,
    /// Ours: the server, the client, or (`None`) the one process.
    pub(super) side: Option<Role>,
    /// e.g. "as the server, ibv_rc_pingpong as the client, -n 100"
    pub(super) label: String,
}

pub(super) fn run_once(step: &Step, program: &str, reference: &str, extra: &[&str], side: Option<Role>) -> RunResult {
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
pub(super) fn runs(step: &Step) -> Vec<(&'static [&'static str], Option<Role>)> {
    let sides: &[Option<Role>] =
        if step.partner.is_none() { &[None] } else { &[Some(Role::Server), Some(Role::Client)] };
    step.runs.iter().flat_map(|&extra| sides.iter().map(move |&side| (extra, side))).collect()
}

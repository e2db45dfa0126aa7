//! Running a step on the device: the student's program, the reference, their peers.

use std::time::Duration;

use rdma_dissect::role::Role;
use testkit as common;
use testkit::runner;

use super::{Exercise, Partner};

/// How long one program may take before it is killed and the check fails.
pub(crate) const DEADLINE: Duration = Duration::from_secs(60);
/// Our programs give up waiting for their peer after this (`--timeout`): a run that works
/// takes 1-3 s under emulation, and one that waits for a peer gone wrong waits this long.
pub(crate) const PEER_TIMEOUT: u64 = 5;

/// How long a peer may run on once the program under test has failed. What it prints then
/// is not graded (the report is ours' first difference from the reference's trace); what
/// the redaction takes from it, its own address, it printed before the exchange.
const PEER_GRACE: Duration = Duration::from_millis(250);

/// What one process did.
pub(super) struct Ran {
    /// What it was, for messages: `your 05_modify_qp_rtr`, `ibv_rc_pingpong`.
    pub(super) what: String,
    pub(super) stdout: String,
    pub(super) stderr: String,
    /// None when it was killed (it did not finish in time, or it was a C peer we stop).
    pub(super) status: Option<i32>,
}

impl Ran {
    /// What the runner says `ran` did, named `what` for messages.
    fn of(ran: &runner::Ran, what: &str) -> Ran {
        Ran {
            what: what.to_string(),
            stdout: String::from_utf8_lossy(&ran.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&ran.stderr).into_owned(),
            status: ran.status.and_then(|s| s.code()),
        }
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

/// Runs `program` (step `step`), under the words `under` (the class grader's sandbox,
/// `grade bounded UID SECONDS`; none for a student's own check), in `side` with the step's
/// partner opposite, through testkit's runner: the server first, the client once the
/// server is ready. Ours (and the reference, which is ours too) gets `--timeout`; a C peer
/// that outlasts the step (`c-outlasts`: rc_pingpong opposite 05–07) is stopped once ours
/// has exited and it has printed the peer's address. When ours fails, its peer — which
/// would wait for ever for a partner that is gone — gets [`PEER_GRACE`] to end by itself,
/// then is stopped: the verdict is ours' failure whatever the peer does.
pub(super) fn run_once(
    step: &Exercise,
    program: &str,
    under: &[String],
    reference: &str,
    extra: &[String],
    side: Option<Role>,
) -> RunResult {
    let flags = if extra.is_empty() { String::new() } else { format!(", {}", extra.join(" ")) };
    let ours_name = format!("your {}", step.bin);
    let listed = common::step(&step.bin).expect("a listed step");
    // The C tool the runner picks for this step (ibv_ud_pingpong for 11, …), by name.
    let c_tool = runner::Player::C.program(&listed).unwrap_or_else(|why| why);
    let mut run = runner::Run::new(listed).ours(program).flags(&extra.iter().map(String::as_str).collect::<Vec<_>>());
    run.timeout = DEADLINE;
    let Some(partner) = step.partner else {
        run.wrap = under.to_vec();
        let ran = run.run();
        return RunResult { ours: Ran::of(&ran[0], &ours_name), peer: None, side, label: format!("alone{flags}") };
    };
    let (peer, peer_name) = match partner {
        Partner::C => (runner::Player::C, c_tool),
        Partner::Rping => (runner::Player::Rping, "rping".to_string()),
        Partner::Reference => (runner::Player::Ours(reference.to_string()), format!("the reference {}", step.bin)),
    };
    let ours_role = side.unwrap_or(Role::Client);
    let mut run = if ours_role == Role::Server { run.client(peer) } else { run.server(peer) };
    *(if ours_role == Role::Server { &mut run.server_wrap } else { &mut run.client_wrap }) = under.to_vec();
    run = run.ours_flags(&["--timeout", &PEER_TIMEOUT.to_string()]);
    if step.cm {
        // rping's flags: three validated pings.
        run = run.flags(&["-C", "3", "-V"]);
    }
    run.after_failure = Some((Some(ours_role), PEER_GRACE));
    let ran = run.run();
    let (ours, peer) = if ours_role == Role::Server { (&ran[0], &ran[1]) } else { (&ran[1], &ran[0]) };
    let (ours, mut peer) = (Ran::of(ours, &ours_name), Ran::of(peer, &peer_name));
    // rping reports a normal end on stderr ("server DISCONNECT EVENT..."): with status 0,
    // that is not a failure.
    if partner == Partner::Rping && peer.status == Some(0) {
        peer.stderr.clear();
    }
    let label = format!("as the {}, {peer_name} as the {}{flags}", ours_role.label(), ours_role.peer().label());
    RunResult { ours, peer: Some(peer), side, label }
}

/// The runs of `step`, in a fixed order: an `alone` step's argument sets; a pair step's
/// one set in both roles, the student's program the server and then the client, or its
/// several sets with the roles in turn. Each role and each set is run, not every pairing
/// of them: a pair step's sets differ in how it waits for completions (busy polling, the
/// completion channel), which its server and client do with the same code.
pub(super) fn runs(step: &Exercise) -> Vec<(Vec<String>, Option<Role>)> {
    const ROLES: [Role; 2] = [Role::Server, Role::Client];
    match (step.partner, step.runs.as_slice()) {
        (None, sets) => sets.iter().map(|set| (set.clone(), None)).collect(),
        (Some(_), [set]) => ROLES.iter().map(|&role| (set.clone(), Some(role))).collect(),
        (Some(_), sets) => {
            sets.iter().zip(ROLES.iter().cycle()).map(|(set, &role)| (set.clone(), Some(role))).collect()
        }
    }
}

//! Break it: each stage's characteristic mistakes, made on purpose on a real device.
//!
//! People learn verbs from what goes wrong. `--break <CASE>` runs a step with exactly one
//! named mistake — an access flag left out, an attribute missing from a mask, a receive
//! never posted — lets the device fail the way it really fails, and prints the real error
//! followed by what the case did wrong: the rule it broke, where in the code the mistake
//! sits, and the fix. `--break help` lists a step's cases.
//!
//! **Both sides take the same case.** For steps 05–09, run the server and the client with
//! the same `--break`: the case knows which side makes the mistake, and the other side
//! plays its part unchanged, so its output shows what a correct peer sees (often: nothing
//! at all, until its `--timeout`). 03 and 04 need no peer: their mistakes only show once
//! data moves, so their cases connect the QP to itself (see [`loopback`]) and send.
//!
//! **No copies of stage code.** A case calls the same stage functions the steps call,
//! changing only the one value the mistake is about (an attribute, a mask, a key). The
//! stages expose their attributes for that: [`crate::stages::modify_qp_rtr::rtr_attr`] and
//! [`RTR_MASK`](crate::stages::modify_qp_rtr::RTR_MASK), and the same for RTS.

pub mod atomics;
pub mod create_qp;
pub mod modify_qp_rtr;
pub mod modify_qp_rts;
pub mod post_send;
pub mod rdma_cm;
pub mod rdma_write;
pub mod reg_mr;
pub mod srq_pingpong;
pub mod ud_pingpong;

use std::process::ExitCode;
use std::rc::Rc;

use crate::cli::{DeviceArgs, StepArgs};
use crate::error::{self, Result};
use crate::role::Role;
use crate::stages::create_qp::{create_qp, QpOptions, Queues};
use crate::stages::modify_qp_rtr::{local_dest, modify_qp_rtr};
use crate::stages::modify_qp_rts::{modify_qp_rts, rts_attr, RTS_MASK};
use crate::stages::open_device::{open_device, Device};
use crate::stages::{alloc_pd::alloc_pd, reg_mr::reg_mr};
use crate::trace;
use crate::verbs::{ibv_access_flags, ibv_qp_attr, Mr, Pd, Qp, IBV_MTU_1024};

/// How a message names who made a mistake, or this process: the one process of 01–04
/// (`None`), or a side of 05–09.
fn who(role: Option<Role>) -> &'static str {
    match role {
        None => "this program",
        Some(Role::Server) => "the server",
        Some(Role::Client) => "the client",
    }
}

/// One mistake, made on purpose.
pub struct Case<A: 'static> {
    /// What `--break` takes.
    pub name: &'static str,
    /// One line for `--break help`.
    pub summary: &'static str,
    /// Who makes the mistake: the server, the client, or (`None`) the one process of 01–04.
    pub by: Option<Role>,
    /// The verbs rule the mistake breaks.
    pub rule: &'static str,
    /// Where in the code the mistake is made (and where the correct code is).
    pub code: &'static str,
    /// What to do instead.
    pub fix: &'static str,
    /// Runs the step with the mistake. Both sides of a two-sided step run this.
    pub run: fn(&A) -> Result<()>,
}

/// The value of `--break`: a case, or `help`.
pub enum Choice<A: 'static> {
    /// `--break help`: list the cases.
    Help,
    /// Run this case.
    Case(&'static Case<A>),
}

// Derived Clone would require `A: Clone`; a Choice only holds a shared reference.
impl<A> Clone for Choice<A> {
    fn clone(&self) -> Self {
        match self {
            Choice::Help => Choice::Help,
            Choice::Case(case) => Choice::Case(case),
        }
    }
}

/// The clap value parser for a step's `--break`: `help` or one of `cases`.
pub fn parser<A: Send + Sync>(
    cases: &'static [Case<A>],
) -> impl Fn(&str) -> std::result::Result<Choice<A>, String> + Clone + Send + Sync + 'static {
    move |s: &str| {
        if s == "help" {
            return Ok(Choice::Help);
        }
        cases.iter().find(|c| c.name == s).map(Choice::Case).ok_or_else(|| {
            if cases.is_empty() {
                return NO_CASES.to_string();
            }
            let names: Vec<&str> = cases.iter().map(|c| c.name).collect();
            format!("no such case on this step; the cases are: {} (or help)", names.join(", "))
        })
    }
}

/// Runs `--break`: lists the cases, or runs one and explains the failure it causes.
///
/// The process exits 1 when the device (or the peer) failed, as it should, and 0 when
/// nothing failed on this side — which is itself the lesson for some mistakes, and is
/// said so.
pub fn main<A: StepArgs>(choice: Choice<A>, cases: &'static [Case<A>], args: &A) -> ExitCode {
    let case = match choice {
        Choice::Help => {
            print_help(cases);
            return ExitCode::SUCCESS;
        }
        Choice::Case(case) => case,
    };
    let here = args.peer_role();
    trace::event("break").kv("case", case.name).kv("mistake_by", case.by.map_or("self", Role::label)).emit();
    match (case.run)(args) {
        Ok(()) if case.by == here => {
            trace::line(format_args!(
                "break: {} made this mistake and no verb failed here: see the peer's output",
                who(here)
            ));
            ExitCode::SUCCESS
        }
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            error::report(&err.into());
            explain(case, here);
            ExitCode::FAILURE
        }
    }
}

/// What a step without cases (01, 02, 08) says to `--break`, which it takes, hidden, so that
/// every step has the same shape.
const NO_CASES: &str =
    "this step has no --break cases; the \"Break it\" section of its chapter says why, and where its mistakes are shown";

fn print_help<A: StepArgs>(cases: &[Case<A>]) {
    if cases.is_empty() {
        println!("{NO_CASES}");
        return;
    }
    let width = cases.iter().map(|c| c.name.len()).max().unwrap_or(0);
    println!("Mistakes this step can make on purpose (--break CASE):");
    for case in cases {
        println!("  {:width$}  {}", case.name, case.summary);
    }
    if cases.iter().any(|c| c.by.is_some()) {
        println!("Run the server and the client with the same --break CASE.");
    }
}

/// The second half of a break-it report: what the case did wrong, on stderr under the
/// real error.
fn explain<A>(case: &Case<A>, here: Option<Role>) {
    let by = if case.by == here || case.by.is_none() {
        "made here".to_string()
    } else {
        format!("made by {}", who(case.by))
    };
    eprintln!("broken on purpose (--break {}, {by}): {}", case.name, case.summary);
    for (label, text) in [("rule", case.rule), ("where", case.code), ("fix", case.fix)] {
        eprintln!("  {label:<6} {}", text.replace('\n', "\n         "));
    }
}

/// Stages 01–04 as a case needs them: the device, a PD, an MR of `size` bytes with
/// `access`, and a QP (in INIT) with `opts`. Fields drop in reverse order of creation,
/// as `pp_close_ctx` does.
pub struct Stack {
    /// The QP, its CQ and channel.
    pub q: Queues,
    /// The message buffer.
    pub mr: Mr,
    /// The protection domain.
    pub pd: Rc<Pd>,
    /// The open device and port.
    pub dev: Device,
}

impl Stack {
    /// Runs stages 01–04.
    pub fn new(device: &DeviceArgs, size: u32, access: ibv_access_flags, opts: QpOptions) -> Result<Stack> {
        Stack::on(open_device(&device.choice())?, size, access, opts)
    }

    /// Runs stages 02–04 on a device stage 01 has opened: for a case that sizes its buffer
    /// from what the device says (step 11's, from the port's active MTU).
    pub fn on(dev: Device, size: u32, access: ibv_access_flags, opts: QpOptions) -> Result<Stack> {
        let pd = alloc_pd(&dev.ctx)?;
        let mr = reg_mr(&pd, size as usize, access)?;
        let q = create_qp(&dev, &pd, opts)?;
        Ok(Stack { q, mr, pd, dev })
    }
}

/// Connects the QP to itself: its own address as the remote one, then RTR and RTS.
///
/// An RC QP may be its own peer: what it sends arrives on its own receive queue. That
/// lets the single-process steps show where their mistakes fail — at the first SEND —
/// without a second program.
pub fn loopback(s: &Stack) -> Result<()> {
    let me = local_dest(&s.dev, &s.q.qp);
    trace::line(format_args!("  loopback:       {me}"));
    modify_qp_rtr(&s.q.qp, &s.dev, &me, IBV_MTU_1024, 0)?;
    modify_qp_rts(&s.q.qp, me.psn)
}

/// RTR→RTS as stage 06 does it, but with `retry_cnt` retries instead of 7.
///
/// For the cases whose lesson is "the peer never acknowledges": the spec makes 7 mean
/// seven retries, but rxe (Linux 6.1) never counts a `retry_cnt` of 7 down, so with
/// rc_pingpong's value the sender would retransmit forever and only `--timeout` would end
/// it. A finite count shows the error a hardware HCA reports.
pub fn rts_with_retry_cnt(qp: &Qp, psn: u32, retry_cnt: u8) -> Result<()> {
    qp.modify(&ibv_qp_attr { retry_cnt, ..rts_attr(psn) }, RTS_MASK)
}

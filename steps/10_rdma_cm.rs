//! Step 10: rping — connect with the connection manager (rdma_cm), then RDMA READ and WRITE.
//!
//! New: stage 10, [`rdma_dissect::stages::rdma_cm`]. The CM replaces stages 05 and 06 (the
//! TCP exchange and the modify_qp calls): it resolves an IP address to a device, creates
//! the QP and connects it. The ping loop is rping's, so either side may be Debian's `rping`.

use rdma_dissect::breakit::{self, Case};
use rdma_dissect::error;
use rdma_dissect::role::Role;
use rdma_dissect::rping::{ping_client, ping_server, print_pings, rping_qp, PingOptions, RpingCb, RPING_ACCESS};
use rdma_dissect::stages::alloc_pd::alloc_pd;
use rdma_dissect::stages::create_qp::create_queues;
use rdma_dissect::stages::rdma_cm::{
    accept, cm_create_qp, cm_verbs, connect, disconnect, listen, resolve, rping_conn_param, show_cm_transitions,
};
use rdma_dissect::step::Cli;

// The flags this step takes, the mistakes it can make on purpose with `--break`, and
// what its `--help` says it does.
type Args = rdma_dissect::cli::RpingArgs;
const CASES: &[Case<Args>] = &breakit::rdma_cm::CASES;
const ABOUT: &str = "Step 10: rping — connect with the connection manager (rdma_cm), then RDMA READ and WRITE";

// ANCHOR: main
fn main() -> std::process::ExitCode {
    let Cli { args, brk, .. } = Cli::<Args>::parse(ABOUT, env!("CARGO_BIN_NAME"), CASES);
    if let Some(choice) = brk {
        return breakit::main(choice, CASES, &args);
    }
    let role = args.role();
    error::main(|| {
        let addr = args.sockaddr()?;
        let timeout = args.timeout;
        let opts =
            PingOptions { count: args.count, size: args.size, verbose: args.verbose, validate: args.validate, timeout };
        // ANCHOR: new
        let ep = match role {
            Role::Server => listen(addr, timeout)?,
            Role::Client => resolve(addr, timeout)?,
        };
        let ctx = cm_verbs(&ep)?;
        // ANCHOR_END: new
        let pd = alloc_pd(&ctx)?;
        // ANCHOR: new_qp
        let q = create_queues(&ctx, &pd, rping_qp(), cm_create_qp(&ep.id))?;
        // rping's buffers; the client's source buffer, which the server reads, with RPING_ACCESS.
        let mut cb = RpingCb::setup(q, &pd, args.size, (role == Role::Client).then_some(RPING_ACCESS))?;
        // ANCHOR_END: new_qp
        // ANCHOR: new_connect
        match role {
            Role::Server => accept(&ep, &cb.q.qp, timeout)?,
            Role::Client => connect(&ep, &cb.q.qp, &rping_conn_param(), timeout)?,
        }
        show_cm_transitions(&ep.id)?;
        let pings = match role {
            Role::Server => ping_server(&ep, &mut cb, opts)?,
            Role::Client => ping_client(&mut cb, opts)?,
        };
        // The client ends the connection; the server, told so, ends its side.
        disconnect(&ep, &cb.q.qp, role == Role::Client, timeout)?;
        print_pings(&pings);
        // ANCHOR_END: new_connect
        Ok(())
    })
}
// ANCHOR_END: main

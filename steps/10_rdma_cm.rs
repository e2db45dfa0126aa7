//! Step 10: rping — connect with the connection manager (rdma_cm), then RDMA READ and WRITE.
//!
//! New: stage 10, [`rdma_dissect::stages::rdma_cm`]. The CM replaces stages 05 and 06 (the
//! TCP exchange and the modify_qp calls): it resolves an IP address to a device, creates
//! the QP and connects it. The ping loop is rping's, so either side may be Debian's `rping`.

use rdma_dissect::breakit::{self, Case};
use rdma_dissect::error;
use rdma_dissect::stages::rdma_cm::{
    accept, connect, disconnect, listen, ping_client, ping_server, print_pings, resolve, rping_conn_param, setup_qp,
    show_cm_transitions, PingOptions,
};
use rdma_dissect::step::Cli;
use rdma_dissect::verbs::{IBV_ACCESS_LOCAL_WRITE, IBV_ACCESS_REMOTE_READ, IBV_ACCESS_REMOTE_WRITE};

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
    error::main(|| {
        let addr = args.sockaddr()?;
        let timeout = args.timeout;
        let opts =
            PingOptions { count: args.count, size: args.size, verbose: args.verbose, validate: args.validate, timeout };
        // ANCHOR: new
        let ep = if args.server { listen(addr, timeout)? } else { resolve(addr, timeout)? };
        // The client's source buffer, which the server reads.
        let start_access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE;
        let mut conn = setup_qp(&ep, args.size, (!args.server).then_some(start_access))?;
        if args.server {
            accept(&ep, &conn, timeout)?;
        } else {
            connect(&ep, &conn, &rping_conn_param(), timeout)?;
        }
        show_cm_transitions(&ep.id)?;
        let pings = if args.server { ping_server(&ep, &mut conn, opts)? } else { ping_client(&mut conn, opts)? };
        // The client ends the connection; the server, told so, ends its side.
        disconnect(&ep, &conn, !args.server, timeout)?;
        print_pings(&pings);
        // ANCHOR_END: new
        Ok(())
    })
}
// ANCHOR_END: main

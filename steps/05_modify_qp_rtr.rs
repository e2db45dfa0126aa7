//! Step 05: exchange addresses with the peer over TCP and move the QP INIT→RTR.
//!
//! New: stage 05, [`rdma_dissect::stages::modify_qp_rtr`]. Run a server (no host) and a
//! client (with the server's host), like `ibv_rc_pingpong`; either may be the C tool.

use rdma_dissect::breakit::{self, Case};
use rdma_dissect::error;
use rdma_dissect::stages::create_qp::{create_qp, QpOptions};
use rdma_dissect::stages::modify_qp_rtr::{exchange_dest, local_dest, modify_qp_rtr};
use rdma_dissect::stages::{alloc_pd::alloc_pd, open_device::open_device, reg_mr::reg_mr};
use rdma_dissect::step::Cli;
use rdma_dissect::verbs::IBV_ACCESS_LOCAL_WRITE;

// The flags this step takes, the mistakes it can make on purpose with `--break`, and
// what its `--help` says it does.
type Args = rdma_dissect::cli::PingpongArgs;
const CASES: &[Case<Args>] = &breakit::modify_qp_rtr::CASES;
const ABOUT: &str = "Step 05 of ibv_rc_pingpong: exchange LID/QPN/PSN/GID over TCP, then INIT→RTR";

// ANCHOR: main
fn main() -> std::process::ExitCode {
    let Cli { args, brk, .. } = Cli::<Args>::parse(ABOUT, env!("CARGO_BIN_NAME"), CASES);
    if let Some(choice) = brk {
        return breakit::main(choice, CASES, &args);
    }
    error::main(|| {
        let dev = open_device(&args.device.choice())?;
        let pd = alloc_pd(&dev.ctx)?;
        let size = args.buffer.size;
        let _mr = reg_mr(&pd, size as usize, IBV_ACCESS_LOCAL_WRITE)?;
        let q = create_qp(&dev, &pd, QpOptions::pingpong(size, args.queue.rx_depth, args.queue.events))?;
        // ANCHOR: new
        let local = local_dest(&dev, &q.qp);
        let exchange = exchange_dest(&args.peer(), &local)?;
        // Here the server has the client's address and owes it a reply: it connects its QP
        // first, so the QP can receive by the time the client knows where to send. The
        // client has the server's reply already.
        modify_qp_rtr(&q.qp, &dev, exchange.remote(), args.mtu.to_ibv(), args.sl)?;
        exchange.finish()?;
        // ANCHOR_END: new
        Ok(())
    })
}
// ANCHOR_END: main

//! Step 07: one SEND each way, and the first work completions.
//!
//! New: stage 07, [`rdma_dissect::stages::post_send`]: a receive posted *before* the
//! exchange (so the peer's SEND has somewhere to land), then the client's `ping` and the
//! server's `pong`.

use rdma_dissect::breakit::{self, Case};
use rdma_dissect::error;
use rdma_dissect::stages::create_qp::{create_qp, QpOptions};
use rdma_dissect::stages::modify_qp_rtr::local_dest;
use rdma_dissect::stages::modify_qp_rts::connect;
use rdma_dissect::stages::post_send::{post_recv, send_each_way};
use rdma_dissect::stages::{alloc_pd::alloc_pd, open_device::open_device, reg_mr::reg_mr};
use rdma_dissect::step::Cli;
use rdma_dissect::verbs::IBV_ACCESS_LOCAL_WRITE;

// The flags this step takes, the mistakes it can make on purpose with `--break`, and
// what its `--help` says it does.
type Args = rdma_dissect::cli::PingpongArgs;
const CASES: &[Case<Args>] = &breakit::post_send::CASES;
const ABOUT: &str = "Step 07 of ibv_rc_pingpong: post a receive and a send on each side";

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
        let mut mr = reg_mr(&pd, size as usize, IBV_ACCESS_LOCAL_WRITE)?;
        let q = create_qp(&dev, &pd, QpOptions::pingpong(size, args.queue.rx_depth, args.queue.events))?;
        // ANCHOR: new
        post_recv(&q.qp, &mr, size, 1)?;
        // ANCHOR_END: new
        let local = local_dest(&dev, &q.qp);
        connect(&q.qp, &dev, &args.peer(), &local, args.mtu.to_ibv(), args.sl)?;
        // ANCHOR: new_send
        send_each_way(args.role(), &q, &mut mr, size, args.timeout())?;
        // ANCHOR_END: new_send
        Ok(())
    })
}
// ANCHOR_END: main

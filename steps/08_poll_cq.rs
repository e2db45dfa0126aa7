//! Step 08: the whole ping-pong — `ibv_rc_pingpong` itself, with its output lines.
//!
//! New: stage 08, [`rdma_dissect::stages::poll_cq`]: `rx_depth` receives and (with `-e`)
//! an armed CQ before the exchange, then the timed loop and rc_pingpong's statistics.

use rdma_dissect::breakit::{self, Case};
use rdma_dissect::error;
use rdma_dissect::stages::create_qp::{create_qp, QpOptions};
use rdma_dissect::stages::modify_qp_rtr::local_dest;
use rdma_dissect::stages::modify_qp_rts::connect;
use rdma_dissect::stages::poll_cq::{pingpong, prepare, print_stats, PingpongOptions};
use rdma_dissect::stages::{alloc_pd::alloc_pd, open_device::open_device, reg_mr::reg_mr};
use rdma_dissect::step::Cli;
use rdma_dissect::verbs::IBV_ACCESS_LOCAL_WRITE;

// The flags this step takes, the mistakes it can make on purpose with `--break`, and
// what its `--help` says it does.
type Args = rdma_dissect::cli::PingpongArgs;
const CASES: &[Case<Args>] = &[]; // 08's mistakes are 04's and 07's, met in a loop
const ABOUT: &str = "Step 08 of ibv_rc_pingpong: the full ping-pong loop, timed";

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
        let opts = PingpongOptions {
            size,
            rx_depth: args.queue.rx_depth,
            iters: args.iters,
            chk: args.chk,
            timeout: args.timeout(),
        };
        prepare(&q, &mr, opts)?;
        // ANCHOR_END: new
        let local = local_dest(&dev, &q.qp);
        connect(&q.qp, &dev, &args.peer(), &local, args.mtu.to_ibv(), args.sl)?;
        // ANCHOR: new_loop
        let stats = pingpong(args.role(), &q, &mut mr, opts)?;
        print_stats(&stats);
        // ANCHOR_END: new_loop
        Ok(())
    })
}
// ANCHOR_END: main

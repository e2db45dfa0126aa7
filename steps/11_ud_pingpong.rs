//! Step 11: `ibv_ud_pingpong` — the ping-pong over unreliable datagrams: no connection, an
//! address handle per destination, 40 bytes of GRH in front of every received message.
//!
//! New: stage 11, [`rdma_dissect::stages::ud_pingpong`]: the size check, a UD QP (stage
//! 04 with `IBV_QPT_UD` and a Q_Key), RTR and RTS without a peer, `ibv_create_ah`, and
//! the loop of stage 08 posting datagrams; then the last datagram's GRH, decoded.

use rdma_dissect::breakit::{self, Case};
use rdma_dissect::error;
use rdma_dissect::stages::create_qp::{create_qp, QpOptions, UD_QKEY};
use rdma_dissect::stages::modify_qp_rtr::local_dest;
use rdma_dissect::stages::poll_cq::{pingpong_with, prepare_with, print_stats, PingpongOptions};
use rdma_dissect::stages::ud_pingpong::{check_size, show_grh, Datagrams, GRH_LEN};
use rdma_dissect::stages::{alloc_pd::alloc_pd, open_device::open_device, reg_mr::reg_mr};
use rdma_dissect::step::Cli;
use rdma_dissect::verbs::IBV_ACCESS_LOCAL_WRITE;

// The flags this step takes, the mistakes it can make on purpose with `--break`, and
// what its `--help` says it does.
type Args = rdma_dissect::cli::UdArgs;
const CASES: &[Case<Args>] = &breakit::ud_pingpong::CASES;
const ABOUT: &str = "Step 11 of ibv_ud_pingpong: the ping-pong over unreliable datagrams";

// ANCHOR: main
fn main() -> std::process::ExitCode {
    let Cli { args, brk, .. } = Cli::<Args>::parse(ABOUT, env!("CARGO_BIN_NAME"), CASES);
    if let Some(choice) = brk {
        return breakit::main(choice, CASES, &args);
    }
    error::main(|| {
        let dev = open_device(&args.device.choice())?;
        let pd = alloc_pd(&dev.ctx)?;
        let size = args.size;
        // ANCHOR: new
        check_size(&dev, size)?;
        let mut mr = reg_mr(&pd, (size + GRH_LEN) as usize, IBV_ACCESS_LOCAL_WRITE)?;
        let q = create_qp(&dev, &pd, QpOptions::ud_pingpong(size, args.queue.rx_depth, args.queue.events))?;
        // ANCHOR_END: new
        let opts = PingpongOptions {
            size,
            rx_depth: args.queue.rx_depth,
            iters: args.iters,
            chk: false,
            timeout: args.exchange.timeout,
        };
        // ANCHOR: new_loop
        prepare_with(&q, &mr, opts, &Datagrams::RECEIVE)?;
        let local = local_dest(&dev, &q.qp);
        let peer = Datagrams::connect(&q, &dev, &pd, &args.peer(), &local, args.sl, UD_QKEY)?;
        let stats = pingpong_with(args.role(), &q, &mut mr, opts, &peer)?;
        print_stats(&stats);
        show_grh(&mr, stats.last_recv_flags);
        // ANCHOR_END: new_loop
        Ok(())
    })
}
// ANCHOR_END: main

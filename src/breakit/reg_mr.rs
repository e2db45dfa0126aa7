//! Step 03's mistakes: access flags on `ibv_reg_mr`.

use super::{loopback, Case, Stack};
use crate::cli::MrArgs;
use crate::error::Result;
use crate::poll::{
    wait_for,
    Awaited::{Recv, Send},
};
use crate::stages::create_qp::QpOptions;
use crate::stages::post_send::{post_recv, post_send, PINGPONG_RECV_WRID, PINGPONG_SEND_WRID};
use crate::stages::{alloc_pd::alloc_pd, open_device::open_device, reg_mr::reg_mr};
use crate::verbs::{ibv_access_flags, IBV_ACCESS_REMOTE_WRITE};

/// rc_pingpong's default message size.
const SIZE: u32 = 4096;

/// The cases of `03_reg_mr --break`.
pub static CASES: [Case<MrArgs>; 2] = [
    Case {
        name: "recv-without-local-write",
        summary: "register the receive buffer without IBV_ACCESS_LOCAL_WRITE, then receive into it",
        by: None,
        rule: "a receive is the HCA writing into our memory, which needs IBV_ACCESS_LOCAL_WRITE on\n\
               the MR; registration cannot know the MR will be used for receives, so it succeeds,\n\
               and the failure comes only when a message lands: a work completion error, not an\n\
               errno (the spec's IBV_WC_LOC_PROT_ERR; rxe reports IBV_WC_LOC_QP_OP_ERR)",
        code: "src/breakit/reg_mr.rs recv_without_local_write: reg_mr(.., access 0); the correct\n\
               call is in steps/03_reg_mr.rs: reg_mr(&pd, size, IBV_ACCESS_LOCAL_WRITE)",
        fix: "register every buffer a receive (or an RDMA READ response) lands in with IBV_ACCESS_LOCAL_WRITE",
        run: recv_without_local_write,
    },
    Case {
        name: "remote-write-without-local-write",
        summary: "ask for IBV_ACCESS_REMOTE_WRITE without IBV_ACCESS_LOCAL_WRITE",
        by: None,
        rule: "the verbs spec requires LOCAL_WRITE whenever REMOTE_WRITE (or REMOTE_ATOMIC) is asked\n\
               for: memory the peer may write, the local HCA must be allowed to write too, so\n\
               ibv_reg_mr refuses the combination with EINVAL (man ibv_reg_mr)",
        code: "src/breakit/reg_mr.rs remote_write_without_local_write: reg_mr(.., IBV_ACCESS_REMOTE_WRITE);\n\
               the correct call is in steps/09_rdma_write.rs: IBV_ACCESS_LOCAL_WRITE | remote_write",
        fix: "IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE",
        run: remote_write_without_local_write,
    },
];

/// Registers without LOCAL_WRITE (fine), then connects the QP to itself and sends one
/// message into that buffer: the receive fails.
fn recv_without_local_write(args: &MrArgs) -> Result<()> {
    let s = Stack::new(&args.device, SIZE, ibv_access_flags(0), QpOptions::pingpong(SIZE, 1, false))?;
    post_recv(&s.q.qp, &s.mr, SIZE, 1)?;
    loopback(&s)?;
    // Sending *from* the MR is fine without any flag: the HCA only reads it.
    post_send(&s.q.qp, &s.mr, SIZE, s.q.send_flags)?;
    wait_for(&s.q.cq, &[Send(PINGPONG_SEND_WRID), Recv(PINGPONG_RECV_WRID)], std::time::Duration::from_secs(10))
}

fn remote_write_without_local_write(args: &MrArgs) -> Result<()> {
    let dev = open_device(&args.device.choice())?;
    let pd = alloc_pd(&dev.ctx)?;
    reg_mr(&pd, SIZE as usize, IBV_ACCESS_REMOTE_WRITE)?;
    Ok(())
}

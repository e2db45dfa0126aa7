//! Step 05's mistakes: the INIT→RTR attributes. The client makes them; the server runs
//! step 05 unchanged.

use super::{rts_with_retry_cnt, Case, Stack};
use crate::cli::PingpongArgs;
use crate::error::Result;
use crate::poll::{wait_for, Awaited::Send};
use crate::role::Role;
use crate::stages::create_qp::QpOptions;
use crate::stages::modify_qp_rtr::{exchange_dest, explain_rtr, local_dest, modify_qp_rtr, rtr_attr, RTR_MASK};
use crate::stages::post_send::{post_send, PINGPONG_SEND_WRID};
use crate::verbs::{ibv_qp_attr, ibv_qp_attr_mask, IBV_ACCESS_LOCAL_WRITE, IBV_QP_DEST_QPN};
use crate::wire::Dest;

/// The cases of `05_modify_qp_rtr --break`.
pub static CASES: [Case<PingpongArgs>; 4] = [
    Case {
        name: "no-grh",
        summary: "leave the GRH out of the address vector (is_global = 0) on RoCE",
        by: Some(Role::Client),
        rule: "RoCE has no LIDs: a RoCE packet is a UDP/IP packet addressed by GID, so the address\n\
               vector must carry a GRH (ah_attr.is_global = 1, grh.dgid, grh.sgid_index). Code\n\
               written for InfiniBand, which addresses by LID alone (dlid), cannot run on RoCE:\n\
               the kernel refuses the RTR transition",
        code: "src/breakit/modify_qp_rtr.rs no_grh: attr.ah_attr.is_global = 0; the correct\n\
               address vector is built in src/stages/modify_qp_rtr.rs rtr_attr",
        fix: "set is_global = 1 with the peer's GID as dgid and a GID index (-g) as sgid_index\n\
              whenever the port's link layer is Ethernet",
        run: no_grh,
    },
    Case {
        name: "missing-attr",
        summary: "fill in dest_qp_num but leave IBV_QP_DEST_QPN out of the attribute mask",
        by: Some(Role::Client),
        rule: "ibv_modify_qp reads only the attributes whose bit is in the mask, and each\n\
               transition has required attributes (man ibv_modify_qp): INIT→RTR needs STATE,\n\
               AV, PATH_MTU, DEST_QPN, RQ_PSN, MAX_DEST_RD_ATOMIC and MIN_RNR_TIMER. A field set\n\
               in the struct but missing from the mask is simply not there: EINVAL",
        code: "src/breakit/modify_qp_rtr.rs missing_attr: RTR_MASK without IBV_QP_DEST_QPN; the\n\
               correct mask is RTR_MASK in src/stages/modify_qp_rtr.rs",
        fix: "put every required attribute's flag in the mask (the trace of ibv_modify_qp lists them)",
        run: missing_attr,
    },
    Case {
        name: "bad-gid-index",
        summary: "put a GID index with no GID behind it (an empty slot of the GID table) in the GRH",
        by: Some(Role::Client),
        rule: "grh.sgid_index selects our source GID, hence the source IP address and RoCE version\n\
               of every packet; it must name an entry of the port's GID table that holds a GID\n\
               (the table has gid_tbl_len entries, most of them empty). The kernel looks the\n\
               entry up at RTR and refuses an empty one with ENODATA. (sgid_index is 8 bits:\n\
               on rxe's 1024-entry table no index is past the end, so this case takes 255)",
        code: "src/breakit/modify_qp_rtr.rs bad_gid_index: grh.sgid_index = min(gid_tbl_len, 255);\n\
               the correct index is -g, as set in src/stages/modify_qp_rtr.rs rtr_attr",
        fix: "use an index 01_open_device lists with a GID (in the lab VM: -g 1, the RoCE v2 GID\n\
              ::ffff:192.0.2.1)",
        run: bad_gid_index,
    },
    Case {
        name: "wrong-dest-qpn",
        summary: "connect to a QP number the peer does not have, then send",
        by: Some(Role::Client),
        rule: "RTR checks nothing about the peer: dest_qp_num is just a number the packets will\n\
               carry. The peer's device drops packets for a QP it does not have, without an\n\
               answer, so the sender retransmits retry_cnt times, each after the ACK timeout\n\
               (14: 67 ms), then fails the SEND with IBV_WC_RETRY_EXC_ERR. (This case's RTS\n\
               takes retry_cnt = 1: rxe retries rc_pingpong's 7 forever)",
        code: "src/breakit/modify_qp_rtr.rs wrong_dest_qpn: dest_qp_num = remote.qpn ^ 0x800000;\n\
               the correct value is remote.qpn, from the exchange (src/stages/modify_qp_rtr.rs rtr_attr)",
        fix: "use the QPN the peer sent in the exchange, from this run (QPNs change every run)",
        run: wrong_dest_qpn,
    },
];

/// Stages 01–04 as step 05 runs them, then the exchange; the server connects with the
/// stage's own RTR, the client with `rtr` (the mistake).
fn exchange_with(args: &PingpongArgs, rtr: impl FnOnce(&Stack, &Dest) -> Result<()>) -> Result<(Stack, Dest, Dest)> {
    let size = args.buffer.size;
    let opts = QpOptions::pingpong(size, args.queue.rx_depth, args.queue.events);
    let s = Stack::new(&args.device, size, IBV_ACCESS_LOCAL_WRITE, opts)?;
    let local = local_dest(&s.dev, &s.q.qp);
    let exchange = exchange_dest(&args.peer(), &local)?;
    match args.role() {
        Role::Server => modify_qp_rtr(&s.q.qp, &s.dev, exchange.remote(), args.mtu.to_ibv(), args.sl)?,
        Role::Client => rtr(&s, exchange.remote())?,
    }
    let remote = exchange.finish()?;
    Ok((s, local, remote))
}

/// The stage's RTR attributes towards `remote`, for a case to spoil one of them.
fn attr(args: &PingpongArgs, s: &Stack, remote: &Dest) -> ibv_qp_attr {
    rtr_attr(&s.dev, remote, args.mtu.to_ibv(), args.sl)
}

fn no_grh(args: &PingpongArgs) -> Result<()> {
    exchange_with(args, |s, remote| {
        let mut attr = attr(args, s, remote);
        attr.ah_attr.is_global = 0;
        s.q.qp.modify(&attr, RTR_MASK)
    })
    .map(drop)
}

fn missing_attr(args: &PingpongArgs) -> Result<()> {
    exchange_with(args, |s, remote| {
        s.q.qp.modify(&attr(args, s, remote), ibv_qp_attr_mask(RTR_MASK.0 & !IBV_QP_DEST_QPN.0))
    })
    .map(drop)
}

fn bad_gid_index(args: &PingpongArgs) -> Result<()> {
    exchange_with(args, |s, remote| {
        let mut attr = attr(args, s, remote);
        attr.ah_attr.grh.sgid_index = s.dev.port_attr.gid_tbl_len.min(255) as u8;
        s.q.qp.modify(&attr, RTR_MASK).map_err(|e| explain_rtr(e, &s.dev, remote))
    })
    .map(drop)
}

fn wrong_dest_qpn(args: &PingpongArgs) -> Result<()> {
    let (s, local, _) = exchange_with(args, |s, remote| {
        let wrong = Dest { qpn: remote.qpn ^ 0x80_0000, ..*remote };
        modify_qp_rtr(&s.q.qp, &s.dev, &wrong, args.mtu.to_ibv(), args.sl)
    })?;
    if args.role() == Role::Server {
        return Ok(());
    }
    // RTR accepted the wrong number; the mistake shows only once something is sent.
    rts_with_retry_cnt(&s.q.qp, local.psn, 1)?;
    post_send(&s.q.qp, &s.mr, args.buffer.size, s.q.send_flags)?;
    wait_for(&s.q.cq, &[Send(PINGPONG_SEND_WRID)], args.timeout())
}

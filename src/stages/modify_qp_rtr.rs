//! Stage 05: exchange addresses with the peer over TCP, then move the QP INIT→RTR.
//!
//! C reference: `pp_client_exch_dest` / `pp_server_exch_dest` (the exchange) and the first
//! half of `pp_connect_ctx` (the RTR transition); the `local address:` / `remote address:`
//! lines are printed by `main`.
//!
//! **Why an exchange.** To reach RTR ("ready to receive") an RC QP must know its one peer:
//! the remote QP number (`dest_qp_num`), the PSN the peer will start sending with
//! (`rq_psn`), and how to address the peer's port (`ah_attr`). Nothing can travel over the
//! QP before that, so the values go over a side channel — here rc_pingpong's TCP socket
//! and its 52-byte message ([`crate::wire::Dest`]).
//!
//! **The address vector.** On InfiniBand, `ah_attr.dlid` (the peer's LID) is enough. On RoCE
//! there are no LIDs: packets are UDP/IP, so the address vector must carry a **GRH** (global
//! route header, `is_global = 1`) with the peer's GID as `dgid` and our GID table index as
//! `sgid_index`. rc_pingpong adds the GRH exactly when the peer sent a GID with a non-zero
//! interface id, i.e. when the peer ran with `-g`. Without `-g` on RoCE, the kernel refuses
//! the RTR transition with EINVAL (an address vector without GRH is invalid on RoCE).
//!
//! **The other RTR attributes.** `path_mtu` is the largest packet payload (both sides must
//! agree, and on RoCE it must fit the Ethernet MTU). `max_dest_rd_atomic` is how many RDMA
//! READs/atomics the peer may have outstanding against us, and `min_rnr_timer` how long the
//! peer should wait before retrying when we have no receive posted (12 = 0.64 ms).

use std::hash::{BuildHasher, Hasher};

use crate::error::{Error, Result};
use crate::exchange::{Connection, Peer};
use crate::stages::open_device::Device;
use crate::trace;
use crate::verbs::{
    ibv_ah_attr, ibv_gid, ibv_global_route, ibv_mtu, ibv_qp_attr, ibv_qp_attr_mask, names, Qp, IBV_QPS_RTR, IBV_QP_AV,
    IBV_QP_DEST_QPN, IBV_QP_MAX_DEST_RD_ATOMIC, IBV_QP_MIN_RNR_TIMER, IBV_QP_PATH_MTU, IBV_QP_RQ_PSN, IBV_QP_STATE,
};
use crate::wire::{Dest, Message, MAX_24BIT};

/// A random 24-bit initial PSN, as rc_pingpong's `lrand48() & 0xffffff`.
///
/// Any value works as long as the peer is told it; a random one makes stale packets of an
/// earlier connection unlikely to be taken for this one's.
pub fn random_psn() -> u32 {
    // std's RandomState is seeded from the OS per process: random enough for a PSN, and
    // needs no extra crate.
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    (h.finish() as u32) & MAX_24BIT
}

/// Our side of the exchange: LID and GID of our port, our QP number, a fresh PSN.
pub fn local_dest(dev: &Device, qp: &Qp) -> Dest {
    Dest { lid: dev.port_attr.lid, qpn: qp.qp_num(), psn: random_psn(), gid: dev.gid }
}

// ANCHOR: exchange
/// Runs rc_pingpong's address exchange with `peer` up to the point where rc_pingpong
/// connects its QP; [`Exchange::finish`] does the rest, once the caller has connected it.
///
/// The two roles stop at different points, and the difference is the lesson. The server
/// stops after reading the client's address, *before* it replies: it connects its QP first
/// (`pp_server_exch_dest` calls `pp_connect_ctx` between its read and its write), so by
/// the time the client knows the server's address the server's QP can receive. The client
/// stops with the whole exchange behind it — its address sent, the server's read, `done`
/// sent — and connects afterwards, as rc_pingpong's `main` does. `M` is [`Dest`] for steps
/// 05–08 and [`crate::wire::RdmaDest`] for 09. Prints rc_pingpong's `local address:` line.
pub fn exchange_dest<'a, M: Message + std::fmt::Display>(peer: &Peer, local: &'a M) -> Result<Exchange<'a, M>> {
    show_address("local address: ", local);
    let port = peer.port;
    match &peer.host {
        None => {
            let mut conn = Connection::accept(port, peer.timeout)?;
            trace::event("tcp accept").kv("port", port).emit();
            let remote: M = conn.recv()?;
            trace::event("tcp recv").kv("bytes", M::LEN).emit();
            Ok(Exchange { remote, local, reply_to: Some(conn) })
        }
        Some(host) => {
            let mut conn = Connection::connect(host, port, peer.timeout)?;
            trace::event("tcp connect").kv("host", host).kv("port", port).emit();
            conn.send(local)?;
            trace::event("tcp send").kv("bytes", M::LEN).emit();
            let remote: M = conn.recv()?;
            trace::event("tcp recv").kv("bytes", M::LEN).emit();
            conn.send_done()?;
            trace::event("tcp send").kv("done", "yes").emit();
            Ok(Exchange { remote, local, reply_to: None })
        }
    }
}

/// An exchange stopped where rc_pingpong connects its QP: the peer's address, and on the
/// server the reply it still owes the client.
#[must_use = "the server has not replied yet: connect the QP, then call finish()"]
pub struct Exchange<'a, M> {
    remote: M,
    local: &'a M,
    /// The server's connection, until it has replied; the client's is closed already.
    reply_to: Option<Connection>,
}

impl<M: Message + std::fmt::Display> Exchange<'_, M> {
    /// The peer's address: what our QP connects to.
    pub fn remote(&self) -> &M {
        &self.remote
    }

    /// Ends the exchange, once our QP is connected: the server replies with our address and
    /// waits for the client's `done`; the client has nothing left to do. Prints
    /// rc_pingpong's `remote address:` line and returns the peer's address.
    pub fn finish(self) -> Result<M> {
        if let Some(mut conn) = self.reply_to {
            // ANCHOR: hole_server_reply HOLE: the client waits for our reply: send it our address (`self.local`) on `conn`
            conn.send(self.local)?;
            // ANCHOR_END: hole_server_reply
            trace::event("tcp send").kv("bytes", M::LEN).emit();
            conn.recv_done()?;
            trace::event("tcp recv").kv("done", "yes").emit();
        }
        show_address("remote address:", &self.remote);
        Ok(self.remote)
    }
}
// ANCHOR_END: exchange

/// rc_pingpong's `  local address:  …` / `  remote address: …` line, one per line of the
/// address: srq_pingpong's message holds one address per QP, and it prints a line each.
fn show_address(label: &str, address: &impl std::fmt::Display) {
    for line in address.to_string().lines() {
        trace::line(format_args!("  {label} {line}"));
    }
}

// ANCHOR: stage
/// `ibv_modify_qp` INIT→RTR towards `remote`, with path MTU `mtu` and service level `sl`.
pub fn modify_qp_rtr(qp: &Qp, dev: &Device, remote: &Dest, mtu: ibv_mtu, sl: u8) -> Result<()> {
    warn_if_above_active_mtu(dev, mtu);
    qp.modify(&rtr_attr(dev, remote, mtu, sl), RTR_MASK).map_err(|e| explain_rtr(e, dev, remote))
}

/// The INIT→RTR attributes: who the peer is (`ah_attr`, `dest_qp_num`), the PSN its
/// first packet will carry, and the responder's limits.
pub fn rtr_attr(dev: &Device, remote: &Dest, mtu: ibv_mtu, sl: u8) -> ibv_qp_attr {
    // ANCHOR: attrs
    let mut attr = ibv_qp_attr {
        qp_state: IBV_QPS_RTR,
        path_mtu: mtu,
        // ANCHOR: hole_dest_qp_num HOLE: the QP number of the one QP this RC QP talks to
        dest_qp_num: remote.qpn,
        // ANCHOR_END: hole_dest_qp_num
        // ANCHOR: hole_rq_psn HOLE: the PSN the first packet we receive will carry: whose PSN is that?
        rq_psn: remote.psn,
        // ANCHOR_END: hole_rq_psn
        // ANCHOR: hole_max_dest_rd_atomic HOLE: how many RDMA READs/atomics the peer may have outstanding against us (rc_pingpong's value)
        max_dest_rd_atomic: 1,
        // ANCHOR_END: hole_max_dest_rd_atomic
        // ANCHOR: hole_min_rnr_timer HOLE: the RNR timer code the peer waits before retrying a SEND that found no receive (rc_pingpong: 0.64 ms)
        min_rnr_timer: 12,
        // ANCHOR_END: hole_min_rnr_timer
        ah_attr: ibv_ah_attr {
            is_global: 0,
            // ANCHOR: hole_dlid HOLE: the destination LID: the peer's (0 on RoCE)
            dlid: remote.lid,
            // ANCHOR_END: hole_dlid
            sl,
            src_path_bits: 0,
            port_num: dev.ib_port,
            ..Default::default()
        },
        ..Default::default()
    };
    if remote.needs_grh() {
        // ANCHOR: hole_is_global HOLE: say that the address vector carries a GRH (needed on RoCE)
        attr.ah_attr.is_global = 1;
        // ANCHOR_END: hole_is_global
        attr.ah_attr.grh = ibv_global_route {
            hop_limit: 1,
            // ANCHOR: hole_dgid HOLE: the destination GID in the GRH: the peer's (an ibv_gid)
            dgid: ibv_gid { raw: remote.gid },
            // ANCHOR_END: hole_dgid
            // Without -g, rc_pingpong passes its gidx of -1, which this u8 field turns into
            // 255: an empty slot or past the table, so RTR fails. We pass 0 instead, which
            // can work (and explain_rtr says what 0 was if RTR fails); -g above 255 never
            // gets here (stage 01 refuses it).
            // ANCHOR: hole_sgid_index HOLE: the source GID: an index into OUR port's GID table (-g; 0 without it)
            sgid_index: dev.gid_index.unwrap_or(0),
            // ANCHOR_END: hole_sgid_index
            ..Default::default()
        };
    }
    // ANCHOR_END: attrs
    attr
}

// ANCHOR: mask
/// The attributes the INIT→RTR transition requires (the table in `man ibv_modify_qp`): the
/// kernel reads only the fields whose bit is in the mask, and refuses the transition with
/// EINVAL when a required one is missing.
pub const RTR_MASK: ibv_qp_attr_mask = ibv_qp_attr_mask(
    IBV_QP_STATE.0
        // ANCHOR: hole_rtr_mask HOLE: the attributes INIT->RTR requires besides the state: one `| IBV_QP_....0` per attribute (man ibv_modify_qp)
        | IBV_QP_AV.0
        | IBV_QP_PATH_MTU.0
        | IBV_QP_DEST_QPN.0
        | IBV_QP_RQ_PSN.0
        | IBV_QP_MAX_DEST_RD_ATOMIC.0
        | IBV_QP_MIN_RNR_TIMER.0,
    // ANCHOR_END: hole_rtr_mask
);
// ANCHOR_END: mask
// ANCHOR_END: stage

/// Warns (on stderr) when the path MTU is larger than the port's `active_mtu`.
///
/// rc_pingpong does not check, and Soft-RoCE accepts such an RTR: `active_mtu` is the
/// largest payload the link under the port carries (1024 for a 1500-byte Ethernet, once
/// the RoCE v2 headers are counted). A larger packet cannot be fragmented — RoCE packets
/// never are — so it is dropped before it reaches the wire, and the sender retransmits it
/// in vain. Inside one machine rxe delivers without the link, so it "works" there and
/// fails only across a wire: a warning, not an error.
fn warn_if_above_active_mtu(dev: &Device, mtu: ibv_mtu) {
    let active = dev.port_attr.active_mtu;
    if mtu > active {
        eprintln!(
            "warning: path MTU {} is above port {}'s active MTU {}: across a wire, packets too \
             big for the link are dropped and their sender retries in vain (use -m {})",
            names::mtu_name(mtu),
            dev.ib_port,
            names::mtu_name(active),
            names::mtu_bytes(active).map_or(names::mtu_name(active), |bytes| bytes.to_string())
        );
    }
}

/// The usual reasons `ibv_modify_qp` INIT→RTR fails, in the order worth checking.
pub fn explain_rtr(err: Error, dev: &Device, remote: &Dest) -> Error {
    if err.errno() == Some(libc::ENODATA) {
        // The kernel resolves grh.sgid_index to a GID (and so to a source IP address and
        // RoCE version) at RTR; an empty entry of the table has none.
        return err.or_explain(
            "grh.sgid_index names an entry of the port's GID table that holds no GID: the\n\
             kernel looks the source GID up at RTR and finds nothing there",
            "pass -g an index 01_open_device lists with a GID (in the lab VM: -g 1)",
        );
    }
    if err.errno() != Some(libc::EINVAL) {
        return err;
    }
    if dev.is_roce() && !remote.needs_grh() {
        return err
            .cause(
                "the port's link layer is Ethernet (RoCE), which has no LIDs: a RoCE packet is\n\
                 addressed by GID, so the address vector needs a GRH (ah_attr.is_global = 1,\n\
                 grh.dgid = the peer's GID). The peer sent no GID (it ran without -g), so\n\
                 rc_pingpong's rule left is_global = 0, and the kernel rejects the AV",
            )
            .fix(
                "pass a GID index on both sides, e.g. `-g 1` in the lab VM (01_open_device lists the GID\n\
                 table), or set RDMA_GID_INDEX, which -g defaults to",
            );
    }
    if dev.is_roce() && dev.gid_index.is_none() {
        return err
            .cause(
                "the peer sent its GID, so the AV has a GRH, but this side ran without -g:\n\
                 grh.sgid_index defaulted to 0, which may not be a GID of the right type or\n\
                 address family for the peer's GID",
            )
            .fix("pass the same kind of GID index on both sides, e.g. `-g 1` in the lab VM");
    }
    err.or_explain(
        "one of the RTR attributes is out of range for this device or port: a GID index past\n\
         the table, an invalid service level, or a path_mtu the provider refuses (rxe checks\n\
         it against the port's max_mtu; some providers also refuse one above active_mtu,\n\
         others accept it)",
        "check -g against the GID table and -m against the port's MTUs (01_open_device shows both)",
    )
}

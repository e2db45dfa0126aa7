//! Stage 11: the ping-pong over an unreliable datagram (UD) QP, `ibv_ud_pingpong`'s.
//!
//! C reference: libibverbs/examples/ud_pingpong.c — `pp_init_ctx`'s size check, its
//! `pp_connect_ctx` (RTR, RTS, `ibv_create_ah`), `pp_post_recv` and `pp_post_send`; the
//! rest (`main`'s loop, the exchange) is rc_pingpong's.
//!
//! **No connection.** A UD QP is not tied to a peer: RTR takes only the state and RTS only
//! the PSN to start from, no `dest_qp_num`, no `path_mtu`, no retry counts. Instead every
//! send names its destination: an *address handle* (`ibv_create_ah`, the address vector RC
//! put in the QP at RTR), the remote QP number, and the remote *Q_Key*, which must equal
//! the one the receiving QP was given at INIT or the datagram is dropped.
//!
//! **Unreliable.** Nothing is acknowledged: a send completes once it has left, and a
//! datagram that is lost — dropped for a wrong Q_Key or QP number, too big for the path
//! MTU, sent to an address nobody has — is lost without a word to either side. So a
//! datagram is one packet: the message must fit the port's MTU (ud_pingpong checks it
//! before creating anything, as [`check_size`] does).
//!
//! **The GRH.** Every receive buffer starts with 40 bytes for the datagram's Global Route
//! Header (or, on RoCE v2 over IPv4, the IPv4 header in their last 20), undefined when it
//! had none (`IBV_WC_GRH` in the completion says): how a receiver learns who sent a
//! datagram. The payload always follows them, so
//! ud_pingpong registers `size + 40` bytes, receives into all of them and sends from
//! offset 40. [`show_grh`] decodes the last one, if its completion has the flag.

use std::rc::Rc;

use crate::error::{Error, Result};
use crate::exchange::Peer;
use crate::stages::create_qp::{Queues, UD_QKEY};
use crate::stages::modify_qp_rtr::{exchange_dest, rtr_attr};
use crate::stages::open_device::Device;
use crate::stages::poll_cq::Post;
use crate::stages::post_send::{post_recv, PINGPONG_SEND_WRID};
use crate::trace::{self, Gid, Hex64, Key, Qpn};
use crate::verbs::{
    ibv_qp_attr, ibv_qp_attr_mask, ibv_send_wr, ibv_sge, ibv_wc_flags, names, Ah, Mr, Pd, Qp, IBV_MTU_1024,
    IBV_QPS_RTR, IBV_QPS_RTS, IBV_QP_SQ_PSN, IBV_QP_STATE, IBV_WC_GRH, IBV_WR_SEND,
};
use crate::wire::Dest;

/// Bytes in front of every received datagram for its GRH (`sizeof(struct ibv_grh)`).
pub const GRH_LEN: u32 = 40;

// ANCHOR: check_size
/// ud_pingpong's check in `pp_init_ctx`: a datagram is one packet, so a message larger
/// than the port's active MTU cannot be sent. (The device would not say so: the spec has
/// it emit nothing and report no error, C10-93.1.1; `--break size-above-mtu` shows it.)
pub fn check_size(dev: &Device, size: u32) -> Result<()> {
    let active = dev.port_attr.active_mtu;
    let mtu = names::mtu_bytes(active).unwrap_or(256);
    if size > mtu {
        return Err(Error::new(format!("checking the message size (-s {size}) against port {}'s MTU", dev.ib_port))
            .cause(format!(
                "a UD message is one datagram, one packet, and the port's active MTU is {mtu} bytes \
                 (ud_pingpong: \"Requested size larger than port MTU ({mtu})\"). The device would \
                 not even fail the send: it completes it and sends nothing"
            ))
            .fix(format!("pass -s {mtu} or less (01_open_device shows the port's active_mtu)")));
    }
    Ok(())
}
// ANCHOR_END: check_size

// ANCHOR: stage
/// The attributes a UD QP needs to go INIT→RTR: the state, nothing else.
pub const UD_RTR_MASK: ibv_qp_attr_mask = IBV_QP_STATE;
/// RTR→RTS for UD: the state and the first PSN (ud_pingpong's `IBV_QP_STATE | IBV_QP_SQ_PSN`).
pub const UD_RTS_MASK: ibv_qp_attr_mask = ibv_qp_attr_mask(IBV_QP_STATE.0 | IBV_QP_SQ_PSN.0);

/// `pp_connect_ctx` of ud_pingpong: RTR, RTS, and the address handle of the peer in `remote`.
pub fn connect_ud(qp: &Qp, dev: &Device, pd: &Rc<Pd>, remote: &Dest, my_psn: u32, sl: u8) -> Result<Ah> {
    // ANCHOR: hole_ud_rtr HOLE: INIT->RTR for a datagram QP: it has no peer, so only the state (UD_RTR_MASK)
    qp.modify(&ibv_qp_attr { qp_state: IBV_QPS_RTR, ..Default::default() }, UD_RTR_MASK)?;
    // ANCHOR_END: hole_ud_rtr
    qp.modify(&ibv_qp_attr { qp_state: IBV_QPS_RTS, sq_psn: my_psn, ..Default::default() }, UD_RTS_MASK)?;
    // The address vector is the one stage 05 gives an RC QP at RTR, by the same rule (a
    // GRH when the peer sent its GID); only its ah_attr is used, not the path MTU.
    let ah_attr = rtr_attr(dev, remote, IBV_MTU_1024, sl).ah_attr;
    // ANCHOR: hole_create_ah HOLE(Result<Ah>): the peer's address as a verbs object, in our PD (ibv_create_ah)
    let ah = Ah::create(pd, &ah_attr);
    // ANCHOR_END: hole_create_ah
    ah.map_err(|err| explain_ah(err, dev, remote))
}

/// Posts through a UD QP: receives with room for the GRH, sends to the peer's AH.
pub struct Datagrams {
    /// The peer: its address handle and QP number. None until the exchange: receives can be
    /// posted before it, sends cannot.
    to: Option<(Ah, u32)>,
    /// The Q_Key every send carries (`wr.ud.remote_qkey`).
    qkey: u32,
}

impl Datagrams {
    /// Before the exchange: only receives can be posted.
    pub const RECEIVE: Datagrams = Datagrams { to: None, qkey: UD_QKEY };

    /// Sends to `remote_qpn` at `ah`, with `qkey`.
    pub fn new(ah: Ah, remote_qpn: u32, qkey: u32) -> Self {
        Datagrams { to: Some((ah, remote_qpn)), qkey }
    }

    /// The exchange with `peer` as rc_pingpong's, with ud_pingpong's `pp_connect_ctx` where
    /// rc_pingpong connects (the server between reading and replying); sends then go to the
    /// peer's QP with `qkey` (ud_pingpong's [`UD_QKEY`]).
    pub fn connect(
        q: &Queues,
        dev: &Device,
        pd: &Rc<Pd>,
        peer: &Peer,
        local: &Dest,
        sl: u8,
        qkey: u32,
    ) -> Result<Self> {
        let exchange = exchange_dest(peer, local)?;
        let ah = connect_ud(&q.qp, dev, pd, exchange.remote(), local.psn, sl)?;
        let remote = exchange.finish()?;
        Ok(Datagrams { to: Some((ah, remote.qpn)), qkey })
    }
}

impl Post for Datagrams {
    fn recv(&self, q: &Queues, mr: &Mr, size: u32, n: u32) -> Result<()> {
        // ANCHOR: hole_grh_room HOLE: a receive of a datagram of `size` bytes: how much room does it need in front?
        post_recv(&q.qp, mr, size + GRH_LEN, n)
        // ANCHOR_END: hole_grh_room
    }

    fn send(&self, q: &Queues, mr: &Mr, size: u32) -> Result<()> {
        let Some((ah, remote_qpn)) = &self.to else {
            return Err(Error::new("ibv_post_send").cause("a UD send needs the peer's address handle: connect first"));
        };
        // The payload sits after the receive's GRH room, where a received one lands.
        let list = ibv_sge { addr: mr.addr() + u64::from(GRH_LEN), length: size, lkey: mr.lkey() };
        let mut wr = ibv_send_wr {
            wr_id: PINGPONG_SEND_WRID,
            opcode: IBV_WR_SEND,
            send_flags: q.send_flags.0,
            ..Default::default()
        };
        q.qp.post_send_ud(&mut wr, &[list], mr, ah, *remote_qpn, self.qkey)?;
        trace::event("ibv_post_send")
            .kv("wr_id", wr.wr_id)
            .kv("opcode", "IBV_WR_SEND")
            .kv("sge.addr", Hex64(list.addr))
            .kv("sge.length", list.length)
            .kv("ud.remote_qpn", Qpn(*remote_qpn))
            .kv("ud.remote_qkey", Key(self.qkey))
            .kv("send_flags", names::SendFlags(wr.send_flags))
            .emit();
        Ok(())
    }

    fn acknowledged(&self) -> bool {
        false
    }

    fn silence(&self) -> &'static str {
        ".\nOr its datagrams, or ours, are lost: UD tells nobody. A datagram dropped on arrival \
         (a Q_Key or QP number the receiving QP does not have, no receive posted, a receive \
         without room for it and the 40 bytes of GRH: rxe on Linux 6.12), one larger \
         than the MTU (the device sends nothing and reports success), one sent to an address \
         nobody has: each completes successfully on its sender, and the receiver's posted \
         receive just never completes"
    }
}
// ANCHOR_END: stage

fn explain_ah(err: Error, dev: &Device, remote: &Dest) -> Error {
    if dev.is_roce() && !remote.needs_grh() {
        return err.or_explain(
            "the port is RoCE, which has no LIDs: an address handle must carry a GRH with the\n\
             peer's GID, and the peer sent none (it ran without -g)",
            "pass a GID index on both sides, e.g. `-g 1` in the lab VM",
        );
    }
    err.or_explain(
        "the kernel could not make an address of the peer's: on RoCE it resolves the GID to an\n\
         Ethernet address here (ARP), and a GID nobody answers for, or a source GID index\n\
         without a GID, fails",
        "check -g (01_open_device lists the GID table) and that the peer's address is reachable",
    )
}

// ANCHOR: grh
/// Decodes the first 40 bytes of the buffer, the GRH of the last datagram received, when
/// that receive's completion says there is one: `flags` is its `wc_flags` (`None` if no
/// receive completed).
///
/// Without `IBV_WC_GRH` the 40 bytes are undefined (`ibv_post_recv(3)`): nothing there is
/// this datagram's, so the flag comes first, as in libibverbs' `ibv_init_ah_from_wc`
/// (`verbs.c`). On RoCE every datagram comes with a GRH or an IP header, and rxe sets the
/// flag on every receive it completes to user space (`do_complete` in `rxe_resp.c`); on
/// InfiniBand a datagram sent through an AH without a GRH (`is_global = 0`) has none.
///
/// Which header it is, only the bytes say. On InfiniBand and RoCE v1 it is an IBA GRH (IPv6's
/// layout: version 6, payload length, next header 0x1b, hop limit, source and destination
/// GIDs). On RoCE v2 over IPv4 the device puts the packet's IPv4 header in bytes 20–39;
/// rxe zeroes bytes 0–19 (its responder, `rxe_resp.c`, fills a `union rdma_network_hdr`),
/// so their version nibble is not 6. (libibverbs' `get_grh_header_version` does not count
/// on that: when byte 0 says 6 it checks the IPv4 header's checksum before it believes it.)
pub fn show_grh(mr: &Mr, flags: Option<ibv_wc_flags>) {
    let Some(flags) = flags else {
        trace::event("grh").kv("format", "none (no datagram received)").emit();
        return;
    };
    if flags & IBV_WC_GRH != IBV_WC_GRH {
        trace::event("grh").kv("format", "none (no IBV_WC_GRH in wc_flags: the 40 bytes are undefined)").emit();
        return;
    }
    let grh = mr.read(0, GRH_LEN as usize);
    let be16 = |at: usize| u16::from_be_bytes([grh[at], grh[at + 1]]);
    let ip4 = |at: usize| std::net::Ipv4Addr::new(grh[at], grh[at + 1], grh[at + 2], grh[at + 3]);
    if grh[20] >> 4 == 4 && grh[0] >> 4 != 6 {
        let ip = 20;
        trace::event("grh")
            .kv("format", "IPv4 header in bytes 20-39 (RoCE v2)")
            .kv("ip.src", ip4(ip + 12))
            .kv("ip.dst", ip4(ip + 16))
            .kv("ip.ttl", grh[ip + 8])
            .kv("ip.protocol", grh[ip + 9])
            .kv("ip.total_length", be16(ip + 2))
            .emit();
    } else if grh[0] >> 4 == 6 {
        let gid = |at: usize| Gid(grh[at..at + 16].try_into().expect("16 bytes"));
        trace::event("grh")
            .kv("format", "GRH (IPv6 layout)")
            .kv("sgid", gid(8))
            .kv("dgid", gid(24))
            .kv("paylen", be16(4))
            .kv("next_hdr", format!("0x{:02x}", grh[6]))
            .kv("hop_limit", grh[7])
            .emit();
    } else {
        trace::event("grh").kv("format", "unknown (IBV_WC_GRH, but neither an IPv6 nor an IPv4 header)").emit();
    }
}
// ANCHOR_END: grh

//! Stage 13: atomics — eight bytes of the peer's memory read and changed by its adapter in
//! one indivisible step, with `IBV_WR_ATOMIC_FETCH_AND_ADD` and `IBV_WR_ATOMIC_CMP_AND_SWP`.
//!
//! C reference: perftest's `ib_atomic_lat` (`src/atomic_lat.c`; its work requests are
//! built in `ctx_set_send_wqes`, its loop is `run_iter_lat`, both in
//! `src/perftest_resources.c`), whose handshake [`crate::wire::perftest`] speaks, so that
//! either program can play either role opposite the other.
//!
//! **What an atomic is.** Like an RDMA READ, an atomic is a request that the target's adapter
//! answers without its CPU: it reads the 64-bit word at `remote_addr`, changes it, writes it
//! back, and returns the *original* value, which lands in the requester's local buffer
//! (the gather entry, 8 bytes). FETCH_AND_ADD adds `compare_add`; COMPARE_AND_SWAP writes
//! `swap` only if the word equals `compare_add`. The target must be 8-byte aligned and lie
//! in an MR registered with `IBV_ACCESS_REMOTE_ATOMIC`, reached through a QP that allows it.
//!
//! **Atomic with respect to what.** The device says, in `atomic_cap`: `IBV_ATOMIC_HCA`,
//! atomic against other atomics through *this* adapter only — not against the CPU, nor
//! against another adapter; `IBV_ATOMIC_GLOB`, against every access. rxe reports
//! `IBV_ATOMIC_HCA` (its responder does the read-modify-write under a lock of its own);
//! `IBV_ATOMIC_NONE`, as siw reports, means no atomics at all.
//!
//! **Responder resources.** An atomic, like a READ, holds a slot of the target's responder
//! until its answer is acknowledged: `max_dest_rd_atomic` (set at RTR, stage 05) is how
//! many the target serves at once, `max_rd_atomic` (RTS, stage 06) how many the requester
//! keeps in flight. perftest tells the peer its number in the keys (`out_reads`).

use crate::error::{Error, Result};
use crate::exchange::{Connection, ExchangeError, Peer};
use crate::poll::{spin_for_one, trace_wc, Awaited::Send};
use crate::stages::create_qp::{QpOptions, Queues};
use crate::stages::modify_qp_rtr::random_psn;
use crate::stages::open_device::Device;
use crate::trace::{self, Hex64, Key};
use crate::verbs::names::mtu_name;
use crate::verbs::{
    ibv_access_flags, ibv_mtu, ibv_send_wr, ibv_send_wr_atomic, ibv_send_wr_wr, ibv_sge, Mr, Qp, Watchdog,
    IBV_ATOMIC_NONE, IBV_QPT_RC, IBV_SEND_SIGNALED, IBV_WR_ATOMIC_CMP_AND_SWP, IBV_WR_ATOMIC_FETCH_AND_ADD,
};
use crate::wire::perftest::{CacheLine, CycleBuffer, Keys, MtuCode, Version, OLDEST, VERSION};
use crate::wire::{Dest, Message};
use std::time::Duration;

/// `wr_id` of an atomic.
pub const ATOMIC_WRID: u64 = 5;

/// How many RDMA READs and atomics we serve at once, told to the peer as `out_reads`: stage
/// 05's `max_dest_rd_atomic` (rc_pingpong's 1), which is also stage 06's `max_rd_atomic`.
pub const OUT_READS: u16 = 1;

/// The cycle (page) size and cache line size we announce: perftest's defaults.
const CYCLE_BUFFER: u32 = 4096;
const CACHE_LINE: u32 = 64;

/// Step 13's QP: no receives, one atomic in flight (`ib_atomic_lat` waits for each), and
/// `access`: `IBV_ACCESS_REMOTE_ATOMIC` on the target, nothing on the requester.
pub fn qp_options(size: u32, access: ibv_access_flags) -> QpOptions {
    QpOptions { rx_depth: 1, tx_depth: 1, cqe: 2, size, use_event: false, access, qp_type: IBV_QPT_RC }
}

/// Which atomic the client posts (`-A`, perftest's names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Atomic {
    /// `IBV_WR_ATOMIC_FETCH_AND_ADD`: a counter. Each one adds 1, as perftest's
    /// `ATOMIC_ADD_VALUE`.
    FetchAndAdd,
    /// `IBV_WR_ATOMIC_CMP_AND_SWP`: here, the same counter built the lock-free way, each
    /// swap writing one more than the value it expects.
    CmpAndSwap,
}

impl Atomic {
    /// perftest's name for it (`-A`).
    pub fn name(self) -> &'static str {
        match self {
            Atomic::FetchAndAdd => "FETCH_AND_ADD",
            Atomic::CmpAndSwap => "CMP_AND_SWAP",
        }
    }
}

/// The device's `atomic_cap`, traced; an error if it has none, or if the buffer (`-s`)
/// cannot hold the 8-byte word.
pub fn check_atomics(dev: &Device, size: u32) -> Result<()> {
    if size < 8 {
        return Err(Error::new("checking the arguments")
            .cause(format!("-s {size}: the word the atomics change, and the answer each returns, are 8 bytes"))
            .fix("give -s 8 or more (the default, 4096, is perftest's buffer)"));
    }
    let attr = dev.ctx.query_device()?;
    let cap = match attr.atomic_cap {
        IBV_ATOMIC_NONE => "IBV_ATOMIC_NONE",
        crate::verbs::IBV_ATOMIC_HCA => "IBV_ATOMIC_HCA",
        _ => "IBV_ATOMIC_GLOB",
    };
    trace::event("ibv_query_device").kv("atomic_cap", cap).emit();
    if attr.atomic_cap == IBV_ATOMIC_NONE {
        return Err(Error::new("ibv_query_device")
            .cause(format!(
                "{} reports atomic_cap IBV_ATOMIC_NONE: it performs no atomic operations (siw, the \
                 Soft-iWARP device, is one)",
                dev.ctx.name()
            ))
            .fix("run step 13 on an InfiniBand or RoCE device (rxe0 in the lab VM)"));
    }
    Ok(())
}

// ANCHOR: stage
/// Posts one atomic on the 8 bytes at `remote.vaddr` in the peer's memory: FETCH_AND_ADD
/// of `compare_add`, or COMPARE_AND_SWAP, which writes `swap` if the word equals
/// `compare_add`. The original value lands in the first 8 bytes of `mr` (read it with
/// [`read_word`] once the completion is polled).
pub fn post_atomic(qp: &Qp, mr: &Mr, remote: &Keys, op: Atomic, compare_add: u64, swap: u64) -> Result<()> {
    // The gather entry is where the answer goes: 8 bytes, the size of every atomic.
    let list = ibv_sge { addr: mr.addr(), length: 8, lkey: mr.lkey() };
    let mut wr = ibv_send_wr {
        wr_id: ATOMIC_WRID,
        // ANCHOR: hole_atomic_opcode HOLE: the opcode of the atomic `op` names (fetch-and-add or compare-and-swap)
        opcode: match op {
            Atomic::FetchAndAdd => IBV_WR_ATOMIC_FETCH_AND_ADD,
            Atomic::CmpAndSwap => IBV_WR_ATOMIC_CMP_AND_SWP,
        },
        // ANCHOR_END: hole_atomic_opcode
        send_flags: IBV_SEND_SIGNALED.0,
        // ANCHOR: hole_atomic_wr HOLE: wr.atomic: the peer's word (address and rkey from its keys, `remote`), what to add or compare with, and the swap
        wr: ibv_send_wr_wr {
            atomic: ibv_send_wr_atomic { remote_addr: remote.vaddr, compare_add, swap, rkey: remote.rkey },
        },
        // ANCHOR_END: hole_atomic_wr
        ..Default::default()
    };
    qp.post_send(&mut wr, std::slice::from_ref(&list), mr).map_err(|err| explain_post(err, remote))?;
    let mut line = trace::event("ibv_post_send")
        .kv("wr_id", wr.wr_id)
        .kv("opcode", op_name(op))
        .kv("sge.length", 8)
        .kv("wr.atomic.remote_addr", Hex64(remote.vaddr))
        .kv("wr.atomic.rkey", Key(remote.rkey))
        .kv("compare_add", compare_add);
    if op == Atomic::CmpAndSwap {
        line = line.kv("swap", swap);
    }
    line.emit();
    Ok(())
}

/// Target, before its keys go out: the word starts at 0. (Stage 03 fills the buffer with
/// rc_pingpong's 0x7b bytes.) Once the peer has the rkey, the word is its adapter's to
/// change: the CPU leaves it alone until the peer says it is done.
pub fn zero_word(mr: &mut Mr) {
    mr.write(0, &0u64.to_ne_bytes());
    trace::event("word").kv("addr", Hex64(mr.addr())).kv("value", 0).emit();
}

/// The 64-bit word at the start of `mr`, in the host's byte order: on the requester, the
/// original value an atomic returned (sound to read once its completion is polled; rxe
/// writes it in the host's order); on the target, the word itself (once the peer has said
/// it is done).
pub fn read_word(mr: &Mr) -> u64 {
    let mut bytes = [0; 8];
    assert_eq!(mr.read_into(0, &mut bytes), 8, "an MR of at least 8 bytes");
    u64::from_ne_bytes(bytes)
}
// ANCHOR_END: stage

/// Explains an `EINVAL` from posting an atomic: the checks a library makes at the door.
fn explain_post(err: Error, remote: &Keys) -> Error {
    if err.errno() != Some(libc::EINVAL) {
        return err;
    }
    err.cause(format!(
        "an atomic is refused as it is posted when its word is not 8-byte aligned (this remote_addr \
         is {} bytes past a multiple of 8) or its gather entry is not 8 bytes: rxe's library \
         checks both (providers/rxe/rxe.c, validate_send_wr)",
        remote.vaddr % 8
    ))
    .fix("aim at an 8-byte aligned address in the peer's MR, with one 8-byte gather entry")
}

fn op_name(op: Atomic) -> &'static str {
    match op {
        Atomic::FetchAndAdd => "IBV_WR_ATOMIC_FETCH_AND_ADD",
        Atomic::CmpAndSwap => "IBV_WR_ATOMIC_CMP_AND_SWP",
    }
}

/// Our keys: rc_pingpong's address, plus the word the peer may change (`mr`'s start, its
/// rkey) and how many atomics we serve at once.
pub fn local_keys(dev: &Device, qp: &Qp, mr: &Mr) -> Keys {
    Keys {
        lid: dev.port_attr.lid,
        out_reads: OUT_READS,
        qpn: qp.qp_num(),
        psn: random_psn(),
        rkey: mr.rkey(),
        vaddr: mr.addr(),
        gid: dev.gid,
        srqn: 0,
    }
}

// ANCHOR: handshake
/// perftest's handshake, as far as the QP's connection: what it settled, and the
/// connection, which carries three more exchanges of the keys.
pub struct Handshake {
    conn: Connection,
    client: bool,
    /// The peer's keys: its QP's address, and the word we may change.
    pub remote: Keys,
    /// The smaller of the two sides' MTUs, which both connect with (perftest's `check_mtu`).
    pub mtu: ibv_mtu,
}

/// perftest's handshake with `peer`, up to where both sides connect their QP: versions,
/// sizes, MTUs, then our keys twice ([`crate::wire::perftest`] has the messages). Unlike
/// rc_pingpong's, it is symmetric: each side connects after it, and two more exchanges
/// ([`Handshake::ready`]) say both are connected.
pub fn perftest_handshake(peer: &Peer, local: &Keys, mtu: ibv_mtu) -> Result<Handshake> {
    let mut conn = match &peer.host {
        None => {
            let conn = Connection::accept(peer.port, peer.timeout)?;
            trace::event("tcp accept").kv("port", peer.port).emit();
            conn
        }
        Some(host) => {
            let conn = Connection::connect(host, peer.port, peer.timeout)?;
            trace::event("tcp connect").kv("host", host).kv("port", peer.port).emit();
            conn
        }
    };
    let client = peer.host.is_some();
    let theirs = swap(&mut conn, client, &Version(VERSION.into()))?;
    trace::event("tcp exchange").kv("version", VERSION).kv("peer", &theirs.0).emit();
    if theirs.number() < OLDEST {
        return Err(Error::new("the perftest handshake").cause(format!(
            "the peer announced version \"{}\": perftest refuses anything older than {OLDEST}, \
             whose handshake differs",
            theirs.0
        )));
    }
    // The sizes perftest lays its buffer out by: we use neither, but the peer waits for them.
    let page = swap(&mut conn, client, &CycleBuffer::new(CYCLE_BUFFER))?;
    trace::event("tcp exchange").kv("cycle_buffer", CYCLE_BUFFER).kv("peer", page.0).emit();
    let line = swap(&mut conn, client, &CacheLine::new(CACHE_LINE))?;
    trace::event("tcp exchange").kv("cache_line_size", CACHE_LINE).kv("peer", line.0).emit();
    let ours = MtuCode(mtu as u8);
    let their_mtu = swap(&mut conn, client, &ours)?;
    trace::event("tcp exchange").kv("mtu", mtu_name(mtu)).kv("peer", mtu_name(their_mtu.0.into())).emit();
    show("local address: ", local);
    let remote = swap(&mut conn, client, local)?;
    trace::event("tcp exchange").kv("keys", 1).kv("bytes", Keys::LEN).emit();
    // perftest exchanges the keys once for the test and once per QP: one QP, the same keys.
    swap(&mut conn, client, local)?;
    trace::event("tcp exchange").kv("keys", 2).kv("bytes", Keys::LEN).emit();
    show("remote address:", &remote);
    Ok(Handshake { conn, client, remote, mtu: mtu.min(ibv_mtu::from(their_mtu.0)) })
}

impl Handshake {
    /// The peer's QP as stage 05's RTR takes it.
    pub fn dest(&self) -> Dest {
        self.remote.dest()
    }

    /// Once our QP is in RTS: two more exchanges, after which both QPs are (perftest prints
    /// the peer's keys between them).
    pub fn ready(&mut self, local: &Keys) -> Result<()> {
        for n in 3..=4 {
            swap(&mut self.conn, self.client, local)?;
            trace::event("tcp exchange").kv("keys", n).kv("bytes", Keys::LEN).emit();
        }
        Ok(())
    }

    /// The last exchange: the client says it is done; the server, which has waited for it,
    /// may now look at its memory. Then `"done"`, as perftest 6.06 ends (later versions
    /// send nothing more, and read nothing more: neither side reads it).
    pub fn close(mut self, local: &Keys) -> Result<()> {
        swap_last(&mut self.conn, self.client, local).map_err(|err| match err {
            ExchangeError::Closed { sending: false, .. } if !self.client => {
                Error::new("waiting for the client's last keys").cause(
                    "the client closed the connection without sending them: it stopped before its atomics \
                     were done, and its own error says why",
                )
            }
            err => err.into(),
        })?;
        trace::event("tcp exchange").kv("keys", 5).kv("bytes", Keys::LEN).emit();
        // A courtesy the peer does not wait for: it may have closed already, and a failed
        // write changes nothing for either side.
        let _ = self.conn.send_done();
        trace::event("tcp send").kv("done", "yes").emit();
        Ok(())
    }
}
// ANCHOR_END: handshake

/// One symmetric exchange: the client writes, then reads; the server reads, then writes
/// (`ctx_xchg_data`).
fn swap<M: Message>(conn: &mut Connection, client: bool, ours: &M) -> Result<M> {
    Ok(exchange(conn, client, ours, false)?)
}

/// The last exchange, after which the peer may send what we do not read
/// ([`Connection::recv_last`]).
fn swap_last<M: Message>(conn: &mut Connection, client: bool, ours: &M) -> std::result::Result<M, ExchangeError> {
    exchange(conn, client, ours, true)
}

fn exchange<M: Message>(
    conn: &mut Connection,
    client: bool,
    ours: &M,
    last: bool,
) -> std::result::Result<M, ExchangeError> {
    let recv = |conn: &mut Connection| if last { conn.recv_last() } else { conn.recv() };
    if client {
        conn.send(ours)?;
        recv(conn)
    } else {
        let theirs = recv(conn)?;
        conn.send(ours)?;
        Ok(theirs)
    }
}

fn show(label: &str, keys: &Keys) {
    trace::line(format_args!("  {label} {keys}"));
}

// ANCHOR: roles
/// Client: `iters` atomics of `op` on the server's word, one at a time as `ib_atomic_lat`
/// does, each waited for. The first is traced; then the originals are checked: alone on
/// the word, a FETCH_AND_ADD returns one more each time, and a COMPARE_AND_SWAP that
/// expects what the last one left always swaps (only the first may fail, on a word that
/// did not start at 0: it returns the value, and the next expects that).
pub fn run_atomics(q: &Queues, mr: &Mr, remote: &Keys, op: Atomic, iters: u32, timeout: Duration) -> Result<()> {
    let Queues { qp, cq, .. } = q;
    let mut first = None;
    let mut last: u64 = 0;
    let mut missed = 0;
    let mut mute = None;
    // The loop is timed (lab/bench, against ib_atomic_lat's): it busy-polls with no clock
    // read, the wait bounded by a watchdog.
    let dog = Watchdog::start(timeout)?;
    for i in 0..iters {
        let (compare_add, swap) = match op {
            Atomic::FetchAndAdd => (1, 0),
            Atomic::CmpAndSwap => (last, last.wrapping_add(1)),
        };
        let expected = last;
        post_atomic(qp, mr, remote, op, compare_add, swap)?;
        let wc = spin_for_one(cq, Send(ATOMIC_WRID), &dog, timeout, u64::from(i))?;
        let got = read_word(mr);
        if i == 0 {
            trace_wc(&wc);
            trace::event("original").kv("value", got).emit();
            first = Some(got);
            mute = Some(trace::mute());
        } else if got != expected {
            missed += 1;
        }
        last = match op {
            Atomic::FetchAndAdd => got.wrapping_add(1),
            Atomic::CmpAndSwap if got == expected => swap,
            Atomic::CmpAndSwap => got,
        };
    }
    drop(mute);
    let first = first.unwrap_or(0);
    trace::event("atomics").kv("op", op.name()).kv("count", iters).kv("first_original", first).kv("left", last).emit();
    if missed > 0 {
        return Err(Error::new("checking the originals").cause(format!(
            "{missed} of the {iters} atomics returned another value than the one before them \
             left: someone else changed the word, or the atomics did not do what they were asked"
        )));
    }
    Ok(())
}

/// Server: after the client's last exchange, the word must hold what its atomics left:
/// `iters` for a counter that started at 0 — or 0 after `ib_atomic_lat`'s
/// COMPARE_AND_SWAP, which swaps 0 for 0 (`ATOMIC_SWAP_VALUE`).
pub fn verify_word(mr: &Mr, op: Atomic, iters: u32) -> Result<()> {
    let value = read_word(mr);
    let ok = value == u64::from(iters) || (op == Atomic::CmpAndSwap && value == 0);
    trace::event("verify").kv("word", value).kv("ok", if ok { "yes" } else { "no" }).emit();
    if !ok {
        return Err(Error::new("verifying the word").cause(format!(
            "it holds {value}, expected {iters}: {iters} {} of 1 on a word that started at 0",
            if op == Atomic::FetchAndAdd { "additions" } else { "swaps, each an increment" }
        )));
    }
    Ok(())
}
// ANCHOR_END: roles

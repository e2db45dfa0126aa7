//! rping, on top of the stages: rdma-core's `librdmacm/examples/rping.c` (Debian's `rping`,
//! package `rdmacm-utils`) — its control block without the CM (`struct rping_cb`), its
//! buffers (`rping_setup_buffers`), its wire format ([`crate::wire::rping`]) and its ping loop
//! (`rping_test_client`, `rping_test_server`). Step 10 speaks its protocol, so either side
//! may be `rping`. The connection itself, and the READ, are stage 10's
//! ([`crate::stages::rdma_cm`]); the SENDs and the receive are stage 07's, with its wr_ids,
//! so that a wr_id means the same in every step's trace.
//!
//! **The ping.** Each iteration: the client SENDs `{addr, rkey, size}` of its source buffer
//! (16 bytes, big-endian: [`RpingInfo`]); the server RDMA READs that buffer and SENDs a
//! "go ahead"; the client SENDs `{addr, rkey, size}` of its sink buffer; the server RDMA
//! WRITEs what it read into it and SENDs "go ahead" again. With `-V` the client compares
//! sink and source.

use std::ffi::CStr;
use std::rc::Rc;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::poll::{
    check_wcs, trace_wc, wait_spinning,
    Awaited::{Recv, Send},
    Backoff,
};
use crate::rdma_cm::{trace_event, unexpected, Endpoint};
use crate::stages::create_qp::{QpOptions, Queues};
use crate::stages::post_send::{post_recv, post_send, PINGPONG_RECV_WRID, PINGPONG_SEND_WRID};
use crate::stages::rdma_cm::{read_source, write_sink};
use crate::stages::reg_mr::reg_mr;
use crate::trace::{self, Hex64, Key};
use crate::verbs::rdma_cm::sys::RDMA_CM_EVENT_DISCONNECTED;
use crate::verbs::{
    self, ibv_access_flags, ibv_wc, CmEvent, Mr, Pd, IBV_ACCESS_LOCAL_WRITE, IBV_ACCESS_REMOTE_READ,
    IBV_ACCESS_REMOTE_WRITE, IBV_QPT_RC, IBV_SEND_SIGNALED,
};
use ibverbs_sys::ibv_wc_status::{IBV_WC_SUCCESS, IBV_WC_WR_FLUSH_ERR};

pub use crate::wire::rping::{c_string, ping_data, RpingInfo};

/// The length of every SEND and receive of rping: one [`RpingInfo`].
const INFO_LEN: u32 = RpingInfo::LEN as u32;
/// rping's send queue depth (`RPING_SQ_DEPTH`); its CQ has twice as many entries.
pub const RPING_SQ_DEPTH: u32 = 16;
/// rping's access to its RDMA buffers (`rdma_buf`, and the client's `start_buf`): the
/// peer reads them and writes them, and the device writes them for the READ's response.
pub const RPING_ACCESS: ibv_access_flags =
    ibv_access_flags(IBV_ACCESS_LOCAL_WRITE.0 | IBV_ACCESS_REMOTE_READ.0 | IBV_ACCESS_REMOTE_WRITE.0);

/// rping's control block (`struct rping_cb`) without the CM: stage 04's queues and rping's
/// four buffers. The queues come first, so the QP is destroyed before the buffers are
/// deregistered, as stage 04's steps do.
pub struct RpingCb {
    /// The QP, created and moved by the CM, and its one CQ (rping's, without its completion
    /// channel: we poll).
    pub q: Queues,
    /// Where each [`RpingInfo`] (or "go ahead") lands: `recv_buf`.
    pub recv: Mr,
    /// What each SEND carries: `send_buf` (no access: only the local HCA reads it).
    pub send: Mr,
    /// The server's READ target and WRITE source; the client's sink: `rdma_buf`.
    pub rdma: Mr,
    /// The client's source, which the server reads: `start_buf`.
    pub start: Option<Mr>,
}

/// rping's queues (`rping_setup_qp`): `RPING_SQ_DEPTH` sends, two receives, a CQ with
/// room for twice as many completions as sends, no completion channel.
pub fn rping_qp() -> QpOptions {
    QpOptions {
        rx_depth: 2,
        tx_depth: RPING_SQ_DEPTH,
        cqe: RPING_SQ_DEPTH * 2,
        // Its messages. Only create_qp reads this (to send inline); rping never does.
        size: RpingInfo::LEN as u32,
        use_event: false,
        access: ibv_access_flags(0),
        qp_type: IBV_QPT_RC,
    }
}

impl RpingCb {
    /// rping's buffers in `pd` (`rping_setup_buffers`) beside the queues `q`, and the first
    /// receive posted. The client registers its source buffer with `start_access`: rping's
    /// is [`RPING_ACCESS`].
    pub fn setup(q: Queues, pd: &Rc<Pd>, size: u32, start_access: Option<ibv_access_flags>) -> Result<RpingCb> {
        let recv = reg_mr(pd, RpingInfo::LEN, IBV_ACCESS_LOCAL_WRITE)?;
        let send = reg_mr(pd, RpingInfo::LEN, ibv_access_flags(0))?;
        let rdma = reg_mr(pd, size as usize, RPING_ACCESS)?;
        let start = start_access.map(|access| reg_mr(pd, size as usize, access)).transpose()?;
        post_recv(&q.qp, &recv, INFO_LEN, 1)?;
        Ok(RpingCb { q, recv, send, rdma, start })
    }
}

/// What a ping loop did, for the closing line.
pub struct Pings {
    /// Iterations completed.
    pub count: u32,
    /// How long they took.
    pub elapsed: Duration,
}

/// How a side runs the loop: `-C`, `-S`, `-v`, `-V` and `--timeout`.
#[derive(Debug, Clone, Copy)]
pub struct PingOptions {
    /// Pings to do (client); 0 for no end. The server, like rping's, pings until the
    /// client disconnects, and only says so when that came before this count.
    pub count: u32,
    /// Bytes per ping.
    pub size: u32,
    /// Print each ping's data.
    pub verbose: bool,
    /// Check each ping's data.
    pub validate: bool,
    /// The longest wait for any one completion or event.
    pub timeout: Duration,
}

// ANCHOR: loop
// ANCHOR: client
/// Client: `count` pings (`rping_test_client`). The first is traced, the rest are not.
pub fn ping_client(cb: &mut RpingCb, opts: PingOptions) -> Result<Pings> {
    let start_time = Instant::now();
    let mut mute = None;
    let mut ping = 0;
    while opts.count == 0 || ping < opts.count {
        let data = ping_data(ping, opts.size as usize);
        let start =
            cb.start.as_mut().ok_or_else(|| Error::new("ping_client").cause("the client has no start buffer"))?;
        start.write(0, &data);
        let source = RpingInfo { addr: start.addr(), rkey: start.rkey(), size: opts.size };
        send_info(cb, source, opts.timeout)?;
        let sink = RpingInfo { addr: cb.rdma.addr(), rkey: cb.rdma.rkey(), size: opts.size };
        send_info(cb, sink, opts.timeout)?;
        // Only -V and -v look at what came back: rping's memcmp and printf.
        if opts.validate || opts.verbose {
            let back = cb.rdma.read(0, opts.size as usize);
            if opts.validate && back != data {
                return Err(Error::new(format!("validating ping {ping}"))
                    .cause("what the server wrote back differs from what it read: data mismatch (rping's words)"));
            }
            if opts.verbose {
                println!("ping data: {}", c_string(&back));
            }
        }
        ping += 1;
        mute.get_or_insert_with(trace::mute);
    }
    drop(mute);
    Ok(Pings { count: ping, elapsed: start_time.elapsed() })
}

/// Client: SENDs `info`, then waits for the SEND to complete and the server's "go ahead".
fn send_info(cb: &mut RpingCb, info: RpingInfo, timeout: Duration) -> Result<()> {
    cb.send.write(0, &info.to_bytes());
    trace::event("rping_info").kv("addr", Hex64(info.addr)).kv("rkey", Key(info.rkey)).kv("size", info.size).emit();
    post_send(&cb.q.qp, &cb.send, INFO_LEN, IBV_SEND_SIGNALED)?;
    wait_spinning(&cb.q.cq, &[Send(PINGPONG_SEND_WRID), Recv(PINGPONG_RECV_WRID)], timeout)?;
    post_recv(&cb.q.qp, &cb.recv, INFO_LEN, 1)
}
// ANCHOR_END: client

// ANCHOR: server
/// Server: serves pings until the client disconnects (`rping_test_server`).
pub fn ping_server(ep: &Endpoint, cb: &mut RpingCb, opts: PingOptions) -> Result<Pings> {
    let start_time = Instant::now();
    let mut mute = None;
    let mut ping = 0;
    loop {
        // From the second ping on, the last "go ahead" of the one before is in flight.
        let source = match await_info(ep, cb, ping > 0, 2 * u64::from(ping), opts.timeout)? {
            Ok(info) => info,
            Err(end) => {
                // The loop's trace is muted after the first ping; the end is not.
                drop(mute.take());
                if let Some(wr_id) = end.flushed {
                    trace::line(format_args!(
                        "wr_id {wr_id} flushed and DISCONNECTED: the client ended the connection \
                         (on iWARP its close also flushes our receive, before or after the CM reports it)"
                    ));
                }
                trace_event(ep, &end.event);
                if ping < opts.count {
                    // The CM reports that the connection ended, never why: a client that
                    // asked for fewer pings, quit or was killed (the kernel then sends the
                    // DREQ for it) all end as this one DISCONNECTED event.
                    trace::line(format_args!(
                        "the client disconnected after {ping} of the {} pings asked (-C): \
                         the CM does not say why a connection ends",
                        opts.count
                    ));
                }
                break;
            }
        };
        read_source(&cb.q, &cb.rdma, source, opts.timeout)?;
        let read = cb.rdma.read(0, source.size as usize);
        if opts.validate && read != ping_data(ping, source.size as usize) {
            return Err(Error::new(format!("validating ping {ping}"))
                .cause("what the RDMA READ brought is not rping's ping data for this iteration"));
        }
        if opts.verbose {
            println!("server ping data: {}", c_string(&read));
        }
        post_send(&cb.q.qp, &cb.send, INFO_LEN, IBV_SEND_SIGNALED)?;
        let sink = await_info(ep, cb, true, 2 * u64::from(ping) + 1, opts.timeout)?
            .map_err(|end| unexpected(&end.event, "the client's sink buffer"))?;
        // rping writes the string it read, up to its NUL: strlen + 1 bytes. (CStr looks for
        // the NUL a word at a time, as strlen does, not byte by byte.)
        let len = CStr::from_bytes_until_nul(&read).map_or(read.len(), |s| s.to_bytes_with_nul().len()) as u32;
        write_sink(&cb.q, &cb.rdma, sink, len, opts.timeout)?;
        post_send(&cb.q.qp, &cb.send, INFO_LEN, IBV_SEND_SIGNALED)?;
        ping += 1;
        mute.get_or_insert_with(trace::mute);
    }
    drop(mute);
    Ok(Pings { count: ping, elapsed: start_time.elapsed() })
}

/// Server: the completion of the "go ahead" SEND (rping's `send_buf`, which the server
/// never fills: 16 zeros) in flight when `go_ahead` is set, and the client's next
/// [`RpingInfo`]; or, once the client has disconnected, the DISCONNECTED event (not yet
/// traced: the loop may be muted), with the flush of our receive on iWARP. Polls the CQ
/// and, between empty polls, the CM's channel.
/// `done`: how many of each kind (a "go ahead", a message) completed on this QP before, for
/// the explanation of a failed one.
///
/// The two completions wait together because either may come first: the client may SEND
/// its next message as soon as our "go ahead" lands, before its acknowledgement reaches
/// us. They are traced in one order, as [`crate::poll::wait_for`] does. Between empty polls
/// it spins, then naps ([`Backoff::spin`]), as the client does.
fn await_info(
    ep: &Endpoint,
    cb: &RpingCb,
    go_ahead: bool,
    done: u64,
    timeout: Duration,
) -> Result<Result<RpingInfo, Disconnected>> {
    let deadline = Instant::now() + timeout;
    let mut wc = [verbs::WC_ZERO; 1];
    let (mut sent, mut received) = (None, None);
    let mut backoff = Backoff::spin();
    loop {
        if cb.q.cq.poll(&mut wc)? == 1 {
            backoff.reset();
            if received.is_none() && verbs::wc_status(&wc[0]) == IBV_WC_WR_FLUSH_ERR {
                if let Some(event) = flushed_by_disconnect(ep, timeout)? {
                    sent.iter().for_each(trace_wc);
                    return Ok(Err(Disconnected { event, flushed: Some(wc[0].wr_id()) }));
                }
            }
            check_wcs(&cb.q.cq, &wc, |_| done)?;
            match wc[0].wr_id() {
                PINGPONG_SEND_WRID if go_ahead && sent.is_none() => sent = Some(wc[0]),
                PINGPONG_RECV_WRID if received.is_none() => received = Some(wc[0]),
                other => {
                    return Err(Error::new("ibv_poll_cq").cause(format!("completion for unexpected wr_id {other}")))
                }
            }
            if let (true, Some(recv)) = (sent.is_some() || !go_ahead, received) {
                sent.iter().for_each(trace_wc);
                trace_wc(&recv);
                return received_info(cb, &recv).map(Ok);
            }
            continue;
        }
        if ep.channel.ready(Duration::ZERO)? {
            let event = ep.channel.get_event(&ep.ids())?;
            if event.kind == RDMA_CM_EVENT_DISCONNECTED && received.is_none() {
                let flushed = flushed_after(cb, go_ahead, &mut sent)?;
                sent.iter().for_each(trace_wc);
                return Ok(Err(Disconnected { event, flushed }));
            }
            trace_event(ep, &event);
            return Err(unexpected(&event, "the client's next message, or DISCONNECTED"));
        }
        let now = Instant::now();
        if now > deadline {
            return Err(Error::new("ibv_poll_cq")
                .cause(format!("no message from the client and no CM event within {} s", timeout.as_secs())));
        }
        backoff.idle(now);
    }
}

/// How long a flush and the DISCONNECTED that explains it wait for each other: on siw the
/// two come within moments, in either order; a flush with no disconnect behind it is a
/// failure, reported late by no more than this.
const DISCONNECT_GRACE: Duration = Duration::from_secs(2);

/// The end of the connection, as the server meets it while it waits for the client's next
/// message: the CM's DISCONNECTED event (not yet traced), and the wr_id of our posted
/// receive when it was flushed.
struct Disconnected {
    event: CmEvent,
    flushed: Option<u64>,
}

/// A flush while the server waits for the client's next message: the end of the connection
/// when the CM's DISCONNECTED follows within [`DISCONNECT_GRACE`] (returned, not yet
/// traced); `None` when it does not, and the flush is then explained as the failure it is.
///
/// Whether there is a flush is the transport's. On RoCE the client's DisconnectRequest
/// reaches the CM and nothing flushes our receive. On iWARP the connection is the QP's own
/// TCP stream (MPA): the client's close ends the stream, the QP leaves RTS and flushes the
/// posted receive, and the CM reports DISCONNECTED, in either order ([`flushed_after`]
/// says why). rping's server, waiting on its semaphore for the CM thread, never looks at
/// the flush and ends on the disconnect; we poll the CQ, so when the flush is first we wait
/// for the disconnect behind it.
fn flushed_by_disconnect(ep: &Endpoint, timeout: Duration) -> Result<Option<CmEvent>> {
    if !ep.channel.ready(timeout.min(DISCONNECT_GRACE))? {
        return Ok(None);
    }
    let event = ep.channel.get_event(&ep.ids())?;
    if event.kind != RDMA_CM_EVENT_DISCONNECTED {
        trace_event(ep, &event);
        return Ok(None);
    }
    Ok(Some(event))
}

/// After a DISCONNECTED met before any flush: the flush of our receive, when the transport
/// gives one, and a "go ahead" that completed beside it. On RoCE nothing is flushed yet: our
/// receive stays posted until `rdma_disconnect` moves the QP to the error state, so only
/// what already reached the CQ is taken. On iWARP the client's close flushes it, and siw
/// does that after it has told the CM: the end of the stream is one work item of siw's CM
/// that makes the CM's upcalls, then closes the QP (`siw_qp_llp_close`, which flushes),
/// while the event goes on to us through the CM's own queue. The two come in either order,
/// so on iWARP the flush is waited for, up to [`DISCONNECT_GRACE`], and the end reads the
/// same whichever came first.
fn flushed_after(cb: &RpingCb, go_ahead: bool, sent: &mut Option<ibv_wc>) -> Result<Option<u64>> {
    let deadline = Instant::now() + DISCONNECT_GRACE;
    let wait = cb.q.qp.is_iwarp();
    let mut wc = [verbs::WC_ZERO; 1];
    let mut backoff = Backoff::spin();
    loop {
        if cb.q.cq.poll(&mut wc)? == 1 {
            let status = verbs::wc_status(&wc[0]);
            match wc[0].wr_id() {
                PINGPONG_RECV_WRID if status == IBV_WC_WR_FLUSH_ERR => return Ok(Some(PINGPONG_RECV_WRID)),
                PINGPONG_SEND_WRID if go_ahead && sent.is_none() && status == IBV_WC_SUCCESS => *sent = Some(wc[0]),
                _ => {}
            }
            continue;
        }
        let now = Instant::now();
        if !wait || now > deadline {
            return Ok(None);
        }
        backoff.idle(now);
    }
}

/// Checks a received message the way rping's `server_recv` does, reads it, and posts the
/// next receive.
fn received_info(cb: &RpingCb, wc: &ibv_wc) -> Result<RpingInfo> {
    if wc.wr_id() != PINGPONG_RECV_WRID || wc.len() != RpingInfo::LEN {
        return Err(Error::new("ibv_poll_cq").cause(format!(
            "expected the client's 16-byte rping_rdma_info, got wr_id {} of {} bytes (rping: \"Received bogus data\")",
            wc.wr_id(),
            wc.len()
        )));
    }
    let bytes: [u8; 16] = cb.recv.read(0, RpingInfo::LEN).try_into().expect("16 bytes");
    let info = RpingInfo::from_bytes(&bytes);
    trace::event("rping_info").kv("addr", Hex64(info.addr)).kv("rkey", Key(info.rkey)).kv("size", info.size).emit();
    post_recv(&cb.q.qp, &cb.recv, INFO_LEN, 1)?;
    Ok(info)
}
// ANCHOR_END: server
// ANCHOR_END: loop

/// The closing line: rc_pingpong's `iters … usec/iter` line, for rping's loop.
pub fn print_pings(p: &Pings) {
    let usec = p.elapsed.as_secs_f64() * 1e6;
    trace::line(format_args!(
        "{} iters in {:.2} seconds = {:.2} usec/iter",
        p.count,
        usec / 1e6,
        if p.count == 0 { 0.0 } else { usec / f64::from(p.count) }
    ));
}

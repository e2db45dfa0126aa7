//! Stage 08: the ping-pong loop — poll the CQ, refill receives, keep one SEND in flight,
//! time it.
//!
//! C reference: `main` from `pp_post_recv(ctx, ctx->rx_depth)` to the statistics, with
//! `parse_single_wc`; `-c` is rdma-core's `validate_buf`.
//!
//! **Polling.** `ibv_poll_cq` never blocks: it hands back the completions that are there
//! (up to two here, one send and one receive) or none. Busy-polling burns a core but
//! reacts within nanoseconds; it is how latency benchmarks run.
//!
//! **Events (`-e`).** Instead, the CQ can be *armed* with `ibv_req_notify_cq`: the next
//! completion then raises one event on the completion channel, and `ibv_get_cq_event`
//! sleeps until it does. Arming is one-shot, so the loop re-arms after every event, *then*
//! polls — a completion that arrives between the event and the re-arm is still found by
//! that poll. The CQ is armed the first time before the address exchange, because a SEND
//! may complete a receive as soon as the peer knows our QP number. Every event must be
//! acknowledged (`ibv_ack_cq_events`) before the CQ can be destroyed; acks take a lock, so
//! they are done once, at the end.
//!
//! **The pipeline.** Each side keeps `rx_depth` receives posted and refills them in bulk
//! when at most one is left. A side sends its next message only when both its previous
//! SEND has completed *and* the peer's next message has arrived (`pending` tracks which of
//! the two is still awaited): that is what makes it a ping-pong, one message in flight
//! each way. With `IBV_SEND_SIGNALED` on every send, the loop ends after `iters` sends and
//! `iters` receives.
//!
//! **A dead peer.** RC tells a *sender* when its peer is gone: the SEND is never
//! acknowledged, the QP retries `retry_cnt` times and completes it with
//! `IBV_WC_RETRY_EXC_ERR` (reported by `check_wcs`). Soft-RoCE does not even do that: rxe
//! reads rc_pingpong's `retry_cnt = 7` as "retry forever" (`rxe_comp.c`: `if
//! (qp->comp.retry_cnt != 7) qp->comp.retry_cnt--`). A *receiver* is told nothing — a
//! posted receive simply never completes — and rc_pingpong then polls (or sleeps in
//! `ibv_get_cq_event`) forever. So the
//! loop has a watchdog ([`Watchdog`]): an interval timer (`SIGALRM`, every quarter of
//! `--timeout`) whose handler fires when no completion has come for `--timeout` seconds;
//! the loop then gives up with an explained error. It costs
//! nothing per message that matters: the loop stores a progress count per completion and,
//! only while the CQ is empty, loads a flag; no clock, no system call. With `-e`, where the
//! loop sleeps in `ibv_get_cq_event`'s `read()`, the watchdog's signal interrupts that read.
//! (A `poll(2)` with a timeout before each `ibv_get_cq_event` would bound the wait too, at
//! the price of a system call per message: 7 % of a 64-byte round trip on rxe.)

use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::poll::check_wcs;
use crate::role::Role;
use crate::stages::create_qp::Queues;
use crate::stages::post_send::{post_recv, post_send, PINGPONG_RECV_WRID, PINGPONG_SEND_WRID};
use crate::trace;
use crate::verbs::{self, ibv_wc, ibv_wc_flags, page_size, CompChannel, Cq, Mr, Watchdog};

/// The ping-pong's parameters (`-s`, `-r`, `-n`, `-c`).
#[derive(Debug, Clone, Copy)]
pub struct PingpongOptions {
    /// Bytes per message.
    pub size: u32,
    /// Receives kept posted.
    pub rx_depth: u32,
    /// Messages each way.
    pub iters: u32,
    /// Fill (client) and check (both sides) the buffer pattern.
    pub chk: bool,
    /// Give up when no completion came for this long (`--timeout`): the peer is gone.
    pub timeout: Duration,
}

/// The loop's outcome, for [`print_stats`].
#[derive(Debug, Clone, Copy)]
pub struct Stats {
    /// Wall-clock time of the loop.
    pub elapsed: Duration,
    /// Bytes per message.
    pub size: u32,
    /// Messages each way.
    pub iters: u32,
    /// The `wc_flags` of the last receive that completed ([`Counts::last_recv_flags`]).
    pub last_recv_flags: Option<ibv_wc_flags>,
}

/// How the loop posts its work requests: what differs between a connected QP's ping-pong
/// and a datagram QP's (step 11's `Datagrams`), so the loop itself is written once.
pub trait Post {
    /// Posts `n` receives for messages of `size` bytes (`pp_post_recv`).
    fn recv(&self, q: &Queues, mr: &Mr, size: u32, n: u32) -> Result<()>;
    /// Posts one SEND of `size` bytes (`pp_post_send`).
    fn send(&self, q: &Queues, mr: &Mr, size: u32) -> Result<()>;
    /// Whether the transport acknowledges what it sends (RC does, UD does not): the
    /// watchdog then looks for retransmissions to tell which side went quiet.
    fn acknowledged(&self) -> bool {
        true
    }
    /// What the transport tells a side whose peer went silent: the end of the watchdog's
    /// explanation when no completion comes.
    fn silence(&self) -> &'static str {
        ".\nRC gives a receiver no signal for that: a posted receive just never completes. Only \
         a side with a SEND outstanding learns of it, when the peer stops acknowledging and the \
         retries run out (IBV_WC_RETRY_EXC_ERR) — and on Soft-RoCE (rxe), where retry_cnt 7 \
         means \"retry forever\", not even then"
    }
}

/// rc_pingpong's posts on a connected (RC) QP: stage 07's `post_recv` and `post_send` of
/// the buffer's first `size` bytes. The QP knows its one peer, so a SEND names nobody.
pub struct Connected;

impl Post for Connected {
    fn recv(&self, q: &Queues, mr: &Mr, size: u32, n: u32) -> Result<()> {
        post_recv(&q.qp, mr, size, n)
    }
    fn send(&self, q: &Queues, mr: &Mr, size: u32) -> Result<()> {
        post_send(&q.qp, mr, size, q.send_flags)
    }
}

// ANCHOR: prepare
/// Before the exchange: post `rx_depth` receives and, with `-e`, arm the CQ.
pub fn prepare(q: &Queues, mr: &Mr, opts: PingpongOptions) -> Result<()> {
    prepare_with(q, mr, opts, &Connected)
}

/// [`prepare`], posting the receives through `post`.
pub fn prepare_with(q: &Queues, mr: &Mr, opts: PingpongOptions, post: &impl Post) -> Result<()> {
    // ANCHOR: hole_prepare_recv HOLE: before the exchange: fill the receive queue (-r receives of -s bytes), as pp_post_recv(ctx, ctx->rx_depth)
    post.recv(q, mr, opts.size, opts.rx_depth)?;
    // ANCHOR_END: hole_prepare_recv
    if q.channel.is_some() {
        // ANCHOR: hole_arm HOLE: with -e: arm the CQ so that its next completion raises an event on the channel (ibv_req_notify_cq, all completions, not only solicited)
        q.cq.req_notify(false)?;
        // ANCHOR_END: hole_arm
        trace::event("ibv_req_notify_cq").kv("solicited_only", 0).emit();
    }
    Ok(())
}
// ANCHOR_END: prepare

// ANCHOR: stage
/// The timed loop of `main`, wrapped in what runs around it: the `-c` pattern, the muted
/// trace, the watchdog, the clock, and afterwards the acknowledged events and the check.
/// Fails when no completion comes for `opts.timeout` (the peer died: see the module doc).
pub fn pingpong(role: Role, q: &Queues, mr: &mut Mr, opts: PingpongOptions) -> Result<Stats> {
    pingpong_with(role, q, mr, opts, &Connected)
}

/// [`pingpong`], posting through `post`.
pub fn pingpong_with(role: Role, q: &Queues, mr: &mut Mr, opts: PingpongOptions, post: &impl Post) -> Result<Stats> {
    let client = role == Role::Client;
    let first = |mr: &Mr| post.send(q, mr, opts.size);
    let looped = |mr: &Mr, dog: &Watchdog, n: &mut Counts| exchange(client, q, mr, opts, post, dog, n);
    timed(role, &q.cq, q.channel.is_some(), mr, opts, post, first, looped)
}

/// [`pingpong`]'s frame around a loop, shared with step 12's loop over several QPs:
/// `first` is the client's first post, `looped` the loop itself, which counts in `Counts`.
/// `events`: the CQ signals a completion channel (`-e`), whose events are acked here.
/// `post` is asked only what its transport tells a side whose peer went silent.
#[allow(clippy::too_many_arguments)]
pub fn timed(
    role: Role,
    cq: &Cq,
    events: bool,
    mr: &mut Mr,
    opts: PingpongOptions,
    post: &impl Post,
    first: impl FnOnce(&Mr) -> Result<()>,
    looped: impl FnOnce(&Mr, &Watchdog, &mut Counts) -> Result<()>,
) -> Result<Stats> {
    let client = role == Role::Client;
    if client && opts.chk {
        mr.write(0, &pattern(mr.len()));
    }
    let mut n = Counts::default();
    let mute = trace::mute();
    // The bound on a silent peer: a timer that fires when no completion came for
    // `opts.timeout` (see the module doc). In the loop it costs a store per completion.
    let dog = Watchdog::start(opts.timeout)?;
    // The client sends first and, as rc_pingpong does, before it reads the clock: the time
    // is that of the loop after the first post. It matters for large messages: Linux
    // 6.1's rxe runs a user QP's sending inside the ibv_post_send system call
    // (rxe_post_send: "utilize process context"), so a large message's first post sends
    // many of its packets before it returns.
    if client {
        first(mr)?;
    }
    let start = Instant::now();
    let looped = looped(mr, &dog, &mut n);
    let elapsed = start.elapsed();
    drop(mute);
    let fired = dog.fired();
    drop(dog);
    if let Err(err) = looped {
        // When the watchdog has fired, whatever error the loop ended with (the interrupted
        // ibv_get_cq_event's EINTR, or the empty poll that saw the flag) is its doing.
        if fired {
            let verb = if events { "ibv_get_cq_event" } else { "ibv_poll_cq" };
            return Err(no_completion(verb, opts, n.scnt, n.rcnt, post));
        }
        return Err(err);
    }

    trace::event("ping-pong").kv("sends", n.scnt).kv("recvs", n.rcnt).emit();
    if events {
        cq.ack_events();
        trace::event("ibv_ack_cq_events").kv("nevents", n.num_cq_events).emit();
    }
    if opts.chk {
        check_pattern(&mr.read(0, mr.len()))?;
        trace::event("validate").kv("bytes", mr.len().min(opts.size as usize)).kv("ok", "yes").emit();
    }
    Ok(Stats { elapsed, size: opts.size, iters: opts.iters, last_recv_flags: n.last_recv_flags })
}

/// rc_pingpong's counters, kept by the caller so that a loop that failed can still say
/// how far it got.
#[derive(Default)]
pub struct Counts {
    /// SENDs completed.
    pub scnt: u32,
    /// Receives completed.
    pub rcnt: u32,
    /// CQ events received (`-e`), to ack at the end.
    pub num_cq_events: u32,
    /// The `wc_flags` of the last receive that completed, `None` before the first: what
    /// the completion says about its buffer (on a UD QP, `IBV_WC_GRH`: whether the first 40
    /// bytes hold a GRH; step 11 asks after the loop).
    pub last_recv_flags: Option<ibv_wc_flags>,
}

// ANCHOR: loop
/// The loop itself, verbs only: both sides answer each receive with a send until `iters`
/// messages went each way. The client has posted the first SEND (see `pingpong`).
fn exchange(
    client: bool,
    q: &Queues,
    mr: &Mr,
    opts: PingpongOptions,
    post: &impl Post,
    dog: &Watchdog,
    n: &mut Counts,
) -> Result<()> {
    let mut routs = opts.rx_depth;
    let mut wc = [verbs::WC_ZERO; 2];
    // What this side awaits first: a receive and, on the client, its first SEND's completion.
    let mut pending = if client { PINGPONG_RECV_WRID | PINGPONG_SEND_WRID } else { PINGPONG_RECV_WRID };

    while n.rcnt < opts.iters || n.scnt < opts.iters {
        let ne = next_batch(&q.cq, q.channel.as_deref(), &mut wc, dog, n)?;
        for wc in &wc[..ne] {
            match wc.wr_id() {
                PINGPONG_SEND_WRID => n.scnt += 1,
                PINGPONG_RECV_WRID => {
                    routs -= 1;
                    // ANCHOR: hole_refill HOLE: a receive was used up (routs counts those still posted): when at most one is left, post enough to have rx_depth again
                    if routs <= 1 {
                        post.recv(q, mr, opts.size, opts.rx_depth - routs)?;
                        routs = opts.rx_depth;
                    }
                    // ANCHOR_END: hole_refill
                    n.rcnt += 1;
                }
                other => {
                    return Err(Error::new(format!("completion for unknown wr_id {other}")));
                }
            }

            // ANCHOR: hole_pending HOLE: this completion's wr_id is no longer awaited: clear its bit in `pending`
            pending &= !wc.wr_id();
            // ANCHOR_END: hole_pending
            if n.scnt < opts.iters && pending == 0 {
                post.send(q, mr, opts.size)?;
                pending = PINGPONG_RECV_WRID | PINGPONG_SEND_WRID;
            }
        }
    }
    Ok(())
}
// ANCHOR_END: loop

/// One turn of the loop's wait, shared by the loops of 08 and 12: with `-e`, sleep until
/// the CQ's event and re-arm it; then take the completions that are there into `wc`
/// (busy-polling until at least one came, without `-e`), tell the watchdog, and fail on
/// the first failed one. Returns how many completions are in `wc`.
#[inline]
pub fn next_batch(
    cq: &Cq,
    channel: Option<&CompChannel>,
    wc: &mut [ibv_wc],
    dog: &Watchdog,
    n: &mut Counts,
) -> Result<usize> {
    if let Some(channel) = channel {
        channel.get_cq_event(cq)?;
        n.num_cq_events += 1;
        // ANCHOR: hole_rearm HOLE: with -e: arming is one-shot. What must happen before we poll, so no completion is missed?
        cq.req_notify(false)?;
        // ANCHOR_END: hole_rearm
    }

    let ne = loop {
        // ANCHOR: hole_poll HOLE(usize): take the completions that are there off the CQ, up to wc.len(), without blocking (ibv_poll_cq): how many came
        let ne = cq.poll(wc)?;
        // ANCHOR_END: hole_poll
        if channel.is_some() || ne >= 1 {
            break ne;
        }
        // An empty poll: one load tells whether the watchdog gave up on the peer.
        if dog.fired() {
            return Err(Error::new("ibv_poll_cq"));
        }
    };
    dog.progress();

    // How many of its kind completed before: a failure's explanation weighs that.
    check_wcs(cq, &wc[..ne], |wr_id| u64::from(if wr_id == PINGPONG_SEND_WRID { n.scnt } else { n.rcnt }))?;
    // Once a completion is taken off the CQ it is gone: keep what the last receive's says.
    if let Some(recv) = wc[..ne].iter().rev().find(|wc| wc.wr_id() == PINGPONG_RECV_WRID) {
        n.last_recv_flags = Some(recv.wc_flags);
    }
    Ok(ne)
}
// ANCHOR_END: stage

/// The watchdog's error: nothing completed for `opts.timeout` (see the module doc).
///
/// Why depends on what this side was waiting for, and the program can find out: if its
/// device is still retransmitting (its retransmit timer expiries, rxe's
/// `completer_retry_err`, go up while we look), a packet of ours is going unacknowledged;
/// if not, we were only waiting for the peer's next message. The link's state comes first
/// when it is down.
fn no_completion(verb: &str, opts: PingpongOptions, scnt: u32, rcnt: u32, post: &impl Post) -> Error {
    // Nearly four of rc_pingpong's ACK timeouts (timeout 14: 67 ms): long enough for a
    // retransmission to show, short next to the --timeout already waited. A transport
    // without acknowledgements never retransmits: nothing to look for.
    let retrying = if post.acknowledged() { crate::link::retries_during(Duration::from_millis(250)) } else { None };
    let down = crate::link::sample().and_then(|(_, now)| now.down());
    let mut causes = Vec::new();
    if let Some(down) = down {
        causes.push(format!("our link is down: {down}. Nothing we send leaves, nothing the peer sends arrives"));
    }
    match retrying {
        Some(n) if n > 0 => causes.push(format!(
            "the peer stopped acknowledging: our device is retransmitting a packet nobody \
             acknowledges ({n} retransmit timeouts in the last 0.25 s, completer_retry_err). The \
             path between is cut or dropping everything, or the peer's program ended (its \
             device drops what comes for a QP it no longer has), or its host is gone"
        )),
        Some(_) => causes.push(
            "the peer stopped sending: its program ended, most often with an error of its own \
             (its output says which), or it was stopped, or its host or the path between went \
             away while we had nothing unacknowledged (our device is not retransmitting)"
                .to_string(),
        ),
        None if !post.acknowledged() => causes.push(
            "the peer stopped sending: its program ended (its output says why), or it was \
             stopped, or the path between or its host went away"
                .to_string(),
        ),
        None => causes.push(
            "the peer stopped sending or acknowledging: its program ended (its output says why), \
             or the path between or its host went away"
                .to_string(),
        ),
    }
    let mut why = format!(
        "no completion for {} s, after {scnt} of {iters} sends and {rcnt} of {iters} receives. ",
        opts.timeout.as_secs(),
        iters = opts.iters
    );
    if causes.len() == 1 {
        why.push_str(&capitalised(&causes[0]));
    } else {
        why.push_str("What fits, the most likely first:");
        for (i, cause) in causes.iter().enumerate() {
            why.push_str(&format!("\n{}. {cause}", i + 1));
        }
    }
    why.push_str(post.silence());
    Error::new(format!("waiting for a completion ({verb})")).cause(why).fix(
        "look at the peer's output for its error, then start both sides again; if the peer is \
         alive but slow (a loaded or emulated machine), raise --timeout",
    )
}

fn capitalised(text: &str) -> String {
    let mut chars = text.chars();
    chars.next().map(|c| c.to_uppercase().chain(chars).collect()).unwrap_or_default()
}

// ANCHOR: stats
/// rc_pingpong's two result lines, with its arithmetic: `usec` is a C `float`, the byte
/// count a `long long`, the rate `bytes * 8. / usec` (bits per µs = Mbit/s).
pub fn print_stats(stats: &Stats) {
    let usec = stats.elapsed.as_micros() as f32;
    let bytes = i64::from(stats.size) * i64::from(stats.iters) * 2;
    trace::line(format_args!(
        "{} bytes in {:.2} seconds = {:.2} Mbit/sec",
        bytes,
        f64::from(usec) / 1_000_000.,
        bytes as f64 * 8. / f64::from(usec)
    ));
    trace::line(format_args!(
        "{} iters in {:.2} seconds = {:.2} usec/iter",
        stats.iters,
        f64::from(usec) / 1_000_000.,
        usec / stats.iters as f32
    ));
}
// ANCHOR_END: stats

/// The `-c` pattern byte at offset `i`: 0 at the start of every page, `0x7b` elsewhere.
///
/// This is what rc_pingpong's client leaves in its buffer with `-c` (it writes
/// `i / page_size % sizeof(char)`, always 0, at each page start of a buffer memset to
/// 0x7b), so our steps and the C tool interoperate with `-c` in both directions. Where the
/// C server checks one byte per page, we check every byte.
pub fn pattern_byte(i: usize, page: usize) -> u8 {
    if i % page == 0 {
        0
    } else {
        crate::stages::reg_mr::FILL
    }
}

/// `len` bytes of [`pattern_byte`], as the client fills its buffer with `-c`.
fn pattern(len: usize) -> Vec<u8> {
    let page = page_size();
    (0..len).map(|i| pattern_byte(i, page)).collect()
}

/// Checks every byte of the last message against [`pattern_byte`].
pub fn check_pattern(buf: &[u8]) -> Result<()> {
    let page = page_size();
    match buf.iter().enumerate().find(|&(i, &b)| b != pattern_byte(i, page)) {
        None => Ok(()),
        Some((i, &b)) => Err(Error::new("validating the received buffer (-c)").cause(format!(
            "byte {i} (page {}) is 0x{b:02x}, expected 0x{:02x}: the message did not arrive \
                 intact, or the peer does not fill the -c pattern (run -c on both sides)",
            i / page,
            pattern_byte(i, page)
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pattern_matches_rc_pingpong_validate_buf() {
        assert_eq!(pattern_byte(0, 4096), 0);
        assert_eq!(pattern_byte(1, 4096), 0x7b);
        assert_eq!(pattern_byte(4096, 4096), 0);
        let mut buf = pattern(3 * page_size() + 5);
        assert!(check_pattern(&buf).is_ok());
        buf[page_size() + 1] = 0;
        let err = check_pattern(&buf).unwrap_err().to_string();
        assert!(err.contains(&format!("byte {} (page 1)", page_size() + 1)), "{err}");
    }
}

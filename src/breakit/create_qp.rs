//! Step 04's mistake: a CQ too small for the work that completes on it.

use std::time::Duration;

use super::{loopback, Case, Stack};
use crate::cli::QpArgs;
use crate::error::{Error, Result};
use crate::poll::trace_wc;
use crate::stages::create_qp::QpOptions;
use crate::stages::post_send::{post_recv, post_send};
use crate::trace;
use crate::verbs::{self, ibv_access_flags, IBV_ACCESS_LOCAL_WRITE, IBV_QPT_RC};

/// Messages sent to ourselves: each one completes twice (its send and its receive).
const MESSAGES: u32 = 4;
/// Small enough for inline sends; the size does not matter here.
const SIZE: u32 = 64;

/// The cases of `04_create_qp --break`.
pub static CASES: [Case<QpArgs>; 1] = [Case {
    name: "cq-too-small",
    summary: "create the CQ with 1 entry for 4 sends and 4 receives, and let them complete",
    by: None,
    rule: "a CQ must have room for every completion that can be waiting to be polled (every\n\
           posted receive plus every signaled send: rc_pingpong's rx_depth + 1). When one\n\
           more arrives the CQ overruns: the completion is lost, the device raises the\n\
           asynchronous IBV_EVENT_CQ_ERR, and the QPs completing into it go to the error\n\
           state. No verb call returns an error: only the async event says so",
    code: "src/breakit/create_qp.rs cq_too_small: QpOptions { cqe: 1, .. }; the correct size is\n\
           QpOptions::pingpong in src/stages/create_qp.rs: cqe = rx_depth + 1",
    fix: "size the CQ for rx_depth + tx_depth completions (ibv_create_cq's cqe), or poll it\n\
          before it fills",
    run: cq_too_small,
}];

/// Connects a QP whose CQ has one entry to itself, sends [`MESSAGES`] messages without
/// polling, then reads the async event and what is left in the CQ.
fn cq_too_small(args: &QpArgs) -> Result<()> {
    let opts = QpOptions {
        rx_depth: MESSAGES,
        tx_depth: MESSAGES,
        cqe: 1,
        size: SIZE,
        use_event: false,
        access: ibv_access_flags(0),
        qp_type: IBV_QPT_RC,
    };
    let s = Stack::new(&args.device, SIZE, IBV_ACCESS_LOCAL_WRITE, opts)?;
    post_recv(&s.q.qp, &s.mr, SIZE, MESSAGES)?;
    loopback(&s)?;
    for _ in 0..MESSAGES {
        post_send(&s.q.qp, &s.mr, SIZE, s.q.send_flags)?;
    }
    let event = s.dev.ctx.get_async_event(Duration::from_secs(5))?.map(|event| event.type_name());
    trace::event("ibv_get_async_event").kv("event_type", event.as_deref().unwrap_or("none within 5 s")).emit();
    let mut wc = [verbs::WC_ZERO; 16];
    let ne = s.q.cq.poll(&mut wc)?;
    trace::event("ibv_poll_cq").kv("completions", ne).kv("expected", 2 * MESSAGES).emit();
    for wc in &wc[..ne] {
        trace_wc(wc);
    }
    match event.as_deref() {
        Some("IBV_EVENT_CQ_ERR") => Err(Error::new("the CQ").cause(format!(
            "IBV_EVENT_CQ_ERR: the CQ overran; {ne} of {} completions could be polled, the rest are lost",
            2 * MESSAGES
        ))),
        Some(other) => Err(Error::new("the CQ").cause(format!("unexpected async event {other}"))),
        None => Ok(()),
    }
}

//! The tests that need an iWARP device: `siw0` in the lab VM (`LAB_DEVICE=siw lab/run`,
//! Soft-iWARP built by `lab/siw`), or an iWARP adapter (`RDMA_DEVICE`). `lab/test` runs them
//! there, with the device tests that hold on any transport (steps 01–04 and 10, step 10's
//! break cases and its interop with rping), whose iWARP snapshots are in
//! `tests/snapshots/iwarp/`. Not part of a plain `cargo test` (`test = false`): on
//! InfiniBand or RoCE they fail, by design.
//!
//! What they show is the book's "why iWARP needs the CM": an iWARP QP runs over a TCP stream
//! that only the connection manager sets up, so rc_pingpong's way — exchange LID, QPN and
//! PSN, then `ibv_modify_qp` to RTR and RTS — stops at RTS.

use testkit as common;

use common::runner::Run;
use common::{book_output, device, device_lock, redact_sections, snapshots, Picks};

/// The device really is an iWARP one: everything else here rests on it.
#[test]
fn the_device_is_iwarp() {
    assert!(
        device().is_iwarp(),
        "{} is not an iWARP device: run these tests with LAB_DEVICE=siw lab/run, or on an iWARP \
         adapter (RDMA_DEVICE)\n{}",
        device().name,
        device().text
    );
    assert!(device().netdev_addr.is_some(), "no IPv4 address on {}'s netdev", device().name);
}

/// Step 08 — rc_pingpong's way of connecting — on iWARP: RESET→INIT→RTR pass, RTR→RTS is
/// refused (`EINVAL` on siw), and the error says why and points at step 10. The server's
/// stderr is the snapshot (`iwarp__08_poll_cq-refused`) and the book's output.
#[test]
fn step_08_is_refused_at_rts_and_points_at_step_10() {
    let _device = device_lock();
    let program = env!("CARGO_BIN_EXE_08_poll_cq");
    let run = Run::new(common::step("08_poll_cq").unwrap()).ours(program).flags(&["-n", "3", "--timeout", "5"]);
    let (s, c) = run.server_client();
    assert!(!c.status.success(), "the client connected on iWARP without the CM?");
    assert_eq!(s.status.code(), Some(1), "{s:?}");
    let err = String::from_utf8_lossy(&s.stderr).into_owned();
    assert!(
        err.contains("ibv_modify_qp RTR→RTS failed: EINVAL") && err.contains("iWARP") && err.contains("10_rdma_cm"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    let text = redact_sections(&err, &Picks::from_sections(&err), device());
    snapshots(|| insta::assert_snapshot!("iwarp__08_poll_cq-refused", text));
    book_output("iwarp", "08_poll_cq-refused", &err);
}

/// Step 13 on iWARP: siw reports `atomic_cap` `IBV_ATOMIC_NONE`, and step 13 stops before
/// its handshake with that cause, on both sides. (An iWARP adapter with the atomics of RFC
/// 7306 would get as far as step 08 does, and be refused at RTS.)
#[test]
fn step_13_stops_at_atomic_cap_none() {
    let _device = device_lock();
    let program = env!("CARGO_BIN_EXE_13_atomics");
    let run = Run::new(common::step("13_atomics").unwrap()).ours(program).flags(&["-n", "3", "--timeout", "5"]);
    let (s, c) = run.server_client();
    for (role, out) in [("server", &s), ("client", &c)] {
        assert_eq!(out.status.code(), Some(1), "{role}: {out:?}");
        let text = String::from_utf8_lossy(&out.stdout);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(text.contains("atomic_cap=IBV_ATOMIC_NONE") && !text.contains("tcp "), "{role}:\n{text}");
        assert!(err.contains("reports atomic_cap IBV_ATOMIC_NONE") && !err.contains("panicked"), "{role}: {err}");
    }
}

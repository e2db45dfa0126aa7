//! Interoperability with rdma-core's own `ibv_rc_pingpong` (Debian's `ibverbs-utils`):
//! our `08_poll_cq` against the C tool, in both roles, with rc_pingpong's flags.
//!
//! Both speak the same 52-byte exchange and the same SEND ping-pong, so each side must
//! finish and print rc_pingpong's statistics lines. Iteration counts stay modest (the lab
//! VM emulates its CPU), except for one run with the defaults.

use testkit as common;

use common::runner::{Player, Run};
use common::{assert_ok, device_lock, stdout};

const C_PINGPONG: &str = "ibv_rc_pingpong";
const OURS: &str = env!("CARGO_BIN_EXE_08_poll_cq");

/// Who plays a side: the C tool, or our program.
fn player(program: &str) -> Player {
    if program == C_PINGPONG {
        Player::C
    } else {
        Player::Ours(program.into())
    }
}

/// Runs `server` ↔ `client` with `extra` flags on both sides and checks both report
/// `iters` iterations.
fn interop(server: &str, client: &str, extra: &[&str], iters: u32) {
    let _device = device_lock();
    let run = Run::new(common::step("08_poll_cq").unwrap()).server(player(server)).client(player(client));
    let (s, c) = run.flags(extra).server_client();
    assert_ok(&format!("server {server}"), &s);
    assert_ok(&format!("client {client}"), &c);
    for (role, out) in [("server", &s), ("client", &c)] {
        let text = stdout(out);
        assert!(text.contains("  local address:  LID 0x"), "{role}: {text}");
        assert!(text.contains("  remote address: LID 0x"), "{role}: {text}");
        assert!(text.contains(&format!("{iters} iters in ")), "{role}: {text}");
        assert!(!text.contains("invalid data"), "{role}: {text}");
    }
}

#[test]
fn defaults_our_server_c_client() {
    interop(OURS, C_PINGPONG, &[], 1000);
}

#[test]
fn defaults_c_server_our_client() {
    interop(C_PINGPONG, OURS, &[], 1000);
}

#[test]
fn events_our_server_c_client() {
    interop(OURS, C_PINGPONG, &["-e", "-n", "200"], 200);
}

#[test]
fn events_c_server_our_client() {
    interop(C_PINGPONG, OURS, &["-e", "-n", "200"], 200);
}

#[test]
fn chk_our_server_c_client() {
    interop(OURS, C_PINGPONG, &["-c", "-n", "200"], 200);
}

#[test]
fn chk_c_server_our_client() {
    interop(C_PINGPONG, OURS, &["-c", "-n", "200"], 200);
}

#[test]
fn size_64_our_server_c_client() {
    interop(OURS, C_PINGPONG, &["-s", "64", "-n", "200"], 200);
}

#[test]
fn size_64_c_server_our_client() {
    interop(C_PINGPONG, OURS, &["-s", "64", "-n", "200"], 200);
}

#[test]
fn size_65536_our_server_c_client() {
    interop(OURS, C_PINGPONG, &["-s", "65536", "-n", "200"], 200);
}

#[test]
fn size_65536_c_server_our_client() {
    interop(C_PINGPONG, OURS, &["-s", "65536", "-n", "200"], 200);
}

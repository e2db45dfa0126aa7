//! Interoperability with rdma-core's own `ibv_ud_pingpong` (Debian's `ibverbs-utils`): our
//! `11_ud_pingpong` against the C tool, in both roles, busy-polling and with `-e`.
//!
//! Both speak rc_pingpong's 52-byte exchange, and the same datagrams: a send from offset 40
//! of the buffer, with Q_Key 0x11111111, into receives with 40 bytes of GRH room. Each side
//! must finish and print the statistics lines. The C tool's default size (2048) is above
//! rxe's active MTU, so the runner gives it ours (1024) unless `-s` says otherwise.

use testkit as common;

use common::runner::{Player, Run};
use common::{assert_ok, device_lock, stdout};

const OURS: &str = env!("CARGO_BIN_EXE_11_ud_pingpong");

/// Runs `server` ↔ `client` with `extra` flags on both sides and checks both report
/// `iters` iterations.
fn interop(server: Player, client: Player, extra: &[&str], iters: u32) {
    let _device = device_lock();
    let run = Run::new(common::step("11_ud_pingpong").unwrap()).server(server.clone()).client(client.clone());
    let (s, c) = run.flags(extra).server_client();
    assert_ok(&format!("server {server:?}"), &s);
    assert_ok(&format!("client {client:?}"), &c);
    for (role, out) in [("server", &s), ("client", &c)] {
        let text = stdout(out);
        assert!(text.contains("  local address:  LID 0x"), "{role}: {text}");
        assert!(text.contains("  remote address: LID 0x"), "{role}: {text}");
        assert!(text.contains(&format!("{iters} iters in ")), "{role}: {text}");
    }
}

fn ours() -> Player {
    Player::Ours(OURS.into())
}

#[test]
fn ud_our_server_c_client() {
    interop(ours(), Player::C, &["-n", "200"], 200);
}

#[test]
fn ud_c_server_our_client() {
    interop(Player::C, ours(), &["-n", "200"], 200);
}

#[test]
fn ud_events_our_server_c_client() {
    interop(ours(), Player::C, &["-e", "-n", "200"], 200);
}

#[test]
fn ud_events_c_server_our_client() {
    interop(Player::C, ours(), &["-e", "-n", "200"], 200);
}

#[test]
fn ud_size_64_c_server_our_client() {
    interop(Player::C, ours(), &["-s", "64", "-n", "200"], 200);
}

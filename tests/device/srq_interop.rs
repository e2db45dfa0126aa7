//! Interoperability of step 12 with rdma-core's own `ibv_srq_pingpong` (Debian's
//! `ibverbs-utils`), in both roles, polling and with `-e`.
//!
//! Both send srq_pingpong's 256 addresses each way and run its loop over `-q` QPs sharing
//! one SRQ, so each side must finish and print the statistics lines. Our side also reads
//! the SRQ limit's event, which never reaches the wire: the C tool cannot tell.

use testkit as common;

use common::runner::{Player, Run};
use common::{assert_ok, device_lock, stdout};

const C_SRQ_PINGPONG: &str = "ibv_srq_pingpong";
const OURS: &str = env!("CARGO_BIN_EXE_12_srq_pingpong");

fn player(program: &str) -> Player {
    if program == C_SRQ_PINGPONG {
        Player::C
    } else {
        Player::Ours(program.into())
    }
}

/// Runs `server` ↔ `client` with `extra` flags on both sides; both must report `iters`
/// iterations, and ours must have seen the SRQ limit reached (every run here uses more
/// than `rx_depth - num_qp` receives).
fn interop(server: &str, client: &str, extra: &[&str], iters: u32) {
    let _device = device_lock();
    let run = Run::new(common::step("12_srq_pingpong").unwrap()).server(player(server)).client(player(client));
    let (s, c) = run.flags(extra).server_client();
    assert_ok(&format!("server {server}"), &s);
    assert_ok(&format!("client {client}"), &c);
    for (role, program, out) in [("server", server, &s), ("client", client, &c)] {
        let text = stdout(out);
        assert!(text.contains("  local address:  LID 0x"), "{role}: {text}");
        assert!(text.contains("  remote address: LID 0x"), "{role}: {text}");
        assert!(text.contains(&format!("{iters} iters in ")), "{role}: {text}");
        if program == OURS {
            assert!(text.contains("event_type=IBV_EVENT_SRQ_LIMIT_REACHED"), "{role}: {text}");
        }
    }
}

#[test]
fn defaults_our_server_c_client() {
    interop(OURS, C_SRQ_PINGPONG, &[], 1000);
}

#[test]
fn defaults_c_server_our_client() {
    interop(C_SRQ_PINGPONG, OURS, &[], 1000);
}

#[test]
fn events_our_server_c_client() {
    interop(OURS, C_SRQ_PINGPONG, &["-e", "-q", "4", "-r", "64", "-n", "200"], 200);
}

#[test]
fn events_c_server_our_client() {
    interop(C_SRQ_PINGPONG, OURS, &["-e", "-q", "4", "-r", "64", "-n", "200"], 200);
}

#[test]
fn size_64_our_server_c_client() {
    interop(OURS, C_SRQ_PINGPONG, &["-s", "64", "-q", "8", "-r", "32", "-n", "200"], 200);
}

#[test]
fn size_64_c_server_our_client() {
    interop(C_SRQ_PINGPONG, OURS, &["-s", "64", "-q", "8", "-r", "32", "-n", "200"], 200);
}

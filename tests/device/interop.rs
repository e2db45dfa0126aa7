//! Interoperability with rdma-core's own `ibv_rc_pingpong` (Debian's `ibverbs-utils`):
//! our `08_poll_cq` against the C tool, in both roles, with rc_pingpong's flags.
//!
//! Both speak the same 52-byte exchange and the same SEND ping-pong, so each side must
//! finish and print rc_pingpong's statistics lines. Iteration counts stay modest (the lab
//! VM emulates its CPU), except for one run with the defaults.

use testkit as common;

use common::{args, assert_ok, device_args, device_lock, run_pair, stdout, tcp_port};

const C_PINGPONG: &str = "ibv_rc_pingpong";
const OURS: &str = env!("CARGO_BIN_EXE_08_poll_cq");

/// Runs `server` ↔ `client` with `extra` flags on both sides and checks both report
/// `iters` iterations.
fn interop(server: &str, client: &str, extra: &[&str], iters: u32) {
    let _device = device_lock();
    let mut server_args = device_args();
    server_args.extend(args(&["-p", &tcp_port().to_string()]));
    server_args.extend(args(extra));
    let mut client_args = server_args.clone();
    client_args.push("127.0.0.1".into());
    let (s, c) = run_pair(server, &server_args, client, &client_args);
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

//! Snapshot tests: every step's trace on a real device, server and client for 05–09.
//!
//! These are the book's "Run it" listings. They run the real binaries on the device given
//! by `RDMA_DEVICE` (default: the first one) with `-g $RDMA_GID_INDEX` (default 1), and fail
//! when there is no device: run them with `lab/test` or `lab/run cargo test`.

mod common;

use common::{args, assert_ok, device_args, device_lock, run, run_pair, stdout, with_filters};

/// A single-process step (01–04): one snapshot, `steps__<bin>.snap`.
fn single(bin: &str, program: &str) {
    let _device = device_lock();
    let out = run(program, &device_args());
    assert_ok(bin, &out);
    with_filters(|| insta::assert_snapshot!(bin, stdout(&out)));
}

/// A two-role step (05–09): `steps__<bin>-server.snap` and `steps__<bin>-client.snap`.
/// Each test gets its own TCP port: test binaries may run next to each other.
fn pair(bin: &str, program: &str, port: u16) {
    let _device = device_lock();
    let mut server = device_args();
    server.extend(args(&["-p", &port.to_string()]));
    let mut client = server.clone();
    client.push("127.0.0.1".into());
    let (s, c) = run_pair(program, &server, program, &client);
    assert_ok(&format!("{bin} server"), &s);
    assert_ok(&format!("{bin} client"), &c);
    with_filters(|| {
        insta::assert_snapshot!(format!("{bin}-server"), stdout(&s));
        insta::assert_snapshot!(format!("{bin}-client"), stdout(&c));
    });
}

#[test]
fn step_01_open_device() {
    single("01_open_device", env!("CARGO_BIN_EXE_01_open_device"));
}

#[test]
fn step_02_alloc_pd() {
    single("02_alloc_pd", env!("CARGO_BIN_EXE_02_alloc_pd"));
}

#[test]
fn step_03_reg_mr() {
    single("03_reg_mr", env!("CARGO_BIN_EXE_03_reg_mr"));
}

#[test]
fn step_04_create_qp() {
    single("04_create_qp", env!("CARGO_BIN_EXE_04_create_qp"));
}

#[test]
fn step_05_modify_qp_rtr() {
    pair("05_modify_qp_rtr", env!("CARGO_BIN_EXE_05_modify_qp_rtr"), 18605);
}

#[test]
fn step_06_modify_qp_rts() {
    pair("06_modify_qp_rts", env!("CARGO_BIN_EXE_06_modify_qp_rts"), 18606);
}

#[test]
fn step_07_post_send() {
    pair("07_post_send", env!("CARGO_BIN_EXE_07_post_send"), 18607);
}

#[test]
fn step_08_poll_cq() {
    pair("08_poll_cq", env!("CARGO_BIN_EXE_08_poll_cq"), 18608);
}

#[test]
fn step_09_rdma_write() {
    pair("09_rdma_write", env!("CARGO_BIN_EXE_09_rdma_write"), 18609);
}

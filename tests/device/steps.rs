//! Snapshot tests: every step's trace on a real device, server and client for 05–09.
//!
//! They run the real binaries on the device, port and GID index of `RDMA_DEVICE`,
//! `RDMA_IB_PORT` and `RDMA_GID_INDEX` (defaults in `testkit`), and fail when there
//! is no device: run them with `lab/test` or `lab/run cargo test`.
//!
//! A snapshot keeps what the program does — the verbs, their order, the arguments it
//! chose, the state changes and masks — and names what the device reports or the run
//! picks (`common::redact`): `[MAX_QP]`, `[ACTIVE_MTU]`, `[GID_TABLE]`, `[QPN:server]`…,
//! each only where it is the device's own answer or the side's own value. The book's
//! "Run it" listings are the real output behind each snapshot (`common::book_output`).

use rdma_dissect::role::Role;
use testkit as common;

use common::cm::redact_cm;
use common::runner::Run;
use std::process::Output;

use common::{assert_ok, book_output, device, device_args, device_lock, redact, run, snapshots, stdout, Device, Picks};

/// A single-process step (01–04): one snapshot, `steps__<bin>.snap`.
fn single(bin: &str, program: &str) {
    let _device = device_lock();
    let out = run(program, &device_args());
    assert_ok(bin, &out);
    let raw = stdout(&out);
    let text = redact(&raw, None, &Picks::alone(&raw), device());
    snapshots(|| insta::assert_snapshot!(format!("steps__{bin}"), text));
    book_output("steps", bin, &raw);
}

/// A two-role step (05–09, 11, 12) with `flags` on both sides: `steps__<bin>-server.snap`
/// and `steps__<bin>-client.snap`.
fn pair(bin: &str, program: &str, flags: &[&str]) {
    let _device = device_lock();
    let (s, c) = Run::new(common::step(bin).unwrap()).ours(program).flags(flags).server_client();
    record_pair(bin, &s, &c, redact);
}

/// Both sides of a two-role step must succeed; records `steps__<bin>-server.snap` and
/// `steps__<bin>-client.snap`, each side's trace redacted by `redact_side`, and the
/// book's outputs.
fn record_pair(bin: &str, s: &Output, c: &Output, redact_side: fn(&str, Option<Role>, &Picks, &Device) -> String) {
    assert_ok(&format!("{bin} server"), s);
    assert_ok(&format!("{bin} client"), c);
    let (s, c) = (stdout(s), stdout(c));
    let run = Picks::pair(&s, &c);
    let server_text = redact_side(&s, Some(Role::Server), &run, device());
    let client_text = redact_side(&c, Some(Role::Client), &run, device());
    snapshots(|| {
        insta::assert_snapshot!(format!("steps__{bin}-server"), server_text);
        insta::assert_snapshot!(format!("steps__{bin}-client"), client_text);
    });
    book_output("steps", &format!("{bin}-server"), &s);
    book_output("steps", &format!("{bin}-client"), &c);
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
    pair("05_modify_qp_rtr", env!("CARGO_BIN_EXE_05_modify_qp_rtr"), &[]);
}

#[test]
fn step_06_modify_qp_rts() {
    pair("06_modify_qp_rts", env!("CARGO_BIN_EXE_06_modify_qp_rts"), &[]);
}

#[test]
fn step_07_post_send() {
    pair("07_post_send", env!("CARGO_BIN_EXE_07_post_send"), &[]);
}

#[test]
fn step_08_poll_cq() {
    pair("08_poll_cq", env!("CARGO_BIN_EXE_08_poll_cq"), &[]);
}

#[test]
fn step_09_rdma_write() {
    pair("09_rdma_write", env!("CARGO_BIN_EXE_09_rdma_write"), &[]);
}

/// Step 10 (roles `cm`): our server and our client over rdma_cm, on the device's address:
/// `steps__<bin>-server.snap` and `steps__<bin>-client.snap`.
fn cm(bin: &str, program: &str) {
    let _device = device_lock();
    let run = Run::new(common::step(bin).unwrap()).ours(program).flags(&["-V"]).role_flags(Role::Client, &["-C", "3"]);
    let (s, c) = run.server_client();
    record_pair(bin, &s, &c, redact_cm);
}

#[test]
fn step_10_rdma_cm() {
    cm("10_rdma_cm", env!("CARGO_BIN_EXE_10_rdma_cm"));
}

#[test]
fn step_11_ud_pingpong() {
    pair("11_ud_pingpong", env!("CARGO_BIN_EXE_11_ud_pingpong"), &[]);
}

/// Step 12 with `-q 2`: two QPs show everything sixteen would, in an eighth of the lines.
#[test]
fn step_12_srq_pingpong() {
    pair("12_srq_pingpong", env!("CARGO_BIN_EXE_12_srq_pingpong"), &["-q", "2"]);
}

#[test]
fn step_13_atomics() {
    pair("13_atomics", env!("CARGO_BIN_EXE_13_atomics"), &[]);
}

//! The classroom image's login profile exports `RDMA_DEVICE`, `RDMA_IB_PORT` and
//! `RDMA_GID_INDEX`, and the book's commands leave `-d`, `-i` and `-g` out: the steps take
//! them from there (src/cli/mod.rs, `DeviceArgs`). On the device: an `08_poll_cq` pair run
//! with the three variables and none of the flags connects, uses that GID index, and each
//! side's trace opens with where the values came from; with `RDMA_GID_INDEX=` (empty, so
//! unset) a RoCE pair fails as without `-g`, the lesson of chapter 05.
//! (tests/no_device/env_defaults.rs checks the rest without a device.)

use testkit as common;

use std::process::Output;

use common::runner::Run;
use common::{device, device_lock};
use rdma_dissect::trace::COLUMN;

/// A 08_poll_cq server and client over 127.0.0.1, ten exchanges, no -d, -i or -g, and of
/// the three variables exactly `envs`.
fn pair(envs: &[(&str, String)]) -> (Output, Output) {
    let mut run = Run::new(common::step("08_poll_cq").unwrap()).ours(env!("CARGO_BIN_EXE_08_poll_cq"));
    run.device = false;
    run.wrap = std::iter::once("env".to_string()).chain(envs.iter().map(|(k, v)| format!("{k}={v}"))).collect();
    run.flags(&["-n", "10"]).server_client()
}

fn text(what: &str, out: &Output) -> String {
    format!(
        "{what} ({})\n--- stdout\n{}--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn a_pair_takes_device_port_and_gid_index_from_the_environment() {
    let _device = device_lock();
    let dev = device();
    let envs = [
        ("RDMA_DEVICE", dev.name.clone()),
        ("RDMA_IB_PORT", dev.port.to_string()),
        ("RDMA_GID_INDEX", dev.gid_index.to_string()),
    ];
    let (s, c) = pair(&envs);
    let opening: String =
        [("RDMA_DEVICE", &envs[0].1, "-d"), ("RDMA_IB_PORT", &envs[1].1, "-i"), ("RDMA_GID_INDEX", &envs[2].1, "-g")]
            .iter()
            .map(|(var, value, flag)| format!("{:<COLUMN$} {var}={value} flag={flag}\n", "getenv"))
            .collect();
    for (what, out) in [("server", &s), ("client", &c)] {
        assert!(out.status.success() && out.stderr.is_empty(), "{}", text(what, out));
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout.starts_with(&opening), "want the trace to open with\n{opening}{}", text(what, out));
        let sgid = format!("ah_attr.grh.sgid_index={} ", dev.gid_index);
        assert!(stdout.contains(&sgid), "want {sgid}in the RTR: {}", text(what, out));
    }
}

#[test]
fn an_empty_gid_index_variable_leaves_the_gid_out_as_rc_pingpong_does() {
    let _device = device_lock();
    let dev = device();
    // InfiniBand GIDs have no RoCE type (testkit's table says "IB"): a LID is enough there.
    let roce = dev.gids.iter().any(|(_, _, ty)| ty.starts_with("RoCE"));
    let envs =
        [("RDMA_DEVICE", dev.name.clone()), ("RDMA_IB_PORT", dev.port.to_string()), ("RDMA_GID_INDEX", String::new())];
    let (s, c) = pair(&envs);
    for (what, out) in [("server", &s), ("client", &c)] {
        assert!(!String::from_utf8_lossy(&out.stdout).contains("RDMA_GID_INDEX"), "{}", text(what, out));
    }
    if roce {
        // The server connects its QP before it replies (chapter 05), so it is the one to fail.
        let stderr = String::from_utf8_lossy(&s.stderr);
        assert!(!s.status.success() && stderr.contains("is_global = 0"), "{}", text("server", &s));
        assert!(!c.status.success(), "{}", text("client", &c));
    } else {
        assert!(s.status.success() && c.status.success(), "{}\n{}", text("server", &s), text("client", &c));
    }
}

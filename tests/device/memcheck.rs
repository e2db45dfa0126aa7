//! valgrind memcheck over every step (issue 5): runs `lab/memcheck` on the step binaries
//! this `cargo test` built, and fails if any run reports an invalid read or write (any
//! memcheck error) or a definite leak, or does not exit 0.
//!
//! Needs an RDMA device and valgrind: run it with `lab/test` or
//! `lab/run cargo test --test device memcheck::`. It is the slowest device test: each process
//! starts valgrind on the lab VM's emulated CPU (lab/README.md, "valgrind memcheck"); the
//! script prints one line per process.

use testkit as common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn every_step_is_clean_under_valgrind_memcheck() {
    // Alone on the device: valgrind's minutes would slow every test beside it.
    let _device = common::device_lock();
    let dev = common::device();
    let bins = Path::new(env!("CARGO_BIN_EXE_01_open_device")).parent().unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("lab/memcheck");
    let started = Instant::now();
    let child = Command::new(&script)
        .env("MEMCHECK_BIN", bins)
        .env("RDMA_DEVICE", &dev.name)
        .env("RDMA_GID_INDEX", dev.gid_index.to_string())
        // One port per step pair (05–09), none another test uses.
        .env("MEMCHECK_PORT", common::tcp_ports(5).to_string())
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", script.display()));
    // The script bounds each process (15 min); this bounds the whole run.
    let out = common::wait(child, "lab/memcheck", started + Duration::from_secs(3600));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains("no memory errors, no definite leaks"),
        "lab/memcheck failed ({})\n--- stdout\n{stdout}--- stderr\n{stderr}",
        out.status
    );
    eprintln!("{stdout}lab/memcheck took {:.0?}", started.elapsed());
}

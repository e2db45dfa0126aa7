//! The lab's own acceptance check, independent of our code: Debian's C `ibv_rc_pingpong`
//! completes a full 1000-iteration run on this machine's device (`RDMA_DEVICE`,
//! `RDMA_IB_PORT`, `RDMA_GID_INDEX`: rxe0, port 1, GID index 1 in the lab VM). If this
//! fails, the device is broken, not the steps.

use testkit as common;

use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn pingpong(port: u16, host: Option<&str>) -> Child {
    let mut cmd = Command::new("timeout");
    // A bounded run: a broken device must fail the test, not hang it.
    cmd.args(["60", "ibv_rc_pingpong"]).args(common::device_args());
    cmd.args(["-p", &port.to_string(), "-n", "1000"]);
    cmd.args(host);
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("spawn ibv_rc_pingpong")
}

/// The C client does not retry a refused connection, and probing the port with a
/// connection of our own would use up the server's single accept(): watch the kernel's
/// socket table for the listener instead.
fn listening(port: u16) -> bool {
    let needle = format!(":{port:04X} ");
    ["/proc/net/tcp", "/proc/net/tcp6"].iter().any(|table| {
        std::fs::read_to_string(table).unwrap_or_default().lines().any(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            fields.len() > 3 && format!("{} ", fields[1]).ends_with(&needle) && fields[3] == "0A"
        })
    })
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

#[test]
fn c_rc_pingpong_server_and_client_complete_1000_iterations() {
    // Alone on the device: a busy-polling pair needs both of the lab VM's vCPUs.
    let _device = common::device_lock();
    let port = common::tcp_port();
    let mut server = pingpong(port, None);
    let deadline = Instant::now() + Duration::from_secs(20);
    while !listening(port) {
        if server.try_wait().unwrap().is_some() {
            let out = server.wait_with_output().unwrap();
            panic!(
                "the C server exited before listening — is there an RDMA device? Run the tests \
                 through `lab/test` (or `lab/run cargo test`).\n{}",
                text(&out)
            );
        }
        assert!(Instant::now() < deadline, "the C server never listened on port {port}");
        std::thread::sleep(Duration::from_millis(20));
    }
    let client = pingpong(port, Some("127.0.0.1")).wait_with_output().unwrap();
    let server = server.wait_with_output().unwrap();
    for (role, out) in [("server", &server), ("client", &client)] {
        assert!(out.status.success(), "{role} failed:\n{}", text(out));
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout.contains("1000 iters in"), "{role} did not complete 1000 iterations:\n{stdout}");
    }
}

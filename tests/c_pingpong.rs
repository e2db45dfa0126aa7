//! The lab's own acceptance check, independent of our code: Debian's C `ibv_rc_pingpong`
//! completes a full 1000-iteration run on this machine's device (rxe0 in the lab VM, with
//! its IPv4-mapped GID at index 1). If this fails, the device is broken, not the steps.

use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const PORT: u16 = 18599;

fn gid_index() -> String {
    std::env::var("RDMA_GID_INDEX").unwrap_or_else(|_| "1".into())
}

fn pingpong(host: Option<&str>) -> Child {
    let mut cmd = Command::new("timeout");
    // A bounded run: a broken device must fail the test, not hang it.
    cmd.args(["60", "ibv_rc_pingpong", "-g", &gid_index(), "-p", &PORT.to_string(), "-n", "1000"]);
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
    let mut server = pingpong(None);
    let deadline = Instant::now() + Duration::from_secs(20);
    while !listening(PORT) {
        if server.try_wait().unwrap().is_some() {
            let out = server.wait_with_output().unwrap();
            panic!(
                "the C server exited before listening — is there an RDMA device? Run the tests \
                 through `lab/test` (or `lab/run cargo test`).\n{}",
                text(&out)
            );
        }
        assert!(Instant::now() < deadline, "the C server never listened on port {PORT}");
        std::thread::sleep(Duration::from_millis(20));
    }
    let client = pingpong(Some("127.0.0.1")).wait_with_output().unwrap();
    let server = server.wait_with_output().unwrap();
    for (role, out) in [("server", &server), ("client", &client)] {
        assert!(out.status.success(), "{role} failed:\n{}", text(out));
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout.contains("1000 iters in"), "{role} did not complete 1000 iterations:\n{stdout}");
    }
}

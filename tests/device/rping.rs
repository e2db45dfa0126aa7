//! Interoperability with Debian's `rping` (rdma-core's `librdmacm/examples/rping.c`,
//! package `rdmacm-utils`): our `10_rdma_cm` against it in both roles, with rping's own
//! flags, at more than one size and count, validated on both sides (`-V`).
//!
//! rping's client with `-V` compares what came back with what it sent; ours as server
//! with `-V` checks that what it READ is rping's ping data for that iteration; rping's
//! client with `-v` prints one `ping data:` line per iteration, which proves the count.
//! rping's server reports its end on stderr (`server DISCONNECT EVENT...`) and exits 0:
//! for rping, the exit status is the verdict.

use testkit as common;

use std::process::Output;

use common::runner::{Player, Run};
use common::{assert_ok, device_lock, stdout};
use rdma_dissect::role::Role;

const OURS: &str = env!("CARGO_BIN_EXE_10_rdma_cm");

/// The runs: (`-S`, `-C`).
const RUNS: [(u32, u32); 2] = [(64, 10), (4096, 25)];

/// Step 10 with rping in the role `rping` and ours in the other, both with `-S size -V`,
/// the server with `-C` the first count and the client with the second.
fn run(rping: Role, size: u32, [server, client]: [u32; 2]) -> Run {
    let run = Run::new(common::step("10_rdma_cm").unwrap()).ours(OURS);
    let run = if rping == Role::Server { run.server(Player::Rping) } else { run.client(Player::Rping) };
    let run = run.flags(&["-S", &size.to_string(), "-V"]);
    run.role_flags(Role::Server, &["-C", &server.to_string()]).role_flags(Role::Client, &["-C", &client.to_string()])
}

fn rping_ok(what: &str, out: &Output) {
    assert!(
        out.status.success(),
        "{what} failed ({})\n--- stdout\n{}--- stderr\n{}",
        out.status,
        stdout(out),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Our trace's closing line says `count` pings were done.
fn ours_did(what: &str, out: &Output, count: u32) {
    let text = stdout(out);
    assert!(text.contains(&format!("\n{count} iters in ")), "{what}: not {count} pings:\n{text}");
}

#[test]
fn our_server_with_rping_client() {
    let _device = device_lock();
    for (size, count) in RUNS {
        let (s, c) = run(Role::Client, size, [count, count]).role_flags(Role::Client, &["-v"]).server_client();
        rping_ok(&format!("rping -c -S {size} -C {count}"), &c);
        assert_ok(&format!("10_rdma_cm -s -S {size}"), &s);
        ours_did("10_rdma_cm -s", &s, count);
        let lines = stdout(&c).lines().filter(|l| l.starts_with("ping data: rdma-ping-")).count();
        assert_eq!(lines, count as usize, "rping -c -v: one ping data line per ping:\n{}", stdout(&c));
    }
}

#[test]
fn our_client_with_rping_server() {
    let _device = device_lock();
    for (size, count) in RUNS {
        let (s, c) = run(Role::Server, size, [count, count]).server_client();
        assert_ok(&format!("10_rdma_cm -c -S {size} -C {count}"), &c);
        rping_ok(&format!("rping -s -S {size}"), &s);
        ours_did("10_rdma_cm -c", &c, count);
    }
}

/// A client that leaves before the server's `-C`: the CM tells the server only that the
/// connection ended, so our server ends as rping's does (exit 0) and says how many of the
/// pings it was asked for were done.
#[test]
fn our_server_says_how_many_of_its_count_were_done() {
    let _device = device_lock();
    let (s, c) = run(Role::Client, 64, [1000, 5]).server_client();
    rping_ok("rping -c -C 5", &c);
    assert_ok("10_rdma_cm -s -C 1000", &s);
    ours_did("10_rdma_cm -s", &s, 5);
    let text = stdout(&s);
    assert!(text.contains("the client disconnected after 5 of the 1000 pings asked (-C)"), "{text}");
}

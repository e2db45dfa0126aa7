//! Interoperability of step 13 with perftest's `ib_atomic_lat` (Debian's `perftest`), in
//! both roles, with both atomics.
//!
//! Both speak perftest's TCP handshake (versions, sizes, MTU, five exchanges of the keys,
//! then 6.06's `"done"`).
//! What each side can check differs: our server checks the word the atomics left (5 after
//! five additions; 0 after ib_atomic_lat's compare-and-swap, which swaps 0 for 0); our
//! client checks the originals, against a word ib_atomic_lat filled with random bytes; the
//! C tool checks nothing and prints its latency table.

use testkit as common;

use common::runner::{Player, Run};
use common::{assert_ok, device_lock, stdout};

const OURS: &str = env!("CARGO_BIN_EXE_13_atomics");

/// Runs `server` ↔ `client` (`None`: ib_atomic_lat) with `-A atomic -n 5`; both must end
/// well, ours with what its side checks, the C tool with its table's line for 5 iterations.
fn interop(server: Option<&str>, client: Option<&str>, atomic: &str, word: &str) {
    let _device = device_lock();
    let player = |p: Option<&str>| p.map_or(Player::C, |p| Player::Ours(p.into()));
    let run = Run::new(common::step("13_atomics").unwrap()).server(player(server)).client(player(client));
    let (s, c) = run.flags(&["-A", atomic, "-n", "5"]).server_client();
    for (ours, role, out) in [(server.is_some(), "server", &s), (client.is_some(), "client", &c)] {
        if ours {
            assert_ok(role, out);
        } else {
            // perftest warns on stderr that rxe has no inline feature it knows of; nothing else.
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(out.status.success(), "ib_atomic_lat as {role}: {}\n{err}", out.status);
            assert!(err.lines().all(|l| l.contains("inline feature")), "ib_atomic_lat as {role}: {err}");
        }
    }
    let (s, c) = (stdout(&s), stdout(&c));
    for (ours, text) in [(server.is_some(), &s), (client.is_some(), &c)] {
        if ours {
            assert!(text.contains("tcp exchange                 version=6.06 peer=6.06"), "{text}");
            assert!(text.contains("tcp send                     done=yes"), "{text}");
        } else {
            assert!(text.contains(&format!("Atomic {atomic} Latency Test")), "{text}");
        }
    }
    // Only ib_atomic_lat's client measures, and prints the table.
    if client.is_none() {
        assert!(c.lines().any(|l| l.split_whitespace().take(2).eq(["8", "5"])), "no line for 5 iterations: {c}");
    }
    if server.is_some() {
        assert!(s.contains(&format!("verify                       word={word} ok=yes")), "{s}");
    } else {
        // A random start: the client's originals are checked by the client itself.
        assert!(c.contains(&format!("op={atomic} count=5 first_original=")), "{c}");
    }
}

#[test]
fn fetch_and_add_our_server_c_client() {
    interop(Some(OURS), None, "FETCH_AND_ADD", "5");
}

#[test]
fn fetch_and_add_c_server_our_client() {
    interop(None, Some(OURS), "FETCH_AND_ADD", "");
}

#[test]
fn cmp_and_swap_our_server_c_client() {
    interop(Some(OURS), None, "CMP_AND_SWAP", "0");
}

#[test]
fn cmp_and_swap_c_server_our_client() {
    interop(None, Some(OURS), "CMP_AND_SWAP", "");
}

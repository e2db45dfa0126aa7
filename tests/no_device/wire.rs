//! Host-side tests of the side channel: the wire format byte for byte, its rejections, and
//! the exchange over real loopback TCP (no RDMA device needed).
//!
//! Every network test uses an ephemeral port so the suite runs in parallel, and asserts
//! only "an error came back within a generous bound", never a precise time.

use proptest::prelude::*;
use rdma_dissect::exchange::{Connection, ExchangeError, Listener};
use rdma_dissect::trace;
use rdma_dissect::wire::{self, Dest, Done, Message, RdmaDest, WireError};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::thread;
use std::time::{Duration, Instant};

/// The lab's RoCE v2 GID at index 1: `::ffff:192.0.2.1`.
const LAB_GID: [u8; 16] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 1];
/// A link-local InfiniBand-style GID: fe80::211:22ff:fe33:4455.
const LL_GID: [u8; 16] = [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x02, 0x11, 0x22, 0xff, 0xfe, 0x33, 0x44, 0x55];

// ---------------------------------------------------------------------------------------
// Byte-exact encodings, worked out by hand from rc_pingpong.c and pingpong.c:
//   sprintf(msg, "%04x:%06x:%06x:%s", lid, qpn, psn, gid) with gid_to_wire_gid(), which
//   prints htobe32(<native load of raw[4i..4i+4]>) as %08x for i = 0..4. On x86 the native
//   load of fe 80 00 00 is 0x000080fe, htobe32 swaps it to 0xfe800000, "%08x" gives
//   "fe800000": the raw bytes in order. Then the NUL: sizeof msg = 52.
// ---------------------------------------------------------------------------------------

#[test]
fn encoding_matches_c_for_a_roce_gid() {
    let d = Dest { lid: 0, qpn: 0x11, psn: 0xabcdef, gid: LAB_GID };
    let want: &[u8; 52] = b"0000:000011:abcdef:00000000000000000000ffffc0000201\0";
    assert_eq!(d.encode(), want);
    assert_eq!(Dest::decode(want), Ok(d));
    assert_eq!(d.gid_string(), "::ffff:192.0.2.1");
    assert!(d.needs_grh());
}

#[test]
fn encoding_matches_c_for_an_ib_gid() {
    let d = Dest { lid: 0x1, qpn: 0xa5, psn: 0x123456, gid: LL_GID };
    let want: &[u8; 52] = b"0001:0000a5:123456:fe80000000000000021122fffe334455\0";
    assert_eq!(d.encode(), want);
    assert_eq!(Dest::decode(want), Ok(d));
    assert_eq!(d.wire_gid(), "fe80000000000000021122fffe334455");
    assert_eq!(wire::wire_gid_to_gid("fe80000000000000021122fffe334455"), Some(LL_GID));
    assert_eq!(d.gid_string(), "fe80::211:22ff:fe33:4455");
    assert_eq!(d.to_string(), "LID 0x0001, QPN 0x0000a5, PSN 0x123456, GID fe80::211:22ff:fe33:4455");
}

#[test]
fn no_gid_is_all_zeros_and_needs_no_grh() {
    // Without -g rc_pingpong memsets the GID to 0; inet_ntop prints "::".
    let d = Dest { lid: 0xffff, qpn: 0xffffff, psn: 0, gid: [0; 16] };
    assert_eq!(d.encode(), b"ffff:ffffff:000000:00000000000000000000000000000000\0");
    assert_eq!(d.gid_string(), "::");
    assert!(!d.needs_grh());
}

#[test]
fn upper_case_hex_is_accepted_like_sscanf() {
    let m = b"00AB:0000A5:12345F:FE80000000000000021122FFFE334455\0";
    let d = Dest::decode(m).unwrap();
    assert_eq!((d.lid, d.qpn, d.psn, d.gid), (0xab, 0xa5, 0x12345f, LL_GID));
}

#[test]
fn rdma_dest_is_our_extension() {
    let r = RdmaDest {
        dest: Dest { lid: 0, qpn: 0x11, psn: 0xabcdef, gid: LAB_GID },
        rkey: 0x1234,
        addr: 0x7f00_1234_5000,
    };
    let want: &[u8] = b"0000:000011:abcdef:00000000000000000000ffffc0000201:00001234:00007f0012345000\0";
    assert_eq!(want.len(), RdmaDest::LEN);
    assert_eq!(r.encode(), want);
    assert_eq!(RdmaDest::decode(want), Ok(r));
    // Its first 51 bytes are exactly rc_pingpong's message: only the tail is ours.
    assert_eq!(&r.encode()[..51], &r.dest.encode()[..51]);
    assert!(r.to_string().ends_with("RKEY 0x00001234, ADDR 0x00007f0012345000"));
}

#[test]
fn done_is_five_bytes() {
    assert_eq!(Done.encode(), b"done\0");
    assert_eq!(Done::decode(b"done\0"), Ok(Done));
}

// ---------------------------------------------------------------------------------------
// Every WireError variant, with the byte it names.
// ---------------------------------------------------------------------------------------

fn valid() -> Vec<u8> {
    Dest { lid: 0x1, qpn: 0xa5, psn: 0x123456, gid: LL_GID }.encode()
}

#[test]
fn wrong_length() {
    let e = Dest::decode(&valid()[..51]).unwrap_err();
    assert_eq!(e, WireError::WrongLength { expected: 52, got: 51 });
    assert!(e.to_string().contains("51 bytes, expected exactly 52"), "{e}");
    assert_eq!(Done::decode(b"done"), Err(WireError::WrongLength { expected: 5, got: 4 }));
}

#[test]
fn bad_separator() {
    for (at, after) in [(4, "LID"), (11, "QPN"), (18, "PSN")] {
        let mut m = valid();
        m[at] = b'-';
        let e = Dest::decode(&m).unwrap_err();
        assert_eq!(e, WireError::BadSeparator { at, after, found: b'-' });
        assert!(
            e.to_string().contains(&format!("byte {at} is '-' (0x2d), expected ':' after the {after} field")),
            "{e}"
        );
    }
}

#[test]
fn not_hex() {
    let mut m = valid();
    m[7] = b'g';
    let e = Dest::decode(&m).unwrap_err();
    assert_eq!(e, WireError::NotHex { field: "QPN", start: 5, end: 11, at: 7, found: b'g' });
    assert!(e.to_string().contains("byte 7 is 'g' (0x67), expected a hex digit"), "{e}");
    // sscanf would take a "0x" prefix or a sign; rc_pingpong never writes one, so we refuse.
    let mut m = valid();
    m[0..4].copy_from_slice(b"0x01");
    assert!(matches!(Dest::decode(&m), Err(WireError::NotHex { at: 1, found: b'x', .. })));
    let mut m = valid();
    m[19] = b' ';
    assert!(matches!(Dest::decode(&m), Err(WireError::NotHex { field: "GID", at: 19, .. })));
}

#[test]
fn missing_nul_and_the_09_hint() {
    let mut m = valid();
    m[51] = b'\n';
    let e = Dest::decode(&m).unwrap_err();
    assert_eq!(e, WireError::MissingNul { at: 51, found: b'\n' });
    assert!(e.to_string().contains("expected the '\\0' that ends the 52-byte message"), "{e}");
    // A 52-byte reader fed 09's message sees ':' where the NUL should be.
    let r = RdmaDest::default().encode();
    let e = Dest::decode(&r[..52]).unwrap_err();
    assert!(e.to_string().contains("09_rdma_write"), "{e}");
}

#[test]
fn field_out_of_range_is_refused_on_send() {
    let d = Dest { qpn: 0x0100_0000, ..Dest::default() };
    let e = d.check().unwrap_err();
    assert_eq!(e, WireError::FieldOutOfRange { field: "QPN", value: 0x0100_0000, max: 0xff_ffff });
    assert!(e.to_string().contains("24-bit"), "{e}");
    // encode still keeps the length, so a fixed-size reader never desynchronises.
    assert_eq!(d.encode().len(), Dest::LEN);
    assert!(Dest { psn: u32::MAX, ..Dest::default() }.check().is_err());
}

#[test]
fn not_done() {
    let e = Done::decode(b"DONE\0").unwrap_err();
    assert_eq!(e, WireError::NotDone { found: b"DONE\0".to_vec() });
    assert!(e.to_string().contains("expected the 5 bytes \"done\\0\""), "{e}");
}

// ---------------------------------------------------------------------------------------
// inet_ntop: our pure-Rust copy must print exactly what glibc prints.
// ---------------------------------------------------------------------------------------

extern "C" {
    fn inet_ntop(
        af: libc::c_int,
        src: *const libc::c_void,
        dst: *mut libc::c_char,
        size: libc::socklen_t,
    ) -> *const libc::c_char;
}

#[allow(unsafe_code, reason = "the oracle is libc's own inet_ntop, a C call")]
fn libc_inet_ntop(gid: &[u8; 16]) -> String {
    let mut buf = [0 as libc::c_char; 64];
    // SAFETY: `gid` is 16 readable bytes (an in6_addr), `buf` is 64 writable bytes and we pass
    // that size; inet_ntop writes a NUL-terminated string of at most 46 bytes into it.
    let p = unsafe { inet_ntop(libc::AF_INET6, gid.as_ptr().cast(), buf.as_mut_ptr(), buf.len() as _) };
    assert!(!p.is_null());
    // SAFETY: on success inet_ntop returned `buf`, now holding a NUL-terminated string.
    unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) }.to_str().unwrap().to_owned()
}

#[test]
fn inet_ntop_edge_cases_match_glibc() {
    let cases: &[[u8; 16]] = &[
        [0; 16],
        LAB_GID,
        LL_GID,
        [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],       // ::1
        [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4],       // ::1.2.3.4 (IPv4-compatible)
        [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0],       // ::0.1.0.0
        [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0, 0, 0, 0], // ::ffff:0.0.0.0
        [0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0],       // tie: leftmost run
        [0, 1, 0, 0, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1],       // single zero: no "::"
        [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], // fe80::
    ];
    for gid in cases {
        assert_eq!(trace::Gid(*gid).to_string(), libc_inet_ntop(gid), "{gid:02x?}");
    }
}

/// GIDs with many zero words, where inet_ntop's cases live.
fn sparse_gid() -> impl Strategy<Value = [u8; 16]> {
    proptest::array::uniform8(prop_oneof![3 => Just(0u16), 1 => Just(0xffff), 2 => any::<u16>()]).prop_map(|w| {
        let mut g = [0u8; 16];
        for (i, x) in w.iter().enumerate() {
            g[2 * i..2 * i + 2].copy_from_slice(&x.to_be_bytes());
        }
        g
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn inet_ntop_matches_glibc(gid in prop_oneof![sparse_gid(), any::<[u8; 16]>()]) {
        prop_assert_eq!(trace::Gid(gid).to_string(), libc_inet_ntop(&gid));
    }

    #[test]
    fn dest_round_trips(lid: u16, qpn in 0..=wire::MAX_24BIT, psn in 0..=wire::MAX_24BIT, gid: [u8; 16]) {
        let d = Dest { lid, qpn, psn, gid };
        prop_assert!(d.check().is_ok());
        let m = d.encode();
        prop_assert_eq!(m.len(), Dest::LEN);
        prop_assert_eq!(Dest::decode(&m), Ok(d));
        prop_assert_eq!(wire::wire_gid_to_gid(&d.wire_gid()), Some(gid));
    }

    #[test]
    fn rdma_dest_round_trips(lid: u16, qpn in 0..=wire::MAX_24BIT, psn in 0..=wire::MAX_24BIT, gid: [u8; 16], rkey: u32, addr: u64) {
        let r = RdmaDest { dest: Dest { lid, qpn, psn, gid }, rkey, addr };
        let m = r.encode();
        prop_assert_eq!(m.len(), RdmaDest::LEN);
        prop_assert_eq!(RdmaDest::decode(&m), Ok(r));
    }
}

// ---------------------------------------------------------------------------------------
// The exchange over loopback TCP.
// ---------------------------------------------------------------------------------------

const T: Duration = Duration::from_secs(10);
/// "Returns within a generous bound": far above any timeout used below, far below forever.
const BOUND: Duration = Duration::from_secs(30);

fn server_dest() -> Dest {
    Dest { lid: 0, qpn: 0x22, psn: 0x654321, gid: LAB_GID }
}
fn client_dest() -> Dest {
    Dest { lid: 0, qpn: 0x11, psn: 0xabcdef, gid: LAB_GID }
}

/// rc_pingpong's server order: recv, (connect QP), send, recv "done".
fn run_server(listener: Listener) -> Result<Dest, ExchangeError> {
    let mut c = listener.accept(T)?;
    let peer = c.recv::<Dest>()?;
    // ... here the real server runs ibv_modify_qp INIT→RTR→RTS before replying ...
    c.send(&server_dest())?;
    c.recv_done()?;
    Ok(peer)
}

/// rc_pingpong's client order: send, recv, send "done".
fn run_client(host: &str, port: u16, timeout: Duration) -> Result<Dest, ExchangeError> {
    let mut c = Connection::connect(host, port, timeout)?;
    assert!(c.peer_addr().ip().is_loopback());
    c.send(&client_dest())?;
    let peer = c.recv::<Dest>()?;
    c.send_done()?;
    Ok(peer)
}

#[test]
fn full_exchange_in_two_threads() {
    let listener = Listener::bind(0).unwrap();
    let port = listener.port();
    let server = thread::spawn(move || run_server(listener));
    let got_by_client = run_client("127.0.0.1", port, T).unwrap();
    let got_by_server = server.join().unwrap().unwrap();
    assert_eq!(got_by_client, server_dest());
    assert_eq!(got_by_server, client_dest());
}

#[test]
fn full_exchange_by_name() {
    // "localhost" may resolve to ::1 first; the server (like rc_pingpong) listens on IPv4
    // only, so this also checks that the client tries every address getaddrinfo returns.
    let listener = Listener::bind(0).unwrap();
    let port = listener.port();
    let server = thread::spawn(move || run_server(listener));
    assert_eq!(run_client("localhost", port, T).unwrap(), server_dest());
    assert_eq!(server.join().unwrap().unwrap(), client_dest());
}

#[test]
fn client_started_before_its_server_still_connects() {
    let port = free_port();
    let client = thread::spawn(move || run_client("127.0.0.1", port, T));
    thread::sleep(Duration::from_millis(300)); // the client is now being refused, and retrying
    let listener = Listener::bind(port).unwrap();
    let got_by_server = run_server(listener).unwrap();
    assert_eq!(client.join().unwrap().unwrap(), server_dest());
    assert_eq!(got_by_server, client_dest());
}

/// A port nothing listens on, for a while: below ip_local_port_range (32768–60999 by
/// default), so that no other test's `bind(0)` or outgoing connection can take it between
/// this call and the test's own bind. A port from `bind(0)` could be handed out again at
/// once, and this file's tests run in parallel; each call starts its search elsewhere.
fn free_port() -> u16 {
    static CALLS: std::sync::atomic::AtomicU16 = std::sync::atomic::AtomicU16::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let base = 20000 + (std::process::id() % 100) as u16 * 100 + call * 10;
    (base..32768).find(|&p| TcpListener::bind(("127.0.0.1", p)).is_ok()).expect("a free port below 32768")
}

#[test]
fn nothing_listening_fails_within_the_timeout() {
    let port = free_port();
    let start = Instant::now();
    let e = Connection::connect("127.0.0.1", port, Duration::from_secs(1)).unwrap_err();
    assert!(start.elapsed() < BOUND);
    assert!(matches!(e, ExchangeError::NothingListening { .. }), "{e:?}");
    assert!(e.to_string().contains(&format!("nothing is listening on 127.0.0.1:{port}")), "{e}");
}

#[test]
fn unresolvable_host_is_explained() {
    let e = Connection::connect("no-such-host.invalid", 18515, Duration::from_secs(1)).unwrap_err();
    assert!(matches!(e, ExchangeError::Resolve { .. }), "{e:?}");
    assert!(e.to_string().contains("couldn't resolve host 'no-such-host.invalid'"), "{e}");
}

#[test]
fn no_client_is_an_accept_timeout() {
    let listener = Listener::bind(0).unwrap();
    let start = Instant::now();
    let e = listener.accept(Duration::from_millis(500)).unwrap_err();
    assert!(start.elapsed() < BOUND);
    assert!(matches!(e, ExchangeError::AcceptTimeout { .. }), "{e:?}");
    assert!(e.to_string().contains("no client connected"), "{e}");
}

#[test]
fn port_in_use_is_explained() {
    let first = Listener::bind(0).unwrap();
    let e = Listener::bind(first.port()).unwrap_err();
    assert!(matches!(e, ExchangeError::Bind { .. }), "{e:?}");
    assert!(e.to_string().contains("still listening"), "{e}");
}

/// A raw TCP peer playing a misbehaving server: accepts one client and runs `f` on it.
fn raw_server(f: impl FnOnce(TcpStream) + Send + 'static) -> (u16, thread::JoinHandle<()>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let h = thread::spawn(move || {
        let (s, _) = l.accept().unwrap();
        f(s)
    });
    (port, h)
}

/// Connect to a raw server, send our address, and return the error its reply provokes.
fn client_recv<M: Message + std::fmt::Debug>(port: u16) -> ExchangeError {
    let mut c = Connection::connect("127.0.0.1", port, T).unwrap();
    c.send(&client_dest()).unwrap();
    let start = Instant::now();
    let e = c.recv::<M>().unwrap_err();
    assert!(start.elapsed() < BOUND);
    e
}

#[test]
fn server_that_accepts_and_says_nothing() {
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let (port, h) = raw_server(move |s| {
        let _ = rx.recv(); // hold the connection open, silent, until the client gave up
        drop(s);
    });
    let mut c = Connection::connect("127.0.0.1", port, Duration::from_secs(1)).unwrap();
    c.send(&client_dest()).unwrap();
    let start = Instant::now();
    let e = c.recv::<Dest>().unwrap_err();
    assert!(start.elapsed() < BOUND);
    tx.send(()).unwrap();
    h.join().unwrap();
    assert!(matches!(e, ExchangeError::Timeout { got: 0, expected: 52, sending: false, .. }), "{e:?}");
    assert!(e.to_string().contains("sent nothing for 1 s"), "{e}");
}

#[test]
fn peer_sending_garbage() {
    let (port, h) = raw_server(|mut s| {
        let mut b = [0; 52];
        s.read_exact(&mut b).unwrap();
        let mut reply = b"HTTP/1.1 400 Bad Request\r\n".to_vec();
        reply.resize(52, b'x');
        s.write_all(&reply).unwrap();
        let _ = s.read(&mut b); // wait for the client to hang up
    });
    let e = client_recv::<Dest>(port);
    h.join().unwrap();
    match &e {
        ExchangeError::Malformed { error: WireError::NotHex { at: 0, found: b'H', .. }, .. } => {}
        other => panic!("{other:?}"),
    }
    assert!(e.to_string().contains("not in rc_pingpong's format"), "{e}");
}

#[test]
fn peer_sending_a_short_message_then_closing() {
    let (port, h) = raw_server(|mut s| {
        let mut b = [0; 52];
        s.read_exact(&mut b).unwrap();
        s.write_all(&server_dest().encode()[..20]).unwrap();
    }); // dropped: FIN after 20 bytes
    let e = client_recv::<Dest>(port);
    h.join().unwrap();
    match &e {
        ExchangeError::Short { received, expected: 52, .. } => assert_eq!(received.len(), 20),
        other => panic!("{other:?}"),
    }
    assert!(e.to_string().contains("after 20 of the 52 bytes"), "{e}");
}

#[test]
fn peer_closing_before_its_message() {
    let (port, h) = raw_server(|mut s| {
        let mut b = [0; 52];
        s.read_exact(&mut b).unwrap();
    }); // like rc_pingpong's server when its ibv_modify_qp failed: it just closes
    let e = client_recv::<Dest>(port);
    h.join().unwrap();
    assert!(matches!(e, ExchangeError::Closed { sending: false, .. }), "{e:?}");
    assert!(e.to_string().contains("closed the connection before sending"), "{e}");
}

#[test]
fn over_long_message() {
    // 09's 78-byte message to a 52-byte reader: the 26 extra bytes arrive with the rest.
    let (port, h) = raw_server(|mut s| {
        let mut b = [0; 52];
        s.read_exact(&mut b).unwrap();
        s.write_all(&RdmaDest { dest: server_dest(), rkey: 1, addr: 2 }.encode()).unwrap();
        let _ = s.read(&mut b);
    });
    let e = client_recv::<Dest>(port);
    h.join().unwrap();
    match &e {
        ExchangeError::OverLong { received, extra, .. } => {
            assert_eq!(received.len(), 52);
            assert!(!extra.is_empty());
        }
        other => panic!("{other:?}"),
    }
    assert!(e.to_string().contains("09_rdma_write"), "{e}");
}

#[test]
fn rc_pingpong_message_to_a_09_reader_times_out_with_a_hint() {
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let (port, h) = raw_server(move |mut s| {
        s.write_all(&server_dest().encode()).unwrap();
        let _ = rx.recv();
    });
    let mut c = Connection::connect("127.0.0.1", port, Duration::from_secs(1)).unwrap();
    let e = c.recv::<RdmaDest>().unwrap_err();
    tx.send(()).unwrap();
    h.join().unwrap();
    assert!(matches!(e, ExchangeError::Timeout { got: 52, expected: 78, .. }), "{e:?}");
    assert!(e.to_string().contains("09_rdma_write"), "{e}");
}

#[test]
fn message_split_over_many_writes_is_reassembled() {
    // The C code would fail here (one read()); TCP may legally deliver a message in pieces.
    let (port, h) = raw_server(|mut s| {
        let mut b = [0; 52];
        s.read_exact(&mut b).unwrap();
        s.set_nodelay(true).unwrap();
        for chunk in server_dest().encode().chunks(7) {
            s.write_all(chunk).unwrap();
            thread::sleep(Duration::from_millis(20));
        }
        let _ = s.read(&mut [0; 5]);
    });
    let mut c = Connection::connect("127.0.0.1", port, T).unwrap();
    c.send(&client_dest()).unwrap();
    assert_eq!(c.recv::<Dest>().unwrap(), server_dest());
    c.send_done().unwrap();
    h.join().unwrap();
}

#[test]
fn server_side_garbage_from_a_client() {
    let listener = Listener::bind(0).unwrap();
    let port = listener.port();
    let client = thread::spawn(move || {
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.write_all(&[0xffu8; 52]).unwrap();
        let _ = s.read(&mut [0; 52]);
    });
    let e = run_server(listener).unwrap_err();
    client.join().unwrap();
    assert!(matches!(e, ExchangeError::Malformed { error: WireError::NotHex { at: 0, found: 0xff, .. }, .. }), "{e:?}");
    assert!(e.to_string().contains("byte 0 is '\\xff' (0xff)"), "{e}");
}

#[test]
fn done_handshake_wrong_bytes_and_missing() {
    // Wrong bytes: "DONE\0".
    let listener = Listener::bind(0).unwrap();
    let port = listener.port();
    let client = thread::spawn(move || {
        let mut c = Connection::connect("127.0.0.1", port, T).unwrap();
        c.send(&client_dest()).unwrap();
        c.recv::<Dest>().unwrap();
        c.stream_write_raw(b"DONE\0");
    });
    let e = run_server(listener).unwrap_err();
    client.join().unwrap();
    assert!(matches!(e, ExchangeError::Malformed { error: WireError::NotDone { .. }, .. }), "{e:?}");

    // Missing: the client closes instead of saying done.
    let listener = Listener::bind(0).unwrap();
    let port = listener.port();
    let client = thread::spawn(move || {
        let mut c = Connection::connect("127.0.0.1", port, T).unwrap();
        c.send(&client_dest()).unwrap();
        c.recv::<Dest>().unwrap();
    });
    let e = run_server(listener).unwrap_err();
    client.join().unwrap();
    assert!(matches!(e, ExchangeError::Closed { what: "\"done\" message", .. }), "{e:?}");
}

/// Test-only helper: send arbitrary bytes on a `Connection`, via a raw message type.
trait RawWrite {
    fn stream_write_raw(&mut self, bytes: &'static [u8]);
}

impl RawWrite for Connection {
    fn stream_write_raw(&mut self, bytes: &'static [u8]) {
        struct Raw(&'static [u8]);
        impl Message for Raw {
            const LEN: usize = 5;
            fn encode(&self) -> Vec<u8> {
                self.0.to_vec()
            }
            fn decode(_: &[u8]) -> Result<Self, WireError> {
                unreachable!()
            }
        }
        self.send(&Raw(bytes)).unwrap();
    }
}

#[test]
fn unsendable_values_are_refused_before_writing() {
    let listener = Listener::bind(0).unwrap();
    let port = listener.port();
    let server = thread::spawn(move || listener.accept(T).map(|_| ()));
    let mut c = Connection::connect("127.0.0.1", port, T).unwrap();
    let e = c.send(&Dest { psn: 0x0100_0000, ..client_dest() }).unwrap_err();
    assert!(
        matches!(e, ExchangeError::Unsendable { error: WireError::FieldOutOfRange { field: "PSN", .. }, .. }),
        "{e:?}"
    );
    server.join().unwrap().unwrap();
}

//! The connection of stages 04–06, written with the high-level `ibverbs` crate (0.9.2).
//!
//! This program exists for the book's appendix "What `handshake()` hides": it is compiled
//! with the rest of the crate so the listing the book quotes cannot rot. It creates the same
//! objects as `04_create_qp`, swaps addresses over TCP like `05_modify_qp_rtr`, and then lets
//! `PreparedQueuePair::handshake()` do INIT→RTR→RTS in one call. One SEND from the client to
//! the server proves the connection works.
//!
//! ```text
//! terminal 1:  cargo run --example handshake -- -g 1
//! terminal 2:  cargo run --example handshake -- -g 1 127.0.0.1
//! ```
//!
//! Arguments: `[-g GID_INDEX] [HOST]`; server when no host is given. TCP port 18516 (one
//! above ibv_rc_pingpong's, so it never talks to a step by accident). The address format is
//! this program's own (`LID:QPN:GID` as hex, one line), not rc_pingpong's.

#![allow(unsafe_code, reason = "the ibverbs crate marks post_send and post_receive unsafe: the MR must outlive the WR")]

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};

const PORT: u16 = 18516;

fn main() -> std::io::Result<()> {
    let (gid_index, host) = parse_args();

    // ANCHOR: setup
    // 01–04: open the first device, a PD, one CQ, an RC QP (still in RESET).
    let devices = ibverbs::devices()?; // ibv_get_device_list
    let device = devices.iter().next().expect("no RDMA device (see the book: Getting a device)");
    let ctx = device.open()?; // ibv_open_device + ibv_query_port(1) + the whole GID table
    let pd = ctx.alloc_pd()?; // ibv_alloc_pd
    let cq = ctx.create_cq(16, 0)?; // ibv_create_cq, no completion channel
    let mut builder = pd.create_qp(&cq, &cq, ibverbs::ibv_qp_type::IBV_QPT_RC);
    if let Some(index) = gid_index {
        builder.set_gid_index(index); // needed on RoCE: the GRH carries the GID
    }
    // ibv_create_qp; no ibv_modify_qp yet
    let prepared = builder.build()?;
    // ANCHOR_END: setup

    // ANCHOR: exchange
    // 05's TCP exchange, done by hand: the crate gives you an endpoint, not a transport.
    let local = prepared.endpoint(); // QPN, LID and (with a GID index) the GID
    let stream = match &host {
        Some(h) => TcpStream::connect((h.as_str(), PORT))?,
        None => TcpListener::bind(("0.0.0.0", PORT))?.accept()?.0,
    };
    let mut reader = BufReader::new(stream.try_clone()?); // one reader for the whole session
    let remote = swap_endpoints(&stream, &mut reader, local)?;
    println!("local  {local:?}\nremote {remote:?}");
    // ANCHOR_END: exchange

    // ANCHOR: handshake
    // 04's RESET→INIT, 05's INIT→RTR and 06's RTR→RTS: three ibv_modify_qp calls, one line.
    let mut qp = prepared.handshake(remote)?;
    // ANCHOR_END: handshake

    // One SEND, client → server, so the connection is seen to work (stage 07 in miniature).
    let mut mr = pd.allocate::<u8>(64)?; // ibv_reg_mr with LOCAL_WRITE|REMOTE_*: see the book
    if host.is_none() {
        // SAFETY: `mr` outlives the receive: we poll its completion before dropping it.
        unsafe { qp.post_receive(&mut mr, .., 1)? };
        (&stream).write_all(b"ready\n")?; // the client must not send before this receive
    } else {
        reader.read_line(&mut String::new())?; // wait for "ready"
        mr[..5].copy_from_slice(b"hello");
        // SAFETY: as above; the send completes before `mr` is dropped.
        unsafe { qp.post_send(&mut mr, ..5, 2)? };
    }
    let mut wc = [ibverbs::ibv_wc::default(); 1];
    loop {
        let done = cq.poll(&mut wc)?;
        if let Some(c) = done.first() {
            match c.error() {
                None => {
                    println!("completion wr_id={} ok, buffer starts {:?}", c.wr_id(), String::from_utf8_lossy(&mr[..5]))
                }
                Some((status, vendor)) => {
                    println!("completion failed: status {status} vendor {vendor:#x}")
                }
            }
            break;
        }
    }
    Ok(())
}

/// Writes our endpoint as one line `LID:QPN:GID` (hex) and reads the peer's.
fn swap_endpoints(
    mut stream: &TcpStream,
    reader: &mut impl BufRead,
    local: ibverbs::QueuePairEndpoint,
) -> std::io::Result<ibverbs::QueuePairEndpoint> {
    let gid: u128 = local.gid.map_or(0, |g| (u128::from(g.subnet_prefix()) << 64) | u128::from(g.interface_id()));
    writeln!(stream, "{:04x}:{:06x}:{:032x}", local.lid, local.num, gid)?;
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let bad = || std::io::Error::new(std::io::ErrorKind::InvalidData, "bad endpoint line");
    let mut parts = line.trim().split(':');
    let mut field = || parts.next().ok_or_else(bad);
    let lid = u16::from_str_radix(field()?, 16).map_err(|_| bad())?;
    let num = u32::from_str_radix(field()?, 16).map_err(|_| bad())?;
    let gid = u128::from_str_radix(field()?, 16).map_err(|_| bad())?;
    // The same rule as rc_pingpong: a zero GID means "no GRH".
    let gid = (gid != 0).then(|| ibverbs_sys::ibv_gid { raw: gid.to_be_bytes() }.into());
    Ok(ibverbs::QueuePairEndpoint { num, lid, gid })
}

fn parse_args() -> (Option<u32>, Option<String>) {
    let mut args = std::env::args().skip(1);
    let (mut gid_index, mut host) = (None, None);
    while let Some(arg) = args.next() {
        if arg == "-g" {
            gid_index = args.next().and_then(|g| g.parse().ok());
        } else {
            host = Some(arg);
        }
    }
    (gid_index, host)
}

//! Step 11's mistakes: what a datagram QP does with a message it cannot deliver. Both
//! sides run the step with the same case; one of them makes the mistake. On UD most of
//! them are *silent*: nothing fails, the datagram is simply gone, and both sides end on
//! their watchdog (`--timeout`), whose message says why no completion came.

use std::rc::Rc;

use super::{Case, Stack};
use crate::cli::UdArgs;
use crate::error::Result;
use crate::role::Role;
use crate::stages::create_qp::{QpOptions, Queues, UD_QKEY};
use crate::stages::modify_qp_rtr::{exchange_dest, local_dest};
use crate::stages::open_device::{open_device, Device};
use crate::stages::poll_cq::{pingpong_with, prepare_with, print_stats, PingpongOptions, Post};
use crate::stages::post_send::post_recv;
use crate::stages::ud_pingpong::{check_size, connect_ud, show_grh, Datagrams, GRH_LEN};
use crate::verbs::{names, Mr, Pd, IBV_ACCESS_LOCAL_WRITE};
use crate::wire::Dest;

/// The cases of `11_ud_pingpong --break`.
pub static CASES: [Case<UdArgs>; 5] = [
    Case {
        name: "size-above-mtu",
        summary: "skip the size check and send datagrams twice the port's active MTU",
        by: Some(Role::Client),
        rule: "a UD message is one packet, so it must fit the path MTU, the port's active MTU. The\n\
               spec says what a device does with a larger one (C10-93.1.1): it emits no packet and\n\
               reports no error. rxe does exactly that: the SEND completes with IBV_WC_SUCCESS\n\
               and nothing leaves, so the server never receives and both sides wait until their\n\
               --timeout. That is why ud_pingpong checks the size itself before it starts",
        code: "src/breakit/ud_pingpong.rs size_above_mtu: no check_size, -s = 2 x active MTU; the\n\
               check is check_size(&dev, size) in steps/11_ud_pingpong.rs",
        fix: "keep -s at or below the port's active MTU (01_open_device shows it)",
        run: size_above_mtu,
    },
    Case {
        name: "no-grh-room",
        summary: "post the server's receives without the 40 bytes of GRH room",
        by: Some(Role::Server),
        rule: "a UD receive gets the datagram's 40-byte GRH in front of the payload, always (an\n\
               IPv4 header in its last 20 bytes on RoCE v2): a receive must have room for 40 +\n\
               the message. Receives of just the message's size are 40 bytes too short. rxe on\n\
               Linux 6.1 finds out while it copies and completes the receive in error, as\n\
               IBV_WC_LOC_QP_OP_ERR (the spec's local length error); rxe on Linux 6.12 checks\n\
               first and drops the datagram without a word, so the server's receive never\n\
               completes and it waits until --timeout. Either way the client, whose datagram\n\
               was sent, waits for an answer until --timeout",
        code: "src/breakit/ud_pingpong.rs NoGrhRoom: post_recv(.., size, ..); the correct length is\n\
               size + GRH_LEN, in Datagrams::recv (src/stages/ud_pingpong.rs)",
        fix: "register and post size + 40 bytes for every receive, as ud_pingpong does",
        run: no_grh_room,
    },
    Case {
        name: "wrong-qkey",
        summary: "send with a Q_Key one off the one the server's QP was given",
        by: Some(Role::Client),
        rule: "a UD QP accepts only datagrams whose Q_Key (the sender's wr.ud.remote_qkey) is the\n\
               qkey it was given at INIT. Any other is dropped on arrival without a word: the\n\
               sender's SEND completes successfully (nothing is acknowledged on UD), the\n\
               receiver's receive never completes, and both sides wait until --timeout",
        code: "src/breakit/ud_pingpong.rs wrong_qkey: Datagrams::connect(.., UD_QKEY + 1); the\n\
               correct one is UD_QKEY in steps/11_ud_pingpong.rs",
        fix: "send with the Q_Key the receiving QP has (ud_pingpong: 0x11111111 on both sides)",
        run: wrong_qkey,
    },
    Case {
        name: "ah-to-nobody",
        summary: "make the address handle for a GID next to the server's that nobody has",
        by: Some(Role::Client),
        rule: "UD never asks whether anybody is at an address, but on RoCE ibv_create_ah must\n\
               find the Ethernet address of the GID's IP address: the kernel asks by ARP (or\n\
               IPv6 neighbour discovery), and when nobody answers, ibv_create_ah fails with\n\
               ETIMEDOUT (rxe0, Linux 6.1 and 6.12). On InfiniBand an AH needs no resolution,\n\
               and the datagrams would be lost in silence, as datagrams to a QP number nobody\n\
               has are on RoCE too. The server, which received nothing, waits until --timeout",
        code: "src/breakit/ud_pingpong.rs ah_to_nobody: the peer's GID with its last byte changed;\n\
               the correct address is the one from the exchange, in Datagrams::connect",
        fix: "make the AH from the address the peer sent (ah_attr from its LID/GID)",
        run: ah_to_nobody,
    },
    Case {
        name: "qpn-of-nobody",
        summary: "send to the server's address, but to a QP number no QP has",
        by: Some(Role::Client),
        rule: "a datagram goes to the QP whose number the send names (wr.ud.remote_qpn), at the\n\
               address of its AH. A number no QP has there is dropped on arrival without a word\n\
               (rxe: no QP matches it): the sender's SEND completes successfully, the server's\n\
               receive never completes, and both sides wait until --timeout",
        code: "src/breakit/ud_pingpong.rs qpn_of_nobody: Datagrams::new(ah, remote.qpn ^ 0x800000, ..);\n\
               the correct number is the peer's, from the exchange, in Datagrams::connect",
        fix: "send to the QP number the peer sent in the exchange",
        run: qpn_of_nobody,
    },
];

/// Step 11 with one thing changed: the size, the receives, or how the client connects.
/// `size` is the message's size for the device just opened (the step's checked `-s`, see
/// [`checked_size`]); stages 02–04 are then [`Stack`]'s, with the step's buffer (the
/// message and the GRH's room) and its UD QP.
fn run_step(
    args: &UdArgs,
    size: impl FnOnce(&Device) -> Result<u32>,
    recv: &dyn Fn(&Queues, &Mr, PingpongOptions) -> Result<()>,
    connect: impl FnOnce(&Queues, &Device, &Rc<Pd>, &Dest) -> Result<Datagrams>,
) -> Result<()> {
    let dev = open_device(&args.device.choice())?;
    let size = size(&dev)?;
    let opts = QpOptions::ud_pingpong(size, args.queue.rx_depth, args.queue.events);
    let mut s = Stack::on(dev, size + GRH_LEN, IBV_ACCESS_LOCAL_WRITE, opts)?;
    let opts = PingpongOptions {
        size,
        rx_depth: args.queue.rx_depth,
        iters: args.iters,
        chk: false,
        timeout: args.exchange.timeout,
    };
    recv(&s.q, &s.mr, opts)?;
    let local = local_dest(&s.dev, &s.q.qp);
    let peer = connect(&s.q, &s.dev, &s.pd, &local)?;
    let stats = pingpong_with(args.role(), &s.q, &mut s.mr, opts, &peer)?;
    print_stats(&stats);
    show_grh(&s.mr, stats.last_recv_flags);
    Ok(())
}

/// The step's size: `-s`, checked against the port's active MTU as the step checks it.
fn checked_size(args: &UdArgs) -> impl FnOnce(&Device) -> Result<u32> + '_ {
    move |dev| check_size(dev, args.size).map(|()| args.size)
}

fn correct_recv(q: &Queues, mr: &Mr, opts: PingpongOptions) -> Result<()> {
    prepare_with(q, mr, opts, &Datagrams::RECEIVE)
}

fn size_above_mtu(args: &UdArgs) -> Result<()> {
    run_step(
        args,
        |dev| Ok(2 * names::mtu_bytes(dev.port_attr.active_mtu).unwrap_or(256)),
        &correct_recv,
        |q, dev, pd, local| Datagrams::connect(q, dev, pd, &args.peer(), local, args.sl, UD_QKEY),
    )
}

/// Receives of exactly the message's size: no room for the GRH.
struct NoGrhRoom;

impl Post for NoGrhRoom {
    fn recv(&self, q: &Queues, mr: &Mr, size: u32, n: u32) -> Result<()> {
        post_recv(&q.qp, mr, size, n)
    }
    fn send(&self, q: &Queues, mr: &Mr, size: u32) -> Result<()> {
        Datagrams::RECEIVE.send(q, mr, size)
    }
}

fn no_grh_room(args: &UdArgs) -> Result<()> {
    let recv = |q: &Queues, mr: &Mr, opts: PingpongOptions| {
        if args.role() == Role::Server {
            prepare_with(q, mr, opts, &NoGrhRoom)
        } else {
            correct_recv(q, mr, opts)
        }
    };
    run_step(args, checked_size(args), &recv, |q, dev, pd, local| {
        Datagrams::connect(q, dev, pd, &args.peer(), local, args.sl, UD_QKEY)
    })
}

fn wrong_qkey(args: &UdArgs) -> Result<()> {
    let qkey = if args.role() == Role::Client { UD_QKEY + 1 } else { UD_QKEY };
    run_step(args, checked_size(args), &correct_recv, |q, dev, pd, local| {
        Datagrams::connect(q, dev, pd, &args.peer(), local, args.sl, qkey)
    })
}

fn ah_to_nobody(args: &UdArgs) -> Result<()> {
    run_step(args, checked_size(args), &correct_recv, |q, dev, pd, local| {
        let exchange = exchange_dest(&args.peer(), local)?;
        let mut to = *exchange.remote();
        if args.role() == Role::Client {
            // The last byte of the GID (of an IPv4-mapped one: of the IPv4 address) flipped
            // high: an address on the peer's subnet that no host has.
            to.gid[15] ^= 0x80;
        }
        let ah = connect_ud(&q.qp, dev, pd, &to, local.psn, args.sl)?;
        let remote = exchange.finish()?;
        Ok(Datagrams::new(ah, remote.qpn, UD_QKEY))
    })
}

fn qpn_of_nobody(args: &UdArgs) -> Result<()> {
    run_step(args, checked_size(args), &correct_recv, |q, dev, pd, local| {
        let exchange = exchange_dest(&args.peer(), local)?;
        let ah = connect_ud(&q.qp, dev, pd, exchange.remote(), local.psn, args.sl)?;
        let remote = exchange.finish()?;
        // The top bit of the 24: far above any QP number the device has handed out (rxe
        // numbers its QPs from 0x11 up, to max_qp).
        let qpn = if args.role() == Role::Client { remote.qpn ^ 0x80_0000 } else { remote.qpn };
        Ok(Datagrams::new(ah, qpn, UD_QKEY))
    })
}

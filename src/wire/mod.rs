//! The out-of-band address message, byte for byte as `ibv_rc_pingpong` sends it.
//!
//! # Why a TCP side channel at all
//!
//! An RC queue pair cannot be moved to RTR until it knows the *remote* QP number, the PSN the
//! remote side will start sending with, and how to address the remote port: its LID on
//! InfiniBand, its GID on RoCE. None of that can travel over the QP itself (it is not connected
//! yet), and RoCE has no subnet manager to ask. So every verbs program has some out-of-band
//! exchange: rdma_cm uses its own CM MADs, `ibv_rc_pingpong` uses a plain TCP socket and a
//! fixed-size text message. We copy that message exactly, so our steps talk to the C tool.
//!
//! # The format (rdma-core `libibverbs/examples/rc_pingpong.c`, `pingpong.c`)
//!
//! ```text
//! sprintf(msg, "%04x:%06x:%06x:%s", lid, qpn, psn, gid);   // gid from gid_to_wire_gid()
//! write(sockfd, msg, sizeof msg);      // msg is char[sizeof "0000:000000:000000:" + 32 hex]
//! ```
//!
//! * `sizeof` of the template string counts its NUL, so **every message is 52 bytes**: 51
//!   characters and a terminating `\0`, always, because LID is 16 bits and QPN/PSN are 24 bits,
//!   so the `%04x`/`%06x` fields never grow.
//! * `gid_to_wire_gid` prints the 16 GID bytes as four `%08x` words, each the `htobe32()` of a
//!   native 32-bit load. Load-then-byteswap on little endian (or neither on big endian) means
//!   the text is simply **the 16 raw GID bytes in order, two lowercase hex digits each** —
//!   host-endianness does not leak onto the wire. `wire_gid_to_gid` is the exact inverse: each
//!   8-character chunk is `sscanf("%x")`'d and stored big-endian.
//! * Example: LID 0, QPN 0x000011, PSN 0xabcdef, GID `::ffff:192.0.2.1` (the lab's RoCE v2 GID)
//!   is `b"0000:000011:abcdef:00000000000000000000ffffc0000201\0"`.
//!
//! # What the C reader accepts, and what we accept
//!
//! The C side reads with `sscanf(msg, "%x:%x:%x:%s", ...)` then `wire_gid_to_gid`. For every
//! message the C writer can produce (fixed widths, lowercase hex, NUL at byte 51) we decode
//! exactly the values `sscanf` does; `tests/no_device/wire_fuzz.rs` checks this against the real libc
//! `sscanf` over ≥10⁶ generated messages. `sscanf`'s `%x` also accepts upper-case digits, so do
//! we. Beyond that `sscanf` is famously lax — it skips leading white space, takes a `+`/`-`
//! sign and a `0x` prefix, accepts fields of any width, ignores everything after the GID, and
//! leaves a GID word *uninitialised* when a chunk has no hex digit at all. We deliberately
//! reject all of that with a [`WireError`] that names the byte: a message that only `sscanf`'s
//! leniency would accept did not come from an `ibv_rc_pingpong`, and telling the student so is
//! the point of this crate.
//!
//! # Our extension for step 09
//!
//! [`RdmaDest`] appends `:%08x:%016x` (rkey, buffer address) to the same fields. That is *ours*,
//! not rdma-core's: the C tool never does RDMA WRITE, so it never needed them, and it will not
//! talk to `09_rdma_write` (by design — the 78-byte message is rejected by a 52-byte reader, and
//! [`WireError`] says that is what probably happened).

use std::fmt;

mod error;
pub mod perftest;
pub mod rping;
pub use error::WireError;

/// A fixed-size message of the side channel.
///
/// Fixed size because that is how `rc_pingpong` frames its messages: there is no length
/// prefix and no delimiter, the reader simply reads `sizeof msg` bytes. Keeping the framing in
/// the type lets [`crate::exchange::Connection::recv`] read exactly `LEN` bytes and notice a
/// short or over-long message instead of mis-parsing it.
pub trait Message: Sized {
    /// Bytes on the wire, including the C string's terminating NUL.
    const LEN: usize;
    /// What the message is, for error messages ("address message", "\"done\"").
    const NAME: &'static str = "message";
    /// The exact bytes to write: always `LEN` of them.
    fn encode(&self) -> Vec<u8>;
    /// Parse exactly `LEN` bytes; any deviation is a precise [`WireError`].
    fn decode(buf: &[u8]) -> Result<Self, WireError>;
    /// Refuse to send values the format cannot carry (a QPN or PSN over 24 bits).
    ///
    /// `encode` cannot fail — it must produce `LEN` bytes so the peer's fixed-size read stays
    /// in step — so the sender checks first; [`crate::exchange::Connection::send`] calls this.
    fn check(&self) -> Result<(), WireError> {
        Ok(())
    }
}

/// The largest QPN or PSN: both are 24-bit fields in the InfiniBand transport header (BTH),
/// which is why `rc_pingpong` prints them with `%06x` and masks the PSN with `& 0xffffff`.
pub const MAX_24BIT: u32 = 0x00ff_ffff;

/// One side's address, as `struct pingpong_dest` in rc_pingpong.c.
///
/// These are exactly the values the *peer* needs for `ibv_modify_qp(INIT→RTR)`:
/// `dest_qp_num = qpn`, `rq_psn = psn`, `ah_attr.dlid = lid`, and — when the GID's interface
/// id is non-zero — a GRH with `dgid = gid` (mandatory on RoCE, where the LID is 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Dest {
    /// Port LID from `ibv_query_port`; 0 on RoCE, which has no subnet manager to assign one.
    pub lid: u16,
    /// Our QP number (`qp->qp_num`), the peer's `dest_qp_num`. 24 bits.
    pub qpn: u32,
    /// The first PSN we will send with (random, `lrand48() & 0xffffff` in C); the peer's
    /// `rq_psn`. 24 bits.
    pub psn: u32,
    /// Raw GID bytes from `ibv_query_gid(-g)`, network order; all zero without `-g`.
    pub gid: [u8; 16],
}

impl Dest {
    /// The GID as `inet_ntop(AF_INET6, ...)` prints it, as rc_pingpong's
    /// `local address:`/`remote address:` lines do (e.g. `::ffff:192.0.2.1`).
    pub fn gid_string(&self) -> String {
        crate::trace::Gid(self.gid).to_string()
    }

    /// The GID as the 32 hex characters `gid_to_wire_gid` writes.
    pub fn wire_gid(&self) -> String {
        gid_to_wire_gid(&self.gid)
    }

    /// Does this address need a GRH? The C code's exact test (`dest->gid.global.interface_id`,
    /// the low 8 bytes): without an interface id there is no routable GID to put in `dgid`.
    pub fn needs_grh(&self) -> bool {
        self.gid[8..].iter().any(|&b| b != 0)
    }
}

/// rc_pingpong's line format: `LID 0x%04x, QPN 0x%06x, PSN 0x%06x, GID <inet_ntop>`.
///
/// Printed after `  local address:  ` / `  remote address: ` by the steps, like the C tool.
impl fmt::Display for Dest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "LID 0x{:04x}, QPN 0x{:06x}, PSN 0x{:06x}, GID {}", self.lid, self.qpn, self.psn, self.gid_string())
    }
}

/// Step 09's message: rc_pingpong's address plus where to RDMA WRITE.
///
/// **Our extension, not interoperable with `ibv_rc_pingpong`, by design.** A one-sided RDMA
/// WRITE needs the target's memory key (`mr->rkey`) and virtual address; nothing in the
/// two-sided ping-pong needed them, so the C format has no room. Wire format:
/// `"%04x:%06x:%06x:%s:%08x:%016x"` + NUL = 78 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct RdmaDest {
    /// The rc_pingpong fields, encoded exactly as in [`Dest`].
    pub dest: Dest,
    /// `mr->rkey` of the peer's buffer: the capability that lets us write into it.
    pub rkey: u32,
    /// Virtual address of the peer's buffer (what `ibv_reg_mr` registered), for `wr.rdma.remote_addr`.
    pub addr: u64,
}

/// srq_pingpong's addresses: one [`Dest`] per QP, each in rc_pingpong's 52-byte format,
/// always `MAX_QP` (256) of them back to back whatever `-q` is — the C tool writes and
/// reads its whole `my_dest[MAX_QP]` array, zeroed past its QPs. So the message is
/// 256 × 52 = 13312 bytes each way. Decoding drops the all-zero entries at the end (QPN 0
/// is never an RC QP's), leaving the peer's QPs in its order: its QP *i* talks to our QP *i*.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SrqDests {
    /// The QPs' addresses, at most [`SrqDests::MAX_QP`].
    pub dests: Vec<Dest>,
}

impl SrqDests {
    /// srq_pingpong.c's `MAX_QP`: the entries on the wire, and the most QPs it takes.
    pub const MAX_QP: usize = 256;
}

/// One line per QP: srq_pingpong prints a `local address:` (and `remote address:`) line
/// for each.
impl fmt::Display for SrqDests {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, dest) in self.dests.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{dest}")?;
        }
        Ok(())
    }
}

impl Message for SrqDests {
    const LEN: usize = Self::MAX_QP * <Dest as Message>::LEN;
    const NAME: &'static str = "srq_pingpong address messages (256 of them)";

    fn encode(&self) -> Vec<u8> {
        let zero = Dest::default();
        (0..Self::MAX_QP).flat_map(|i| self.dests.get(i).unwrap_or(&zero).encode()).collect()
    }

    fn decode(buf: &[u8]) -> Result<Self, WireError> {
        if buf.len() != Self::LEN {
            return Err(WireError::WrongLength { expected: Self::LEN, got: buf.len() });
        }
        let mut dests = buf.chunks(<Dest as Message>::LEN).map(Dest::decode).collect::<Result<Vec<_>, _>>()?;
        while dests.last().is_some_and(|d| *d == Dest::default()) {
            dests.pop();
        }
        Ok(SrqDests { dests })
    }

    fn check(&self) -> Result<(), WireError> {
        self.dests.iter().try_for_each(Message::check)
    }
}

/// The rc_pingpong fields of either message: what the QP connects with (RTR's remote
/// address, RTS's own PSN), whichever message carried them.
impl AsRef<Dest> for Dest {
    fn as_ref(&self) -> &Dest {
        self
    }
}

impl AsRef<Dest> for RdmaDest {
    fn as_ref(&self) -> &Dest {
        &self.dest
    }
}

impl fmt::Display for RdmaDest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}, RKEY 0x{:08x}, ADDR 0x{:016x}", self.dest, self.rkey, self.addr)
    }
}

/// The client's final `write(sockfd, "done", sizeof "done")`: 5 bytes, NUL included.
///
/// It tells the server the client has read the server's address, so the server may close the
/// socket and start the ping-pong. rdma-core's server checks the read returned exactly
/// `sizeof "done"` bytes (it does not look at them); we also check they *are* `done\0`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Done;

/// One piece of a fixed-width text layout.
#[derive(Clone, Copy)]
enum Piece {
    /// `width` hex digits, parsed as one big-endian number.
    Hex(&'static str, usize),
    Colon,
    Nul,
}

use Piece::{Colon, Hex, Nul};

/// rc_pingpong's `"%04x:%06x:%06x:%s"` with the 32-character wire GID, plus the NUL.
const DEST_LAYOUT: &[Piece] = &[Hex("LID", 4), Colon, Hex("QPN", 6), Colon, Hex("PSN", 6), Colon, Hex("GID", 32), Nul];

/// Ours: the same, then `":%08x:%016x"` (rkey, address), then the NUL.
const RDMA_DEST_LAYOUT: &[Piece] = &[
    Hex("LID", 4),
    Colon,
    Hex("QPN", 6),
    Colon,
    Hex("PSN", 6),
    Colon,
    Hex("GID", 32),
    Colon,
    Hex("RKEY", 8),
    Colon,
    Hex("ADDR", 16),
    Nul,
];

const fn layout_len(layout: &[Piece]) -> usize {
    let mut n = 0;
    let mut i = 0;
    while i < layout.len() {
        n += match layout[i] {
            Hex(_, w) => w,
            Colon | Nul => 1,
        };
        i += 1;
    }
    n
}

/// Walk `buf` along `layout`, left to right, so the error names the *first* bad byte.
///
/// Returns each hex field's value; a 32-digit GID fits a `u128`, whose big-endian bytes are
/// exactly what `wire_gid_to_gid` stores (four `%x` words, each `be32toh`'d into place).
fn parse_layout(buf: &[u8], layout: &[Piece]) -> Result<Vec<u128>, WireError> {
    let expected = layout_len(layout);
    if buf.len() != expected {
        return Err(WireError::WrongLength { expected, got: buf.len() });
    }
    let mut values = Vec::with_capacity(layout.len());
    let mut at = 0;
    let mut after = "";
    for piece in layout {
        match *piece {
            Hex(field, width) => {
                let mut v: u128 = 0;
                for (i, &b) in buf[at..at + width].iter().enumerate() {
                    let d = (b as char).to_digit(16).ok_or(WireError::NotHex {
                        field,
                        start: at,
                        end: at + width,
                        at: at + i,
                        found: b,
                    })?;
                    v = (v << 4) | d as u128;
                }
                values.push(v);
                after = field;
                at += width;
            }
            Colon => {
                if buf[at] != b':' {
                    return Err(WireError::BadSeparator { at, after, found: buf[at] });
                }
                at += 1;
            }
            Nul => {
                if buf[at] != 0 {
                    return Err(WireError::MissingNul { at, found: buf[at] });
                }
                at += 1;
            }
        }
    }
    Ok(values)
}

/// `gid_to_wire_gid`: the 16 raw bytes as 32 lowercase hex digits, in order.
pub fn gid_to_wire_gid(gid: &[u8; 16]) -> String {
    format!("{:032x}", u128::from_be_bytes(*gid))
}

/// `wire_gid_to_gid` for a well-formed 32-hex-digit string (either case); `None` otherwise.
pub fn wire_gid_to_gid(wire: &str) -> Option<[u8; 16]> {
    if wire.len() != 32 || !wire.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u128::from_str_radix(wire, 16).ok().map(u128::to_be_bytes)
}

fn check_24bit(field: &'static str, value: u32) -> Result<(), WireError> {
    if value > MAX_24BIT {
        return Err(WireError::FieldOutOfRange { field, value: value.into(), max: MAX_24BIT.into() });
    }
    Ok(())
}

/// The first 51 characters, shared by [`Dest`] and [`RdmaDest`]. Out-of-range QPN/PSN are
/// masked so the length stays right; [`Message::check`] is where they are refused.
fn dest_text(d: &Dest) -> String {
    format!("{:04x}:{:06x}:{:06x}:{}", d.lid, d.qpn & MAX_24BIT, d.psn & MAX_24BIT, gid_to_wire_gid(&d.gid))
}

fn dest_from(values: &[u128]) -> Dest {
    // Widths are fixed by the layout (4, 6, 6 hex digits), so these casts cannot truncate.
    Dest { lid: values[0] as u16, qpn: values[1] as u32, psn: values[2] as u32, gid: values[3].to_be_bytes() }
}

impl Message for Dest {
    const LEN: usize = layout_len(DEST_LAYOUT);
    const NAME: &'static str = "address message";

    fn encode(&self) -> Vec<u8> {
        let mut v = dest_text(self).into_bytes();
        v.push(0);
        v
    }

    fn decode(buf: &[u8]) -> Result<Self, WireError> {
        parse_layout(buf, DEST_LAYOUT).map(|v| dest_from(&v))
    }

    fn check(&self) -> Result<(), WireError> {
        check_24bit("QPN", self.qpn)?;
        check_24bit("PSN", self.psn)
    }
}

impl Message for RdmaDest {
    const LEN: usize = layout_len(RDMA_DEST_LAYOUT);
    const NAME: &'static str = "09_rdma_write address message (with rkey and address)";

    fn encode(&self) -> Vec<u8> {
        let mut v = format!("{}:{:08x}:{:016x}", dest_text(&self.dest), self.rkey, self.addr).into_bytes();
        v.push(0);
        v
    }

    fn decode(buf: &[u8]) -> Result<Self, WireError> {
        let v = parse_layout(buf, RDMA_DEST_LAYOUT)?;
        Ok(RdmaDest { dest: dest_from(&v), rkey: v[4] as u32, addr: v[5] as u64 })
    }

    fn check(&self) -> Result<(), WireError> {
        self.dest.check()
    }
}

impl Message for Done {
    const LEN: usize = 5;
    const NAME: &'static str = "\"done\" message";

    fn encode(&self) -> Vec<u8> {
        b"done\0".to_vec()
    }

    fn decode(buf: &[u8]) -> Result<Self, WireError> {
        if buf.len() != Self::LEN {
            return Err(WireError::WrongLength { expected: Self::LEN, got: buf.len() });
        }
        if buf != b"done\0" {
            return Err(WireError::NotDone { found: buf.to_vec() });
        }
        Ok(Done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LAB: [u8; 16] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 1];

    #[test]
    fn sizes_match_the_c_sizeof() {
        assert_eq!(Dest::LEN, "0000:000000:000000:00000000000000000000000000000000".len() + 1);
        assert_eq!(Dest::LEN, 52);
        assert_eq!(RdmaDest::LEN, 78);
        assert_eq!(Done::LEN, "done".len() + 1);
    }

    #[test]
    fn encodes_like_sprintf() {
        let d = Dest { lid: 0, qpn: 0x11, psn: 0xabcdef, gid: LAB };
        assert_eq!(d.encode(), b"0000:000011:abcdef:00000000000000000000ffffc0000201\0");
        assert_eq!(Dest::decode(&d.encode()), Ok(d));
        assert_eq!(d.to_string(), "LID 0x0000, QPN 0x000011, PSN 0xabcdef, GID ::ffff:192.0.2.1");
    }

    #[test]
    fn first_bad_byte_is_reported() {
        let mut m = Dest::default().encode();
        m[7] = b'g';
        m[4] = b';';
        assert_eq!(Dest::decode(&m), Err(WireError::BadSeparator { at: 4, after: "LID", found: b';' }));
    }
}

#[cfg(test)]
mod srq_tests {
    use super::*;

    #[test]
    fn srq_dests_are_256_messages_and_drop_the_zeroed_tail() {
        let a = Dest { lid: 0, qpn: 0x11, psn: 0xabcdef, gid: [0xfe; 16] };
        let b = Dest { qpn: 0x12, ..a };
        let msg = SrqDests { dests: vec![a, b] };
        let bytes = msg.encode();
        assert_eq!(bytes.len(), 13312);
        // Each entry is rc_pingpong's 52-byte message; the zeroed ones are what C writes.
        assert_eq!(&bytes[52..104], &b.encode()[..]);
        assert_eq!(&bytes[104..156], &b"0000:000000:000000:00000000000000000000000000000000\0"[..]);
        assert_eq!(SrqDests::decode(&bytes).unwrap(), msg);
    }
}

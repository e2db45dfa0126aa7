//! perftest's side channel, byte for byte as `ib_atomic_lat` (and every perftest tool run
//! without `-R`) speaks it over TCP (`src/perftest_communication.c`), so that step 13 and
//! Debian's `ib_atomic_lat` understand each other.
//!
//! Every message is a fixed number of bytes with no length prefix, as rc_pingpong's, and
//! every exchange is symmetric: the client writes its value, then reads the server's; the
//! server reads, then writes (`ctx_xchg_data`, `ctx_hand_shake`). In order:
//!
//! | what | bytes | C |
//! |---|---|---|
//! | the version, a C string | 16 | `exchange_versions` |
//! | the buffer's cycle (page) size, then the cache line size, each `htonl` | 4 + 4 | `check_sys_data` |
//! | the MTU: its `enum ibv_mtu` value as `"%d"`, NUL included | 2 | `check_mtu` |
//! | the keys ([`Keys`]), five times over the run | 108 | `ctx_hand_shake` |
//!
//! What each side does with the peer's values depends on the *peer's* version: the MTU is
//! 2 bytes from 5.31, the sizes travel from 5.32, nothing older than 5.70 is accepted, and
//! from 6.28 a binary block of parameters follows the MTU (`negotiate_params`). We announce
//! [`VERSION`], so a newer perftest leaves that block out, as it does for Debian 12's.

use std::fmt;

use super::MAX_24BIT;
use super::{layout_len, parse_layout, Message, Piece, WireError};
use crate::wire::Piece::{Colon, Hex, Nul};

/// The perftest version whose handshake we speak: Debian 12's `perftest` (4.5-0.17)
/// announces it.
pub const VERSION: &str = "6.06";

/// The oldest version perftest itself accepts (`check_version_compatibility`).
pub const OLDEST: f64 = 5.70;

/// The version a perftest sends: a C string in 16 bytes (`char version[MAX_VERSION]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Version(pub String);

impl Version {
    /// The number perftest reads from it (`atof`): the digits and dot it starts with.
    pub fn number(&self) -> f64 {
        let digits: String = self.0.chars().take_while(|c| c.is_ascii_digit() || *c == '.').collect();
        digits.parse().unwrap_or(0.0)
    }
}

impl Message for Version {
    const LEN: usize = 16;
    const NAME: &'static str = "perftest version";

    fn encode(&self) -> Vec<u8> {
        let mut v = self.0.as_bytes().to_vec();
        v.resize(Self::LEN, 0);
        v
    }

    fn decode(buf: &[u8]) -> Result<Self, WireError> {
        if buf.len() != Self::LEN {
            return Err(WireError::WrongLength { expected: Self::LEN, got: buf.len() });
        }
        let bad = |detail: String| WireError::Perftest { what: Self::NAME, detail };
        let end = buf.iter().position(|&b| b == 0).ok_or_else(|| bad("no '\\0' in its 16 bytes".into()))?;
        if let Some(at) = buf[..end].iter().position(|b| !b.is_ascii_graphic()) {
            return Err(bad(format!("byte {at} is 0x{:02x}, not a printable character", buf[at])));
        }
        Ok(Version(String::from_utf8_lossy(&buf[..end]).into_owned()))
    }

    fn check(&self) -> Result<(), WireError> {
        let len = self.0.len() as u64;
        if len >= Self::LEN as u64 {
            return Err(WireError::FieldOutOfRange { field: "version", value: len, max: Self::LEN as u64 - 1 });
        }
        Ok(())
    }
}

/// A 32-bit number in network byte order (`hton_int`): the cycle buffer's size, then the
/// cache line's. `NAME` tells which.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SysValue<const CACHE_LINE: bool>(pub u32);

/// `check_sys_data`'s first value: the size of the buffer's cycle (`--cycle_buffer`, the
/// page size by default). Each side takes the larger one.
pub type CycleBuffer = SysValue<false>;
/// `check_sys_data`'s second value: the cache line size. Each side takes the larger one.
pub type CacheLine = SysValue<true>;

impl<const CACHE_LINE: bool> SysValue<CACHE_LINE> {
    /// The value, whichever of the two it is.
    pub const fn new(value: u32) -> Self {
        SysValue(value)
    }
}

impl<const CACHE_LINE: bool> Message for SysValue<CACHE_LINE> {
    const LEN: usize = 4;
    const NAME: &'static str = if CACHE_LINE { "perftest cache line size" } else { "perftest cycle buffer size" };

    fn encode(&self) -> Vec<u8> {
        self.0.to_be_bytes().to_vec()
    }

    fn decode(buf: &[u8]) -> Result<Self, WireError> {
        let bytes: [u8; 4] = buf.try_into().map_err(|_| WireError::WrongLength { expected: 4, got: buf.len() })?;
        Ok(SysValue(u32::from_be_bytes(bytes)))
    }
}

/// The MTU as perftest sends it: `sprintf(cur, "%d", mtu)` of its `enum ibv_mtu` (1 = 256
/// … 5 = 4096), two bytes with the NUL. Each side uses the smaller of the two.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MtuCode(pub u8);

impl Message for MtuCode {
    const LEN: usize = 2;
    const NAME: &'static str = "perftest MTU";

    fn encode(&self) -> Vec<u8> {
        vec![b'0' + self.0, 0]
    }

    fn decode(buf: &[u8]) -> Result<Self, WireError> {
        if buf.len() != Self::LEN {
            return Err(WireError::WrongLength { expected: Self::LEN, got: buf.len() });
        }
        if !(b'1'..=b'5').contains(&buf[0]) || buf[1] != 0 {
            return Err(WireError::Perftest {
                what: Self::NAME,
                detail: format!("\"{}\", expected one digit 1-5 (256-4096 bytes) and '\\0'", buf.escape_ascii()),
            });
        }
        Ok(MtuCode(buf[0] - b'0'))
    }

    fn check(&self) -> Result<(), WireError> {
        if !(1..=5).contains(&self.0) {
            return Err(WireError::FieldOutOfRange { field: "MTU", value: self.0.into(), max: 5 });
        }
        Ok(())
    }
}

/// `struct pingpong_dest` as `ethernet_write_keys` prints it when a GID is in use (always on
/// RoCE): `KEY_PRINT_FMT_GID`, 108 bytes with the NUL.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Keys {
    pub lid: u16,
    /// How many RDMA READs and atomics this side serves at once: the peer sets its
    /// `max_rd_atomic` to it, this side its `max_dest_rd_atomic`.
    pub out_reads: u16,
    pub qpn: u32,
    pub psn: u32,
    /// The rkey of the buffer the peer may reach.
    pub rkey: u32,
    /// Where in it the peer aims (perftest: its buffer plus one cycle).
    pub vaddr: u64,
    pub gid: [u8; 16],
    /// 0 without an SRQ.
    pub srqn: u32,
}

/// `"%04x:%04x:%06x:%06x:%08x:%016llx:"`, the 16 GID bytes as `"%02x:"` each, `"%08x:"`, NUL.
const KEYS_LAYOUT: &[Piece] = &{
    let head = [
        Hex("LID", 4),
        Colon,
        Hex("OUT_READS", 4),
        Colon,
        Hex("QPN", 6),
        Colon,
        Hex("PSN", 6),
        Colon,
        Hex("RKEY", 8),
        Colon,
        Hex("VADDR", 16),
        Colon,
    ];
    let mut all = [Nul; 12 + 32 + 3];
    let mut i = 0;
    while i < 12 {
        all[i] = head[i];
        i += 1;
    }
    while i < 12 + 32 {
        all[i] = if (i - 12) % 2 == 0 { Hex("GID", 2) } else { Colon };
        i += 1;
    }
    all[i] = Hex("SRQN", 8);
    all[i + 1] = Colon;
    all
};

impl Message for Keys {
    const LEN: usize = layout_len(KEYS_LAYOUT);
    const NAME: &'static str = "perftest keys";

    fn encode(&self) -> Vec<u8> {
        let gid: String = self.gid.iter().map(|b| format!("{b:02x}:")).collect();
        let mut v = format!(
            "{:04x}:{:04x}:{:06x}:{:06x}:{:08x}:{:016x}:{gid}{:08x}:",
            self.lid,
            self.out_reads,
            self.qpn & MAX_24BIT,
            self.psn & MAX_24BIT,
            self.rkey,
            self.vaddr,
            self.srqn
        )
        .into_bytes();
        v.push(0);
        v
    }

    fn decode(buf: &[u8]) -> Result<Self, WireError> {
        let v = parse_layout(buf, KEYS_LAYOUT).map_err(|e| match e {
            WireError::BadSeparator { at, after, found } => WireError::Perftest {
                what: Self::NAME,
                detail: format!(
                    "byte {at} is {:?}, expected ':' after the {after} field (format \
                     \"%04x:%04x:%06x:%06x:%08x:%016llx:\", 16 \"%02x:\" of the GID, \"%08x:\")",
                    char::from(found)
                ),
            },
            other => other,
        })?;
        let mut gid = [0u8; 16];
        for (byte, value) in gid.iter_mut().zip(&v[6..22]) {
            *byte = *value as u8;
        }
        // Widths are fixed by the layout, so these casts cannot truncate.
        Ok(Keys {
            lid: v[0] as u16,
            out_reads: v[1] as u16,
            qpn: v[2] as u32,
            psn: v[3] as u32,
            rkey: v[4] as u32,
            vaddr: v[5] as u64,
            gid,
            srqn: v[22] as u32,
        })
    }

    fn check(&self) -> Result<(), WireError> {
        super::check_24bit("QPN", self.qpn)?;
        super::check_24bit("PSN", self.psn)
    }
}

impl Keys {
    /// The QP's address in rc_pingpong's terms: what stage 05's RTR is given, and what the
    /// address line prints.
    pub fn dest(&self) -> super::Dest {
        super::Dest { lid: self.lid, qpn: self.qpn, psn: self.psn, gid: self.gid }
    }
}

/// In the words of rc_pingpong's address line, so the trace reads (and is redacted) alike.
impl fmt::Display for Keys {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{}, RKEY 0x{:08x}, ADDR 0x{:016x}, OUT_READS {}", self.dest(), self.rkey, self.vaddr, self.out_reads)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LAB: [u8; 16] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 192, 0, 2, 1];

    #[test]
    fn keys_are_perftests_108_bytes() {
        let k = Keys { lid: 0, out_reads: 1, qpn: 0x11, psn: 0xabcdef, rkey: 0x1234, vaddr: 0x5566, gid: LAB, srqn: 0 };
        let bytes = k.encode();
        assert_eq!(bytes.len(), 108);
        assert_eq!(
            &bytes[..],
            &b"0000:0001:000011:abcdef:00001234:0000000000005566:00:00:00:00:00:00:00:00:00:00:ff:ff:c0:00:02:01:00000000:\0"[..]
        );
        assert_eq!(Keys::decode(&bytes), Ok(k));
    }

    #[test]
    fn versions_are_read_as_perftest_reads_them() {
        let v = Version(VERSION.into());
        assert_eq!(v.encode().len(), 16);
        assert_eq!(Version::decode(&v.encode()), Ok(v.clone()));
        assert_eq!(v.number(), 6.06);
        assert_eq!(Version("6.10 beta".into()).number(), 6.10);
        assert!(Version::decode(&[b'6'; 16]).is_err(), "no NUL");
    }

    #[test]
    fn mtu_is_one_digit_and_a_nul() {
        assert_eq!(MtuCode(3).encode(), b"3\0");
        assert_eq!(MtuCode::decode(b"5\0"), Ok(MtuCode(5)));
        assert!(MtuCode::decode(b"7\0").is_err());
        assert_eq!(CycleBuffer::decode(&4096u32.to_be_bytes()), Ok(SysValue(4096)));
    }
}

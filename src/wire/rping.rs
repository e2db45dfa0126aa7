//! rping's wire format: the 16-byte message that says where a buffer is, and the ping data,
//! byte for byte as rdma-core's `librdmacm/examples/rping.c` writes them, so that step 10
//! and Debian's `rping` understand each other. It travels in SENDs on the QP, not over a
//! side channel as the address message does, but it is a format peers must agree on byte
//! for byte, as that one is: here, below stage 10 and rping's loop, which both use it. A
//! leaf: it imports nothing of the crate's.

/// `struct rping_rdma_info`: where a buffer is and how to reach it — 16 bytes on the wire,
/// every field big-endian (`htobe64`/`htobe32`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RpingInfo {
    /// The buffer's virtual address in the sender's process.
    pub addr: u64,
    /// The rkey of the MR it lies in.
    pub rkey: u32,
    /// Its size in bytes (rping's `-S`).
    pub size: u32,
}

impl RpingInfo {
    /// Its size on the wire.
    pub const LEN: usize = 16;

    /// The 16 bytes rping sends.
    pub fn to_bytes(self) -> [u8; 16] {
        let mut b = [0u8; 16];
        b[..8].copy_from_slice(&self.addr.to_be_bytes());
        b[8..12].copy_from_slice(&self.rkey.to_be_bytes());
        b[12..].copy_from_slice(&self.size.to_be_bytes());
        b
    }

    /// Reads what rping sent.
    pub fn from_bytes(b: &[u8; 16]) -> Self {
        RpingInfo {
            addr: u64::from_be_bytes(b[..8].try_into().expect("8 bytes")),
            rkey: u32::from_be_bytes(b[8..12].try_into().expect("4 bytes")),
            size: u32::from_be_bytes(b[12..].try_into().expect("4 bytes")),
        }
    }
}

/// The ping data of iteration `ping` (from 0) at `size` bytes, as `rping_test_client` writes
/// it: `"rdma-ping-%d: "` (at most 22 bytes: rping's smallest `-S`, 23, holds it and a
/// NUL; a shorter buffer would get what `snprintf` leaves of it), then letters from
/// `'A' + ping % 58` upwards, wrapping from `'z'` (122) to `'A'` (65), and a NUL last.
pub fn ping_data(ping: u32, size: usize) -> Vec<u8> {
    let prefix = format!("rdma-ping-{ping}: ").into_bytes();
    let mut buf = vec![0u8; size];
    let copied = prefix.len().min(size.saturating_sub(1));
    buf[..copied].copy_from_slice(&prefix[..copied]);
    let mut c = 65 + (ping % 58) as u8;
    for b in buf.iter_mut().skip(prefix.len()) {
        *b = c;
        c = if c >= 122 { 65 } else { c + 1 };
    }
    if let Some(last) = buf.last_mut() {
        *last = 0;
    }
    buf
}

/// The text of a NUL-terminated ping buffer, as rping's `printf("%s")` shows it.
pub fn c_string(buf: &[u8]) -> String {
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ping_data_is_rpings() {
        // What Debian's `rping -c -v` printed for its first two pings at the default -S 64.
        assert_eq!(c_string(&ping_data(0, 64)), "rdma-ping-0: ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqr");
        assert_eq!(c_string(&ping_data(1, 64)), "rdma-ping-1: BCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqrs");
        let data = ping_data(57, 200);
        assert_eq!(data.len(), 200);
        assert_eq!(data[199], 0, "a NUL last");
        // Letters run from 'A' + ping % 58 up to 'z', then wrap to 'A'.
        assert_eq!(&data[14..17], b"zAB");
        // rping's smallest buffer holds its longest prefix (its ping count is an int) and the NUL.
        assert_eq!(c_string(&ping_data(i32::MAX as u32, 23)), "rdma-ping-2147483647: ");
    }

    #[test]
    fn rping_info_is_16_big_endian_bytes() {
        let info = RpingInfo { addr: 0x0102_0304_0506_0708, rkey: 0x1122_3344, size: 64 };
        let bytes = info.to_bytes();
        assert_eq!(bytes, [1, 2, 3, 4, 5, 6, 7, 8, 0x11, 0x22, 0x33, 0x44, 0, 0, 0, 64]);
        assert_eq!(RpingInfo::from_bytes(&bytes), info);
    }
}

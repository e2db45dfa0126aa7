//! `cargo xtask pair-line`: lab/pair-check's one exchange — each VM of a pair sends the
//! other a line of what it has (interface MTU, active MTU, GID index, address) and prints
//! the one it got — over the library's TCP exchange (`rdma_dissect::exchange`), the one
//! the steps use: the server accepts one client within the timeout, the client retries a
//! refused connect until it.

use std::time::Duration;

use rdma_dissect::exchange::Connection;
use rdma_dissect::wire::{Message, WireError};

/// A line of text in a fixed-size message, NUL-padded, as rc_pingpong's messages are a
/// fixed-size C string: the reader reads exactly `LEN` bytes.
#[derive(Debug, PartialEq)]
pub struct PairLine(pub String);

impl Message for PairLine {
    const LEN: usize = 128;
    const NAME: &'static str = "pair-check line";

    fn encode(&self) -> Vec<u8> {
        let mut bytes = self.0.as_bytes().to_vec();
        bytes.resize(Self::LEN, 0);
        bytes
    }

    fn decode(buf: &[u8]) -> Result<Self, WireError> {
        if buf.len() != Self::LEN {
            return Err(WireError::WrongLength { expected: Self::LEN, got: buf.len() });
        }
        if buf[Self::LEN - 1] != 0 {
            return Err(WireError::MissingNul { at: Self::LEN - 1, found: buf[Self::LEN - 1] });
        }
        let end = buf.iter().position(|&b| b == 0).unwrap_or(Self::LEN);
        Ok(PairLine(String::from_utf8_lossy(&buf[..end]).into_owned()))
    }

    fn check(&self) -> Result<(), WireError> {
        let len = self.0.len() as u64;
        if len >= Self::LEN as u64 || self.0.contains('\0') {
            return Err(WireError::FieldOutOfRange { field: "line", value: len, max: Self::LEN as u64 - 1 });
        }
        Ok(())
    }
}

/// Sends `line` to the peer and returns the peer's: as the server (`connect` None) on
/// `port`, or as the client of `connect`'s `port`; every wait bounded by `timeout`.
pub fn swap(connect: Option<&str>, port: u16, timeout: Duration, line: &str) -> Result<String, String> {
    let mut conn = match connect {
        None => Connection::accept(port, timeout),
        Some(host) => Connection::connect(host, port, timeout),
    }
    .map_err(|e| e.to_string())?;
    conn.send(&PairLine(line.to_string())).map_err(|e| e.to_string())?;
    conn.recv::<PairLine>().map(|l| l.0).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_goes_both_ways_over_loopback() {
        let listener = rdma_dissect::exchange::Listener::bind(0).unwrap();
        let port = listener.port();
        drop(listener);
        let server = std::thread::spawn(move || swap(None, port, Duration::from_secs(10), "1500 1024 1 192.0.2.1"));
        let theirs = swap(Some("127.0.0.1"), port, Duration::from_secs(10), "9000 4096 3 192.0.2.2").unwrap();
        assert_eq!(theirs, "1500 1024 1 192.0.2.1");
        assert_eq!(server.join().unwrap().unwrap(), "9000 4096 3 192.0.2.2");
    }

    #[test]
    fn a_line_that_does_not_fit_is_refused_before_it_is_sent() {
        assert!(PairLine("x".repeat(127)).check().is_ok());
        assert!(PairLine("x".repeat(128)).check().is_err());
        assert_eq!(PairLine::decode(&PairLine("a b".into()).encode()).unwrap().0, "a b");
        assert!(PairLine::decode(&[b'x'; 128]).is_err(), "no NUL at the end");
    }

    #[test]
    fn nobody_listening_is_an_error_within_the_timeout() {
        let listener = rdma_dissect::exchange::Listener::bind(0).unwrap();
        let port = listener.port();
        drop(listener);
        let e = swap(Some("127.0.0.1"), port, Duration::from_millis(300), "x").unwrap_err();
        assert!(!e.is_empty());
    }
}

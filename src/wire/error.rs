//! [`WireError`]: what is wrong with a received message, said in the terms of its bytes.

use std::fmt;

use super::{Dest, Message};

/// Precisely what is wrong with a received message. Positions are 0-based byte offsets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WireError {
    /// The buffer handed to `decode` is not `expected` bytes long.
    WrongLength { expected: usize, got: usize },
    /// A `:` was expected at byte `at` (after the field `after`).
    BadSeparator { at: usize, after: &'static str, found: u8 },
    /// Byte `at`, inside field `field` (bytes `start..end`), is not a hex digit.
    NotHex { field: &'static str, start: usize, end: usize, at: usize, found: u8 },
    /// The C string's terminating NUL is not at byte `at` (the message's last byte).
    MissingNul { at: usize, found: u8 },
    /// A value does not fit its field (only on the sending side: QPN/PSN > 24 bits).
    FieldOutOfRange { field: &'static str, value: u64, max: u64 },
    /// The 5 bytes that should be `done\0` are something else.
    NotDone { found: Vec<u8> },
    /// A message of perftest's handshake ([`super::perftest`]) that is not what perftest
    /// sends: `what` it is, `detail` what is wrong.
    Perftest { what: &'static str, detail: String },
}

impl std::error::Error for WireError {}

/// Show a byte the way a student can recognise it: `':' (0x3a)`, `'\0' (0x00)`.
struct ShowByte(u8);

impl fmt::Display for ShowByte {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            0 => write!(f, "'\\0' (0x00)"),
            b => write!(f, "'{}' (0x{:02x})", [b].escape_ascii(), b),
        }
    }
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WireError::WrongLength { expected, got } => write!(
                f,
                "message is {got} bytes, expected exactly {expected} \
                 (rc_pingpong's messages are fixed-size C strings, NUL included)"
            ),
            WireError::BadSeparator { at, after, found } => write!(
                f,
                "byte {at} is {}, expected ':' after the {after} field \
                 (format \"%04x:%06x:%06x:<32 hex GID>\")",
                ShowByte(*found)
            ),
            WireError::NotHex { field, start, end, at, found } => write!(
                f,
                "byte {at} is {}, expected a hex digit (0-9, a-f, A-F): the {field} field is bytes \
                 {start}..{end}, {} hex digits",
                ShowByte(*found),
                end - start
            ),
            WireError::MissingNul { at, found } => {
                write!(
                    f,
                    "byte {at} is {}, expected the '\\0' that ends the {}-byte message",
                    ShowByte(*found),
                    at + 1
                )?;
                if *found == b':' && *at == Dest::LEN - 1 {
                    write!(
                        f,
                        " — a ':' here means the peer sent a longer message: is it \
                         09_rdma_write (78-byte messages with rkey and address) talking to \
                         one of steps 05-08 or ibv_rc_pingpong?"
                    )?;
                }
                Ok(())
            }
            WireError::FieldOutOfRange { field, value, max } => write!(
                f,
                "{field} 0x{value:x} does not fit the wire format (at most 0x{max:x}): \
                 QPN and PSN are 24-bit fields in the InfiniBand transport header"
            ),
            WireError::NotDone { found } => write!(
                f,
                "expected the 5 bytes \"done\\0\" that end rc_pingpong's exchange, got \"{}\"",
                found.escape_ascii()
            ),
            WireError::Perftest { what, detail } => write!(
                f,
                "{what}: {detail} (perftest's handshake, src/perftest_communication.c: is the peer \
                 a perftest tool of version 5.70 or later, run without -R?)"
            ),
        }
    }
}

//! Parser fuzzing with the C code as the oracle.
//!
//! The oracle is rc_pingpong's own reading and writing, done with the real libc:
//! `sscanf(msg, "%x:%x:%x:%s")` followed by `wire_gid_to_gid` (one `sscanf("%x")` per
//! 8-character chunk, stored big-endian), and `sprintf("%04x:%06x:%06x:%s")` with
//! `gid_to_wire_gid` (`"%08x"` of `htobe32` of each native 32-bit load). Properties:
//!
//! * our encoder writes byte for byte what the C code writes;
//! * every message the C code can write — in any mix of letter case, which `%x` also reads —
//!   we decode to exactly the values `sscanf` reads;
//! * whatever we accept, `sscanf` reads identically (we are never *more* lenient);
//! * a one-byte corruption of a valid message is either still valid (and then C agrees) or
//!   rejected with an error naming *that* byte;
//! * no input of any length or content panics.
//!
//! Default: 2,000 cases per property, so `cargo test` stays fast. The documented long run
//! (≥10⁶ inputs per property, 6×10⁶ in all):
//!
//! ```text
//! PROPTEST_CASES=1000000 cargo test --release --test no_device wire_fuzz::
//! ```

#![allow(unsafe_code, reason = "the oracle is rc_pingpong's own C, sscanf and snprintf from the real libc")]

use proptest::prelude::*;
use rdma_dissect::wire::{Dest, Done, Message, RdmaDest, WireError, MAX_24BIT};
use std::ffi::{c_char, c_int, c_uint, CStr};

fn config() -> ProptestConfig {
    // ProptestConfig::default() honours PROPTEST_CASES; without it, use 2000 cases rather
    // than proptest's 256, still well under a second per property.
    let mut c = ProptestConfig::default();
    if std::env::var_os("PROPTEST_CASES").is_none() {
        c.cases = 2000;
    }
    c
}

/// rc_pingpong.c + pingpong.c, writing: the 52 bytes `write(sockfd, msg, sizeof msg)` sends.
fn c_encode(d: &Dest) -> Vec<u8> {
    let mut wgid = [0 as c_char; 33];
    for i in 0..4 {
        let native = u32::from_ne_bytes(d.gid[4 * i..4 * i + 4].try_into().unwrap());
        // SAFETY: 9 bytes remain from offset 8*i in a 33-byte buffer; "%08x" writes 8 digits
        // and a NUL; the argument matches %x (unsigned int).
        unsafe { libc::snprintf(wgid.as_mut_ptr().add(8 * i), 9, c"%08x".as_ptr(), native.to_be() as c_uint) };
    }
    let mut msg = [0 as c_char; 52];
    // SAFETY: snprintf writes at most 52 bytes (51 characters + NUL) into the 52-byte `msg`;
    // the arguments match the conversions (%x: unsigned int, %s: NUL-terminated string).
    let n = unsafe {
        libc::snprintf(
            msg.as_mut_ptr(),
            msg.len(),
            c"%04x:%06x:%06x:%s".as_ptr(),
            d.lid as c_uint,
            d.qpn as c_uint,
            d.psn as c_uint,
            wgid.as_ptr(),
        )
    };
    assert_eq!(n, 51);
    msg.iter().map(|&c| c as u8).collect()
}

/// rc_pingpong.c + pingpong.c, reading a 52-byte message: `sscanf` then `wire_gid_to_gid`.
/// Only called on messages whose 4th field is at most 32 characters (C's `char gid[33]`).
fn c_decode(msg: &[u8]) -> (c_int, c_int, c_int, [u8; 16]) {
    let mut z = msg.to_vec();
    z.push(0); // sscanf needs a C string; rc_pingpong relies on byte 51 being NUL
    let (mut lid, mut qpn, mut psn): (c_int, c_int, c_int) = (-1, -1, -1);
    let mut gid = [0 as c_char; 64];
    // SAFETY: `z` is NUL-terminated; each %x gets an int*, %s a buffer of 64 bytes, more than
    // the ≤52 characters the message can hold.
    let n = unsafe {
        libc::sscanf(z.as_ptr().cast(), c"%x:%x:%x:%s".as_ptr(), &mut lid, &mut qpn, &mut psn, gid.as_mut_ptr())
    };
    assert_eq!(n, 4, "sscanf did not read 4 fields from {:?}", msg.escape_ascii().to_string());
    let mut raw = [0u8; 16];
    for i in 0..4 {
        let mut tmp = [0 as c_char; 9];
        tmp[..8].copy_from_slice(&gid[8 * i..8 * i + 8]);
        let mut v32: c_uint = 0;
        // SAFETY: `tmp` is NUL-terminated (tmp[8] = 0); %x gets an unsigned int*.
        unsafe { libc::sscanf(tmp.as_ptr(), c"%x".as_ptr(), &mut v32) };
        raw[4 * i..4 * i + 4].copy_from_slice(&v32.to_be_bytes());
    }
    // SAFETY: `gid` is NUL-terminated (sscanf's %s terminates it within the buffer).
    assert_eq!(unsafe { CStr::from_ptr(gid.as_ptr()) }.to_bytes().len(), 32);
    (lid, qpn, psn, raw)
}

fn dest() -> impl Strategy<Value = Dest> {
    (any::<u16>(), 0..=MAX_24BIT, 0..=MAX_24BIT, any::<[u8; 16]>()).prop_map(|(lid, qpn, psn, gid)| Dest {
        lid,
        qpn,
        psn,
        gid,
    })
}

/// The byte an error points at, for errors that point at one.
fn error_position(e: &WireError) -> Option<usize> {
    match *e {
        WireError::BadSeparator { at, .. } | WireError::NotHex { at, .. } | WireError::MissingNul { at, .. } => {
            Some(at)
        }
        _ => None,
    }
}

/// Accepting is only allowed where C reads the same values, and the input is then the
/// canonical encoding up to letter case.
fn assert_accept_agrees_with_c(m: &[u8], d: &Dest) -> Result<(), TestCaseError> {
    let (lid, qpn, psn, gid) = c_decode(m);
    prop_assert_eq!((lid as u32, qpn as u32, psn as u32, gid), (u32::from(d.lid), d.qpn, d.psn, d.gid));
    prop_assert_eq!(m.to_ascii_lowercase(), d.encode());
    Ok(())
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn encode_matches_c_sprintf(d in dest()) {
        prop_assert_eq!(d.encode(), c_encode(&d));
    }

    #[test]
    fn valid_messages_decode_like_sscanf(d in dest(), upper in any::<u64>()) {
        // Any mix of upper and lower case: %x reads both.
        let mut m = d.encode();
        for (i, b) in m.iter_mut().enumerate() {
            if upper >> (i % 64) & 1 == 1 {
                b.make_ascii_uppercase();
            }
        }
        let ours = Dest::decode(&m);
        prop_assert_eq!(ours.as_ref(), Ok(&d));
        assert_accept_agrees_with_c(&m, &d)?;
    }

    #[test]
    fn one_byte_corruption_is_caught_at_its_byte(d in dest(), at in 0..Dest::LEN, byte: u8) {
        let mut m = d.encode();
        let changed = m[at] != byte;
        m[at] = byte;
        match Dest::decode(&m) {
            Ok(got) => assert_accept_agrees_with_c(&m, &got)?,
            Err(e) => {
                prop_assert!(changed);
                prop_assert_eq!(error_position(&e), Some(at), "{}", e);
                prop_assert!(!e.to_string().is_empty());
            }
        }
    }

    #[test]
    fn rdma_dest_corruption_is_caught_at_its_byte(d in dest(), rkey: u32, addr: u64, at in 0..RdmaDest::LEN, byte: u8) {
        let r = RdmaDest { dest: d, rkey, addr };
        let mut m = r.encode();
        let changed = m[at] != byte;
        m[at] = byte;
        match RdmaDest::decode(&m) {
            Ok(got) => prop_assert_eq!(m.to_ascii_lowercase(), got.encode()),
            Err(e) => {
                prop_assert!(changed);
                prop_assert_eq!(error_position(&e), Some(at), "{}", e);
            }
        }
    }

    #[test]
    fn near_valid_alphabet_never_fools_us(m in proptest::collection::vec(
        prop_oneof![
            8 => proptest::sample::select(b"0123456789abcdefABCDEF".to_vec()),
            1 => proptest::sample::select(b":\0 x+-\n\xff".to_vec()),
        ], 50..=54)) {
        // Mostly hex with the odd separator/sign/prefix: the inputs sscanf is lenient with.
        if let Ok(d) = Dest::decode(&m) {
            assert_accept_agrees_with_c(&m, &d)?;
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(m in proptest::collection::vec(any::<u8>(), 0..=100)) {
        if let Ok(d) = Dest::decode(&m) {
            prop_assert_eq!(m.to_ascii_lowercase(), d.encode());
        }
        if let Ok(r) = RdmaDest::decode(&m) {
            prop_assert_eq!(m.to_ascii_lowercase(), r.encode());
        }
        if Done::decode(&m).is_ok() {
            prop_assert_eq!(&m[..], b"done\0");
        }
        if let Err(e) = Dest::decode(&m) {
            let _ = e.to_string();
        }
    }
}

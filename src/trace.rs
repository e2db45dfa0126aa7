//! The trace: one line per verbs event on stdout, the contract every step is tested against.
//!
//! ```text
//! ibv_alloc_pd               pd.handle=0
//! ibv_modify_qp              qp_num=0x000011 INIT→RTR
//!   IBV_QP_STATE             qp_state=IBV_QPS_RTR
//!   IBV_QP_PATH_MTU          path_mtu=IBV_MTU_1024
//! ```
//!
//! A line starts with the verb (or, indented, a detail of the event above it, such as one
//! `ibv_modify_qp` mask flag), padded to [`COLUMN`] characters, then `key=value` pairs.
//! Numbers use `ibv_rc_pingpong`'s widths (LID `0x%04x`, QPN and PSN `0x%06x`, keys
//! `0x%08x`) and GIDs its `inet_ntop` form, so a line can be set next to the C program's
//! output. Every value the device or the run picks (QP numbers, PSNs, keys, addresses,
//! GUIDs, timings) sits behind its own key, so the tests replace it by one rule per key.
//!
//! Colour only decorates: it is switched on when stdout is a terminal and `NO_COLOR` is not
//! set, and a line carries the same text either way.
//!
//! The timed ping-pong loop must not pay for tracing: it holds a [`Mute`] guard, and a
//! muted event neither formats nor allocates.

use std::cell::Cell;
use std::fmt::{self, Display, Write as _};
use std::io::{IsTerminal, Write as _};
use std::sync::Once;

use colored::Colorize;

/// Width of the verb column: room for `IBV_QP_MAX_DEST_RD_ATOMIC`, the longest mask flag, indented by two, plus one.
pub const COLUMN: usize = 28;

thread_local! {
    static MUTED: Cell<u32> = const { Cell::new(0) };
}

/// While a `Mute` is alive, events on this thread are dropped before being formatted.
///
/// Used around the timed loop of `08_poll_cq`: printing a line costs microseconds, as much
/// as a whole round trip on real hardware.
#[must_use = "the trace is muted only while the guard lives"]
pub struct Mute(());

/// Mutes the trace on this thread until the returned guard is dropped.
pub fn mute() -> Mute {
    MUTED.with(|m| m.set(m.get() + 1));
    Mute(())
}

impl Drop for Mute {
    fn drop(&mut self) {
        MUTED.with(|m| m.set(m.get() - 1));
    }
}

/// One trace line under construction; [`Event::emit`] prints it.
///
/// A muted event holds no line at all (`None`): the whole `Event` is one null pointer,
/// kept in a register, so building and emitting it in the timed loop costs a test per
/// call and no copy, format or allocation.
#[must_use = "an event prints nothing until emit() is called"]
pub struct Event {
    // A Box<String>, not a String: `None` is then one null pointer (a String is three words).
    #[allow(clippy::box_collection)]
    line: Option<Box<String>>,
}

/// Starts a line for `verb`: an `ibv_*` call or a step of the TCP exchange.
#[inline]
pub fn event(verb: &str) -> Event {
    start(verb, false)
}

/// Starts an indented detail line under the previous event (e.g. one mask flag).
#[inline]
pub fn detail(label: &str) -> Event {
    start(label, true)
}

// The muted path — one thread-local read — is inlined into the caller, and so are the
// tests of `kv`, `word` and `emit`; formatting lives in the functions below, out of line.
#[inline]
fn start(label: &str, indented: bool) -> Event {
    if MUTED.with(|m| m.get() != 0) {
        return Event { line: None };
    }
    start_line(label, indented)
}

#[inline(never)]
fn start_line(label: &str, indented: bool) -> Event {
    init_colour();
    let mut line = String::new();
    let (indent, width) = if indented { ("  ", COLUMN - 2) } else { ("", COLUMN) };
    let padded = format!("{label:<width$}");
    let painted = if indented { padded.cyan() } else { padded.bold() };
    let _ = write!(line, "{indent}{painted}");
    Event { line: Some(Box::new(line)) }
}

#[inline(never)]
fn push_kv(line: &mut String, key: &str, value: &dyn Display) {
    let _ = write!(line, " {}{}", format!("{key}=").dimmed(), value);
}

#[inline(never)]
fn push_word(line: &mut String, word: &dyn Display) {
    let _ = write!(line, " {word}");
}

#[inline(never)]
fn print(line: &str) {
    let mut out = std::io::stdout().lock();
    // A closed pipe (`| head`) must not turn into a panic: the trace is best effort.
    let _ = writeln!(out, "{}", line.trim_end());
}

impl Event {
    /// Appends ` key=value`.
    #[inline]
    pub fn kv(mut self, key: &str, value: impl Display) -> Self {
        if let Some(line) = self.line.as_deref_mut() {
            push_kv(line, key, &value);
        }
        self
    }

    /// Appends a bare word, such as a state change `INIT→RTR`.
    #[inline]
    pub fn word(mut self, word: impl Display) -> Self {
        if let Some(line) = self.line.as_deref_mut() {
            push_word(line, &word);
        }
        self
    }

    /// Prints the line on stdout.
    #[inline]
    pub fn emit(self) {
        if let Some(line) = self.line {
            print(&line);
        }
    }
}

/// A plain line of program output (not an event), such as `08_poll_cq`'s statistics.
pub fn line(text: impl Display) {
    if MUTED.with(|m| m.get() == 0) {
        let _ = writeln!(std::io::stdout().lock(), "{text}");
    }
}

fn init_colour() {
    static INIT: Once = Once::new();
    INIT.call_once(|| {
        let colour = std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
        colored::control::set_override(colour);
    });
}

/// A LID as `ibv_rc_pingpong` prints it: `0x%04x`.
pub struct Lid(pub u16);
/// A QP number: `0x%06x` (QPNs are 24 bits).
pub struct Qpn(pub u32);
/// A packet sequence number: `0x%06x` (PSNs are 24 bits).
pub struct Psn(pub u32);
/// An lkey or rkey: `0x%08x`.
pub struct Key(pub u32);
/// A 64-bit address or GUID: `0x%016x`.
pub struct Hex64(pub u64);
/// A GID in `inet_ntop(AF_INET6)` form: `fe80::5054:ff:fe12:3456`, `::ffff:192.0.2.1`.
pub struct Gid(pub [u8; 16]);

impl Display for Lid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "0x{:04x}", self.0)
    }
}
impl Display for Qpn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "0x{:06x}", self.0)
    }
}
impl Display for Psn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "0x{:06x}", self.0)
    }
}
impl Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "0x{:08x}", self.0)
    }
}
impl Display for Hex64 {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "0x{:016x}", self.0)
    }
}
// The GID in `inet_ntop(AF_INET6)` form, byte-identical to glibc's output: the one GID
// formatter, for the trace and for rc_pingpong's address lines (`wire`).
//
// Not `std::net::Ipv6Addr`'s `Display`: for the deprecated IPv4-*compatible* form
// (`::a.b.c.d`) glibc prints dotted quad and std does not, and our trace lines must match
// rc_pingpong's. Otherwise the rules agree (RFC 5952: longest run of ≥2 zero groups becomes
// `::`, leftmost on a tie; `::ffff:a.b.c.d` for IPv4-mapped, which is what RoCE v2 uses for
// an IPv4 netdev). `tests/no_device/wire.rs` compares it with libc's `inet_ntop`.
impl Display for Gid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let gid = &self.0;
        let words: [u16; 8] = std::array::from_fn(|i| u16::from_be_bytes([gid[2 * i], gid[2 * i + 1]]));
        // The longest run of at least two zero words, leftmost on a tie (glibc/BIND
        // inet_ntop6), as (first word, length).
        let mut best: Option<(usize, usize)> = None;
        let mut cur: Option<(usize, usize)> = None;
        for (i, &w) in words.iter().chain(std::iter::once(&1)).enumerate() {
            if w == 0 {
                cur = Some(cur.map_or((i, 1), |(b, l)| (b, l + 1)));
            } else if let Some(c) = cur.take() {
                if best.is_none_or(|b| c.1 > b.1) {
                    best = Some(c);
                }
            }
        }
        let best = best.filter(|&(_, len)| len >= 2);
        // IPv4-compatible (::a.b.c.d) and IPv4-mapped (::ffff:a.b.c.d): dotted quad.
        if let Some((0, len)) = best {
            if len == 6 || (len == 5 && words[5] == 0xffff) {
                let prefix = if len == 6 { "::" } else { "::ffff:" };
                return write!(f, "{prefix}{}.{}.{}.{}", gid[12], gid[13], gid[14], gid[15]);
            }
        }
        let mut i = 0;
        while i < 8 {
            if let Some((base, len)) = best.filter(|&(base, _)| base == i) {
                f.write_str(":")?;
                i = base + len;
                continue;
            }
            if i != 0 {
                f.write_str(":")?;
            }
            write!(f, "{:x}", words[i])?;
            i += 1;
        }
        if best.is_some_and(|(base, len)| base + len == 8) {
            f.write_str(":")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn widths_follow_rc_pingpong() {
        assert_eq!(Lid(1).to_string(), "0x0001");
        assert_eq!(Qpn(0x11).to_string(), "0x000011");
        assert_eq!(Psn(0xabcdef).to_string(), "0xabcdef");
        assert_eq!(Key(0x1234).to_string(), "0x00001234");
    }

    #[test]
    fn gids_print_like_inet_ntop() {
        let mut mapped = [0u8; 16];
        mapped[10] = 0xff;
        mapped[11] = 0xff;
        mapped[12..].copy_from_slice(&[192, 0, 2, 1]);
        assert_eq!(Gid(mapped).to_string(), "::ffff:192.0.2.1");
        assert_eq!(Gid([0; 16]).to_string(), "::");
        let mut link_local = [0u8; 16];
        link_local[0] = 0xfe;
        link_local[1] = 0x80;
        link_local[8..].copy_from_slice(&[0x50, 0x54, 0, 0xff, 0xfe, 0x12, 0x34, 0x56]);
        assert_eq!(Gid(link_local).to_string(), "fe80::5054:ff:fe12:3456");
    }

    #[test]
    fn muted_events_do_not_format() {
        let _mute = mute();
        let e = event("ibv_post_send").kv("wr_id", 1);
        assert!(e.line.is_none());
    }
}

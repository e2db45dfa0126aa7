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
use ibverbs_sys::{ibv_qp_attr, ibv_qp_attr_mask, ibv_qp_state};

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
// an IPv4 netdev). `tests/wire.rs` compares it with libc's `inet_ntop`.
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

/// `RESET`, `INIT`, `RTR`, `RTS`, ...: a QP state as the spec's state diagram names it.
pub fn state_name(state: ibv_qp_state::Type) -> &'static str {
    match state {
        ibv_qp_state::IBV_QPS_RESET => "RESET",
        ibv_qp_state::IBV_QPS_INIT => "INIT",
        ibv_qp_state::IBV_QPS_RTR => "RTR",
        ibv_qp_state::IBV_QPS_RTS => "RTS",
        ibv_qp_state::IBV_QPS_SQD => "SQD",
        ibv_qp_state::IBV_QPS_SQE => "SQE",
        ibv_qp_state::IBV_QPS_ERR => "ERR",
        _ => "UNKNOWN",
    }
}

/// `IBV_WC_SUCCESS`, `IBV_WC_RETRY_EXC_ERR`, ...: a work completion status by its C name
/// (`ibv_wc_status_str` gives prose, which is harder to look up).
pub fn wc_status_name(status: ibverbs_sys::ibv_wc_status::Type) -> &'static str {
    use ibverbs_sys::ibv_wc_status::*;
    const NAMES: [&str; 22] = [
        "IBV_WC_SUCCESS", "IBV_WC_LOC_LEN_ERR", "IBV_WC_LOC_QP_OP_ERR", "IBV_WC_LOC_EEC_OP_ERR",
        "IBV_WC_LOC_PROT_ERR", "IBV_WC_WR_FLUSH_ERR", "IBV_WC_MW_BIND_ERR", "IBV_WC_BAD_RESP_ERR",
        "IBV_WC_LOC_ACCESS_ERR", "IBV_WC_REM_INV_REQ_ERR", "IBV_WC_REM_ACCESS_ERR",
        "IBV_WC_REM_OP_ERR", "IBV_WC_RETRY_EXC_ERR", "IBV_WC_RNR_RETRY_EXC_ERR",
        "IBV_WC_LOC_RDD_VIOL_ERR", "IBV_WC_REM_INV_RD_REQ_ERR", "IBV_WC_REM_ABORT_ERR",
        "IBV_WC_INV_EECN_ERR", "IBV_WC_INV_EEC_STATE_ERR", "IBV_WC_FATAL_ERR",
        "IBV_WC_RESP_TIMEOUT_ERR", "IBV_WC_GENERAL_ERR",
    ];
    debug_assert_eq!(IBV_WC_GENERAL_ERR, 21);
    NAMES.get(status as usize).copied().unwrap_or("IBV_WC_(unknown)")
}

/// `IBV_MTU_1024` for the enum value 3: `ibv_mtu` is an enum, not a byte count.
pub fn mtu_name(mtu: ibverbs_sys::ibv_mtu) -> String {
    match mtu {
        1..=5 => format!("IBV_MTU_{}", 128 << mtu),
        _ => format!("{mtu}"),
    }
}

/// Names of the set bits of an `ibv_access_flags` value, `|`-joined; `0` when none.
pub fn access_names(flags: u32) -> String {
    const NAMES: [(u32, &str); 4] = [
        (1, "IBV_ACCESS_LOCAL_WRITE"),
        (2, "IBV_ACCESS_REMOTE_WRITE"),
        (4, "IBV_ACCESS_REMOTE_READ"),
        (8, "IBV_ACCESS_REMOTE_ATOMIC"),
    ];
    join_flags(flags, &NAMES)
}

/// An `ibv_send_flags` value shown as the names of its bits, `|`-joined; `0` when none.
///
/// A type rather than a function returning a `String`, so that building a muted event in
/// the timed loop formats (and allocates) nothing.
pub struct SendFlags(pub u32);

impl Display for SendFlags {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const NAMES: [(u32, &str); 4] = [
            (1, "IBV_SEND_FENCE"),
            (2, "IBV_SEND_SIGNALED"),
            (4, "IBV_SEND_SOLICITED"),
            (8, "IBV_SEND_INLINE"),
        ];
        f.write_str(&join_flags(self.0, &NAMES))
    }
}

fn join_flags(flags: u32, names: &[(u32, &str)]) -> String {
    let mut out: Vec<String> =
        names.iter().filter(|(bit, _)| flags & bit != 0).map(|(_, n)| n.to_string()).collect();
    let known: u32 = names.iter().map(|(bit, _)| bit).sum();
    if flags & !known != 0 {
        out.push(format!("0x{:x}", flags & !known));
    }
    if out.is_empty() {
        "0".into()
    } else {
        out.join("|")
    }
}

/// The `ibv_qp_attr_mask` flags in bit order, with the attribute fields each one makes
/// `ibv_modify_qp` read. This is the table to keep in mind when reading a modify call:
/// a field whose flag is not in the mask is ignored, however it was initialised.
const MASK_FLAGS: [(ibv_qp_attr_mask, &str); 21] = [
    (ibv_qp_attr_mask::IBV_QP_STATE, "IBV_QP_STATE"),
    (ibv_qp_attr_mask::IBV_QP_CUR_STATE, "IBV_QP_CUR_STATE"),
    (ibv_qp_attr_mask::IBV_QP_EN_SQD_ASYNC_NOTIFY, "IBV_QP_EN_SQD_ASYNC_NOTIFY"),
    (ibv_qp_attr_mask::IBV_QP_ACCESS_FLAGS, "IBV_QP_ACCESS_FLAGS"),
    (ibv_qp_attr_mask::IBV_QP_PKEY_INDEX, "IBV_QP_PKEY_INDEX"),
    (ibv_qp_attr_mask::IBV_QP_PORT, "IBV_QP_PORT"),
    (ibv_qp_attr_mask::IBV_QP_QKEY, "IBV_QP_QKEY"),
    (ibv_qp_attr_mask::IBV_QP_AV, "IBV_QP_AV"),
    (ibv_qp_attr_mask::IBV_QP_PATH_MTU, "IBV_QP_PATH_MTU"),
    (ibv_qp_attr_mask::IBV_QP_TIMEOUT, "IBV_QP_TIMEOUT"),
    (ibv_qp_attr_mask::IBV_QP_RETRY_CNT, "IBV_QP_RETRY_CNT"),
    (ibv_qp_attr_mask::IBV_QP_RNR_RETRY, "IBV_QP_RNR_RETRY"),
    (ibv_qp_attr_mask::IBV_QP_RQ_PSN, "IBV_QP_RQ_PSN"),
    (ibv_qp_attr_mask::IBV_QP_MAX_QP_RD_ATOMIC, "IBV_QP_MAX_QP_RD_ATOMIC"),
    (ibv_qp_attr_mask::IBV_QP_ALT_PATH, "IBV_QP_ALT_PATH"),
    (ibv_qp_attr_mask::IBV_QP_MIN_RNR_TIMER, "IBV_QP_MIN_RNR_TIMER"),
    (ibv_qp_attr_mask::IBV_QP_SQ_PSN, "IBV_QP_SQ_PSN"),
    (ibv_qp_attr_mask::IBV_QP_MAX_DEST_RD_ATOMIC, "IBV_QP_MAX_DEST_RD_ATOMIC"),
    (ibv_qp_attr_mask::IBV_QP_PATH_MIG_STATE, "IBV_QP_PATH_MIG_STATE"),
    (ibv_qp_attr_mask::IBV_QP_CAP, "IBV_QP_CAP"),
    (ibv_qp_attr_mask::IBV_QP_DEST_QPN, "IBV_QP_DEST_QPN"),
];

/// The mask of an `ibv_modify_qp` call flag by flag, each with the attribute values it
/// selects: `("IBV_QP_PATH_MTU", [("path_mtu", "IBV_MTU_1024")])`.
pub fn mask_fields(attr: &ibv_qp_attr, mask: ibv_qp_attr_mask) -> Vec<(&'static str, Vec<(&'static str, String)>)> {
    let mut out = Vec::new();
    for (flag, name) in MASK_FLAGS {
        if mask.0 & flag.0 == 0 {
            continue;
        }
        let fields: Vec<(&'static str, String)> = match name {
            "IBV_QP_STATE" => vec![("qp_state", format!("IBV_QPS_{}", state_name(attr.qp_state)))],
            "IBV_QP_CUR_STATE" => {
                vec![("cur_qp_state", format!("IBV_QPS_{}", state_name(attr.cur_qp_state)))]
            }
            "IBV_QP_ACCESS_FLAGS" => vec![("qp_access_flags", access_names(attr.qp_access_flags))],
            "IBV_QP_PKEY_INDEX" => vec![("pkey_index", attr.pkey_index.to_string())],
            "IBV_QP_PORT" => vec![("port_num", attr.port_num.to_string())],
            "IBV_QP_QKEY" => vec![("qkey", Key(attr.qkey).to_string())],
            "IBV_QP_AV" => {
                let ah = &attr.ah_attr;
                let mut v = vec![
                    ("ah_attr.is_global", ah.is_global.to_string()),
                    ("ah_attr.dlid", Lid(ah.dlid).to_string()),
                    ("ah_attr.sl", ah.sl.to_string()),
                    ("ah_attr.src_path_bits", ah.src_path_bits.to_string()),
                    ("ah_attr.port_num", ah.port_num.to_string()),
                ];
                if ah.is_global != 0 {
                    v.push(("ah_attr.grh.dgid", Gid(crate::verbs::gid_bytes(&ah.grh.dgid)).to_string()));
                    v.push(("ah_attr.grh.sgid_index", ah.grh.sgid_index.to_string()));
                    v.push(("ah_attr.grh.hop_limit", ah.grh.hop_limit.to_string()));
                }
                v
            }
            "IBV_QP_PATH_MTU" => vec![("path_mtu", mtu_name(attr.path_mtu))],
            "IBV_QP_TIMEOUT" => vec![("timeout", attr.timeout.to_string())],
            "IBV_QP_RETRY_CNT" => vec![("retry_cnt", attr.retry_cnt.to_string())],
            "IBV_QP_RNR_RETRY" => vec![("rnr_retry", attr.rnr_retry.to_string())],
            "IBV_QP_RQ_PSN" => vec![("rq_psn", Psn(attr.rq_psn).to_string())],
            "IBV_QP_MAX_QP_RD_ATOMIC" => vec![("max_rd_atomic", attr.max_rd_atomic.to_string())],
            "IBV_QP_MIN_RNR_TIMER" => vec![("min_rnr_timer", attr.min_rnr_timer.to_string())],
            "IBV_QP_SQ_PSN" => vec![("sq_psn", Psn(attr.sq_psn).to_string())],
            "IBV_QP_MAX_DEST_RD_ATOMIC" => {
                vec![("max_dest_rd_atomic", attr.max_dest_rd_atomic.to_string())]
            }
            "IBV_QP_DEST_QPN" => vec![("dest_qp_num", Qpn(attr.dest_qp_num).to_string())],
            _ => vec![],
        };
        out.push((name, fields));
    }
    out
}

/// Traces an `ibv_modify_qp` call: the state change, then one line per mask flag.
pub fn modify_qp(qp_num: u32, from: ibv_qp_state::Type, attr: &ibv_qp_attr, mask: ibv_qp_attr_mask) {
    let to = if mask.0 & ibv_qp_attr_mask::IBV_QP_STATE.0 != 0 { attr.qp_state } else { from };
    event("ibv_modify_qp")
        .kv("qp_num", Qpn(qp_num))
        .word(format!("{}→{}", state_name(from), state_name(to)))
        .emit();
    for (flag, fields) in mask_fields(attr, mask) {
        let mut line = detail(flag);
        for (key, value) in fields {
            line = line.kv(key, value);
        }
        line.emit();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ibverbs_sys::{ibv_gid, IBV_MTU_1024};

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
    fn rtr_mask_lists_each_flag_with_its_fields() {
        let mut attr = ibv_qp_attr {
            qp_state: ibv_qp_state::IBV_QPS_RTR,
            path_mtu: IBV_MTU_1024,
            dest_qp_num: 0x12,
            rq_psn: 0x345678,
            max_dest_rd_atomic: 1,
            min_rnr_timer: 12,
            ..Default::default()
        };
        attr.ah_attr.is_global = 1;
        attr.ah_attr.port_num = 1;
        attr.ah_attr.grh.dgid = ibv_gid { raw: [0; 16] };
        attr.ah_attr.grh.sgid_index = 1;
        attr.ah_attr.grh.hop_limit = 1;
        let mask = ibv_qp_attr_mask::IBV_QP_STATE
            | ibv_qp_attr_mask::IBV_QP_AV
            | ibv_qp_attr_mask::IBV_QP_PATH_MTU
            | ibv_qp_attr_mask::IBV_QP_DEST_QPN
            | ibv_qp_attr_mask::IBV_QP_RQ_PSN
            | ibv_qp_attr_mask::IBV_QP_MAX_DEST_RD_ATOMIC
            | ibv_qp_attr_mask::IBV_QP_MIN_RNR_TIMER;
        let fields = mask_fields(&attr, mask);
        let names: Vec<_> = fields.iter().map(|(n, _)| *n).collect();
        assert_eq!(
            names,
            [
                "IBV_QP_STATE",
                "IBV_QP_AV",
                "IBV_QP_PATH_MTU",
                "IBV_QP_RQ_PSN",
                "IBV_QP_MIN_RNR_TIMER",
                "IBV_QP_MAX_DEST_RD_ATOMIC",
                "IBV_QP_DEST_QPN"
            ]
        );
        assert_eq!(fields[0].1, [("qp_state", "IBV_QPS_RTR".to_string())]);
        assert_eq!(fields[2].1, [("path_mtu", "IBV_MTU_1024".to_string())]);
        assert_eq!(fields[3].1, [("rq_psn", "0x345678".to_string())]);
        assert_eq!(fields[6].1, [("dest_qp_num", "0x000012".to_string())]);
        assert!(fields[1].1.contains(&("ah_attr.grh.sgid_index", "1".to_string())));
    }

    #[test]
    fn state_and_flag_names() {
        assert_eq!(state_name(ibv_qp_state::IBV_QPS_RESET), "RESET");
        assert_eq!(state_name(ibv_qp_state::IBV_QPS_RTS), "RTS");
        assert_eq!(mtu_name(5), "IBV_MTU_4096");
        assert_eq!(wc_status_name(0), "IBV_WC_SUCCESS");
        assert_eq!(wc_status_name(12), "IBV_WC_RETRY_EXC_ERR");
        assert_eq!(access_names(0), "0");
        assert_eq!(access_names(3), "IBV_ACCESS_LOCAL_WRITE|IBV_ACCESS_REMOTE_WRITE");
        assert_eq!(SendFlags(2 | 8).to_string(), "IBV_SEND_SIGNALED|IBV_SEND_INLINE");
    }

    #[test]
    fn muted_events_do_not_format() {
        let _mute = mute();
        let e = event("ibv_post_send").kv("wr_id", 1);
        assert!(e.line.is_none());
    }
}

//! Redaction: snapshots keep what the program does, name what the device and the run pick.
//!
//! Every redaction is listed in this file: [`RULES`], the fixed patterns, each marked with
//! the pass it is part of (the host's insta filters, [`redact`]'s last pass, step 10's,
//! a decoded packet's); [`DEVICE_VALUES`], what the device reports; [`RUN_VALUES`], what
//! each side of a run picks. Only the CM's own address, which depends on the device, is
//! matched in code ([`redact_cm_values`](crate::cm::redact_cm_values)).

use std::sync::OnceLock;

use rdma_dissect::role::Role;
use regex::Regex;

use crate::device::Device;

/// Which redaction a rule of [`RULES`] is part of.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Pass {
    /// The filters of the tests that cannot ask the device ([`with_filters`](crate::with_filters)):
    /// `tests/host_vms/two_hosts/` runs on the host and boots two lab VMs. The device tests
    /// use [`redact`], which checks what it hides.
    Host,
    /// [`redact`]'s last pass, after the device's values and the run's.
    Device,
    /// Both [`Pass::Host`] and [`Pass::Device`].
    Both,
    /// Step 10's, after [`redact`] ([`redact_cm_values`](crate::cm::redact_cm_values)).
    Cm,
    /// The fields of a decoded RoCE packet (`lab/packets`) that the device picks
    /// ([`redact_packet`]).
    Wire,
}

/// Every redaction by a fixed pattern: (regex, replacement, the pass it is part of), each
/// pass applying its rules in this order. What depends on the device or on what a run
/// picked is in [`DEVICE_VALUES`] and `RUN_VALUES`; the CM's own address in
/// [`redact_cm_values`](crate::cm::redact_cm_values).
pub const RULES: &[(&str, &str, Pass)] = &[
    (r"\b(qp_num|dest_qp_num)=0x[0-9a-f]{6}", "$1=[QPN]", Pass::Host),
    (r"\b(rq_psn|sq_psn)=0x[0-9a-f]{6}", "$1=[PSN]", Pass::Host),
    (r"QPN 0x[0-9a-f]{6}", "QPN [QPN]", Pass::Host),
    (r"PSN 0x[0-9a-f]{6}", "PSN [PSN]", Pass::Host),
    (r"\b(lkey|sge\.lkey)=0x[0-9a-f]{8}", "$1=[LKEY]", Pass::Host),
    (r"\b(rkey|wr\.(?:rdma|atomic)\.rkey)=0x[0-9a-f]{8}", "$1=[RKEY]", Pass::Host),
    (r"RKEY 0x[0-9a-f]{8}", "RKEY [RKEY]", Pass::Host),
    (r"\b(addr|sge\.addr|wr\.(?:rdma|atomic)\.remote_addr)=0x[0-9a-f]{16}", "$1=[ADDR]", Pass::Host),
    (r"ADDR 0x[0-9a-f]{16}", "ADDR [ADDR]", Pass::Host),
    (r"\b(guid|node_guid)=0x[0-9a-f]{16}", "$1=[GUID]", Pass::Host),
    // The sizes the device grants: at least what was asked, which [`redact`] checks; more
    // where the device rounds up (rxe's CQ of 501 has 511 entries).
    (r"(?P<pre>\bcap\.\w+=\d+→)\d+", "${pre}[GRANTED]", Pass::Device),
    (r"(?P<pre>\bcq\.cqe=)\d+", "${pre}[GRANTED]", Pass::Device),
    (r"(?P<pre>\battr\.max_(?:wr|sge)=\d+→)\d+", "${pre}[GRANTED]", Pass::Device),
    (r"(?P<pre>\bcap\.max_inline_data=)\d+", "${pre}[GRANTED]", Pass::Device),
    (r"\bport=\d+", "port=[PORT]", Pass::Both),
    (r"\bnevents=\d+", "nevents=[COUNT]", Pass::Both),
    // How many WRs a writer that never signals got posted before its send queue was full
    // depends on how fast the device works them off (09 --break never-signal).
    (r"\bposted=\d+ of=", "posted=[COUNT] of=", Pass::Device),
    // Step 12's counts (the device tests run it with -q 2): -n (1000) counts messages over
    // all QPs, and each QP may still have one SEND posted when the count is reached, so each
    // side sends and receives 1000 or 1001, as the completions fall (on rxe, a server's
    // receives were 1001 on Linux 6.1 and 1000 on 6.12). Only srq_pingpong's line is
    // followed by the SRQ's event; any other count stays and fails the snapshot.
    (
        r"(?m)^(ping-pong +)sends=100[01] recvs=100[01]\n(ibv_get_async_event)",
        "${1}sends=[1000|1001] recvs=[1000|1001]\n${2}",
        Pass::Device,
    ),
    // 08's watchdog says how far the ping-pong got when the peer fell silent.
    (
        r"after \d+ of (\d+) sends and \d+ of (\d+) receives",
        "after [COUNT] of $1 sends and [COUNT] of $2 receives",
        Pass::Both,
    ),
    // Kernel counters the two-host lessons print (tests/host_vms/two_hosts/lessons.rs): how many times
    // something failed or was retried depends on time; whether it did (0 or not) does not.
    (
        r"\b(sent_pkts|send_err|completer_retry_err|retry_exceeded_err|duplicate_request|rcvd_seq_err|carrier_changes|FragFails|OutDestUnreachs)=[1-9]\d*",
        "$1=[COUNT]",
        Pass::Host,
    ),
    // What a completion error's explanation counted (src/poll.rs, stage 08's watchdog).
    (r"\b\d+ (retransmit timeouts|work requests|time\(s\)|packet\(s\))", "[COUNT] $1", Pass::Host),
    (r"unlike the \d+ of its kind", "unlike the [COUNT] of its kind", Pass::Host),
    (r"in \d+\.\d+ seconds = \d+\.\d+ ", "in [TIME] seconds = [RATE] ", Pass::Both),
    // What the kernel's CM chooses differently from one kernel to the next (measured:
    // Linux 6.1 and 6.12): the local ACK timeout (19 and 17) and, at INIT, the FLUSH access
    // bits that 6.12 grants besides remote write, read and atomics.
    (r"\btimeout=\d+\b", "timeout=[CM_TIMEOUT]", Pass::Cm),
    (
        r"(qp_access_flags=IBV_ACCESS_REMOTE_WRITE\|IBV_ACCESS_REMOTE_READ\|IBV_ACCESS_REMOTE_ATOMIC)(?:\|IBV_ACCESS_FLUSH_GLOBAL\|IBV_ACCESS_FLUSH_PERSISTENT)?",
        "${1}[|FLUSH]",
        Pass::Cm,
    ),
    // A RETH's virtual address and rkey, whatever tshark writes them as.
    (r"(^| )va=[^ ]*", "${1}va=[ADDR]", Pass::Wire),
    (r"(^| )rkey=[^ ]*", "${1}rkey=[RKEY]", Pass::Wire),
    // A datagram's source QP (its DETH): the number the sender's device gave its QP.
    (r"(^| )src_qp=[^ ]*", "${1}src_qp=[QPN]", Pass::Wire),
];

/// The rules of `pass` (a rule of [`Pass::Both`] is in the host's and the device's), in
/// order.
pub fn rules(pass: Pass) -> impl Iterator<Item = (&'static str, &'static str)> {
    RULES
        .iter()
        .filter(move |(.., p)| *p == pass || (*p == Pass::Both && matches!(pass, Pass::Host | Pass::Device)))
        .map(|(re, with, _)| (*re, *with))
}

/// `text` with the rules of `pass` applied, in order (compiled once per process).
pub(crate) fn apply(pass: Pass, text: &str) -> String {
    static COMPILED: OnceLock<Vec<(Pass, Regex, &str)>> = OnceLock::new();
    let compiled = COMPILED.get_or_init(|| {
        [Pass::Host, Pass::Device, Pass::Cm, Pass::Wire]
            .into_iter()
            .flat_map(|pass| rules(pass).map(move |(re, with)| (pass, Regex::new(re).unwrap(), with)))
            .collect()
    });
    let mut text = text.to_string();
    for (_, re, with) in compiled.iter().filter(|(p, ..)| *p == pass) {
        text = re.replace_all(&text, *with).into_owned();
    }
    text
}

/// The fields of a decoded RoCE packet (`lab/packets`'s words after the opcode) with what
/// the device picked named: a RETH's `va=[ADDR]` and `rkey=[RKEY]`, a DETH's `src_qp=[QPN]`.
pub fn redact_packet(rest: &str) -> String {
    apply(Pass::Wire, rest)
}

/// What the device reports, by where the trace or an error message shows it: (text before
/// the value, fact, placeholder). A value is replaced only when it *is* the device's own
/// answer (`ibv_devinfo`, or the device, port and GID index the test chose), so a snapshot
/// passes on any device, and a trace that misreports its device keeps the wrong number and
/// fails. `[DEVICE]` is the name, `[IB_PORT]` the port, `[GID_INDEX]` and `[GID]` the GID
/// chosen; the rest are `ibv_devinfo`'s names. A port's GID table (one line per address of
/// its netdev) becomes one `[GID_TABLE]` line once every entry matches `ibv_devinfo`.
pub const DEVICE_VALUES: &[(&str, &str, &str)] = &[
    (r"\bnum_devices=", "num_devices", "NUM_DEVICES"),
    (r"this host has: ", "devices", "DEVICES"),
    (r"\b(?:name|device)=", "device", "DEVICE"),
    (r"(?:cause: |\bof )", "device", "DEVICE"),
    (r"-d ", "first_device", "FIRST_DEVICE"),
    (r"\b(?:guid|node_guid)=", "node_guid", "NODE_GUID"),
    (r"\bfw_ver=", "fw_ver", "FW_VER"),
    (r"\bvendor_id=", "vendor_id", "VENDOR_ID"),
    (r"\bphys_port_cnt=", "phys_port_cnt", "PHYS_PORT_CNT"),
    (r"\bhas ", "phys_port_cnt", "PHYS_PORT_CNT"),
    (r"\busing port ", "port_past_end", "PHYS_PORT_CNT+1"),
    (r"\bmax_qp=", "max_qp", "MAX_QP"),
    (r"\bmax_qp_wr=", "max_qp_wr", "MAX_QP_WR"),
    (r"\bmax_sge=", "max_sge", "MAX_SGE"),
    (r"\bmax_cq=", "max_cq", "MAX_CQ"),
    (r"\bmax_cqe=", "max_cqe", "MAX_CQE"),
    (r"\bmax_mr=", "max_mr", "MAX_MR"),
    (r"\bmax_mr_size=", "max_mr_size", "MAX_MR_SIZE"),
    (r"\bmax_pd=", "max_pd", "MAX_PD"),
    (r"\b(?:port_num|ah_attr\.port_num)=", "ib_port", "IB_PORT"),
    (r"(?:\blid=|\bdlid=|LID )", "lid", "LID"),
    (r"\blink_layer=", "link_layer", "LINK_LAYER"),
    (r"\bmax_mtu=", "max_mtu", "MAX_MTU"),
    (r"\bactive_mtu=", "active_mtu", "ACTIVE_MTU"),
    // 11's `--break size-above-mtu` sends twice the active MTU, into buffers with room for
    // the GRH's 40 bytes: that length, and only that one, is named for what it is (a
    // length that is not twice the MTU keeps its number and fails the snapshot).
    (r"\blength=", "size_above_mtu", "2*ACTIVE_MTU+40"),
    (r"\bgid_tbl_len=", "gid_tbl_len", "GID_TBL_LEN"),
    (r"\bentries=", "gid_entries", "GID_ENTRIES"),
    (r"\b(?:index|sgid_index)=", "gid_index", "GID_INDEX"),
    (r"(?:\bgid=|\bdgid=|, GID )", "gid", "GID"),
    (r"\bip\.(?:src|dst)=", "gid_ipv4", "GID_IPV4"),
    // 01 with an empty GID index (tests/device/break_it.rs picks the first one).
    (r"(?:\(index |GID entry |none is at )", "empty_gid_index", "EMPTY_GID_INDEX"),
    (r"holds a GID: ", "gid_list", "GID_LIST"),
];

/// Values each run picks anew, by key: (pattern with the text before the value as `pre` and
/// the value as `v`, kinds the value may be, whose it should be). A value becomes
/// `[KIND:server]` or `[KIND:client]` after the side that picked it (a single process:
/// `[KIND]`), so a snapshot shows who talks to whom — the server's `dest_qp_num` is
/// `[QPN:client]` — and `[KIND:other]` when it is neither side's (a `--break` case that
/// connects to a QPN nobody has). Longer keys come first: `\brkey=` also matches in
/// `wr.rdma.rkey=`.
const RUN_VALUES: &[(&str, &[Kind], Whose)] = &[
    (r"(?P<pre>\bdest_qp_num=)(?P<v>0x[0-9a-f]{6})", &[Kind::Qpn], Whose::Peer),
    (r"(?P<pre>\bqp_num=)(?P<v>0x[0-9a-f]{6})", &[Kind::Qpn], Whose::Own),
    (r"(?P<pre>\brq_psn=)(?P<v>0x[0-9a-f]{6})", &[Kind::Psn], Whose::Peer),
    (r"(?P<pre>\bsq_psn=)(?P<v>0x[0-9a-f]{6})", &[Kind::Psn], Whose::Own),
    (r"(?P<pre>\bwr\.(?:rdma|atomic)\.rkey=)(?P<v>0x[0-9a-f]{8})", &[Kind::Rkey, Kind::Lkey], Whose::Peer),
    (r"(?P<pre>\brkey=)(?P<v>0x[0-9a-f]{8})", &[Kind::Rkey, Kind::Lkey], Whose::Own),
    (r"(?P<pre>\blkey=)(?P<v>0x[0-9a-f]{8})", &[Kind::Lkey, Kind::Rkey], Whose::Own),
    (r"(?P<pre>\bwr\.(?:rdma|atomic)\.remote_addr=)(?P<v>0x[0-9a-f]{16})", &[Kind::Addr], Whose::Peer),
    (r"(?P<pre>\baddr=)(?P<v>0x[0-9a-f]{16})", &[Kind::Addr], Whose::Own),
    // rc_pingpong's address lines: ours (`loopback:` when a QP talks to itself), the peer's.
    (r"(?m)(?P<pre>^  (?:local address|loopback): .*?QPN )(?P<v>0x[0-9a-f]{6})", &[Kind::Qpn], Whose::Own),
    (r"(?m)(?P<pre>^  (?:local address|loopback): .*?PSN )(?P<v>0x[0-9a-f]{6})", &[Kind::Psn], Whose::Own),
    (r"(?m)(?P<pre>^  (?:local address|loopback): .*?RKEY )(?P<v>0x[0-9a-f]{8})", &[Kind::Rkey], Whose::Own),
    (r"(?m)(?P<pre>^  (?:local address|loopback): .*?ADDR )(?P<v>0x[0-9a-f]{16})", &[Kind::Addr], Whose::Own),
    (r"(?m)(?P<pre>^  remote address: .*?QPN )(?P<v>0x[0-9a-f]{6})", &[Kind::Qpn], Whose::Peer),
    (r"(?m)(?P<pre>^  remote address: .*?PSN )(?P<v>0x[0-9a-f]{6})", &[Kind::Psn], Whose::Peer),
    (r"(?m)(?P<pre>^  remote address: .*?RKEY )(?P<v>0x[0-9a-f]{8})", &[Kind::Rkey], Whose::Peer),
    (r"(?m)(?P<pre>^  remote address: .*?ADDR )(?P<v>0x[0-9a-f]{16})", &[Kind::Addr], Whose::Peer),
];

/// A run-picked value's kind, named as in its placeholder.
#[derive(Clone, Copy, PartialEq, Debug)]
pub enum Kind {
    Qpn,
    Psn,
    Lkey,
    Rkey,
    Addr,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Qpn => "QPN",
            Kind::Psn => "PSN",
            Kind::Lkey => "LKEY",
            Kind::Rkey => "RKEY",
            Kind::Addr => "ADDR",
        }
    }
}

/// Whose value a key should hold: the printing side's own, or its peer's.
#[derive(Clone, Copy)]
enum Whose {
    Own,
    Peer,
}

/// The values each side of one run picked, read from its own trace: the QPN of the QP it
/// created, the PSN it announced, the addresses and keys of the MRs it registered.
pub struct Picks {
    /// Which process picked them — the server, the client, or (`None`) the one process of
    /// 01–04 and of 03/04's `--break` cases, whose QP talks to itself — and what it picked.
    sides: Vec<(Option<Role>, Values)>,
}

impl Picks {
    /// One process and its trace.
    pub fn alone(trace: &str) -> Picks {
        Picks { sides: vec![(None, picked(trace))] }
    }

    /// A server and a client, and their traces.
    pub fn pair(server: &str, client: &str) -> Picks {
        Picks { sides: vec![(Some(Role::Server), picked(server)), (Some(Role::Client), picked(client))] }
    }

    /// The sides of a text as [`redact_sections`] splits it: `--- server` / `--- client`
    /// sections (a break-it trace snapshot), or one process.
    pub fn from_sections(text: &str) -> Picks {
        let section = |name: &str| {
            let start = text.find(&format!("--- {name}"))?;
            let body = &text[start..];
            let body = &body[body.find('\n').map_or(body.len(), |i| i + 1)..];
            Some(body[..body.find("\n--- ").map_or(body.len(), |i| i + 1)].to_string())
        };
        match (section("server"), section("client")) {
            (Some(server), Some(client)) => Picks::pair(&server, &client),
            _ => Picks::alone(text),
        }
    }

    /// The placeholder for `value` of one of `kinds`, looking first at `order`'s sides.
    ///
    /// The side the value should come from (`order[0]`) is searched for `kinds` in order,
    /// any other side for them in reverse: a value that is both a side's lkey and its rkey
    /// is named by the key that side would use it as. That matters where the device gives
    /// an MR without remote access an rkey equal to its lkey (rxe on Linux 6.12; 6.1 gives
    /// it 0): 09's `wrong-rkey` writes with the client's lkey, `[LKEY:client]` on both.
    fn label(&self, kinds: &[Kind], value: &str, order: &[Option<Role>]) -> String {
        for (i, side) in order.iter().enumerate() {
            let Some((_, values)) = self.sides.iter().find(|(s, _)| s == side) else { continue };
            let mut tried: Vec<Kind> = kinds.to_vec();
            if i > 0 {
                tried.reverse();
            }
            for kind in tried {
                if values.iter().any(|(k, v)| *k == kind && v == value) {
                    return match side {
                        None => format!("[{}]", kind.name()),
                        Some(role) => format!("[{}:{}]", kind.name(), role.label()),
                    };
                }
            }
        }
        format!("[{}:other]", kinds[0].name())
    }
}

/// The values one process picked, each with its kind.
type Values = Vec<(Kind, String)>;

fn picked(trace: &str) -> Values {
    static PICKED: OnceLock<[(Regex, &[Kind]); 4]> = OnceLock::new();
    let rules = PICKED.get_or_init(|| {
        [
            (Regex::new(r"(?m)^(?:ibv|rdma)_create_qp .*\bqp_num=(0x[0-9a-f]{6})").unwrap(), &[Kind::Qpn][..]),
            (Regex::new(r"(?m)^  (?:local address|loopback): .*\bPSN (0x[0-9a-f]{6})").unwrap(), &[Kind::Psn][..]),
            // The PSN the CM chose: what rdma_init_qp_attr gives for RTS (step 10).
            (
                Regex::new(
                    r"(?m)^rdma_init_qp_attr .*IBV_QPS_RTS\n(?:  .*\n)*?  IBV_QP_SQ_PSN +sq_psn=(0x[0-9a-f]{6})",
                )
                .unwrap(),
                &[Kind::Psn][..],
            ),
            (
                Regex::new(r"(?m)^ibv_reg_mr +addr=(0x[0-9a-f]{16}) .*\blkey=(0x[0-9a-f]{8}) rkey=(0x[0-9a-f]{8})")
                    .unwrap(),
                &[Kind::Addr, Kind::Lkey, Kind::Rkey][..],
            ),
        ]
    });
    let mut values = Vec::new();
    for (re, kinds) in rules {
        for caps in re.captures_iter(trace) {
            for (i, kind) in kinds.iter().enumerate() {
                values.push((*kind, caps[i + 1].to_string()));
            }
        }
    }
    values
}

/// `text`, printed by `side` of `run` on `dev`, as its snapshot shows it: every value the
/// device reports or the run picks behind a named placeholder (see [`DEVICE_VALUES`],
/// `RUN_VALUES`, then [`RULES`] of [`Pass::Device`]). Panics if a granted size is below the
/// one asked.
pub fn redact(text: &str, side: Option<Role>, run: &Picks, dev: &Device) -> String {
    check_granted(text);
    let mut text = text.to_string();
    // Other devices' lines in ibv_get_device_list's listing: only the count stays.
    for other in dev.all.iter().filter(|d| **d != dev.name) {
        let re = Regex::new(&format!(r"(?m)^  device +name={} guid=0x[0-9a-f]{{16}}\n", regex::escape(other))).unwrap();
        text = re.replace_all(&text, "").into_owned();
    }
    // The GID table: each line that is exactly an entry ibv_devinfo lists, then one line.
    for (index, gid, ty) in &dev.gids {
        let re = Regex::new(&format!(
            r"(?m)^(?P<pre>  gid +)index={index} gid={} gid_type={}$",
            regex::escape(gid),
            regex::escape(ty)
        ))
        .unwrap();
        text = re.replace_all(&text, "${pre}[GID_TABLE]").into_owned();
    }
    let fixed = fixed_patterns();
    text = fixed.gid_table.replace_all(&text, "$1").into_owned();
    for (pre, fact, name) in DEVICE_VALUES {
        let re = Regex::new(&format!(r"(?m)(?P<pre>{pre}){}(?P<end>[ ,)]|$)", regex::escape(&dev.fact(fact)))).unwrap();
        text = re.replace_all(&text, format!("${{pre}}[{name}]${{end}}").as_str()).into_owned();
    }
    let peer = side.map(Role::peer);
    for ((_, kinds, whose), re) in RUN_VALUES.iter().zip(&fixed.run) {
        let order = match whose {
            Whose::Own => [side, peer],
            Whose::Peer => [peer, side],
        };
        text = re
            .replace_all(&text, |caps: &regex::Captures| {
                format!("{}{}", &caps["pre"], run.label(kinds, &caps["v"], &order))
            })
            .into_owned();
    }
    apply(Pass::Device, &text)
}

/// The patterns of [`redact`] that do not depend on the device: a run's values and the
/// folded GID table.
struct FixedPatterns {
    gid_table: Regex,
    run: Vec<Regex>,
}

/// Compiled once per process: [`redact`] runs for every trace a test or the grader checks,
/// and compiling its patterns anew each time was most of a `lab/check` under emulation.
fn fixed_patterns() -> &'static FixedPatterns {
    static FIXED: OnceLock<FixedPatterns> = OnceLock::new();
    FIXED.get_or_init(|| FixedPatterns {
        gid_table: Regex::new(r"(?m)^(  gid +\[GID_TABLE\]\n)(?:  gid +\[GID_TABLE\]\n)+").unwrap(),
        run: RUN_VALUES.iter().map(|(pattern, ..)| Regex::new(pattern).unwrap()).collect(),
    })
}

/// A text of several sides, each after a `--- server…` or `--- client…` line (the break-it
/// snapshots), redacted side by side; before any such line, the text is the one process's.
pub fn redact_sections(text: &str, run: &Picks, dev: &Device) -> String {
    let mut out = String::new();
    let mut side = None;
    let mut section = String::new();
    for line in text.split_inclusive('\n') {
        let next = if line.starts_with("--- server") {
            Some(Some(Role::Server))
        } else if line.starts_with("--- client") {
            Some(Some(Role::Client))
        } else {
            None
        };
        if let Some(next) = next {
            out += &redact(&section, side, run, dev);
            out += line;
            section.clear();
            side = next;
        } else {
            section += line;
        }
    }
    out + &redact(&section, side, run, dev)
}

/// Every size a device grants is at least the one asked: `cap.max_send_wr=1→N`,
/// `attr.max_wr=500→N` (an SRQ) and `ibv_create_cq cqe=A … cq.cqe=B`.
fn check_granted(text: &str) {
    static CAP: OnceLock<(Regex, Regex)> = OnceLock::new();
    let (cap, cq) = CAP.get_or_init(|| {
        (
            Regex::new(r"\b((?:cap|attr)\.\w+)=(\d+)→(\d+)").unwrap(),
            Regex::new(r"\bcqe=(\d+) .*\bcq\.cqe=(\d+)").unwrap(),
        )
    });
    for c in cap.captures_iter(text) {
        let (asked, got): (u64, u64) = (c[2].parse().unwrap(), c[3].parse().unwrap());
        assert!(got >= asked, "the device granted {} = {got}, less than the {asked} asked:\n{text}", &c[1]);
    }
    for c in cq.captures_iter(text) {
        let (asked, got): (u64, u64) = (c[1].parse().unwrap(), c[2].parse().unwrap());
        assert!(got >= asked, "the device made a CQ of {got} entries for {asked} asked:\n{text}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `text` through the host's filters, as insta applies them: each rule in order.
    fn host(text: &str) -> String {
        rules(Pass::Host)
            .fold(text.to_string(), |t, (re, with)| Regex::new(re).unwrap().replace_all(&t, with).into_owned())
    }

    #[test]
    fn each_pass_takes_its_rules_and_the_shared_ones_in_table_order() {
        let placeholders = |pass| rules(pass).map(|(_, with)| with).collect::<Vec<_>>();
        let host = placeholders(Pass::Host);
        assert_eq!(host.len(), 17, "{host:?}");
        assert_eq!(
            &host[10..13],
            ["port=[PORT]", "nevents=[COUNT]", "after [COUNT] of $1 sends and [COUNT] of $2 receives"]
        );
        assert_eq!(host.last(), Some(&"in [TIME] seconds = [RATE] "));
        let device = placeholders(Pass::Device);
        assert_eq!(
            device,
            [
                "${pre}[GRANTED]",
                "${pre}[GRANTED]",
                "${pre}[GRANTED]",
                "${pre}[GRANTED]",
                "port=[PORT]",
                "nevents=[COUNT]",
                "posted=[COUNT] of=",
                "${1}sends=[1000|1001] recvs=[1000|1001]\n${2}",
                "after [COUNT] of $1 sends and [COUNT] of $2 receives",
                "in [TIME] seconds = [RATE] ",
            ]
        );
        assert_eq!(placeholders(Pass::Cm), ["timeout=[CM_TIMEOUT]", "${1}[|FLUSH]"]);
        assert_eq!(placeholders(Pass::Wire), ["${1}va=[ADDR]", "${1}rkey=[RKEY]", "${1}src_qp=[QPN]"]);
    }

    #[test]
    fn only_step_12_s_counts_are_named_and_only_within_their_bound() {
        let srq = "ping-pong                    sends=1001 recvs=1000\nibv_get_async_event          event_type=X\n";
        assert_eq!(
            apply(Pass::Device, srq),
            "ping-pong                    sends=[1000|1001] recvs=[1000|1001]\nibv_get_async_event          event_type=X\n"
        );
        let past = srq.replace("1001", "1002");
        assert_eq!(apply(Pass::Device, &past), past);
        let rc = "ping-pong                    sends=1000 recvs=1000\nibv_destroy_qp\n";
        assert_eq!(apply(Pass::Device, rc), rc);
    }

    #[test]
    fn the_host_filters_name_every_value_a_run_picks() {
        assert_eq!(
            host("[h1] ibv_create_qp qp_num=0x000011 rkey=0x00001234 addr=0x00005555deadbeef guid=0x0102030405060708 port=21000"),
            "[h1] ibv_create_qp qp_num=[QPN] rkey=[RKEY] addr=[ADDR] guid=[GUID] port=[PORT]"
        );
        assert_eq!(
            host("  local address:  LID 0x0000, QPN 0x000011, PSN 0x0a1b2c, GID ::ffff:192.0.2.1"),
            "  local address:  LID 0x0000, QPN [QPN], PSN [PSN], GID ::ffff:192.0.2.1"
        );
        assert_eq!(
            host("rxe0: sent_pkts=12 send_err=0 completer_retry_err=3 after 5 of 9 sends and 4 of 9 receives"),
            "rxe0: sent_pkts=[COUNT] send_err=0 completer_retry_err=[COUNT] after [COUNT] of 9 sends and [COUNT] of 9 receives"
        );
        assert_eq!(
            host("4096000 bytes in 0.12 seconds = 273.07 Mbit/sec; 7 retransmit timeouts"),
            "4096000 bytes in [TIME] seconds = [RATE] Mbit/sec; [COUNT] retransmit timeouts"
        );
    }

    #[test]
    fn size_above_mtu_s_length_is_named_on_any_mtu_and_only_when_it_is_twice_the_mtu_and_the_grh() {
        // The lab's rxe0 (active MTU 1024), and the same device with an active MTU of 4096.
        let lab = include_str!("../../book/src/output/device.txt");
        let trace = |len: u32| {
            format!("ibv_reg_mr                   length={len} access=IBV_ACCESS_LOCAL_WRITE\nibv_post_recv                count=500 wr_id=1 sge.length={len}\n")
        };
        let named = trace(0).replace("=0", "=[2*ACTIVE_MTU+40]");
        for (mtu, bytes) in [("1024 (3)", 1024), ("4096 (5)", 4096)] {
            let dev = Device::parse(&lab.replace("active_mtu:\t\t1024 (3)", &format!("active_mtu:\t\t{mtu}")));
            assert_eq!(dev.fact("active_mtu"), format!("IBV_MTU_{bytes}"));
            let redacted = |len| redact(&trace(len), None, &Picks::alone(""), &dev);
            assert_eq!(redacted(2 * bytes + 40), named, "MTU {bytes}");
            // Any other length is shown as it is: the MTU itself, the size the step checks.
            for len in [bytes + 40, 2 * bytes, 4 * bytes + 40] {
                assert_eq!(redacted(len), trace(len), "MTU {bytes}, length {len}");
            }
        }
    }

    #[test]
    fn a_packet_keeps_every_field_but_the_reth_s_address_and_key() {
        assert_eq!(
            redact_packet("RETH va=0x00005555deadbeef rkey=0x00001234 dmalen=4096 ack-req"),
            "RETH va=[ADDR] rkey=[RKEY] dmalen=4096 ack-req"
        );
        assert_eq!(redact_packet("va=1  rkey= xva=2 rkeys=3"), "va=[ADDR]  rkey=[RKEY] xva=2 rkeys=3");
        assert_eq!(redact_packet("msn=1"), "msn=1");
    }
}

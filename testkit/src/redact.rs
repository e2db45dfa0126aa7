//! Redaction: snapshots keep what the program does, name what the device and the run pick.

use std::sync::OnceLock;

use rdma_dissect::role::Role;
use regex::Regex;

use crate::device::Device;

/// The filters of the tests that cannot ask the device: `tests/host_vms/two_hosts.rs` runs on the
/// host and boots two lab VMs. The device tests use [`redact`], which checks what it hides.
pub const FILTERS: &[(&str, &str)] = &[
    (r"\b(qp_num|dest_qp_num)=0x[0-9a-f]{6}", "$1=[QPN]"),
    (r"\b(rq_psn|sq_psn)=0x[0-9a-f]{6}", "$1=[PSN]"),
    (r"QPN 0x[0-9a-f]{6}", "QPN [QPN]"),
    (r"PSN 0x[0-9a-f]{6}", "PSN [PSN]"),
    (r"\b(lkey|sge\.lkey)=0x[0-9a-f]{8}", "$1=[LKEY]"),
    (r"\b(rkey|wr\.rdma\.rkey)=0x[0-9a-f]{8}", "$1=[RKEY]"),
    (r"RKEY 0x[0-9a-f]{8}", "RKEY [RKEY]"),
    (r"\b(addr|sge\.addr|wr\.rdma\.remote_addr)=0x[0-9a-f]{16}", "$1=[ADDR]"),
    (r"ADDR 0x[0-9a-f]{16}", "ADDR [ADDR]"),
    (r"\b(guid|node_guid)=0x[0-9a-f]{16}", "$1=[GUID]"),
    (r"\bport=\d+", "port=[PORT]"),
    (r"\bnevents=\d+", "nevents=[COUNT]"),
    // 08's watchdog says how far the ping-pong got when the peer fell silent.
    (r"after \d+ of (\d+) sends and \d+ of (\d+) receives", "after [COUNT] of $1 sends and [COUNT] of $2 receives"),
    // Kernel counters the two-host lessons print (tests/host_vms/two_hosts.rs): how many times
    // something failed or was retried depends on time; whether it did (0 or not) does not.
    (
        r"\b(sent_pkts|send_err|completer_retry_err|retry_exceeded_err|duplicate_request|rcvd_seq_err|carrier_changes|FragFails|OutDestUnreachs)=[1-9]\d*",
        "$1=[COUNT]",
    ),
    // What a completion error's explanation counted (src/poll.rs, stage 08's watchdog).
    (r"\b\d+ (retransmit timeouts|work requests|time\(s\)|packet\(s\))", "[COUNT] $1"),
    (r"unlike the \d+ of its kind", "unlike the [COUNT] of its kind"),
    (r"in \d+\.\d+ seconds = \d+\.\d+ ", "in [TIME] seconds = [RATE] "),
];

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
    (r"\bgid_tbl_len=", "gid_tbl_len", "GID_TBL_LEN"),
    (r"\bentries=", "gid_entries", "GID_ENTRIES"),
    (r"\b(?:index|sgid_index)=", "gid_index", "GID_INDEX"),
    (r"(?:\bgid=|\bdgid=|, GID )", "gid", "GID"),
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
    (r"(?P<pre>\bwr\.rdma\.rkey=)(?P<v>0x[0-9a-f]{8})", &[Kind::Rkey, Kind::Lkey], Whose::Peer),
    (r"(?P<pre>\brkey=)(?P<v>0x[0-9a-f]{8})", &[Kind::Rkey, Kind::Lkey], Whose::Own),
    (r"(?P<pre>\blkey=)(?P<v>0x[0-9a-f]{8})", &[Kind::Lkey, Kind::Rkey], Whose::Own),
    (r"(?P<pre>\bwr\.rdma\.remote_addr=)(?P<v>0x[0-9a-f]{16})", &[Kind::Addr], Whose::Peer),
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

/// What is left: values that depend on time and load, and the sizes the device grants
/// (at least what was asked, which [`redact`] checks; more where the device rounds up:
/// rxe's CQ of 501 has 511 entries).
const OTHER_VALUES: &[(&str, &str)] = &[
    (r"(?P<pre>\bcap\.\w+=\d+→)\d+", "${pre}[GRANTED]"),
    (r"(?P<pre>\bcq\.cqe=)\d+", "${pre}[GRANTED]"),
    (r"(?P<pre>\bcap\.max_inline_data=)\d+", "${pre}[GRANTED]"),
    (r"\bport=\d+", "port=[PORT]"),
    (r"\bnevents=\d+", "nevents=[COUNT]"),
    // How many WRs a writer that never signals got posted before its send queue was full
    // depends on how fast the device works them off (09 --break never-signal).
    (r"\bposted=\d+ of=", "posted=[COUNT] of="),
    // 08's watchdog says how far the ping-pong got when the peer fell silent.
    (r"after \d+ of (\d+) sends and \d+ of (\d+) receives", "after [COUNT] of $1 sends and [COUNT] of $2 receives"),
    (r"in \d+\.\d+ seconds = \d+\.\d+ ", "in [TIME] seconds = [RATE] "),
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
/// [`RUN_VALUES`], [`OTHER_VALUES`]). Panics if a granted size is below the one asked.
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
    for ((_, replacement), re) in OTHER_VALUES.iter().zip(&fixed.other) {
        text = re.replace_all(&text, *replacement).into_owned();
    }
    text
}

/// The patterns of [`redact`] that do not depend on the device: a run's values, the other
/// values, the folded GID table.
struct FixedPatterns {
    gid_table: Regex,
    run: Vec<Regex>,
    other: Vec<Regex>,
}

/// Compiled once per process: [`redact`] runs for every trace a test or the grader checks,
/// and compiling its patterns anew each time was most of a `lab/check` under emulation.
fn fixed_patterns() -> &'static FixedPatterns {
    static FIXED: OnceLock<FixedPatterns> = OnceLock::new();
    FIXED.get_or_init(|| FixedPatterns {
        gid_table: Regex::new(r"(?m)^(  gid +\[GID_TABLE\]\n)(?:  gid +\[GID_TABLE\]\n)+").unwrap(),
        run: RUN_VALUES.iter().map(|(pattern, ..)| Regex::new(pattern).unwrap()).collect(),
        other: OTHER_VALUES.iter().map(|(pattern, _)| Regex::new(pattern).unwrap()).collect(),
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

/// Every size a device grants is at least the one asked: `cap.max_send_wr=1→N` and
/// `ibv_create_cq cqe=A … cq.cqe=B`.
fn check_granted(text: &str) {
    static CAP: OnceLock<(Regex, Regex)> = OnceLock::new();
    let (cap, cq) = CAP.get_or_init(|| {
        (Regex::new(r"\b(cap\.\w+)=(\d+)→(\d+)").unwrap(), Regex::new(r"\bcqe=(\d+) .*\bcq\.cqe=(\d+)").unwrap())
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

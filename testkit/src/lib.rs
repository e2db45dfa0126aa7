//! What the device tests share: the device to use and what it says about itself, running
//! step binaries with a bounded wait, server/client pairs, TCP ports no two tests share,
//! the one redaction table for snapshots, and the book's real outputs.

use std::collections::BTreeMap;
use std::io::Read;
use std::net::TcpListener;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use rdma_dissect::role::Role;

pub mod cm;
use regex::Regex;

/// The project's directory (this crate is `testkit/` in it).
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("testkit/ is inside the project").to_path_buf()
}

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

/// Runs `f` with [`FILTERS`] applied to snapshots, and the settings of [`snapshots`].
pub fn with_filters(f: impl FnOnce()) {
    let mut settings = snapshot_settings();
    for (regex, replacement) in FILTERS {
        settings.add_filter(regex, *replacement);
    }
    settings.bind(f);
}

/// Runs `f` (which asserts snapshots of texts already passed through [`redact`]) with the
/// settings every snapshot here uses.
pub fn snapshots(f: impl FnOnce()) {
    snapshot_settings().bind(f);
}

/// Every snapshot lives in `tests/snapshots/`, named `<file>__<name>.snap` after the test
/// file that makes it (`steps__08_poll_cq-client.snap`). The tests are modules of one
/// binary per group (`tests/device/steps.rs`), so insta's own prefix would be the module
/// path (`device__steps__`) and its directory the group's: the callers spell the prefix,
/// and the path points one level up.
fn snapshot_settings() -> insta::Settings {
    let mut settings = insta::Settings::clone_current();
    settings.set_prepend_module_to_snapshot(false);
    settings.set_snapshot_path("../snapshots");
    settings
}

/// Device tests share one machine's device and its CPUs: a busy-polling ping-pong needs
/// both vCPUs of the lab VM, so they run one at a time (tests in one binary are threads).
pub fn device_lock() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    let guard = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    require_device();
    guard
}

/// Panics (the test fails, it is not skipped) when this machine has no RDMA device.
pub fn require_device() {
    let dir = Path::new("/sys/class/infiniband");
    let any = std::fs::read_dir(dir).map(|mut d| d.next().is_some()).unwrap_or(false);
    assert!(any, "no RDMA device: run `lab/test` or `lab/run cargo test`");
}

// ---------------------------------------------------------------------------------------
// The device under test
// ---------------------------------------------------------------------------------------

/// The device, port and GID index every device test uses, and what the device says about
/// itself (`ibv_devinfo`, rdma-core's own tool, not our code).
///
/// They come from `RDMA_DEVICE`, `RDMA_IB_PORT` and `RDMA_GID_INDEX`. Unset, they default to
/// the first device `ibv_devinfo -l` lists, port 1, and the index of that port's first
/// RoCE v2 IPv4-mapped GID (`::ffff:a.b.c.d`; 0 on InfiniBand) — in the lab VM: `rxe0`,
/// 1, 1. The lab sets all three to the device it created.
pub struct Device {
    /// The device's name (`-d`).
    pub name: String,
    /// The port (`-i`).
    pub port: u8,
    /// The GID index (`-g`).
    pub gid_index: u32,
    /// Every device, in `ibv_get_device_list` order (`ibv_devinfo -l`).
    pub all: Vec<String>,
    /// `key: value` lines of `ibv_devinfo -v -d NAME -i PORT`.
    info: BTreeMap<String, String>,
    /// The port's GID table as `ibv_devinfo -v` lists it (non-empty entries only): index,
    /// GID in `inet_ntop` form, and type as our trace writes it (`RoCE_v2`).
    pub gids: Vec<(u32, String, String)>,
    /// What all this was read from: the choice, then both `ibv_devinfo` outputs. The book
    /// keeps it next to its outputs (`book/src/output/device.txt`) so they can be checked
    /// against the snapshots without the device.
    pub text: String,
}

/// The device of this test run, asked once; panics (the test fails) without one.
pub fn device() -> &'static Device {
    static DEVICE: OnceLock<Device> = OnceLock::new();
    DEVICE.get_or_init(Device::probe)
}

/// `program args` must succeed; its stdout.
fn command_text(program: &str, args: &[&str]) -> String {
    let out = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {program} (Debian: ibverbs-utils): {e}"));
    assert!(
        out.status.success(),
        "{program} {} failed ({}): {}— is there an RDMA device? Run the tests with `lab/test` or \
         `lab/run cargo test`",
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

impl Device {
    fn probe() -> Device {
        require_device();
        let list = command_text("ibv_devinfo", &["-l"]);
        let all = parse_device_list(&list);
        let name = std::env::var("RDMA_DEVICE")
            .unwrap_or_else(|_| all.first().cloned().expect("ibv_devinfo -l lists no device"));
        let port = std::env::var("RDMA_IB_PORT").unwrap_or_else(|_| "1".into());
        let verbose = command_text("ibv_devinfo", &["-v", "-d", &name, "-i", &port]);
        let gid_index = std::env::var("RDMA_GID_INDEX").unwrap_or_else(|_| {
            let (info, gids) = parse_devinfo(&verbose);
            if info.get("link_layer").is_some_and(|l| l == "InfiniBand") {
                return "0".into();
            }
            let v4 =
                gids.iter().find(|(_, gid, ty)| gid.starts_with("::ffff:") && gid.contains('.') && ty == "RoCE_v2");
            v4.map(|(i, _, _)| i.to_string())
                .unwrap_or_else(|| panic!("{name} port {port} has no RoCE v2 IPv4 GID: set RDMA_GID_INDEX\n{verbose}"))
        });
        Device::parse(&format!(
            "RDMA_DEVICE={name}\nRDMA_IB_PORT={port}\nRDMA_GID_INDEX={gid_index}\n\
             --- ibv_devinfo -l\n{list}--- ibv_devinfo -v -d {name} -i {port}\n{verbose}"
        ))
    }

    /// Reads back what [`Device::probe`] wrote (also the book's `output/device.txt`).
    pub fn parse(text: &str) -> Device {
        let var = |key: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
                .unwrap_or_else(|| panic!("no {key}= in the device description:\n{text}"))
                .to_string()
        };
        let section = |title: &str| {
            let start = text.find(title).unwrap_or_else(|| panic!("no `{title}` in:\n{text}")) + title.len();
            let rest = &text[start..];
            let rest = &rest[rest.find('\n').map_or(rest.len(), |i| i + 1)..];
            rest[..rest.find("\n--- ").map_or(rest.len(), |i| i + 1)].to_string()
        };
        let (info, gids) = parse_devinfo(&section("--- ibv_devinfo -v"));
        Device {
            name: var("RDMA_DEVICE"),
            port: var("RDMA_IB_PORT").parse().expect("RDMA_IB_PORT is a port number"),
            gid_index: var("RDMA_GID_INDEX").parse().expect("RDMA_GID_INDEX is a GID index"),
            all: parse_device_list(&section("--- ibv_devinfo -l")),
            info,
            gids,
            text: text.to_string(),
        }
    }

    /// `ibv_devinfo`'s value for `key`, e.g. `max_qp`.
    fn info(&self, key: &str) -> &str {
        self.info.get(key).unwrap_or_else(|| panic!("ibv_devinfo -v does not say {key}:\n{}", self.text))
    }

    fn number(&self, key: &str) -> u64 {
        let v = self.info(key);
        let v = v.split_whitespace().next().unwrap_or("");
        match v.strip_prefix("0x") {
            Some(hex) => u64::from_str_radix(hex, 16),
            None => v.parse(),
        }
        .unwrap_or_else(|_| panic!("ibv_devinfo's {key} is not a number: {v}"))
    }

    /// The GID at our index, in `inet_ntop` form.
    pub fn gid(&self) -> &str {
        self.gids.iter().find(|(i, _, _)| *i == self.gid_index).map(|(_, g, _)| g.as_str()).unwrap_or_else(|| {
            panic!(
                "{} port {} has no GID at index {} (RDMA_GID_INDEX):\n{}",
                self.name, self.port, self.gid_index, self.text
            )
        })
    }

    /// A GID index inside the table with no GID behind it: the first empty entry.
    pub fn empty_gid_index(&self) -> u32 {
        (0..self.number("gid_tbl_len") as u32)
            .find(|i| self.gids.iter().all(|(g, _, _)| g != i))
            .expect("a GID table with an empty entry")
    }

    /// The length of the port's GID table (`gid_tbl_len`), empty entries included.
    pub fn gid_tbl_len(&self) -> u64 {
        self.number("gid_tbl_len")
    }

    /// A port the device does not have: one past its last.
    pub fn port_past_end(&self) -> u64 {
        self.number("phys_port_cnt") + 1
    }

    /// The value a fact has in the trace's own format (see [`DEVICE_VALUES`]).
    fn fact(&self, name: &str) -> String {
        let mtu = |key| format!("IBV_MTU_{}", self.info(key).split_whitespace().next().unwrap_or(""));
        match name {
            "device" => self.name.clone(),
            "devices" => self.all.join(", "),
            "first_device" => self.all.first().cloned().unwrap_or_default(),
            "num_devices" => self.all.len().to_string(),
            // ibv_devinfo writes the GUID as four colon-separated groups of hex digits.
            "node_guid" => {
                let hex = self.info("node_guid").replace(':', "");
                let guid = u64::from_str_radix(&hex, 16).unwrap_or_else(|_| panic!("node_guid {hex}"));
                format!("0x{guid:016x}")
            }
            "vendor_id" => format!("0x{:04x}", self.number("vendor_id")),
            "max_mr_size" => format!("0x{:016x}", self.number("max_mr_size")),
            "lid" => format!("0x{:04x}", self.number("port_lid")),
            "max_mtu" | "active_mtu" => mtu(name),
            "ib_port" => self.port.to_string(),
            "gid_index" => self.gid_index.to_string(),
            "gid" => self.gid().to_string(),
            "gid_entries" => self.gids.len().to_string(),
            "gid_list" => self.gids.iter().map(|(i, g, _)| format!("{i} ({g})")).collect::<Vec<_>>().join(", "),
            "empty_gid_index" => self.empty_gid_index().to_string(),
            "port_past_end" => self.port_past_end().to_string(),
            key => self.info(key).to_string(),
        }
    }

    /// `-d NAME -i PORT -g INDEX`, the flags every device test passes.
    pub fn args(&self) -> Vec<String> {
        args(&["-d", &self.name, "-i", &self.port.to_string(), "-g", &self.gid_index.to_string()])
    }
}

/// The names in `ibv_devinfo -l`'s output ("1 HCA found:", then one indented name a line).
fn parse_device_list(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| l.starts_with(char::is_whitespace))
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty())
        .collect()
}

/// `ibv_devinfo -v`'s `key: value` lines, and its `GID[  N]: gid, type` lines.
/// One GID table row of `ibv_devinfo -v`: index, GID, RoCE type.
type GidRow = (u32, String, String);

fn parse_devinfo(text: &str) -> (BTreeMap<String, String>, Vec<GidRow>) {
    let mut info = BTreeMap::new();
    let mut gids = Vec::new();
    for line in text.lines().map(str::trim) {
        if let Some(rest) = line.strip_prefix("GID[") {
            let (index, value) = rest.split_once("]:").expect("GID[ N]: ...");
            let value = value.trim();
            // InfiniBand GIDs have no type after them.
            let (gid, ty) = value.split_once(", ").unwrap_or((value, "IB"));
            gids.push((index.trim().parse().expect("a GID index"), gid.to_string(), ty.replace(' ', "_")));
        } else if let Some((key, value)) = line.split_once(':') {
            if !key.contains(char::is_whitespace) && !key.is_empty() {
                info.entry(key.to_string()).or_insert_with(|| value.trim().to_string());
            }
        }
    }
    (info, gids)
}

/// `-d <device> -i <port> -g <GID index>` of [`device`].
pub fn device_args() -> Vec<String> {
    device().args()
}

// ---------------------------------------------------------------------------------------
// Redaction: snapshots keep what the program does, name what the device and the run pick
// ---------------------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------------------
// The book's real outputs
// ---------------------------------------------------------------------------------------

/// Where the book keeps the real, unredacted output behind each snapshot.
pub fn book_output_dir() -> PathBuf {
    root().join("book/src/output")
}

/// With `RDMA_DISSECT_BOOK=write`, keeps `raw` — what the snapshot `<test>__<name>` shows
/// redacted — as the book's `output/<test>__<name>.txt`, and the device it ran on as
/// `output/device.txt`. `tests/no_device/book.rs` checks, without a device, that each file redacts
/// to its snapshot. Regenerate them all in the lab VM with
/// `RDMA_DISSECT_BOOK=write lab/run cargo test --test device -- steps:: break_it::`.
pub fn book_output(test: &str, name: &str, raw: &str) {
    if std::env::var("RDMA_DISSECT_BOOK").as_deref() != Ok("write") {
        return;
    }
    let dir = book_output_dir();
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("device.txt"), &device().text).unwrap();
    std::fs::write(dir.join(format!("{test}__{name}.txt")), raw).unwrap();
}

// ---------------------------------------------------------------------------------------
// TCP ports
// ---------------------------------------------------------------------------------------

/// The range every test's TCP ports come from (below Linux's ephemeral ports, 32768 and
/// up, and clear of rc_pingpong's default 18515 and of the ports `lab/stages`, `lab/bench`
/// and `lab/memcheck` start from).
pub const TCP_PORTS: std::ops::Range<u16> = 21000..23000;

/// One TCP port no other test, in this process or any other, is using (see [`tcp_ports`]).
pub fn tcp_port() -> u16 {
    tcp_ports(1)
}

/// `n` consecutive TCP ports for this test process alone, kept until it exits.
///
/// A port is claimed by binding the abstract Unix socket `rdma-dissect/tcp-port/<port>`:
/// the kernel lets one socket at a time have a name, across every process of the machine
/// (or VM), and drops it when the process ends, however it ends — no lock files to go
/// stale. A claimed port must also be free for a TCP listener at the time.
pub fn tcp_ports(n: u16) -> u16 {
    static CLAIMS: Mutex<Vec<UnixListener>> = Mutex::new(Vec::new());
    let mut claims = CLAIMS.lock().unwrap_or_else(|e| e.into_inner());
    'first: for first in TCP_PORTS.start..=TCP_PORTS.end - n {
        let mut held = Vec::new();
        for port in first..first + n {
            match claim(port) {
                Some(claim) => held.push(claim),
                None => continue 'first,
            }
        }
        claims.extend(held);
        return first;
    }
    panic!("no {n} free consecutive TCP ports left in {TCP_PORTS:?}");
}

fn claim(port: u16) -> Option<UnixListener> {
    let name = SocketAddr::from_abstract_name(format!("rdma-dissect/tcp-port/{port}")).ok()?;
    let claim = UnixListener::bind_addr(&name).ok()?;
    // The steps listen on 0.0.0.0 (rc_pingpong's AI_PASSIVE): the port must be free there.
    TcpListener::bind(("0.0.0.0", port)).ok()?;
    Some(claim)
}

/// How long one program may run before the test kills it and fails.
pub const TIMEOUT: Duration = Duration::from_secs(90);

/// Spawns `program` with `args`, stdout and stderr captured.
pub fn spawn(program: &str, args: &[String]) -> Child {
    spawn_as(Command::new(program), program, args)
}

/// Spawns `cmd` (which runs `program`, perhaps through a wrapper such as `stdbuf`) with
/// `args` added, stdout and stderr captured, no colour and no stdin.
///
/// Without `RDMA_DEVICE`, `RDMA_IB_PORT` and `RDMA_GID_INDEX`: the steps take them as the
/// defaults of `-d`, `-i` and `-g` and then add a `getenv` line to their trace. The lab VM
/// and the classroom image export them, so a case that leaves a flag out on purpose (no
/// `-g`) would otherwise trace, and do, something else there than in its snapshot. The
/// tests pass what they mean as flags (`device_args`).
pub fn spawn_as(mut cmd: Command, program: &str, args: &[String]) -> Child {
    cmd.args(args)
        .env("NO_COLOR", "1")
        .env_remove("RDMA_DEVICE")
        .env_remove("RDMA_IB_PORT")
        .env_remove("RDMA_GID_INDEX")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {program}: {e}"))
}

/// Waits for `child` until `deadline` and kills it then: its exit status (`None` when it
/// had to be killed), stdout and stderr. The pipes are drained on threads, so a chatty
/// child cannot block on a full pipe.
pub fn wait_or_kill(child: Child, deadline: Instant) -> (Option<std::process::ExitStatus>, Vec<u8>, Vec<u8>) {
    wait_or_kill_when(child, deadline, |_| false)
}

/// [`wait_or_kill`], but kills `child` as soon as its stdout so far is `enough`: for a peer
/// that has printed all it will and would otherwise wait for ever.
pub fn wait_or_kill_when(
    mut child: Child,
    deadline: Instant,
    enough: impl Fn(&[u8]) -> bool,
) -> (Option<std::process::ExitStatus>, Vec<u8>, Vec<u8>) {
    let mut out = child.stdout.take().expect("stdout piped");
    let mut err = child.stderr.take().expect("stderr piped");
    let stdout = Arc::new(Mutex::new(Vec::new()));
    let out_t = {
        let stdout = Arc::clone(&stdout);
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            loop {
                match out.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => stdout.lock().unwrap().extend_from_slice(&buf[..n]),
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
        })
    };
    let err_t = std::thread::spawn(move || {
        let mut v = Vec::new();
        let _ = err.read_to_end(&mut v);
        v
    });
    let status = loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            break Some(status);
        }
        if Instant::now() > deadline || enough(&stdout.lock().unwrap()) {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    out_t.join().unwrap();
    let stdout = std::mem::take(&mut *stdout.lock().unwrap());
    (status, stdout, err_t.join().unwrap())
}

/// Waits for `child` at most until `deadline`; kills it and panics after that.
pub fn wait(child: Child, what: &str, deadline: Instant) -> Output {
    let (status, stdout, stderr) = wait_or_kill(child, deadline);
    let Some(status) = status else {
        panic!(
            "{what} did not finish in time and was killed\n--- stdout\n{}--- stderr\n{}",
            String::from_utf8_lossy(&stdout),
            String::from_utf8_lossy(&stderr)
        );
    };
    Output { status, stdout, stderr }
}

/// Runs one program to completion (bounded by [`TIMEOUT`]).
pub fn run(program: &str, args: &[String]) -> Output {
    wait(spawn(program, args), program, Instant::now() + TIMEOUT)
}

/// Runs a server and a client (both bounded by [`TIMEOUT`]); the client retries its
/// connect until the server listens, so they can start together.
pub fn run_pair(server: &str, server_args: &[String], client: &str, client_args: &[String]) -> (Output, Output) {
    let deadline = Instant::now() + TIMEOUT;
    let s = spawn(server, server_args);
    // The C client does not retry a refused connect: start it only once the server listens.
    let port = port_of(server_args);
    while !listening(port) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let c = spawn(client, client_args);
    let client_out = wait(c, "client", deadline);
    let server_out = wait(s, "server", deadline);
    (server_out, client_out)
}

/// Panics with both outputs unless the program exited 0 with an empty stderr.
pub fn assert_ok(what: &str, out: &Output) {
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "{what} failed ({})\n--- stdout\n{}--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The args as owned strings.
pub fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

/// stdout as text.
pub fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The `-p` value of an argument list (rc_pingpong's default 18515 without one).
fn port_of(args: &[String]) -> u16 {
    args.iter().position(|a| a == "-p").and_then(|i| args.get(i + 1)).and_then(|p| p.parse().ok()).unwrap_or(18515)
}

/// True when some socket listens on TCP `port` (state 0A in /proc/net/tcp{,6}); checking
/// this way does not consume the server's one accept (and the C client does not retry a
/// refused connect, so the exercise grader waits for this too).
pub fn listening(port: u16) -> bool {
    let needle = format!(":{port:04X} ");
    ["/proc/net/tcp", "/proc/net/tcp6"].iter().any(|file| {
        std::fs::read_to_string(file).is_ok_and(|text| {
            text.lines().any(|l| {
                let cols: Vec<&str> = l.split_whitespace().collect();
                cols.len() > 3 && format!("{} ", cols[1]).ends_with(&needle) && cols[3] == "0A"
            })
        })
    })
}

/// One step of `steps/list.txt`, the project's one ordered list of the steps (its header
/// says what the columns mean; the lab scripts read it with `lab_steps` in lab/common.sh).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// `NN_name`: the `[[bin]]`, `steps/NN_name.rs` and `book/src/NN_name.md`.
    pub bin: String,
    /// Runs as a server and a client (05–10), not as one process.
    pub pair: bool,
    /// Connects with rdma_cm and takes rping's flags (10, roles `cm`), not the TCP exchange
    /// and rc_pingpong's.
    pub cm: bool,
    /// The step this one is built on, for the book's "what changed" diff (`cargo xtask
    /// book`): the third column, else the previous step; None for the first.
    pub base: Option<String>,
}

impl Step {
    /// The step's number, `01`…`09`.
    pub fn nn(&self) -> &str {
        &self.bin[..2]
    }

    /// Its stage module, `src/stages/<stage>.rs`: the bin name without its number.
    pub fn stage(&self) -> &str {
        &self.bin[3..]
    }
}

/// The steps, in order, from `steps/list.txt`. tests/no_device/consistency.rs checks that Cargo.toml's
/// `[[bin]]`s, the `steps/*.rs` files and book/src/SUMMARY.md's chapters are this list.
pub fn steps() -> Vec<Step> {
    let path = root().join("steps/list.txt");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut steps: Vec<Step> = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
        let (bin, roles, base) = match line.split_whitespace().collect::<Vec<_>>()[..] {
            [bin, roles] => (bin, roles, None),
            [bin, roles, base] => (bin, roles, Some(base)),
            _ => panic!("{}: `{line}`: want `NN_name alone|pair|cm [BASE]`", path.display()),
        };
        let (pair, cm) = match roles {
            "alone" => (false, false),
            "pair" => (true, false),
            "cm" => (true, true),
            _ => panic!("{}: `{line}`: the roles are `alone`, `pair` or `cm`", path.display()),
        };
        let numbered = bin.len() > 3 && bin[..2].bytes().all(|b| b.is_ascii_digit()) && bin.as_bytes()[2] == b'_';
        assert!(numbered, "{}: `{bin}` is not named NN_name", path.display());
        if let Some(base) = base {
            assert!(
                steps.iter().any(|s| s.bin == base),
                "{}: `{line}`: base `{base}` is not a step listed before",
                path.display()
            );
        }
        let base = base.map(str::to_string).or_else(|| steps.last().map(|s| s.bin.clone()));
        steps.push(Step { bin: bin.to_string(), pair, cm, base });
    }
    assert!(!steps.is_empty(), "{} lists no step", path.display());
    steps
}

// ---------------------------------------------------------------------------------------
// XML
// ---------------------------------------------------------------------------------------

/// A small well-formedness check, enough for hand-written SVG and the JUnit XML `lab/check`
/// writes: one root element, tags
/// balanced, attributes quoted and unique, entities known, comments closed.
pub fn check_xml(text: &str) -> Result<String, String> {
    let b = text.as_bytes();
    let mut i = 0;
    let mut stack: Vec<String> = Vec::new();
    let mut root: Option<String> = None;
    let name_at = |i: usize| -> (String, usize) {
        let mut j = i;
        while j < b.len() && (b[j].is_ascii_alphanumeric() || b"_:.-".contains(&b[j])) {
            j += 1;
        }
        (text[i..j].to_string(), j)
    };
    let check_entities = |s: &str, at: usize| -> Result<(), String> {
        let mut rest = s;
        while let Some(k) = rest.find('&') {
            let after = &rest[k + 1..];
            let end = after.find(';').ok_or(format!("bare & near byte {at}"))?;
            let ent = &after[..end];
            let ok = ["amp", "lt", "gt", "quot", "apos"].contains(&ent)
                || ent.strip_prefix("#x").is_some_and(|h| !h.is_empty() && h.chars().all(|c| c.is_ascii_hexdigit()))
                || ent.strip_prefix('#').is_some_and(|d| !d.is_empty() && d.chars().all(|c| c.is_ascii_digit()));
            if !ok {
                return Err(format!("unknown entity &{ent}; near byte {at}"));
            }
            rest = &after[end + 1..];
        }
        Ok(())
    };
    while i < b.len() {
        if b[i] != b'<' {
            let j = text[i..].find('<').map_or(b.len(), |k| i + k);
            let chunk = &text[i..j];
            if stack.is_empty() && !chunk.trim().is_empty() {
                return Err(format!("text outside the root element at byte {i}"));
            }
            check_entities(chunk, i)?;
            i = j;
            continue;
        }
        let rest = &text[i..];
        if rest.starts_with("<?") {
            i += rest.find("?>").ok_or("unclosed <?")? + 2;
        } else if rest.starts_with("<!--") {
            let end = rest.find("-->").ok_or("unclosed comment")?;
            if rest[4..end].contains("--") {
                return Err(format!("`--` inside a comment at byte {i}"));
            }
            i += end + 3;
        } else if rest.starts_with("<![CDATA[") {
            i += rest.find("]]>").ok_or("unclosed CDATA")? + 3;
        } else if rest.starts_with("<!") {
            return Err(format!("DOCTYPE/declaration at byte {i}: not expected in an SVG"));
        } else if rest.starts_with("</") {
            let (name, j) = name_at(i + 2);
            let close = text[j..].find('>').ok_or("unclosed end tag")?;
            if !text[j..j + close].trim().is_empty() {
                return Err(format!("junk in end tag </{name}> at byte {i}"));
            }
            match stack.pop() {
                Some(open) if open == name => {}
                other => return Err(format!("</{name}> at byte {i} closes {other:?}")),
            }
            i = j + close + 1;
        } else {
            let (name, mut j) = name_at(i + 1);
            if name.is_empty() {
                return Err(format!("bad tag at byte {i}"));
            }
            let mut attrs = std::collections::BTreeSet::new();
            loop {
                while j < b.len() && b[j].is_ascii_whitespace() {
                    j += 1;
                }
                if j >= b.len() {
                    return Err(format!("unclosed <{name}"));
                }
                if b[j] == b'>' {
                    if root.is_none() {
                        root = Some(name.clone());
                    } else if stack.is_empty() {
                        return Err(format!("second root element <{name}> at byte {i}"));
                    }
                    stack.push(name.clone());
                    j += 1;
                    break;
                }
                if text[j..].starts_with("/>") {
                    if root.is_none() {
                        root = Some(name.clone());
                    } else if stack.is_empty() {
                        return Err(format!("second root element <{name}> at byte {i}"));
                    }
                    j += 2;
                    break;
                }
                let (attr, k) = name_at(j);
                if attr.is_empty() || k >= b.len() || b[k] != b'=' {
                    return Err(format!("bad attribute in <{name}> at byte {j}"));
                }
                if !attrs.insert(attr.clone()) {
                    return Err(format!("duplicate attribute {attr} in <{name}> at byte {j}"));
                }
                let q = b[k + 1];
                if q != b'"' && q != b'\'' {
                    return Err(format!("unquoted attribute {attr} in <{name}> at byte {j}"));
                }
                let vend = text[k + 2..].find(q as char).ok_or("unclosed attribute value")? + k + 2;
                let value = &text[k + 2..vend];
                if value.contains('<') {
                    return Err(format!("`<` in attribute {attr} at byte {j}"));
                }
                check_entities(value, j)?;
                j = vend + 1;
            }
            i = j;
        }
    }
    if let Some(open) = stack.pop() {
        return Err(format!("<{open}> is never closed"));
    }
    root.ok_or_else(|| "no root element".to_string())
}

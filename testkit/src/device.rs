//! The device under test: the device, port and GID index the tests use, what
//! `ibv_devinfo` says about it, and the kernel it runs on.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::sync::{Mutex, MutexGuard, OnceLock};

use crate::run::args;

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
    /// An iWARP device's IPv4 address: the address of the netdev it sits on (`rdma link`,
    /// `ip -4 addr`), which rdma_cm and rping take as `-a`. None on InfiniBand and RoCE,
    /// whose chosen GID holds the address.
    pub netdev_addr: Option<String>,
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
        let mut text = format!(
            "RDMA_DEVICE={name}\nRDMA_IB_PORT={port}\nRDMA_GID_INDEX={gid_index}\n\
             --- ibv_devinfo -l\n{list}--- ibv_devinfo -v -d {name} -i {port}\n{verbose}"
        );
        // An iWARP device's one GID is made from its MAC, not from an address: the address
        // rdma_cm needs is its netdev's.
        if parse_devinfo(&verbose).0.get("transport").is_some_and(|t| t.starts_with("iWARP")) {
            let link = command_text("rdma", &["link", "show", &format!("{name}/{port}")]);
            let netdev = link
                .split_whitespace()
                .skip_while(|w| *w != "netdev")
                .nth(1)
                .unwrap_or_else(|| panic!("rdma link show names no netdev for {name}: {link}"))
                .to_string();
            let addr = command_text("ip", &["-4", "-o", "addr", "show", "dev", &netdev, "scope", "global"]);
            text += &format!("--- ip -4 -o addr show dev {netdev} scope global\n{addr}");
            // ibv_devinfo -v lists no GID for it (rdma-core's ibv_devinfo prints the GID
            // table for IB and RoCE ports only): read its one GID from sysfs, as the
            // verbs report it (ibv_query_gid, type IB).
            let sysfs = format!("/sys/class/infiniband/{name}/ports/{port}/gids/0");
            let gid = std::fs::read_to_string(&sysfs).unwrap_or_else(|e| panic!("{sysfs}: {e}"));
            let gid: std::net::Ipv6Addr = gid.trim().parse().unwrap_or_else(|_| panic!("{sysfs}: not a GID: {gid}"));
            text += &format!("--- {sysfs}\nGID[  0]:\t\t{gid}\n");
        }
        Device::parse(&text)
    }

    /// Reads back the description `Device::probe` writes (also the book's `output/device.txt`).
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
        let (info, mut gids) = parse_devinfo(&section("--- ibv_devinfo -v"));
        if text.contains("--- /sys/class/infiniband/") {
            gids.extend(parse_devinfo(&section("--- /sys/class/infiniband/")).1);
        }
        // `2: eth0    inet 192.0.2.1/24 brd …`: the first global IPv4 address.
        let netdev_addr = text.contains("--- ip -4 -o addr").then(|| {
            let addr = section("--- ip -4 -o addr");
            let word = addr.split_whitespace().skip_while(|w| *w != "inet").nth(1);
            word.and_then(|w| w.split('/').next()).expect("an IPv4 address on the netdev").to_string()
        });
        Device {
            name: var("RDMA_DEVICE"),
            port: var("RDMA_IB_PORT").parse().expect("RDMA_IB_PORT is a port number"),
            gid_index: var("RDMA_GID_INDEX").parse().expect("RDMA_GID_INDEX is a GID index"),
            all: parse_device_list(&section("--- ibv_devinfo -l")),
            info,
            gids,
            netdev_addr,
            text: text.to_string(),
        }
    }

    /// Whether the device is an iWARP one (`transport: iWARP (1)`): siw, or an RNIC.
    pub fn is_iwarp(&self) -> bool {
        self.info.get("transport").is_some_and(|t| t.starts_with("iWARP"))
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

    /// A GID index with no GID behind it: the first empty entry of the table, or, in a
    /// table with none (siw's holds one GID and nothing else), the first index past it.
    pub fn empty_gid_index(&self) -> u32 {
        let len = self.number("gid_tbl_len") as u32;
        (0..len).find(|i| self.gids.iter().all(|(g, _, _)| g != i)).unwrap_or(len)
    }

    /// The length of the port's GID table (`gid_tbl_len`), empty entries included.
    pub fn gid_tbl_len(&self) -> u64 {
        self.number("gid_tbl_len")
    }

    /// A port the device does not have: one past its last.
    pub fn port_past_end(&self) -> u64 {
        self.number("phys_port_cnt") + 1
    }

    /// The value a fact has in the trace's own format (see [`DEVICE_VALUES`](crate::DEVICE_VALUES)).
    #[cfg(feature = "redact")]
    pub(crate) fn fact(&self, name: &str) -> String {
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
            // The buffers of 11's `--break size-above-mtu`: twice the active MTU, and the GRH.
            "size_above_mtu" => (2 * self.number("active_mtu") + 40).to_string(),
            "ib_port" => self.port.to_string(),
            "gid_index" => self.gid_index.to_string(),
            "gid" => self.gid().to_string(),
            // The IPv4 address of an IPv4-mapped GID (RoCE v2), which step 11's `grh` line
            // decodes from a datagram's IPv4 header; none for another GID.
            "gid_ipv4" => self.gid().strip_prefix("::ffff:").unwrap_or("(not an IPv4 GID)").to_string(),
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

/// The (major, minor) of a kernel release as `uname -r` prints it: (6, 12) for
/// `6.12.48+deb13-amd64`. rxe's answers to some mistakes changed between the lab's kernels.
/// Panics, naming the release, on one that does not start with the two numbers.
pub fn kernel_version(release: &str) -> (u32, u32) {
    let mut numbers = release.trim().split(|c: char| !c.is_ascii_digit()).map(|n| n.parse().ok());
    match (numbers.next().flatten(), numbers.next().flatten()) {
        (Some(major), Some(minor)) => (major, minor),
        _ => panic!("kernel release {release:?}: not MAJOR.MINOR…"),
    }
}

/// The running kernel's (major, minor) release (see [`kernel_version`]).
pub fn running_kernel() -> (u32, u32) {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").expect("/proc/sys/kernel/osrelease");
    kernel_version(&release)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kernel_version_is_the_release_s_first_two_numbers() {
        assert_eq!(kernel_version("6.12.48+deb13-amd64"), (6, 12));
        assert_eq!(kernel_version("6.1.0-37-amd64\n"), (6, 1));
        assert_eq!(kernel_version("6.12"), (6, 12));
        assert!(kernel_version("6.1.0-37-amd64") < (6, 12));
    }

    #[test]
    #[should_panic(expected = "kernel release \"6\": not MAJOR.MINOR")]
    fn a_release_without_a_minor_is_refused() {
        kernel_version("6");
    }
}

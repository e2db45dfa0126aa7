//! Stage 01: find an RDMA device, open it, and ask what it is.
//!
//! C reference: the top of `main` in `rc_pingpong.c` (`ibv_get_device_list` and the `-d`
//! lookup), `ibv_open_device` in `pp_init_ctx`, `pp_get_port_info` (`ibv_query_port`) and the
//! `ibv_query_gid` for `-g`. rc_pingpong never calls `ibv_query_device` or lists the GID
//! table (`ibv_query_gid_table`); we do, because the device limits and the GID table are what a newcomer needs to
//! see once (`ibv_devinfo -v` shows the same).
//!
//! **Device, port, GID.** A device (an HCA, or Soft-RoCE's `rxe0` on top of a NIC) has one
//! or more *ports*, numbered from 1. On InfiniBand a port is addressed by its LID, assigned
//! by the subnet manager. On RoCE (RDMA over Ethernet) there is no subnet manager and the
//! LID is 0: a port is addressed by a **GID**, an IPv6-format address derived from the
//! netdev's MAC or IP addresses. The port's GID table lists them, one entry per address of
//! the netdev (and, on adapters that speak both, per RoCE version): on rxe every entry is
//! RoCE v2, the link-local `fe80::` one first, then the IPv4-mapped `::ffff:a.b.c.d` ones —
//! in the lab VM, index 0 and index 1. Which index holds which address depends on the
//! netdev's addresses, so read the table. The `-g` index chosen here is what stage 05 puts
//! in the address vector.

use std::rc::Rc;

use crate::error::{Error, Result};
use crate::trace::{self, Gid, Hex64, Lid};
use crate::verbs::{ibv_port_attr, names, Context, DeviceList, GidEntry, IBV_LINK_LAYER_ETHERNET};

/// An open device and the port we will use: what every later stage builds on.
pub struct Device {
    /// The open device context (`ctx->context` in C).
    pub ctx: Rc<Context>,
    /// The port number (`-i`, 1-based).
    pub ib_port: u8,
    /// The port's attributes (`ctx->portinfo`): LID, state, MTU, link layer.
    pub port_attr: ibv_port_attr,
    /// The GID index given with `-g`, if any (rc_pingpong's `gidx`, -1 for none): checked
    /// to hold a GID and to fit the address vector's 8-bit `grh.sgid_index`.
    pub gid_index: Option<u8>,
    /// Our GID at that index, all zero without `-g`: what the peer puts in its GRH.
    pub gid: [u8; 16],
}

impl Device {
    /// True on RoCE, where the link layer is Ethernet and peers are addressed by GID.
    pub fn is_roce(&self) -> bool {
        u32::from(self.port_attr.link_layer) == IBV_LINK_LAYER_ETHERNET
    }
}

/// Which device, port and GID index to use: rc_pingpong's `-d`, `-i` and `-g`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceChoice {
    /// A device name; `None` for the first device found.
    pub ib_dev: Option<String>,
    /// The port, numbered from 1.
    pub ib_port: u8,
    /// The GID table index of our address; `None` on InfiniBand, where a LID is enough.
    pub gid_index: Option<i32>,
}

// ANCHOR: stage
/// Opens the device named by `-d` (default: the first one), queries it, its port `-i`, its
/// GID table and the GID at `-g`.
pub fn open_device(args: &DeviceChoice) -> Result<Device> {
    let dev_list = DeviceList::get().map_err(explain_device_list)?;
    for i in 0..dev_list.len() {
        trace::detail("device").kv("name", dev_list.name(i)).kv("guid", Hex64(dev_list.guid(i))).emit();
    }
    if dev_list.is_empty() {
        return Err(no_device());
    }
    let index = match &args.ib_dev {
        None => 0,
        Some(name) => {
            (0..dev_list.len()).find(|&i| dev_list.name(i) == *name).ok_or_else(|| unknown_device(name, &dev_list))?
        }
    };

    // ANCHOR: hole_open_device HOLE(Rc<Context>): open entry `index` of `dev_list` (ibv_open_device; `Context` in src/verbs/device.rs takes the list and the index)
    let ctx = Context::open(dev_list, index)?;
    // ANCHOR_END: hole_open_device

    // ANCHOR: hole_query_device HOLE(crate::verbs::ibv_device_attr): ask the open device for its attributes and limits (ibv_query_device)
    let device_attr = ctx.query_device()?;
    // ANCHOR_END: hole_query_device
    let fw_ver: Vec<u8> = device_attr.fw_ver.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
    trace::event("ibv_query_device")
        .kv("fw_ver", String::from_utf8_lossy(&fw_ver))
        .kv("node_guid", Hex64(u64::from_be(device_attr.node_guid)))
        .kv("vendor_id", format!("0x{:04x}", device_attr.vendor_id))
        .kv("phys_port_cnt", device_attr.phys_port_cnt)
        .emit();
    trace::detail("limits")
        .kv("max_qp", device_attr.max_qp)
        .kv("max_qp_wr", device_attr.max_qp_wr)
        .kv("max_sge", device_attr.max_sge)
        .kv("max_cq", device_attr.max_cq)
        .kv("max_cqe", device_attr.max_cqe)
        .kv("max_mr", device_attr.max_mr)
        .kv("max_mr_size", Hex64(device_attr.max_mr_size))
        .kv("max_pd", device_attr.max_pd)
        .emit();

    if args.ib_port == 0 || args.ib_port > device_attr.phys_port_cnt {
        return Err(Error::new(format!("using port {} of {}", args.ib_port, ctx.name()))
            .cause(format!("{} has {} port(s), numbered from 1", ctx.name(), device_attr.phys_port_cnt))
            .fix("pass -i 1 (the default)"));
    }
    // ANCHOR: hole_query_port HOLE(ibv_port_attr): ask for the attributes of the port the user chose with -i (ibv_query_port)
    let port_attr = ctx.query_port(args.ib_port)?;
    // ANCHOR_END: hole_query_port
    let roce = u32::from(port_attr.link_layer) == IBV_LINK_LAYER_ETHERNET;
    trace::event("ibv_query_port")
        .kv("port_num", args.ib_port)
        .kv("state", port_state_name(port_attr.state))
        .kv("lid", Lid(port_attr.lid))
        .kv("link_layer", if roce { "Ethernet" } else { "InfiniBand" })
        .kv("max_mtu", names::mtu_name(port_attr.max_mtu))
        .kv("active_mtu", names::mtu_name(port_attr.active_mtu))
        .kv("gid_tbl_len", port_attr.gid_tbl_len)
        .emit();

    // The GID table: the kernel fills it from the netdev's addresses (one GID per address
    // and RoCE version), so most of rxe's gid_tbl_len slots are empty.
    let table = ctx.query_gid_table(port_attr.gid_tbl_len as usize * usize::from(device_attr.phys_port_cnt))?;
    let ours: Vec<_> = table.iter().filter(|e| e.port == u32::from(args.ib_port)).collect();
    trace::event("ibv_query_gid_table").kv("port_num", args.ib_port).kv("entries", ours.len()).emit();
    for entry in &ours {
        trace::detail("gid")
            .kv("index", entry.index)
            .kv("gid", Gid(entry.gid))
            .kv("gid_type", gid_type_name(entry.gid_type))
            .emit();
    }

    let (gid_index, gid) = match args.gid_index {
        Some(index) => {
            let bad = |e| bad_gid_index(e, index, port_attr.gid_tbl_len, &ours);
            // ANCHOR: hole_query_gid HOLE([u8; 16]): read the GID at table index `index` of our port (ibv_query_gid); turn a failure into the explained error `bad`
            let gid = ctx.query_gid(args.ib_port, index).map_err(bad)?;
            // ANCHOR_END: hole_query_gid
            if gid == [0; 16] {
                return Err(bad(Error::new(format!("ibv_query_gid(index {index})"))));
            }
            // The table may be longer than 256 entries (rxe's has 1024), but the address
            // vector names our GID in 8 bits: an index above 255 cannot reach stage 05.
            let Ok(index8) = u8::try_from(index) else {
                return Err(Error::new(format!("-g {index}"))
                    .cause(format!(
                        "GID index {index} holds {}, but an address vector's grh.sgid_index is 8 bits\n\
                         (struct ibv_global_route): stage 05 could not name it",
                        Gid(gid)
                    ))
                    .fix("pass an index below 256 that holds a GID (01_open_device lists the table)"));
            };
            trace::event("ibv_query_gid").kv("index", index).kv("gid", Gid(gid)).emit();
            (Some(index8), gid)
        }
        None => (None, [0; 16]),
    };

    // Not a verb: which network interface carries this port, and the device's counters now,
    // so that a failure later can be explained by what happened to the link (src/link.rs).
    crate::link::watch(ctx.name(), args.ib_port, gid_index);
    Ok(Device { ctx, ib_port: args.ib_port, port_attr, gid_index, gid })
}
// ANCHOR_END: stage

fn gid_type_name(gid_type: u32) -> &'static str {
    match gid_type {
        ibverbs_sys::IBV_GID_TYPE_IB => "IB",
        ibverbs_sys::IBV_GID_TYPE_ROCE_V1 => "RoCE_v1",
        ibverbs_sys::IBV_GID_TYPE_ROCE_V2 => "RoCE_v2",
        _ => "unknown",
    }
}

fn port_state_name(state: ibverbs_sys::ibv_port_state::Type) -> &'static str {
    use ibverbs_sys::ibv_port_state::*;
    match state {
        IBV_PORT_DOWN => "DOWN",
        IBV_PORT_INIT => "INIT",
        IBV_PORT_ARMED => "ARMED",
        IBV_PORT_ACTIVE => "ACTIVE",
        IBV_PORT_ACTIVE_DEFER => "ACTIVE_DEFER",
        _ => "NOP",
    }
}

/// How to get an RDMA device: the fix shared by "no RDMA at all" and "no device".
pub const HOW_TO_GET_A_DEVICE: &str = "create a Soft-RoCE device on a Linux host with RDMA support:\n\
    `sudo modprobe rdma_rxe && sudo rdma link add rxe0 type rxe netdev eth0`\n\
    (use your interface instead of eth0), or run the step in this project's lab VM:\n\
    `lab/run target/debug/01_open_device`";

/// `ibv_get_device_list` failed: say that there is no RDMA here at all, and how to get it.
pub fn explain_device_list(err: Error) -> Error {
    if err.errno() == Some(libc::ENOSYS) {
        err.cause(
            "there is no RDMA device: this kernel has no RDMA support \
             (no ib_uverbs / rdma_rxe module), so libibverbs cannot even list devices",
        )
        .fix(HOW_TO_GET_A_DEVICE)
    } else {
        err.or_explain("libibverbs could not read /sys/class/infiniband", HOW_TO_GET_A_DEVICE)
    }
}

/// The device list is empty: the kernel supports RDMA but no device exists.
pub fn no_device() -> Error {
    Error::new("finding an RDMA device")
        .cause("there is no RDMA device: ibv_get_device_list returned an empty list")
        .fix(HOW_TO_GET_A_DEVICE)
}

fn unknown_device(name: &str, list: &DeviceList) -> Error {
    let names: Vec<String> = (0..list.len()).map(|i| list.name(i)).collect();
    Error::new(format!("finding RDMA device '{name}'"))
        .cause(format!("no device has that name; this host has: {}", names.join(", ")))
        .fix(format!("pass one of them with -d, e.g. -d {}", names[0]))
}

/// `-g` names no usable GID: say whether it is past the table or an empty slot, and list
/// the indices that do hold a GID (the student cannot guess them: they depend on the
/// netdev's addresses).
fn bad_gid_index(err: Error, index: i32, tbl_len: i32, valid: &[&GidEntry]) -> Error {
    let cause = if index >= tbl_len {
        format!(
            "GID index {index} is past the end of the port's GID table, which has {tbl_len} \
             entries (0..={})",
            tbl_len - 1
        )
    } else {
        format!(
            "GID entry {index} is empty (all zeros): the kernel fills the table from the \
             netdev's addresses, one entry per address and RoCE version, and none is at {index}"
        )
    };
    let fix = if valid.is_empty() {
        "this port has no GID at all: give its netdev an IP address (`ip addr add`), or on \
         InfiniBand leave -g out"
            .to_owned()
    } else {
        let list: Vec<String> = valid.iter().map(|e| format!("{} ({})", e.index, Gid(e.gid))).collect();
        format!(
            "pass an index that holds a GID: {} — for RoCE v2 over IPv4, the ::ffff:a.b.c.d one \
             (-g 1 in the lab VM)",
            list.join(", ")
        )
    };
    err.or_explain(cause, fix)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn enosys_says_there_is_no_rdma_device_and_how_to_get_one() {
        let err = Error::verb("ibv_get_device_list", std::io::Error::from_raw_os_error(libc::ENOSYS));
        let text = explain_device_list(err).to_string();
        assert!(text.starts_with("ibv_get_device_list failed: ENOSYS (Function not implemented)"), "{text}");
        assert!(text.contains("there is no RDMA device"), "{text}");
        assert!(text.contains("rdma link add rxe0 type rxe netdev eth0"), "{text}");
        assert!(text.contains("lab/run"), "{text}");
    }

    #[test]
    fn an_empty_list_says_the_same() {
        let text = no_device().to_string();
        assert!(text.contains("there is no RDMA device"), "{text}");
        assert!(text.contains("rdma link add"), "{text}");
    }
}

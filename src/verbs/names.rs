//! The names of verbs things, as the trace prints them: QP states, work completion
//! statuses and opcodes, MTUs, access and send flags, and the `ibv_modify_qp` mask with the
//! attribute fields each flag selects.
//!
//! They live with the verbs layer, not in [`crate::trace`], so that the trace stays a leaf
//! (events and their formatting) and knows nothing about verbs.

use std::fmt::{self, Display};

use ibverbs_sys::{ibv_qp_attr, ibv_qp_attr_mask, ibv_qp_state};

use crate::trace::{detail, event, Gid, Key, Lid, Psn, Qpn};

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

/// `IBV_QPT_RC`, `IBV_QPT_UD`, ...: a QP's transport type by its C name.
pub fn qp_type_name(qp_type: ibverbs_sys::ibv_qp_type::Type) -> &'static str {
    match qp_type {
        ibverbs_sys::ibv_qp_type::IBV_QPT_RC => "IBV_QPT_RC",
        ibverbs_sys::ibv_qp_type::IBV_QPT_UC => "IBV_QPT_UC",
        ibverbs_sys::ibv_qp_type::IBV_QPT_UD => "IBV_QPT_UD",
        _ => "other",
    }
}

/// `IBV_WC_SUCCESS`, `IBV_WC_RETRY_EXC_ERR`, ...: a work completion status by its C name
/// (`ibv_wc_status_str` gives prose, which is harder to look up).
pub fn wc_status_name(status: ibverbs_sys::ibv_wc_status::Type) -> &'static str {
    use ibverbs_sys::ibv_wc_status::*;
    const NAMES: [&str; 22] = [
        "IBV_WC_SUCCESS",
        "IBV_WC_LOC_LEN_ERR",
        "IBV_WC_LOC_QP_OP_ERR",
        "IBV_WC_LOC_EEC_OP_ERR",
        "IBV_WC_LOC_PROT_ERR",
        "IBV_WC_WR_FLUSH_ERR",
        "IBV_WC_MW_BIND_ERR",
        "IBV_WC_BAD_RESP_ERR",
        "IBV_WC_LOC_ACCESS_ERR",
        "IBV_WC_REM_INV_REQ_ERR",
        "IBV_WC_REM_ACCESS_ERR",
        "IBV_WC_REM_OP_ERR",
        "IBV_WC_RETRY_EXC_ERR",
        "IBV_WC_RNR_RETRY_EXC_ERR",
        "IBV_WC_LOC_RDD_VIOL_ERR",
        "IBV_WC_REM_INV_RD_REQ_ERR",
        "IBV_WC_REM_ABORT_ERR",
        "IBV_WC_INV_EECN_ERR",
        "IBV_WC_INV_EEC_STATE_ERR",
        "IBV_WC_FATAL_ERR",
        "IBV_WC_RESP_TIMEOUT_ERR",
        "IBV_WC_GENERAL_ERR",
    ];
    debug_assert_eq!(IBV_WC_GENERAL_ERR, 21);
    NAMES.get(status as usize).copied().unwrap_or("IBV_WC_(unknown)")
}

/// `IBV_WC_SEND`, `IBV_WC_RECV`, ...: a work completion's opcode by its C name, for the
/// opcodes our programs' work requests complete with; `other` for the rest.
pub fn wc_opcode_name(opcode: ibverbs_sys::ibv_wc_opcode::Type) -> &'static str {
    use super::{IBV_WC_RDMA_READ, IBV_WC_RDMA_WRITE, IBV_WC_RECV, IBV_WC_RECV_RDMA_WITH_IMM, IBV_WC_SEND};
    match opcode {
        IBV_WC_SEND => "IBV_WC_SEND",
        IBV_WC_RECV => "IBV_WC_RECV",
        IBV_WC_RDMA_WRITE => "IBV_WC_RDMA_WRITE",
        IBV_WC_RDMA_READ => "IBV_WC_RDMA_READ",
        IBV_WC_RECV_RDMA_WITH_IMM => "IBV_WC_RECV_RDMA_WITH_IMM",
        ibverbs_sys::ibv_wc_opcode::IBV_WC_COMP_SWAP => "IBV_WC_COMP_SWAP",
        ibverbs_sys::ibv_wc_opcode::IBV_WC_FETCH_ADD => "IBV_WC_FETCH_ADD",
        _ => "other",
    }
}

/// `IBV_EVENT_CQ_ERR`, `IBV_EVENT_QP_FATAL`, ...: an asynchronous event type by its C name.
///
/// libibverbs has `ibv_event_type_str`, but it gives prose ("CQ error"), and the trace
/// names every enum value as the headers and man pages spell it, as for statuses.
pub fn event_type_name(event_type: ibverbs_sys::ibv_event_type) -> String {
    const NAMES: [&str; 20] = [
        "IBV_EVENT_CQ_ERR",
        "IBV_EVENT_QP_FATAL",
        "IBV_EVENT_QP_REQ_ERR",
        "IBV_EVENT_QP_ACCESS_ERR",
        "IBV_EVENT_COMM_EST",
        "IBV_EVENT_SQ_DRAINED",
        "IBV_EVENT_PATH_MIG",
        "IBV_EVENT_PATH_MIG_ERR",
        "IBV_EVENT_DEVICE_FATAL",
        "IBV_EVENT_PORT_ACTIVE",
        "IBV_EVENT_PORT_ERR",
        "IBV_EVENT_LID_CHANGE",
        "IBV_EVENT_PKEY_CHANGE",
        "IBV_EVENT_SM_CHANGE",
        "IBV_EVENT_SRQ_ERR",
        "IBV_EVENT_SRQ_LIMIT_REACHED",
        "IBV_EVENT_QP_LAST_WQE_REACHED",
        "IBV_EVENT_CLIENT_REREGISTER",
        "IBV_EVENT_GID_CHANGE",
        "IBV_EVENT_WQ_FATAL",
    ];
    match NAMES.get(event_type as usize) {
        Some(name) => (*name).to_owned(),
        None => format!("event type {event_type}"),
    }
}

/// The payload bytes per packet of an `ibv_mtu`: 1024 for `IBV_MTU_1024`, whose value is 3
/// (the enum counts from `IBV_MTU_256` = 1); `None` outside the enum.
pub fn mtu_bytes(mtu: ibverbs_sys::ibv_mtu) -> Option<u32> {
    matches!(mtu, 1..=5).then(|| 128 << mtu)
}

/// `IBV_MTU_1024` for the enum value 3: `ibv_mtu` is an enum, not a byte count.
pub fn mtu_name(mtu: ibverbs_sys::ibv_mtu) -> String {
    match mtu_bytes(mtu) {
        Some(bytes) => format!("IBV_MTU_{bytes}"),
        None => format!("{mtu}"),
    }
}

/// Names of the set bits of an `ibv_access_flags` value, `|`-joined; `0` when none.
pub fn access_names(flags: u32) -> String {
    // The FLUSH bits: Linux 6.12's connection manager grants them (step 10), 6.1's does not.
    const NAMES: [(u32, &str); 6] = [
        (1, "IBV_ACCESS_LOCAL_WRITE"),
        (2, "IBV_ACCESS_REMOTE_WRITE"),
        (4, "IBV_ACCESS_REMOTE_READ"),
        (8, "IBV_ACCESS_REMOTE_ATOMIC"),
        (1 << 8, "IBV_ACCESS_FLUSH_GLOBAL"),
        (1 << 9, "IBV_ACCESS_FLUSH_PERSISTENT"),
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
        const NAMES: [(u32, &str); 4] =
            [(1, "IBV_SEND_FENCE"), (2, "IBV_SEND_SIGNALED"), (4, "IBV_SEND_SOLICITED"), (8, "IBV_SEND_INLINE")];
        f.write_str(&join_flags(self.0, &NAMES))
    }
}

fn join_flags(flags: u32, names: &[(u32, &str)]) -> String {
    let mut out: Vec<String> = names.iter().filter(|(bit, _)| flags & bit != 0).map(|(_, n)| n.to_string()).collect();
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
                    v.push(("ah_attr.grh.dgid", Gid(super::gid_bytes(&ah.grh.dgid)).to_string()));
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
pub fn trace_modify_qp(qp_num: u32, from: ibv_qp_state::Type, attr: &ibv_qp_attr, mask: ibv_qp_attr_mask) {
    let to = if mask.0 & ibv_qp_attr_mask::IBV_QP_STATE.0 != 0 { attr.qp_state } else { from };
    event("ibv_modify_qp").kv("qp_num", Qpn(qp_num)).word(format!("{}→{}", state_name(from), state_name(to))).emit();
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
        assert_eq!(mtu_name(0), "0");
        assert_eq!((mtu_bytes(1), mtu_bytes(3), mtu_bytes(6)), (Some(256), Some(1024), None));
        assert_eq!(wc_status_name(0), "IBV_WC_SUCCESS");
        assert_eq!(wc_status_name(12), "IBV_WC_RETRY_EXC_ERR");
        assert_eq!(event_type_name(ibverbs_sys::IBV_EVENT_CQ_ERR), "IBV_EVENT_CQ_ERR");
        assert_eq!(event_type_name(ibverbs_sys::IBV_EVENT_WQ_FATAL), "IBV_EVENT_WQ_FATAL");
        assert_eq!(access_names(0), "0");
        assert_eq!(access_names(3), "IBV_ACCESS_LOCAL_WRITE|IBV_ACCESS_REMOTE_WRITE");
        assert_eq!(SendFlags(2 | 8).to_string(), "IBV_SEND_SIGNALED|IBV_SEND_INLINE");
    }
}

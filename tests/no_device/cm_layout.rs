//! The librdmacm declarations of `src/verbs/rdma_cm.rs` against the system's C header.
//!
//! They are written by hand (the module's doc says why), and a field declared one byte off
//! would not fail to compile: it would read garbage. So this test compiles a small C program
//! against `<rdma/rdma_cma.h>` that prints the size of every struct declared there and the
//! offset of every field, and compares each with Rust's `size_of` / `offset_of!`. It needs
//! a C compiler and `librdmacm-dev` (`lab/setup` installs both), and no device.

use std::collections::BTreeMap;
use std::mem::{offset_of, size_of};
use std::process::Command;

use rdma_dissect::verbs::rdma_cm::sys::*;

/// `(C expression, Rust value)`: every size and offset the Rust side relies on.
fn rust_layout() -> Vec<(&'static str, usize)> {
    vec![
        ("sizeof(struct rdma_event_channel)", size_of::<rdma_event_channel>()),
        ("offsetof(struct rdma_event_channel, fd)", offset_of!(rdma_event_channel, fd)),
        ("sizeof(struct rdma_ib_addr)", size_of::<rdma_ib_addr>()),
        ("offsetof(struct rdma_ib_addr, pkey)", offset_of!(rdma_ib_addr, pkey)),
        ("sizeof(struct rdma_addr)", size_of::<rdma_addr>()),
        ("offsetof(struct rdma_addr, dst_storage)", offset_of!(rdma_addr, dst_storage)),
        ("offsetof(struct rdma_addr, addr.ibaddr)", offset_of!(rdma_addr, ibaddr)),
        ("sizeof(struct rdma_route)", size_of::<rdma_route>()),
        ("offsetof(struct rdma_route, path_rec)", offset_of!(rdma_route, path_rec)),
        ("offsetof(struct rdma_route, num_paths)", offset_of!(rdma_route, num_paths)),
        ("sizeof(struct rdma_cm_id)", size_of::<rdma_cm_id>()),
        ("offsetof(struct rdma_cm_id, verbs)", offset_of!(rdma_cm_id, verbs)),
        ("offsetof(struct rdma_cm_id, channel)", offset_of!(rdma_cm_id, channel)),
        ("offsetof(struct rdma_cm_id, context)", offset_of!(rdma_cm_id, context)),
        ("offsetof(struct rdma_cm_id, qp)", offset_of!(rdma_cm_id, qp)),
        ("offsetof(struct rdma_cm_id, route)", offset_of!(rdma_cm_id, route)),
        ("offsetof(struct rdma_cm_id, ps)", offset_of!(rdma_cm_id, ps)),
        ("offsetof(struct rdma_cm_id, port_num)", offset_of!(rdma_cm_id, port_num)),
        ("offsetof(struct rdma_cm_id, event)", offset_of!(rdma_cm_id, event)),
        ("offsetof(struct rdma_cm_id, pd)", offset_of!(rdma_cm_id, pd)),
        ("offsetof(struct rdma_cm_id, qp_type)", offset_of!(rdma_cm_id, qp_type)),
        ("sizeof(struct rdma_conn_param)", size_of::<rdma_conn_param>()),
        ("offsetof(struct rdma_conn_param, private_data_len)", offset_of!(rdma_conn_param, private_data_len)),
        ("offsetof(struct rdma_conn_param, responder_resources)", offset_of!(rdma_conn_param, responder_resources)),
        ("offsetof(struct rdma_conn_param, initiator_depth)", offset_of!(rdma_conn_param, initiator_depth)),
        ("offsetof(struct rdma_conn_param, flow_control)", offset_of!(rdma_conn_param, flow_control)),
        ("offsetof(struct rdma_conn_param, retry_count)", offset_of!(rdma_conn_param, retry_count)),
        ("offsetof(struct rdma_conn_param, rnr_retry_count)", offset_of!(rdma_conn_param, rnr_retry_count)),
        ("offsetof(struct rdma_conn_param, srq)", offset_of!(rdma_conn_param, srq)),
        ("offsetof(struct rdma_conn_param, qp_num)", offset_of!(rdma_conn_param, qp_num)),
        ("sizeof(struct rdma_ud_param)", size_of::<rdma_ud_param>()),
        ("sizeof(struct rdma_cm_event)", size_of::<rdma_cm_event>()),
        ("offsetof(struct rdma_cm_event, id)", offset_of!(rdma_cm_event, id)),
        ("offsetof(struct rdma_cm_event, listen_id)", offset_of!(rdma_cm_event, listen_id)),
        ("offsetof(struct rdma_cm_event, event)", offset_of!(rdma_cm_event, event)),
        ("offsetof(struct rdma_cm_event, status)", offset_of!(rdma_cm_event, status)),
        ("offsetof(struct rdma_cm_event, param)", offset_of!(rdma_cm_event, param)),
        ("sizeof(enum rdma_port_space)", size_of::<u32>()),
        ("sizeof(enum rdma_cm_event_type)", size_of::<u32>()),
        ("RDMA_PS_TCP", RDMA_PS_TCP as usize),
        ("RDMA_CM_EVENT_ADDR_RESOLVED", RDMA_CM_EVENT_ADDR_RESOLVED as usize),
        ("RDMA_CM_EVENT_ROUTE_RESOLVED", RDMA_CM_EVENT_ROUTE_RESOLVED as usize),
        ("RDMA_CM_EVENT_CONNECT_REQUEST", RDMA_CM_EVENT_CONNECT_REQUEST as usize),
        ("RDMA_CM_EVENT_REJECTED", RDMA_CM_EVENT_REJECTED as usize),
        ("RDMA_CM_EVENT_ESTABLISHED", RDMA_CM_EVENT_ESTABLISHED as usize),
        ("RDMA_CM_EVENT_DISCONNECTED", RDMA_CM_EVENT_DISCONNECTED as usize),
    ]
}

/// What the C compiler says for each expression, from the system's header.
fn c_layout(exprs: &[&str]) -> BTreeMap<String, usize> {
    let dir = std::env::temp_dir().join(format!("rdma-dissect-cm-layout-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut src =
        String::from("#include <stddef.h>\n#include <stdio.h>\n#include <rdma/rdma_cma.h>\nint main(void) {\n");
    for e in exprs {
        src += &format!("    printf(\"%s=%zu\\n\", \"{e}\", (size_t)({e}));\n");
    }
    src += "    return 0;\n}\n";
    let (c, exe) = (dir.join("layout.c"), dir.join("layout"));
    std::fs::write(&c, src).unwrap();
    let cc = Command::new("cc").arg("-o").arg(&exe).arg(&c).output().expect("cc: a C compiler is needed (lab/setup)");
    assert!(
        cc.status.success(),
        "compiling against <rdma/rdma_cma.h> failed (is librdmacm-dev installed? lab/setup installs it):\n{}",
        String::from_utf8_lossy(&cc.stderr)
    );
    let out = Command::new(&exe).output().unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let (k, v) = l.rsplit_once('=').unwrap();
            (k.to_string(), v.parse().unwrap())
        })
        .collect()
}

#[test]
fn librdmacm_declarations_match_the_system_header() {
    let rust = rust_layout();
    let exprs: Vec<&str> = rust.iter().map(|(e, _)| *e).collect();
    let c = c_layout(&exprs);
    let wrong: Vec<String> = rust
        .iter()
        .filter(|(e, v)| c[*e] != *v)
        .map(|(e, v)| format!("{e}: C says {}, src/verbs/rdma_cm.rs {v}", c[*e]))
        .collect();
    assert!(wrong.is_empty(), "src/verbs/rdma_cm.rs disagrees with <rdma/rdma_cma.h>:\n{}", wrong.join("\n"));
}

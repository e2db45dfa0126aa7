//! Step 10's mistakes: the address the CM cannot route, a server nobody runs, and the two
//! permissions an RDMA READ needs — on the memory, and on the connection.
//!
//! Every case runs step 10 through `rping` (below) with one value spoiled; the side that does not
//! make the mistake runs as the step does. The two client cases that need no server
//! (`loopback-address`, `no-listener`) fail before any server would be involved: run the
//! client alone.

use std::net::{Ipv4Addr, SocketAddr};

use super::Case;
use crate::cli::RpingArgs;
use crate::error::{Error, Result};
use crate::role::Role;
use crate::rping::{ping_client, ping_server, rping_qp, PingOptions, RpingCb, RPING_ACCESS};
use crate::stages::alloc_pd::alloc_pd;
use crate::stages::create_qp::create_queues;
use crate::stages::rdma_cm::{accept, cm_create_qp, cm_verbs, connect, disconnect, listen, resolve, rping_conn_param};
use crate::verbs::{ibv_access_flags, rdma_conn_param, IBV_ACCESS_REMOTE_READ};

/// The cases of `10_rdma_cm --break`.
pub static CASES: [Case<RpingArgs>; 4] = [
    Case {
        name: "loopback-address",
        summary: "the client resolves 127.0.0.1 instead of the RDMA device's address",
        by: Some(Role::Client),
        rule: "the CM finds the device, port and route from the IP address. On RoCE the route\n\
               must leave through the netdev the RDMA device sits on; 127.0.0.1 is on `lo`,\n\
               which carries no RDMA device, so route resolution fails (ENODEV on rxe; on siw0\n\
               the lab sees address resolution refuse it already, EINVAL)",
        code: "src/breakit/rdma_cm.rs: the client's address is 127.0.0.1; the correct one is -a,\n\
               resolved in steps/10_rdma_cm.rs (new)",
        fix: "give -a the address of the RDMA device's netdev (192.0.2.1 in the lab VM), on both\n\
              sides; `rdma link show` names the netdev, `ip -br addr` its address",
        run: loopback_address,
    },
    Case {
        name: "no-listener",
        summary: "the client connects to -p + 1, where nobody listens",
        by: Some(Role::Client),
        rule: "a connection request goes to the CM of the peer's device, which hands it to the\n\
               id listening on that port. With none, the peer's CM answers with a reject, and\n\
               the client's id gets RDMA_CM_EVENT_REJECTED with the reason as its status",
        code: "src/breakit/rdma_cm.rs: the client's port is -p + 1; the correct one is -p",
        fix: "start the server first, and give both sides the same -a and -p",
        run: no_listener,
    },
    Case {
        name: "start-without-remote-read",
        summary: "the client registers its source buffer without IBV_ACCESS_REMOTE_READ",
        by: Some(Role::Client),
        rule: "an RDMA READ needs the target MR's permission, granted at ibv_reg_mr with\n\
               IBV_ACCESS_REMOTE_READ. Without it the target's device answers the read with a\n\
               remote access error NAK: the reader's READ completes in error, and its QP, like\n\
               the target's, goes to the error state. Soft-iWARP (siw) does not check: it sends\n\
               the READ response from any registered buffer (siw_qp_tx.c checks the source of\n\
               a READ response with no access bits), so on siw0 the read succeeds, and the\n\
               client reports that instead",
        code: "src/breakit/rdma_cm.rs: the start buffer's access lacks REMOTE_READ; the correct\n\
               flags are src/rping/mod.rs RPING_ACCESS, which steps/10_rdma_cm.rs passes",
        fix: "register a buffer a peer reads with IBV_ACCESS_REMOTE_READ",
        run: start_without_remote_read,
    },
    Case {
        name: "no-responder-resources",
        summary: "the client connects with responder_resources = 0 and initiator_depth = 0",
        by: Some(Role::Client),
        rule: "an RDMA READ takes a responder resource at the target (max_dest_rd_atomic) and\n\
               a slot of initiator depth at the reader (max_rd_atomic) while in flight. The CM\n\
               sets both from the connection parameters: the server, accepting with NULL, takes\n\
               the client's responder_resources as its initiator depth. With 0, the server's\n\
               QP may have no READ outstanding at all",
        code: "src/breakit/rdma_cm.rs: rdma_conn_param with 0 and 0; the correct values are\n\
               rping_conn_param's 1 and 1 (src/stages/rdma_cm.rs)",
        fix: "offer at least one responder resource (and initiator depth) in rdma_connect's\n\
              rdma_conn_param when the peer will READ from you",
        run: no_responder_resources,
    },
];

/// Step 10's body, with the client's address, source buffer access and connection
/// parameters as given; whether the device was an iWARP one.
fn rping(args: &RpingArgs, addr: SocketAddr, start_access: ibv_access_flags, param: rdma_conn_param) -> Result<bool> {
    let opts = PingOptions {
        count: args.count,
        size: args.size,
        verbose: args.verbose,
        validate: args.validate,
        timeout: args.timeout,
    };
    let role = args.role();
    let ep = match role {
        Role::Server => listen(addr, args.timeout)?,
        Role::Client => resolve(addr, args.timeout)?,
    };
    let ctx = cm_verbs(&ep)?;
    let pd = alloc_pd(&ctx)?;
    let q = create_queues(&ctx, &pd, rping_qp(), cm_create_qp(&ep.id))?;
    let mut cb = RpingCb::setup(q, &pd, args.size, (role == Role::Client).then_some(start_access))?;
    match role {
        Role::Server => {
            accept(&ep, &cb.q.qp, args.timeout)?;
            ping_server(&ep, &mut cb, opts)?;
        }
        Role::Client => {
            connect(&ep, &cb.q.qp, &param, args.timeout)?;
            ping_client(&mut cb, opts)?;
        }
    }
    disconnect(&ep, &cb.q.qp, role == Role::Client, args.timeout)?;
    Ok(cb.q.qp.is_iwarp())
}

/// The address to bind (server: `-a` and `-p`, as the step does) or to connect to (client:
/// what `client` makes of them, the mistake).
fn addr_for(args: &RpingArgs, client: impl FnOnce(SocketAddr) -> SocketAddr) -> Result<SocketAddr> {
    let addr = args.sockaddr()?;
    Ok(match args.role() {
        Role::Server => addr,
        Role::Client => client(addr),
    })
}

fn loopback_address(args: &RpingArgs) -> Result<()> {
    let addr = addr_for(args, |a| SocketAddr::new(Ipv4Addr::LOCALHOST.into(), a.port()))?;
    rping(args, addr, RPING_ACCESS, rping_conn_param()).map(drop)
}

fn no_listener(args: &RpingArgs) -> Result<()> {
    let addr = addr_for(args, |a| SocketAddr::new(a.ip(), a.port().wrapping_add(1)))?;
    rping(args, addr, RPING_ACCESS, rping_conn_param()).map(drop)
}

fn start_without_remote_read(args: &RpingArgs) -> Result<()> {
    let access = ibv_access_flags(RPING_ACCESS.0 & !IBV_ACCESS_REMOTE_READ.0);
    let iwarp = rping(args, args.sockaddr()?, access, rping_conn_param())?;
    if iwarp && args.role() == Role::Client {
        // Nothing failed, and nothing should have: say so rather than end as if all was well.
        return Err(Error::new("the READ's access check").cause(
            "the server's RDMA READ of the client's source buffer succeeded, though the buffer \
             was registered without IBV_ACCESS_REMOTE_READ: this iWARP device did not check the \
             MR's remote access (siw does not)",
        ));
    }
    Ok(())
}

fn no_responder_resources(args: &RpingArgs) -> Result<()> {
    let param = rdma_conn_param { responder_resources: 0, initiator_depth: 0, ..rping_conn_param() };
    rping(args, args.sockaddr()?, RPING_ACCESS, param).map(drop)
}

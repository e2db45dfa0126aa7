//! The connection manager (librdmacm): the event channel, CM ids and their events.
//!
//! rdma_cm is to RDMA what the socket API is to TCP: an id (`struct rdma_cm_id`, "a
//! socket") is bound, listens, resolves an IP address to a device, port and path, and
//! connects — and the library moves the QP through INIT, RTR and RTS itself, with the
//! attributes the CM negotiated on the wire. Everything it has to say arrives as *events*
//! on an event channel (a file descriptor), one at a time, each acknowledged.
//!
//! # Why declarations written by hand
//!
//! No crate on crates.io binds librdmacm with `ibverbs-sys`' `ibv_*` types, and the CM's
//! functions take and return exactly those (`ibv_context`, `ibv_pd`, `ibv_qp`,
//! `ibv_qp_init_attr`, `ibv_qp_attr`): a binding with its own copies of them would need
//! a pointer cast at every call. A bindgen build script would need libclang at build time,
//! which the lab's package list does not otherwise need. So [`sys`] declares the few
//! functions step 10 calls and the structs it reads, in `rdma/rdma_cma.h`'s field order,
//! over `ibverbs-sys`' types. A declaration that drifts from the header would read garbage
//! without any error: `tests/no_device/cm_layout.rs` compiles a C program against the
//! system's header and checks every size and offset declared here against it.
//!
//! # Ownership
//!
//! ```text
//! EventChannel ◄─ CmId ◄─ Context (the device the CM bound the id to) ◄─ Pd, Cq, Qp ...
//! ```
//!
//! An id reports on its channel, so the channel outlives it (`rdma_destroy_event_channel`
//! requires every id destroyed). The verbs context of an id belongs to librdmacm, which
//! opened it; it stays usable as long as an id is bound to it, so a [`Context`] made
//! from an id keeps the id alive, and PDs, CQs and QPs keep that context alive as for a
//! device we opened. A QP created by the CM is destroyed with `rdma_destroy_qp` before its
//! id (see [`Qp::create_cm`]).

use std::ffi::{c_int, CStr};
use std::io;
use std::net::SocketAddr;
use std::ptr::{self, NonNull};
use std::rc::Rc;
use std::time::Duration;

use super::*;
use crate::error::{Error, Result};
use crate::trace;

/// librdmacm's C declarations, as far as step 10 uses them, laid out as in
/// `rdma/rdma_cma.h` (checked by `tests/no_device/cm_layout.rs`).
#[allow(non_camel_case_types, missing_docs)]
pub mod sys {
    use std::ffi::{c_char, c_int, c_void};

    use ibverbs_sys::{ibv_ah_attr, ibv_comp_channel, ibv_context, ibv_cq, ibv_gid, ibv_pd, ibv_qp, ibv_srq};
    pub use ibverbs_sys::{ibv_qp_attr, ibv_qp_init_attr};

    /// `enum rdma_port_space`: TCP's port space (connected, reliable: an RC QP).
    pub const RDMA_PS_TCP: u32 = 0x0106;

    /// `struct rdma_event_channel`.
    #[repr(C)]
    pub struct rdma_event_channel {
        pub fd: c_int,
    }

    /// `struct rdma_ib_addr`.
    #[repr(C)]
    pub struct rdma_ib_addr {
        pub sgid: ibv_gid,
        pub dgid: ibv_gid,
        pub pkey: u16,
    }

    /// `struct rdma_addr`: its unions of `sockaddr` kinds, as `sockaddr_storage`s.
    #[repr(C)]
    pub struct rdma_addr {
        pub src_storage: libc::sockaddr_storage,
        pub dst_storage: libc::sockaddr_storage,
        pub ibaddr: rdma_ib_addr,
    }

    /// `struct rdma_route`.
    #[repr(C)]
    pub struct rdma_route {
        pub addr: rdma_addr,
        pub path_rec: *mut c_void,
        pub num_paths: c_int,
    }

    /// `struct rdma_cm_id`.
    #[repr(C)]
    pub struct rdma_cm_id {
        pub verbs: *mut ibv_context,
        pub channel: *mut rdma_event_channel,
        pub context: *mut c_void,
        pub qp: *mut ibv_qp,
        pub route: rdma_route,
        pub ps: u32,
        pub port_num: u8,
        pub event: *mut rdma_cm_event,
        pub send_cq_channel: *mut ibv_comp_channel,
        pub send_cq: *mut ibv_cq,
        pub recv_cq_channel: *mut ibv_comp_channel,
        pub recv_cq: *mut ibv_cq,
        pub srq: *mut ibv_srq,
        pub pd: *mut ibv_pd,
        pub qp_type: u32,
    }

    /// `struct rdma_conn_param`: what a connect or accept asks of the connection.
    #[repr(C)]
    #[derive(Clone, Copy, Debug)]
    pub struct rdma_conn_param {
        pub private_data: *const c_void,
        pub private_data_len: u8,
        pub responder_resources: u8,
        pub initiator_depth: u8,
        pub flow_control: u8,
        pub retry_count: u8,
        pub rnr_retry_count: u8,
        pub srq: u8,
        pub qp_num: u32,
    }

    /// `struct rdma_ud_param` (only its size matters here: it shares a union with
    /// [`rdma_conn_param`]).
    #[repr(C)]
    #[derive(Clone, Copy)]
    pub struct rdma_ud_param {
        pub private_data: *const c_void,
        pub private_data_len: u8,
        pub ah_attr: ibv_ah_attr,
        pub qp_num: u32,
        pub qkey: u32,
    }

    /// The `param` union of an event.
    #[repr(C)]
    #[derive(Clone, Copy)]
    pub union rdma_cm_event_param {
        pub conn: rdma_conn_param,
        pub ud: rdma_ud_param,
    }

    /// `struct rdma_cm_event`.
    #[repr(C)]
    pub struct rdma_cm_event {
        pub id: *mut rdma_cm_id,
        pub listen_id: *mut rdma_cm_id,
        pub event: u32,
        pub status: c_int,
        pub param: rdma_cm_event_param,
    }

    /// `enum rdma_cm_event_type`, the values step 10 acts on.
    pub const RDMA_CM_EVENT_ADDR_RESOLVED: u32 = 0;
    pub const RDMA_CM_EVENT_ROUTE_RESOLVED: u32 = 2;
    pub const RDMA_CM_EVENT_CONNECT_REQUEST: u32 = 4;
    pub const RDMA_CM_EVENT_REJECTED: u32 = 8;
    pub const RDMA_CM_EVENT_ESTABLISHED: u32 = 9;
    pub const RDMA_CM_EVENT_DISCONNECTED: u32 = 10;

    #[link(name = "rdmacm")]
    extern "C" {
        pub fn rdma_create_event_channel() -> *mut rdma_event_channel;
        pub fn rdma_destroy_event_channel(channel: *mut rdma_event_channel);
        pub fn rdma_create_id(
            channel: *mut rdma_event_channel,
            id: *mut *mut rdma_cm_id,
            context: *mut c_void,
            ps: u32,
        ) -> c_int;
        pub fn rdma_destroy_id(id: *mut rdma_cm_id) -> c_int;
        pub fn rdma_bind_addr(id: *mut rdma_cm_id, addr: *mut libc::sockaddr) -> c_int;
        pub fn rdma_resolve_addr(
            id: *mut rdma_cm_id,
            src_addr: *mut libc::sockaddr,
            dst_addr: *mut libc::sockaddr,
            timeout_ms: c_int,
        ) -> c_int;
        pub fn rdma_resolve_route(id: *mut rdma_cm_id, timeout_ms: c_int) -> c_int;
        pub fn rdma_listen(id: *mut rdma_cm_id, backlog: c_int) -> c_int;
        pub fn rdma_connect(id: *mut rdma_cm_id, conn_param: *mut rdma_conn_param) -> c_int;
        pub fn rdma_accept(id: *mut rdma_cm_id, conn_param: *mut rdma_conn_param) -> c_int;
        pub fn rdma_disconnect(id: *mut rdma_cm_id) -> c_int;
        pub fn rdma_create_qp(id: *mut rdma_cm_id, pd: *mut ibv_pd, qp_init_attr: *mut ibv_qp_init_attr) -> c_int;
        pub fn rdma_destroy_qp(id: *mut rdma_cm_id);
        pub fn rdma_init_qp_attr(id: *mut rdma_cm_id, qp_attr: *mut ibv_qp_attr, qp_attr_mask: *mut c_int) -> c_int;
        pub fn rdma_get_cm_event(channel: *mut rdma_event_channel, event: *mut *mut rdma_cm_event) -> c_int;
        pub fn rdma_ack_cm_event(event: *mut rdma_cm_event) -> c_int;
        pub fn rdma_event_str(event: u32) -> *const c_char;
    }
}

pub use sys::rdma_conn_param;

/// The name of an `enum rdma_cm_event_type` value, as `rdma_event_str` gives it.
pub fn event_name(kind: u32) -> String {
    // SAFETY: rdma_event_str returns a static string for any value.
    unsafe { CStr::from_ptr(sys::rdma_event_str(kind)) }.to_string_lossy().into_owned()
}

/// librdmacm's functions return 0, or -1 with errno set.
fn cm_check(what: &str, rc: c_int) -> Result<()> {
    if rc == 0 {
        Ok(())
    } else {
        Err(Error::verb(what, io::Error::last_os_error()))
    }
}

/// `struct rdma_event_channel`: the file descriptor the CM reports every event of its ids
/// on.
pub struct EventChannel {
    raw: NonNull<sys::rdma_event_channel>,
}

impl EventChannel {
    /// `rdma_create_event_channel`.
    pub fn create() -> Result<Rc<Self>> {
        // ANCHOR: c_rdma_create_event_channel
        // C: struct rdma_event_channel *rdma_create_event_channel(void);
        // The channel, or NULL with errno set.
        // SAFETY: no arguments; the result is checked for NULL.
        let raw = unsafe { sys::rdma_create_event_channel() };
        let raw = NonNull::new(raw).ok_or_else(|| {
            Error::verb("rdma_create_event_channel", io::Error::last_os_error())
                .cause(
                    "librdmacm opens /dev/infiniband/rdma_cm, which exists once the kernel's rdma_ucm module is loaded",
                )
                .fix("sudo modprobe rdma_ucm (the lab VM loads it; lab/rxe up does too)")
        })?;
        // ANCHOR_END: c_rdma_create_event_channel
        trace::event("rdma_create_event_channel").emit();
        Ok(Rc::new(EventChannel { raw }))
    }

    fn fd(&self) -> c_int {
        // SAFETY: raw points to a live channel; fd is a plain field.
        unsafe { self.raw.as_ref().fd }
    }

    /// Whether an event is waiting, after waiting at most `timeout` for one.
    pub fn ready(&self, timeout: Duration) -> Result<bool> {
        let mut pfd = libc::pollfd { fd: self.fd(), events: libc::POLLIN, revents: 0 };
        let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: pfd is one valid pollfd for the duration of the call.
        let n = unsafe { libc::poll(&mut pfd, 1, ms) };
        if n < 0 {
            return Err(Error::verb("poll(rdma_event_channel fd)", io::Error::last_os_error()));
        }
        Ok(n > 0)
    }

    /// `rdma_get_cm_event`, then `rdma_ack_cm_event` once what the event says is copied out.
    /// `ids` are the ids of ours the event may be about; a CONNECT_REQUEST comes with a
    /// new id, which [`CmEvent::new_id`] owns. Call it when [`EventChannel::ready`] said so:
    /// the verb blocks until an event comes.
    pub fn get_event(self: &Rc<Self>, ids: &[&CmId]) -> Result<CmEvent> {
        let mut raw = ptr::null_mut();
        // ANCHOR: c_rdma_get_cm_event
        // C: int rdma_get_cm_event(struct rdma_event_channel *channel,
        //                          struct rdma_cm_event **event);
        // 0 and the next event, or -1 with errno set. Blocks while no event is pending.
        // SAFETY: raw (self) is a live channel; the out-pointer is valid.
        let rc = unsafe { sys::rdma_get_cm_event(self.raw.as_ptr(), &mut raw) };
        cm_check("rdma_get_cm_event", rc)?;
        // ANCHOR_END: c_rdma_get_cm_event
        // SAFETY: on success, raw points to an event librdmacm keeps until it is acked.
        let ev = unsafe { &*raw };
        let kind = ev.event;
        let name = event_name(kind);
        // For a connected id, the param union holds the conn member (ud is for datagram ids).
        // SAFETY: every event of an RDMA_PS_TCP id carries conn; private_data points into
        // the event, so it is cleared here: the copy outlives the ack.
        let conn = rdma_conn_param { private_data: ptr::null(), private_data_len: 0, ..unsafe { ev.param.conn } };
        let known = ids.iter().find(|id| id.raw.as_ptr() == ev.id).map(|id| id.name);
        let new_id = match (known, NonNull::new(ev.id)) {
            (None, Some(id)) if kind == sys::RDMA_CM_EVENT_CONNECT_REQUEST => {
                Some(Rc::new(CmId { raw: id, name: "child", _channel: Rc::clone(self) }))
            }
            _ => None,
        };
        let id = known.or(new_id.as_ref().map(|id| id.name)).unwrap_or("unknown");
        let status = ev.status;
        // ANCHOR: c_rdma_ack_cm_event
        // C: int rdma_ack_cm_event(struct rdma_cm_event *event);
        // Frees the event. rdma_destroy_id waits for every event of its id to be acked.
        // SAFETY: raw came from rdma_get_cm_event and is acked once, after the last read.
        let rc = unsafe { sys::rdma_ack_cm_event(raw) };
        cm_check("rdma_ack_cm_event", rc)?;
        // ANCHOR_END: c_rdma_ack_cm_event
        Ok(CmEvent { kind, name, status, id, conn, new_id })
    }
}

impl Drop for EventChannel {
    fn drop(&mut self) {
        // SAFETY: every id holds an Rc of its channel, so none is alive; destroyed once.
        unsafe { sys::rdma_destroy_event_channel(self.raw.as_ptr()) };
        trace::event("rdma_destroy_event_channel").emit();
    }
}

/// One event, copied out of librdmacm's before it was acknowledged.
pub struct CmEvent {
    /// `event->event`, an `enum rdma_cm_event_type` value (`sys::RDMA_CM_EVENT_*`).
    pub kind: u32,
    /// Its name, as `rdma_event_str` gives it.
    pub name: String,
    /// `event->status`: 0, a negative errno, or (REJECTED) the transport's reject reason.
    pub status: i32,
    /// The name of the id it is about (`listen`, `child`, `client`).
    pub id: &'static str,
    /// `event->param.conn`, without its private data.
    pub conn: rdma_conn_param,
    /// A CONNECT_REQUEST's new id, which the listener's owner now owns.
    pub new_id: Option<Rc<CmId>>,
}

/// `struct rdma_cm_id`: the CM's socket. It is bound to a device once an address is
/// resolved (client) or a connection request arrives on it (server's child id).
pub struct CmId {
    raw: NonNull<sys::rdma_cm_id>,
    name: &'static str,
    _channel: Rc<EventChannel>,
}

/// An IP address and port as the `struct sockaddr` librdmacm reads.
fn sockaddr(addr: SocketAddr) -> libc::sockaddr_storage {
    // SAFETY: all-zero is a valid sockaddr_storage (plain integers).
    let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    match addr {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr { s_addr: u32::from_ne_bytes(a.ip().octets()) },
                sin_zero: [0; 8],
            };
            // SAFETY: a sockaddr_in fits in a sockaddr_storage, which is aligned for it.
            unsafe { ptr::write(ptr::addr_of_mut!(storage).cast(), sin) };
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo(),
                sin6_addr: libc::in6_addr { s6_addr: a.ip().octets() },
                sin6_scope_id: a.scope_id(),
            };
            // SAFETY: as above, for a sockaddr_in6.
            unsafe { ptr::write(ptr::addr_of_mut!(storage).cast(), sin6) };
        }
    }
    storage
}

impl CmId {
    /// `rdma_create_id(channel, &id, NULL, RDMA_PS_TCP)`: an id for a reliable connection,
    /// named `name` in the trace.
    pub fn create(channel: &Rc<EventChannel>, name: &'static str) -> Result<Rc<Self>> {
        let mut raw = ptr::null_mut();
        // ANCHOR: c_rdma_create_id
        // C: int rdma_create_id(struct rdma_event_channel *channel, struct rdma_cm_id **id,
        //                       void *context, enum rdma_port_space ps);
        // 0, or -1 with errno set. RDMA_PS_TCP: connected and reliable, an RC QP.
        // SAFETY: channel is live; the out-pointer is valid; no context is passed.
        let rc = unsafe { sys::rdma_create_id(channel.raw.as_ptr(), &mut raw, ptr::null_mut(), sys::RDMA_PS_TCP) };
        cm_check("rdma_create_id", rc)?;
        // ANCHOR_END: c_rdma_create_id
        let raw = NonNull::new(raw).ok_or_else(|| Error::new("rdma_create_id").cause("it returned no id"))?;
        trace::event("rdma_create_id").kv("id", name).kv("ps", "RDMA_PS_TCP").emit();
        Ok(Rc::new(CmId { raw, name, _channel: Rc::clone(channel) }))
    }

    /// The name the trace gives this id.
    pub fn name(&self) -> &'static str {
        self.name
    }

    pub(super) fn as_ptr(&self) -> *mut sys::rdma_cm_id {
        self.raw.as_ptr()
    }

    /// The port of the device the CM bound the id to (`id->port_num`), 0 while unbound.
    pub fn port_num(&self) -> u8 {
        // SAFETY: raw points to a live id; port_num is a plain field.
        unsafe { self.raw.as_ref().port_num }
    }

    /// Our GID on that port (`id->route.addr.addr.ibaddr.sgid`), the one the CM chose for
    /// the resolved address; all zero while unbound.
    pub fn sgid(&self) -> [u8; 16] {
        // SAFETY: raw points to a live id; the route's address is plain data librdmacm
        // fills when it binds the id.
        gid_bytes(unsafe { &self.raw.as_ref().route.addr.ibaddr.sgid })
    }

    /// The verbs context of the device the CM bound the id to (`id->verbs`), if bound.
    pub(super) fn verbs(&self) -> Option<NonNull<ffi::ibv_context>> {
        // SAFETY: raw points to a live id; verbs is a plain field.
        NonNull::new(unsafe { self.raw.as_ref().verbs })
    }

    /// `rdma_bind_addr`: the id takes `addr` (and, for a specific address, its device).
    pub fn bind_addr(&self, addr: SocketAddr) -> Result<()> {
        let mut sa = sockaddr(addr);
        // ANCHOR: c_rdma_bind_addr
        // C: int rdma_bind_addr(struct rdma_cm_id *id, struct sockaddr *addr);
        // 0, or -1 with errno set (EADDRINUSE: another id has the port; EADDRNOTAVAIL: no
        // local netdev has this address; ENODEV: the netdev that has it has no RDMA device).
        // SAFETY: raw is live; sa is a valid sockaddr of addr's family.
        let rc = unsafe { sys::rdma_bind_addr(self.as_ptr(), ptr::addr_of_mut!(sa).cast()) };
        cm_check(&format!("rdma_bind_addr({addr})"), rc)
        // ANCHOR_END: c_rdma_bind_addr
    }

    /// `rdma_listen(id, backlog)`.
    pub fn listen(&self, backlog: i32) -> Result<()> {
        // SAFETY: raw is a live, bound id.
        let rc = unsafe { sys::rdma_listen(self.as_ptr(), backlog) };
        cm_check("rdma_listen", rc)
    }

    /// `rdma_resolve_addr(id, NULL, dst, timeout_ms)`: asks for ADDR_RESOLVED (or
    /// ADDR_ERROR) on the channel.
    pub fn resolve_addr(&self, dst: SocketAddr, timeout_ms: i32) -> Result<()> {
        let mut sa = sockaddr(dst);
        // SAFETY: raw is live; sa is a valid sockaddr; no source address is given.
        let rc =
            unsafe { sys::rdma_resolve_addr(self.as_ptr(), ptr::null_mut(), ptr::addr_of_mut!(sa).cast(), timeout_ms) };
        cm_check(&format!("rdma_resolve_addr({dst})"), rc)
    }

    /// `rdma_resolve_route(id, timeout_ms)`: asks for ROUTE_RESOLVED (or ROUTE_ERROR).
    pub fn resolve_route(&self, timeout_ms: i32) -> Result<()> {
        // SAFETY: raw is a live id whose address is resolved.
        let rc = unsafe { sys::rdma_resolve_route(self.as_ptr(), timeout_ms) };
        cm_check("rdma_resolve_route", rc)
    }

    /// `rdma_connect(id, &param)`: sends the connection request.
    pub fn connect(&self, param: &rdma_conn_param) -> Result<()> {
        let mut param = *param;
        // SAFETY: raw is live; param is valid and has no private data.
        let rc = unsafe { sys::rdma_connect(self.as_ptr(), &mut param) };
        cm_check("rdma_connect", rc)
    }

    /// `rdma_accept(id, NULL)`, as rping does: the CM then takes the responder resources
    /// and initiator depth from the request, bounded by the device.
    pub fn accept(&self) -> Result<()> {
        // SAFETY: raw is a live child id with a QP; NULL asks for the defaults.
        let rc = unsafe { sys::rdma_accept(self.as_ptr(), ptr::null_mut()) };
        cm_check("rdma_accept", rc)
    }

    /// `rdma_disconnect`: moves the id's QP to ERR and tells the peer.
    pub fn disconnect(&self) -> Result<()> {
        // SAFETY: raw is a live, connected id.
        let rc = unsafe { sys::rdma_disconnect(self.as_ptr()) };
        cm_check("rdma_disconnect", rc)
    }

    /// `rdma_init_qp_attr` for a move to `state`: the attributes and the mask the CM would
    /// pass to `ibv_modify_qp` — and does, when it moves a QP it created.
    pub fn init_qp_attr(&self, state: ffi::ibv_qp_state::Type) -> Result<(ibv_qp_attr, ibv_qp_attr_mask)> {
        let mut attr = ibv_qp_attr { qp_state: state, ..Default::default() };
        let mut mask: c_int = 0;
        // ANCHOR: c_rdma_init_qp_attr
        // C: int rdma_init_qp_attr(struct rdma_cm_id *id, struct ibv_qp_attr *qp_attr,
        //                          int *qp_attr_mask);
        // 0 with the attributes and mask filled in, or -1 with errno set.
        // SAFETY: raw is live; both out-pointers are valid.
        let rc = unsafe { sys::rdma_init_qp_attr(self.as_ptr(), &mut attr, &mut mask) };
        cm_check(&format!("rdma_init_qp_attr({})", names::state_name(state)), rc)?;
        // ANCHOR_END: c_rdma_init_qp_attr
        Ok((attr, ibv_qp_attr_mask(mask as u32)))
    }
}

impl Drop for CmId {
    fn drop(&mut self) {
        // SAFETY: the QP, context and PD made from this id hold an Rc of it, so they are
        // gone; its events were acked in get_event. Destroyed once.
        let rc = unsafe { sys::rdma_destroy_id(self.raw.as_ptr()) };
        if rc != 0 {
            eprintln!("error: {}", Error::verb("rdma_destroy_id", io::Error::last_os_error()));
        }
        trace::event("rdma_destroy_id").kv("id", self.name).emit();
    }
}

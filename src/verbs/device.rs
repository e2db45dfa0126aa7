//! The device: the list of RDMA devices, an open device context, and what it reports
//! (`ibv_query_device`, `ibv_query_port`, the GID table).

use std::ffi::CStr;
use std::io;
use std::ptr::{self, NonNull};
use std::rc::Rc;

use ibverbs_sys as ffi;

use super::*;
use crate::error::{Error, Result};
use crate::trace;

/// `ibv_get_device_list`: the RDMA devices of this host.
///
/// `ibv_get_device_list(3)` allows freeing the list as soon as the devices wanted are open;
/// `ibv_rc_pingpong` frees it only at the very end, and so do we, to keep its order:
/// [`Context::open`] takes the list and frees it after closing the device.
pub struct DeviceList {
    list: NonNull<*mut ffi::ibv_device>,
    len: usize,
}

impl DeviceList {
    /// Calls `ibv_get_device_list`. Fails with the errno it sets (`ENOSYS` when the kernel
    /// has no RDMA support at all); an empty list is *not* an error here.
    pub fn get() -> Result<Self> {
        let mut num = 0;
        // ANCHOR: c_ibv_get_device_list
        // C: struct ibv_device **ibv_get_device_list(int *num_devices);
        // The array, or NULL with errno set.
        // SAFETY: `num` is a valid out-pointer; the returned array (NULL-terminated, `num`
        // entries) is owned by us until ibv_free_device_list.
        let list = unsafe { ffi::ibv_get_device_list(&mut num) };
        let Some(list) = NonNull::new(list) else {
            return Err(Error::verb("ibv_get_device_list", io::Error::last_os_error()));
        };
        // ANCHOR_END: c_ibv_get_device_list
        let list = DeviceList { list, len: usize::try_from(num).unwrap_or(0) };
        trace::event("ibv_get_device_list").kv("num_devices", list.len).emit();
        Ok(list)
    }

    /// Number of devices in the list.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when the host has RDMA support but no device (no `rdma link add` yet).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn device(&self, index: usize) -> *mut ffi::ibv_device {
        assert!(index < self.len, "device index {index} out of range");
        // SAFETY: index < len, and the array holds len valid device pointers.
        unsafe { *self.list.as_ptr().add(index) }
    }

    /// `ibv_get_device_name` of device `index`, e.g. `rxe0` or `mlx5_0`.
    pub fn name(&self, index: usize) -> String {
        // SAFETY: device() is a valid device; its name is a NUL-terminated string that
        // lives as long as the list.
        let name = unsafe { CStr::from_ptr(ffi::ibv_get_device_name(self.device(index))) };
        name.to_string_lossy().into_owned()
    }

    /// `ibv_get_device_guid` of device `index`, in host order (the verb returns it in
    /// network order, as it travels in InfiniBand packets).
    pub fn guid(&self, index: usize) -> u64 {
        // SAFETY: device() is a valid device pointer.
        u64::from_be(unsafe { ffi::ibv_get_device_guid(self.device(index)) })
    }
}

impl Drop for DeviceList {
    fn drop(&mut self) {
        // SAFETY: the list came from ibv_get_device_list and is freed exactly once.
        unsafe { ffi::ibv_free_device_list(self.list.as_ptr()) };
        trace::event("ibv_free_device_list").emit();
    }
}

/// `struct ibv_context`: an open device, the root of every other verbs object.
///
/// Opening a device gives this process its own channel to the kernel driver (the
/// `/dev/infiniband/uverbs*` file); PDs, CQs and QPs are all created through it.
pub struct Context {
    pub(super) raw: NonNull<ffi::ibv_context>,
    name: String,
    owner: Owner,
}

/// Who opened a context, and so who closes it.
enum Owner {
    /// We did, with `ibv_open_device`; the list is dropped after Drop::drop has closed the
    /// device: rc_pingpong frees the list last.
    Us { _list: DeviceList },
    /// librdmacm did, for the device it bound this id to: it closes it, not us.
    Cm { _id: Rc<CmId> },
}

impl Context {
    /// `ibv_open_device` on device `index` of `list`, which the context keeps until it is
    /// closed.
    pub fn open(list: DeviceList, index: usize) -> Result<Rc<Self>> {
        let name = list.name(index);
        // ANCHOR: c_ibv_open_device
        // C: struct ibv_context *ibv_open_device(struct ibv_device *device);
        // The context, or NULL with errno set.
        // SAFETY: device() is a valid device of a live list.
        let raw = unsafe { ffi::ibv_open_device(list.device(index)) };
        let raw = NonNull::new(raw)
            .ok_or_else(|| Error::verb(format!("ibv_open_device({name})"), io::Error::last_os_error()))?;
        // ANCHOR_END: c_ibv_open_device
        trace::event("ibv_open_device").kv("device", &name).emit();
        Ok(Rc::new(Context { raw, name, owner: Owner::Us { _list: list } }))
    }

    /// The context of the device the CM bound `id` to (`id->verbs`), which librdmacm
    /// opened: what rping passes to `ibv_alloc_pd` and `ibv_create_cq`. It keeps the id.
    pub fn of_cm_id(id: &Rc<CmId>) -> Result<Rc<Self>> {
        let raw = id.verbs().ok_or_else(|| {
            Error::new(format!("the verbs context of CM id {}", id.name()))
                .cause("the id is bound to no device yet: its address is not resolved and no request came on it")
        })?;
        // SAFETY: raw is a context librdmacm keeps open while an id is bound to it; its
        // device pointer and name are set at open.
        let name = unsafe { CStr::from_ptr(ffi::ibv_get_device_name((*raw.as_ptr()).device)) };
        let name = name.to_string_lossy().into_owned();
        Ok(Rc::new(Context { raw, name, owner: Owner::Cm { _id: Rc::clone(id) } }))
    }

    /// The device name, e.g. `rxe0`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `ibv_get_async_event`, waiting at most `timeout` (0: only if one is there): the
    /// next *asynchronous* event (`IBV_EVENT_CQ_ERR`, `IBV_EVENT_QP_FATAL`,
    /// `IBV_EVENT_SRQ_LIMIT_REACHED`, ...), or `None` if none came. The event is
    /// acknowledged by [`AsyncEvent::ack`] or when dropped.
    ///
    /// Errors that belong to no work request — a CQ that overflowed, a QP that broke
    /// outside any WR — are not reported by any verb call: the device queues them on the
    /// context's async fd, and a program that never reads it never learns of them. The
    /// verb itself blocks (a read(2) of that fd); a `poll(2)` first bounds the wait. (A
    /// production program reads them on a thread of its own, blocking in the verb.)
    pub fn get_async_event(&self, timeout: std::time::Duration) -> Result<Option<AsyncEvent<'_>>> {
        // SAFETY: raw is an open context; async_fd is a plain field set at open.
        let fd = unsafe { (*self.raw.as_ptr()).async_fd };
        let mut pfd = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
        let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: pfd is one valid pollfd for the duration of the call.
        let n = unsafe { libc::poll(&mut pfd, 1, ms) };
        if n < 0 {
            return Err(Error::verb("poll(async_fd)", io::Error::last_os_error()));
        }
        if n == 0 {
            return Ok(None);
        }
        // SAFETY: zeroed is a valid ibv_async_event (plain C data) for the verb to fill.
        let mut raw: ffi::ibv_async_event = unsafe { std::mem::zeroed() };
        // ANCHOR: c_ibv_get_async_event
        // C: int ibv_get_async_event(struct ibv_context *context,
        //                            struct ibv_async_event *event);
        // 0, or -1 with errno set. Blocks until an event comes; every event it returns
        // must be acknowledged with ibv_ack_async_event.
        // SAFETY: raw is an open context and `raw` a valid out-struct; poll said an event
        // is ready, so the (blocking) verb returns at once.
        let rc = unsafe { ffi::ibv_get_async_event(self.raw.as_ptr(), &mut raw) };
        check("ibv_get_async_event", rc)?;
        // ANCHOR_END: c_ibv_get_async_event
        Ok(Some(AsyncEvent { raw, acked: false, _ctx: self }))
    }

    /// `ibv_query_device`: the device's limits and identity.
    pub fn query_device(&self) -> Result<ibv_device_attr> {
        let mut attr = ibv_device_attr::default();
        // ANCHOR: c_ibv_query_device
        // C: int ibv_query_device(struct ibv_context *context,
        //                         struct ibv_device_attr *device_attr);
        // 0, or the error number itself (errno is not the place to look).
        // SAFETY: raw is an open context and attr a valid out-pointer.
        let rc = unsafe { ffi::ibv_query_device(self.raw.as_ptr(), &mut attr) };
        check("ibv_query_device", rc)?;
        // ANCHOR_END: c_ibv_query_device
        Ok(attr)
    }

    /// `ibv_query_port`: the state, LID, MTU and link layer of port `port` (1-based).
    pub fn query_port(&self, port: u8) -> Result<ibv_port_attr> {
        let mut attr = ibv_port_attr::default();
        // ANCHOR: c_ibv_query_port
        // C: int ibv_query_port(struct ibv_context *context, uint8_t port_num,
        //                       struct _compat_ibv_port_attr *port_attr);
        // 0, or the error number itself.
        // `ibv_query_port` is a macro in verbs.h around an inline that calls the exported
        // symbol with the smaller "compat" struct layout. That layout is a prefix of
        // ibv_port_attr (every field up to `flags`, `link_layer` included), and the library
        // copies exactly that prefix, so a zeroed full struct is a valid buffer.
        // SAFETY: raw is an open context; attr is large enough for the compat layout.
        let rc = unsafe { ffi::ibv_query_port(self.raw.as_ptr(), port, ptr::from_mut(&mut attr).cast()) };
        check(&format!("ibv_query_port(port {port})"), rc)?;
        // ANCHOR_END: c_ibv_query_port
        Ok(attr)
    }

    /// `ibv_query_gid`: entry `index` of port `port`'s GID table.
    pub fn query_gid(&self, port: u8, index: i32) -> Result<[u8; 16]> {
        // ibv_query_gid returns -1 and leaves errno alone on some paths (rdma-core's
        // sysfs fallback returns its error code instead of setting errno), so an errno read
        // after it may be stale. ibv_query_gid_ex (a static inline over the symbol called
        // here) returns the error code itself: "0 on success or errno value on error".
        let Ok(index_u32) = u32::try_from(index) else {
            return Err(Error::verb(
                format!("ibv_query_gid(port {port}, index {index})"),
                io::Error::from_raw_os_error(libc::EINVAL),
            ));
        };
        let mut entry = ffi::ibv_gid_entry::default();
        // ANCHOR: c_ibv_query_gid
        // C: int _ibv_query_gid_ex(struct ibv_context *context, uint32_t port_num,
        //                          uint32_t gid_index, struct ibv_gid_entry *entry,
        //                          uint32_t flags, size_t entry_size);
        // 0, or the error number itself (ENODATA for an empty slot). rc_pingpong calls
        // ibv_query_gid, which returns 0 or -1 and may leave errno stale (see above).
        // SAFETY: raw is an open context and entry a valid out-pointer of the size passed.
        let rc = unsafe {
            ffi::_ibv_query_gid_ex(
                self.raw.as_ptr(),
                u32::from(port),
                index_u32,
                &mut entry,
                0,
                std::mem::size_of::<ffi::ibv_gid_entry>(),
            )
        };
        match rc {
            0 => Ok(gid_bytes(&entry.gid)),
            // An empty slot: ibv_query_gid reports it as success with an all-zero GID, and so
            // do we (the caller explains an all-zero GID).
            libc::ENODATA => Ok([0; 16]),
            _ => {
                Err(Error::verb(format!("ibv_query_gid(port {port}, index {index})"), io::Error::from_raw_os_error(rc)))
            }
        }
        // ANCHOR_END: c_ibv_query_gid
    }
}

/// One entry of a port's GID table, as `ibv_query_gid_table` reports it.
#[derive(Debug, Clone, Copy)]
pub struct GidEntry {
    /// The index `-g` selects.
    pub index: u32,
    /// The port it belongs to.
    pub port: u32,
    /// The GID itself.
    pub gid: [u8; 16],
    /// `IBV_GID_TYPE_IB`, `_ROCE_V1` (Ethernet frames) or `_ROCE_V2` (UDP/IP packets).
    pub gid_type: u32,
}

impl Context {
    /// `ibv_query_gid_table`: every valid GID of every port, in one call.
    ///
    /// rc_pingpong only queries the one entry `-g` names ([`Context::query_gid`]); listing
    /// the table that way would take one call per slot (rxe has 1024, nearly all empty).
    pub fn query_gid_table(&self, max_entries: usize) -> Result<Vec<GidEntry>> {
        let mut entries: Vec<ffi::ibv_gid_entry> = vec![ffi::ibv_gid_entry::default(); max_entries];
        // ibv_query_gid_table is a static inline that passes the struct size to this symbol.
        // SAFETY: raw is an open context; `entries` has room for max_entries entries of the
        // size we pass.
        let n = unsafe {
            ffi::_ibv_query_gid_table(
                self.raw.as_ptr(),
                entries.as_mut_ptr(),
                max_entries,
                0,
                std::mem::size_of::<ffi::ibv_gid_entry>(),
            )
        };
        let n = usize::try_from(n).map_err(|_| {
            let errno = i32::try_from(-n).unwrap_or(libc::EINVAL);
            Error::verb("ibv_query_gid_table", io::Error::from_raw_os_error(errno))
        })?;
        Ok(entries[..n]
            .iter()
            .map(|e| GidEntry { index: e.gid_index, port: e.port_num, gid: gid_bytes(&e.gid), gid_type: e.gid_type })
            .collect())
    }
}

impl Drop for Context {
    fn drop(&mut self) {
        if let Owner::Cm { .. } = self.owner {
            return;
        }
        // SAFETY: every child holds an Rc<Context>, so none is alive any more.
        let rc = unsafe { ffi::ibv_close_device(self.raw.as_ptr()) };
        report_destroy("ibv_close_device", rc);
        trace::event("ibv_close_device").kv("device", &self.name).emit();
    }
}

/// `struct ibv_async_event`: one event the device raised outside any completion — an
/// SRQ's limit reached, a QP's fatal error, a CQ overrun, a port going down. Destroying
/// the object it is about waits until it is acknowledged: [`AsyncEvent::ack`], or drop.
pub struct AsyncEvent<'a> {
    raw: ffi::ibv_async_event,
    acked: bool,
    _ctx: &'a Context,
}

impl AsyncEvent<'_> {
    /// The event type's C name, e.g. `IBV_EVENT_SRQ_LIMIT_REACHED`.
    pub fn type_name(&self) -> String {
        names::event_type_name(self.raw.event_type)
    }

    /// Whether it is `IBV_EVENT_SRQ_LIMIT_REACHED` for `srq`.
    pub fn is_limit_of(&self, srq: &Srq) -> bool {
        // SAFETY: the union's members are all pointers or an int; the bytes are only
        // compared with srq's handle, never followed.
        self.raw.event_type == ffi::IBV_EVENT_SRQ_LIMIT_REACHED && unsafe { self.raw.element.srq } == srq.as_ptr()
    }

    /// `ibv_ack_async_event`.
    pub fn ack(mut self) {
        self.ack_once();
    }

    fn ack_once(&mut self) {
        if !self.acked {
            self.acked = true;
            // ANCHOR: c_ibv_ack_async_event
            // C: void ibv_ack_async_event(struct ibv_async_event *event);
            // Cannot fail; destroying the CQ, QP or SRQ an event is about waits for its ack.
            // SAFETY: raw came from a successful ibv_get_async_event and is acked once.
            unsafe { ffi::ibv_ack_async_event(&mut self.raw) };
            // ANCHOR_END: c_ibv_ack_async_event
        }
    }
}

impl Drop for AsyncEvent<'_> {
    fn drop(&mut self) {
        self.ack_once();
    }
}

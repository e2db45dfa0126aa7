//! The values the flags take: the path MTU, and the parsers that refuse nonsense with a
//! reason (see the module doc of [`crate::cli`]).

use std::ffi::OsStr;
use std::fmt;
use std::time::Duration;

use clap::parser::ValueSource;

/// The InfiniBand path MTUs — the only values `ibv_qp_attr.path_mtu` can take.
///
/// A typed enum rather than a number so an invalid MTU is refused when the flags are parsed,
/// not by `ibv_modify_qp(RTR)` with a bare EINVAL. (C's `pp_mtu_to_enum` returns -1 for other
/// values, and rc_pingpong's check `mtu == 0` never catches it.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Mtu {
    Mtu256,
    Mtu512,
    Mtu1024,
    Mtu2048,
    Mtu4096,
}

impl Mtu {
    /// All values, smallest first.
    pub const ALL: [Mtu; 5] = [Mtu::Mtu256, Mtu::Mtu512, Mtu::Mtu1024, Mtu::Mtu2048, Mtu::Mtu4096];

    /// Payload bytes per packet.
    pub fn bytes(self) -> u32 {
        crate::verbs::names::mtu_bytes(self.to_ibv()).expect("every Mtu is an ibv_mtu from 1 to 5")
    }

    /// From a byte count, as `pp_mtu_to_enum` does; `None` for anything else.
    pub fn from_bytes(bytes: u32) -> Option<Mtu> {
        Mtu::ALL.into_iter().find(|m| m.bytes() == bytes)
    }

    /// The verbs enum value (`IBV_MTU_256` = 1 … `IBV_MTU_4096` = 5).
    pub fn to_ibv(self) -> ibverbs_sys::ibv_mtu {
        match self {
            Mtu::Mtu256 => ibverbs_sys::IBV_MTU_256,
            Mtu::Mtu512 => ibverbs_sys::IBV_MTU_512,
            Mtu::Mtu1024 => ibverbs_sys::IBV_MTU_1024,
            Mtu::Mtu2048 => ibverbs_sys::IBV_MTU_2048,
            Mtu::Mtu4096 => ibverbs_sys::IBV_MTU_4096,
        }
    }
}

impl Default for Mtu {
    /// rc_pingpong's default, `IBV_MTU_1024`: fits a standard 1500-byte Ethernet MTU on RoCE.
    fn default() -> Self {
        Mtu::Mtu1024
    }
}

impl From<Mtu> for ibverbs_sys::ibv_mtu {
    fn from(m: Mtu) -> Self {
        m.to_ibv()
    }
}

impl fmt::Display for Mtu {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.bytes())
    }
}

impl std::str::FromStr for Mtu {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        parse_mtu(s)
    }
}

/// Decimal or `0x` hex, like `strtoul(s, NULL, 0)` minus octal (see the module doc).
pub(super) fn parse_number(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let parsed = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => t.parse::<u64>(),
    };
    parsed.map_err(|_| {
        if t.starts_with('-') {
            format!("'{s}' is negative; expected a whole number ≥ 0")
        } else {
            format!("'{s}' is not a number (expected decimal like 4096 or hex like 0x1000)")
        }
    })
}

fn in_range(s: &str, min: u64, max: u64, why: &str) -> Result<u64, String> {
    let v = parse_number(s)?;
    if v < min || v > max {
        return Err(format!("{v} is out of range {min}..={max}: {why}"));
    }
    Ok(v)
}

pub(super) fn parse_ib_port(s: &str) -> Result<u8, String> {
    let v = parse_number(s)?;
    if v == 0 {
        return Err("port 0 does not exist: ports of an RDMA device are numbered from 1 \
                    (`ibv_devinfo` or 01_open_device shows them); the usual value is 1"
            .into());
    }
    u8::try_from(v).map_err(|_| format!("{v} is not a port number: verbs port numbers are 1..=255"))
}

pub(super) fn parse_gid_index(s: &str) -> Result<i32, String> {
    if s.trim().starts_with('-') {
        return Err(format!(
            "GID index '{s}' is negative: GID table indices start at 0. To use no GID (as \
             rc_pingpong's -g -1 does), leave -g out"
        ));
    }
    in_range(s, 0, i32::MAX as u64, "a GID table index").map(|v| v as i32)
}

pub(super) fn parse_size(s: &str) -> Result<u32, String> {
    let v = parse_number(s)?;
    if v == 0 {
        return Err("size 0: there would be nothing to ping-pong and no buffer to register; \
                    use at least 1 byte (rc_pingpong's default is 4096)"
            .into());
    }
    u32::try_from(v).map_err(|_| {
        format!(
            "{v} bytes is more than one SEND can carry: a scatter/gather entry's length is 32 bits (max {})",
            u32::MAX
        )
    })
}

pub(super) fn parse_rx_depth(s: &str) -> Result<u32, String> {
    let v = parse_number(s)?;
    if v == 0 {
        return Err("rx-depth 0: with no receive posted, the first SEND the peer makes has \
                    nowhere to land (RNR); use at least 1 (default 500)"
            .into());
    }
    // The CQ is created with rx_depth + 1 entries, an `int` in ibv_create_cq.
    in_range(s, 1, i32::MAX as u64 - 1, "the CQ gets rx-depth + 1 entries, a C int").map(|v| v as u32)
}

pub(super) fn parse_num_qp(s: &str) -> Result<u32, String> {
    // srq_pingpong.c keeps its QPs in `qp[MAX_QP]` and always exchanges MAX_QP addresses.
    in_range(s, 1, crate::wire::SrqDests::MAX_QP as u64, "srq_pingpong's MAX_QP is 256").map(|v| v as u32)
}

pub(super) fn parse_iters(s: &str) -> Result<u32, String> {
    let v = parse_number(s)?;
    if v == 0 {
        return Err("iters 0: nothing would be exchanged and the rate would divide by zero; \
                    use at least 1 (default 1000)"
            .into());
    }
    u32::try_from(v).map_err(|_| format!("{v} iterations is more than the 32-bit counter rc_pingpong uses"))
}

pub(super) fn parse_sl(s: &str) -> Result<u8, String> {
    in_range(s, 0, 15, "the service level is a 4-bit field").map(|v| v as u8)
}

pub(super) fn parse_tcp_port(s: &str) -> Result<u16, String> {
    let v = parse_number(s)?;
    if v == 0 {
        return Err("TCP port 0 would let the OS pick a random port the client cannot know; \
                    use the default 18515 or any 1..=65535, the same on both sides"
            .into());
    }
    u16::try_from(v).map_err(|_| format!("{v} is not a TCP port (1..=65535)"))
}

pub(super) fn parse_timeout(s: &str) -> Result<Duration, String> {
    let v = parse_number(s)?;
    if v == 0 {
        return Err("--timeout 0 would fail every wait at once; give seconds ≥ 1".into());
    }
    // Cap at a day: a finite bound is the point of the flag, and it keeps Instant + timeout
    // arithmetic far from overflow.
    if v > 86_400 {
        return Err(format!("--timeout {v} s is over a day; give at most 86400"));
    }
    Ok(Duration::from_secs(v))
}

pub(super) fn parse_mtu(s: &str) -> Result<Mtu, String> {
    let v = parse_number(s)?;
    u32::try_from(v).ok().and_then(Mtu::from_bytes).ok_or_else(|| {
        format!(
            "MTU {v} is not an InfiniBand path MTU: use 256, 512, 1024, 2048 or 4096 \
             (on RoCE it must also fit the netdev MTU: 1024 for a 1500-byte Ethernet MTU)"
        )
    })
}

/// A flag's parser whose value may come from an environment variable (clap's `env`): the
/// same checks, but a bad value from the environment is blamed on the variable. clap's own
/// message names only the flag (`invalid value 'x' for '--gid-idx'`), which sends a student
/// who never typed `-g` looking in the wrong place.
#[derive(Clone)]
pub(super) struct EnvAware<T>(pub(super) fn(&str) -> Result<T, String>);

impl<T: Clone + Send + Sync + 'static> clap::builder::TypedValueParser for EnvAware<T> {
    type Value = T;

    fn parse_ref(&self, cmd: &clap::Command, arg: Option<&clap::Arg>, value: &OsStr) -> Result<T, clap::Error> {
        self.0.parse_ref(cmd, arg, value)
    }

    fn parse_ref_(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &OsStr,
        source: ValueSource,
    ) -> Result<T, clap::Error> {
        let var = arg.and_then(clap::Arg::get_env);
        let (ValueSource::EnvVariable, Some(var), Some(arg)) = (source, var, arg) else {
            return self.parse_ref(cmd, arg, value);
        };
        let text = value.to_string_lossy();
        (self.0)(&text).map_err(|why| {
            let flag = arg.get_short().map_or_else(|| format!("--{}", arg.get_id()), |c| format!("-{c}"));
            let message = format!(
                "{var}={text:?} in the environment is not a value for {flag}: {why}\n\
                 (it is {flag}'s default: fix or unset {var}, or give {flag} on the command line)\n",
                var = var.to_string_lossy()
            );
            clap::Error::raw(clap::error::ErrorKind::ValueValidation, message).with_cmd(cmd)
        })
    }
}

//! `ibv_ud_pingpong`'s flags (step 11): rc_pingpong's, less what a datagram QP has no use
//! for.
//!
//! ud_pingpong.c takes `-p -d -i -s -r -n -l -e -g`: no `-m` (a UD QP has no path MTU of
//! its own: every datagram is one packet of at most the port's MTU) and no `-c`. Its
//! default size, 2048, is larger than Soft-RoCE's active MTU over a 1500-byte Ethernet
//! (1024), where the C tool stops at once ("Requested size larger than port MTU"): ours
//! defaults to 1024, so that it runs on the lab's rxe0 as typed; `-s 2048` shows the check.

use clap::Args;

use super::values::{parse_iters, parse_number, parse_sl};
use super::{both_roles_here, DeviceArgs, ExchangeArgs, QueueArgs, StepArgs};
use crate::exchange::Peer;
use crate::role::Role;

/// The largest message a UD QP can send anywhere: one packet of the largest MTU.
pub const UD_MAX_SIZE: u32 = 4096;

/// ud_pingpong's flags (step 11).
#[derive(Args, Debug, Clone, PartialEq, Eq)]
pub struct UdArgs {
    /// Server to connect to; without it, act as the server and wait for a client
    #[arg(value_name = "HOST")]
    pub host: Option<String>,

    #[command(flatten)]
    pub device: DeviceArgs,

    /// Size of message to exchange, bytes: one datagram, at most the port's active MTU
    /// (ud_pingpong's default, 2048, is above rxe's 1024)
    #[arg(short = 's', long = "size", value_name = "SIZE", default_value = "1024", value_parser = parse_ud_size)]
    pub size: u32,

    #[command(flatten)]
    pub queue: QueueArgs,

    #[command(flatten)]
    pub exchange: ExchangeArgs,

    /// Number of exchanges (each is one datagram each way)
    #[arg(short = 'n', long = "iters", value_name = "ITERS", default_value = "1000", value_parser = parse_iters)]
    pub iters: u32,

    /// Service level (0-15) put in the address handle
    #[arg(short = 'l', long = "sl", value_name = "SL", default_value = "0", value_parser = parse_sl)]
    pub sl: u8,
}

impl UdArgs {
    /// Server without a host, client with one — ud_pingpong's rule, as rc_pingpong's.
    pub fn role(&self) -> Role {
        Role::of(self.host.as_deref())
    }

    /// Who we talk to, where and how patiently: the host (none on the server), `-p` and `--timeout`.
    pub fn peer(&self) -> Peer {
        Peer { host: self.host.clone(), port: self.exchange.port, timeout: self.exchange.timeout }
    }
}

fn parse_ud_size(s: &str) -> Result<u32, String> {
    let v = parse_number(s)?;
    if !(1..=u64::from(UD_MAX_SIZE)).contains(&v) {
        return Err(format!(
            "{v} bytes: a UD message is one datagram, one packet, so 1 to {UD_MAX_SIZE} bytes (the \
             largest MTU); the port's active MTU, checked once the device is open, may allow less"
        ));
    }
    Ok(v as u32)
}

impl StepArgs for UdArgs {
    /// Why this footer: as rc_pingpong's steps', plus the size a datagram is limited to.
    fn after_help(bin: &str) -> String {
        format!(
            "{}-g is needed on RoCE: the address handle names the peer by GID. -s must fit the \
             port's active MTU (01_open_device shows it). Either side may be the C tool \
             (ibv_ud_pingpong -g 1 -s 1024 [127.0.0.1]).",
            both_roles_here(bin)
        )
    }
    fn peer_role(&self) -> Option<Role> {
        Some(self.role())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ud_sizes_are_one_packet() {
        assert_eq!(parse_ud_size("1024"), Ok(1024));
        assert_eq!(parse_ud_size("0x1000"), Ok(4096));
        assert!(parse_ud_size("0").is_err());
        assert!(parse_ud_size("4097").unwrap_err().contains("one datagram"));
    }
}

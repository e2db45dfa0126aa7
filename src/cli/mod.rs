//! Command-line flags: `ibv_rc_pingpong`'s, with its short flags and defaults.
//!
//! The flags are split into small [`clap::Args`] groups so every step takes exactly the
//! ones it uses and no flag is defined twice: 01–02 take [`OpenArgs`] (the [`DeviceArgs`]),
//! 03 [`MrArgs`] (adds [`BufferArgs`]), 04 [`QpArgs`] (adds [`QueueArgs`]), and 05–09 all of
//! [`PingpongArgs`]. Each group is a [`StepArgs`]: it knows how its steps run, which sets
//! the footer of their `--help` and the role their break cases see.
//!
//! A step flattens its group into its command line with `step::Cli`, which adds
//! `--break`.
//!
//! Defaults are those of rc_pingpong.c's `main` (not of its man page, which claims `-r`
//! defaults to 1000; the code says 500). Numbers accept decimal or `0x` hex, as the C code's
//! `strtoul(optarg, NULL, 0)` does; its octal (`010` = 8) is deliberately not copied — a
//! student typing `-s 0100` means 100. Where the C tool silently takes nonsense (`-s 0`,
//! `-n 0`, `-l 99`) we refuse with a message that says why, before touching the device.
//!
//! Deliberately **not** implemented, because they teach features beyond the steps:
//! `-o/--odp` and `-O/--iodp` (on-demand paging), `-P/--prefetch` (ODP prefetch),
//! `-t/--ts` (CQE timestamps via `ibv_create_cq_ex`), `-j/--dm` (device memory),
//! `-N/--new_send` (the `ibv_wr_*` post-send API), `-U/--allow-cc-unprotected`
//! (confidential-computing guests). clap rejects them as unknown arguments.

use clap::Args;

use crate::exchange::Peer;
use crate::role::Role;
use crate::stages::atomics::Atomic;
use crate::stages::open_device::DeviceChoice;
use std::time::Duration;

mod rping;
mod ud;
mod values;

pub use rping::{RpingArgs, RPING_MAX_SIZE, RPING_MIN_SIZE};
pub use ud::{UdArgs, UD_MAX_SIZE};

pub use values::Mtu;
use values::{
    parse_gid_index, parse_ib_port, parse_iters, parse_mtu, parse_num_qp, parse_rx_depth, parse_size, parse_sl,
    parse_tcp_port, parse_timeout, EnvAware,
};

/// Which device, port and GID: all any verbs program needs to open and address a port.
///
/// Each flag's default comes from the environment when the variable is set (clap's `env`):
/// `RDMA_DEVICE`, `RDMA_IB_PORT`, `RDMA_GID_INDEX` — what the lab VM and the classroom image
/// export for their device, and what the tests read — so `cargo run --bin 05_modify_qp_rtr`
/// works there as typed. A flag given on the command line wins; the trace names a value
/// taken from the environment (`getenv`, see [`crate::step`]). A variable set to the empty
/// string counts as unset, as `${RDMA_GID_INDEX:-…}` does in the lab's scripts: with
/// `RDMA_GID_INDEX=` in front of it, a step runs without a GID, rc_pingpong's default, and
/// shows the no-GID failure on RoCE.
#[derive(Args, Debug, Clone, PartialEq, Eq)]
pub struct DeviceArgs {
    /// IB device to use, e.g. rxe0 (default: the first device found, like rc_pingpong)
    #[arg(short = 'd', long = "ib-dev", value_name = "DEV", env = "RDMA_DEVICE", hide_env_values = true)]
    pub ib_dev: Option<String>,

    /// Port of the IB device (numbered from 1)
    #[arg(short = 'i', long = "ib-port", value_name = "PORT", default_value = "1", value_parser = EnvAware(parse_ib_port), env = "RDMA_IB_PORT", hide_env_values = true)]
    pub ib_port: u8,

    /// Local GID table index, needed on RoCE (rxe): the GRH is the only way to address a
    /// RoCE peer, which has no LID. Default: none (LID-only addressing, InfiniBand)
    #[arg(short = 'g', long = "gid-idx", value_name = "GID_INDEX", allow_negative_numbers = true, value_parser = EnvAware(parse_gid_index), env = "RDMA_GID_INDEX", hide_env_values = true)]
    pub gid_index: Option<i32>,
}

/// The buffer registered as the MR: its size is also the size of every SEND.
#[derive(Args, Debug, Clone, PartialEq, Eq)]
pub struct BufferArgs {
    /// Size of message to exchange, bytes
    #[arg(short = 's', long = "size", value_name = "SIZE", default_value = "4096", value_parser = parse_size)]
    pub size: u32,
}

/// Queue sizing and completion mode: what `ibv_create_cq`/`ibv_create_qp` are asked for.
#[derive(Args, Debug, Clone, PartialEq, Eq)]
pub struct QueueArgs {
    /// Number of receives to post at a time (the CQ gets rx-depth + 1 entries)
    #[arg(short = 'r', long = "rx-depth", value_name = "DEPTH", default_value = "500", value_parser = parse_rx_depth)]
    pub rx_depth: u32,

    /// Sleep on CQ events (a completion channel) instead of busy-polling the CQ
    #[arg(short = 'e', long = "events")]
    pub events: bool,
}

/// The TCP side channel: where to meet the peer and how long to wait for it.
#[derive(Args, Debug, Clone, PartialEq, Eq)]
pub struct ExchangeArgs {
    /// TCP port to listen on (server) or connect to (client) for the address exchange
    #[arg(short = 'p', long = "port", value_name = "PORT", default_value = "18515", value_parser = parse_tcp_port)]
    pub port: u16,

    /// Seconds to wait for the peer: for the client's connect (retried while refused), for
    /// the server's accept, and for every message of the exchange. rc_pingpong waits forever
    #[arg(long = "timeout", value_name = "SECONDS", default_value = "20", value_parser = parse_timeout)]
    pub timeout: Duration,
}

/// Steps 01 and 02: which device, port and GID.
///
/// Every step's flags are one struct with the same field names (`device`, `buffer`,
/// `queue`), so the steps read alike and the diff from one step to the next shows the new
/// stage, not renamed plumbing.
#[derive(Args, Debug, Clone, PartialEq, Eq)]
pub struct OpenArgs {
    #[command(flatten)]
    pub device: DeviceArgs,
}

/// Step 03: the device, and the buffer to register.
#[derive(Args, Debug, Clone, PartialEq, Eq)]
pub struct MrArgs {
    #[command(flatten)]
    pub device: DeviceArgs,

    #[command(flatten)]
    pub buffer: BufferArgs,
}

/// Step 04: the device, the buffer, and the queues to create.
#[derive(Args, Debug, Clone, PartialEq, Eq)]
pub struct QpArgs {
    #[command(flatten)]
    pub device: DeviceArgs,

    #[command(flatten)]
    pub buffer: BufferArgs,

    #[command(flatten)]
    pub queue: QueueArgs,
}

/// Step 09's own flag, besides [`PingpongArgs`].
#[derive(Args, Debug, Clone, Copy, PartialEq, Eq)]
pub struct BwArgs {
    /// Bandwidth mode (client): -n writes of -s bytes, up to 128 in flight, reported in
    /// MiB/s like ib_write_bw
    #[arg(long)]
    pub bw: bool,
}

/// Step 13's own flag, besides [`PingpongArgs`]: `ib_atomic_lat`'s `-A`.
#[derive(Args, Debug, Clone, Copy, PartialEq, Eq)]
pub struct AtomicArgs {
    /// The atomic the client posts: FETCH_AND_ADD (add 1) or CMP_AND_SWAP (swap in one more
    /// than the value expected); both sides need the same
    #[arg(short = 'A', long = "atomic_type", value_name = "TYPE", default_value = "FETCH_AND_ADD", value_parser = parse_atomic)]
    pub atomic: Atomic,
}

fn parse_atomic(s: &str) -> Result<Atomic, String> {
    [Atomic::FetchAndAdd, Atomic::CmpAndSwap]
        .into_iter()
        .find(|a| a.name() == s)
        .ok_or_else(|| format!("`{s}` is not an atomic: use FETCH_AND_ADD or CMP_AND_SWAP (ib_atomic_lat's names)"))
}

/// Step 12's own flag, besides [`PingpongArgs`]: `ibv_srq_pingpong`'s `-q`.
#[derive(Args, Debug, Clone, Copy, PartialEq, Eq)]
pub struct SrqArgs {
    /// Number of QPs sharing the one SRQ (1-256; each side needs the same number, and
    /// -r at least this many receives)
    #[arg(short = 'q', long = "num-qp", value_name = "NUM", default_value = "16", value_parser = parse_num_qp)]
    pub num_qp: u32,
}

impl SrqArgs {
    /// srq_pingpong's own check: the pool needs a receive per QP that may have a message
    /// in flight, so `-r` must be at least `-q`.
    pub fn check(&self, rx_depth: u32) -> crate::error::Result<()> {
        if self.num_qp > rx_depth {
            return Err(crate::error::Error::new("checking -q against -r")
                .cause(format!(
                    "rx_depth {rx_depth} is too small for {} QPs: the SRQ must hold at least one receive per QP",
                    self.num_qp
                ))
                .fix(format!("pass -r {} or more, or fewer QPs", self.num_qp)));
        }
        Ok(())
    }
}

/// All of `ibv_rc_pingpong`'s flags that the steps implement (05–09 flatten this).
#[derive(Args, Debug, Clone, PartialEq, Eq)]
pub struct PingpongArgs {
    /// Server to connect to; without it, act as the server and wait for a client
    #[arg(value_name = "HOST")]
    pub host: Option<String>,

    #[command(flatten)]
    pub device: DeviceArgs,

    #[command(flatten)]
    pub buffer: BufferArgs,

    #[command(flatten)]
    pub queue: QueueArgs,

    #[command(flatten)]
    pub exchange: ExchangeArgs,

    /// Path MTU: 256, 512, 1024, 2048 or 4096
    #[arg(short = 'm', long = "mtu", value_name = "SIZE", default_value = "1024", value_parser = parse_mtu)]
    pub mtu: Mtu,

    /// Number of exchanges (each is one SEND each way)
    #[arg(short = 'n', long = "iters", value_name = "ITERS", default_value = "1000", value_parser = parse_iters)]
    pub iters: u32,

    /// Service level (0-15) put in the address vector
    #[arg(short = 'l', long = "sl", value_name = "SL", default_value = "0", value_parser = parse_sl)]
    pub sl: u8,

    /// Validate the received buffer (the client fills it with a pattern, the server checks)
    #[arg(short = 'c', long = "chk")]
    pub chk: bool,
}

impl PingpongArgs {
    /// Server without a host, client with one — rc_pingpong's rule.
    pub fn role(&self) -> Role {
        Role::of(self.host.as_deref())
    }

    /// The `--timeout` for [`crate::exchange::Connection`].
    pub fn timeout(&self) -> Duration {
        self.exchange.timeout
    }

    /// Who we talk to, where and how patiently: the host (none on the server), `-p` and `--timeout`.
    pub fn peer(&self) -> Peer {
        Peer { host: self.host.clone(), port: self.exchange.port, timeout: self.timeout() }
    }
}

impl DeviceArgs {
    /// `-d`, `-i` and `-g`, as stage 01 takes them.
    pub fn choice(&self) -> DeviceChoice {
        DeviceChoice { ib_dev: self.ib_dev.clone(), ib_port: self.ib_port, gid_index: self.gid_index }
    }
}

/// A step's group of flags (the one its `Cli` flattens) and what the group says about how
/// the step runs: as one process, or as a server and a client.
///
/// A step names its group once, `type Args = PingpongArgs;`, and what depends on the group
/// follows from that name: the footer of `--help` and the type of the `--break` cases. Going
/// from 04's group to 05's is then one changed line in the step.
pub trait StepArgs: Args + 'static {
    /// The footer of the step's `--help`, with the step's bin name: how to run it. By
    /// default, a one-process step's.
    fn after_help(bin: &str) -> String {
        format!(
            "Needs an RDMA device. Without one (no RDMA in the kernel), run it in the lab VM: \
             lab/run target/debug/{bin} -g 1"
        )
    }
    /// The role this process plays against a peer, or `None` for a one-process step (the
    /// default).
    fn peer_role(&self) -> Option<Role> {
        None
    }
}

impl StepArgs for OpenArgs {}
impl StepArgs for MrArgs {}
impl StepArgs for QpArgs {}

/// The footer's first lines for a step that plays both roles: how to run them on one machine.
pub(crate) fn both_roles_here(bin: &str) -> String {
    format!(
        "Running both roles on one machine (any host with an RDMA device, e.g. Soft-RoCE rxe0):\n\
         \x20 server:  cargo run --bin {bin} -- -g 1\n\
         \x20 client:  cargo run --bin {bin} -- -g 1 127.0.0.1\n"
    )
}

impl StepArgs for PingpongArgs {
    /// Why this footer: a student with one machine must realise both roles can run there,
    /// over 127.0.0.1, and that RoCE needs `-g`.
    fn after_help(bin: &str) -> String {
        format!(
            "{}Start them in two terminals, in either order: the client retries until the server \
             listens (up to --timeout seconds).\n\
             -g is needed on RoCE: there is no LID, so the peer is addressed by GID \
             (index 1 is ::ffff:<IPv4 address> on rxe; 01_open_device lists the GID table). \
             Where RDMA_GID_INDEX is set (the lab VM, the classroom image), it is -g's default.\n\
             Steps 05-08 speak ibv_rc_pingpong's exchange, so either side may be the C tool \
             (ibv_rc_pingpong -g 1 [127.0.0.1]); 09_rdma_write extends it and needs 09 on both sides.",
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
    use clap::Parser;

    #[derive(Parser, Debug)]
    #[command(name = "05_modify_qp_rtr", after_help = PingpongArgs::after_help("05_modify_qp_rtr"))]
    struct Cli {
        #[command(flatten)]
        args: PingpongArgs,
    }

    fn parse(argv: &[&str]) -> Result<PingpongArgs, clap::Error> {
        parse_as::<PingpongArgs>(argv)
    }

    /// `argv` parsed as group `A`, the environment's defaults left out: these tests are about
    /// the flags, and the lab VM exports RDMA_DEVICE, RDMA_IB_PORT and RDMA_GID_INDEX.
    /// (tests/no_device/env_defaults.rs runs the steps with them.)
    fn parse_as<A: Args + clap::FromArgMatches>(argv: &[&str]) -> Result<A, clap::Error> {
        let command = A::augment_args(clap::Command::new("step")).mut_args(|a| a.env(None));
        let matches = command.try_get_matches_from(std::iter::once("step").chain(argv.iter().copied()))?;
        A::from_arg_matches(&matches)
    }

    #[test]
    fn defaults_are_rc_pingpongs() {
        let a = parse(&[]).unwrap();
        assert_eq!(a.role(), Role::Server);
        assert_eq!(a.exchange.port, 18515);
        assert_eq!(a.device, DeviceArgs { ib_dev: None, ib_port: 1, gid_index: None });
        assert_eq!(a.buffer.size, 4096);
        assert_eq!(a.mtu, Mtu::Mtu1024);
        assert_eq!(a.queue, QueueArgs { rx_depth: 500, events: false });
        assert_eq!(a.iters, 1000);
        assert_eq!(a.sl, 0);
        assert!(!a.chk);
        assert_eq!(a.timeout(), Duration::from_secs(20));
    }

    #[test]
    fn short_flags_are_rc_pingpongs() {
        let a = parse(&[
            "-p",
            "9999",
            "-d",
            "rxe0",
            "-i",
            "2",
            "-s",
            "0x40",
            "-m",
            "4096",
            "-r",
            "16",
            "-n",
            "5",
            "-l",
            "3",
            "-e",
            "-g",
            "1",
            "-c",
            "--timeout",
            "3",
            "127.0.0.1",
        ])
        .unwrap();
        assert_eq!(a.role(), Role::Client);
        assert_eq!(a.peer().host.as_deref(), Some("127.0.0.1"));
        assert_eq!(a.exchange.port, 9999);
        assert_eq!(a.device, DeviceArgs { ib_dev: Some("rxe0".into()), ib_port: 2, gid_index: Some(1) });
        assert_eq!(a.buffer.size, 64);
        assert_eq!(a.mtu.to_ibv(), ibverbs_sys::IBV_MTU_4096);
        assert_eq!(a.queue, QueueArgs { rx_depth: 16, events: true });
        assert_eq!((a.iters, a.sl, a.chk), (5, 3, true));
        assert_eq!(a.timeout(), Duration::from_secs(3));
    }

    #[test]
    fn long_flags() {
        let a = parse(&[
            "--port=1",
            "--ib-dev=mlx5_0",
            "--ib-port=1",
            "--size=1",
            "--mtu=256",
            "--rx-depth=1",
            "--iters=1",
            "--sl=15",
            "--events",
            "--gid-idx=0",
            "--chk",
            "host",
        ])
        .unwrap();
        assert_eq!(a.mtu, Mtu::Mtu256);
        assert_eq!(a.sl, 15);
        assert_eq!(a.device.gid_index, Some(0));
    }

    #[test]
    fn bad_values_are_refused_with_a_reason() {
        for (argv, needle) in [
            (&["-s", "0"][..], "size 0"),
            (&["-n", "0"][..], "iters 0"),
            (&["-r", "0"][..], "rx-depth 0"),
            (&["-m", "1500"][..], "MTU 1500 is not an InfiniBand path MTU"),
            (&["-i", "0"][..], "port 0 does not exist"),
            (&["-p", "0"][..], "TCP port 0"),
            (&["-p", "65536"][..], "not a TCP port"),
            (&["-l", "16"][..], "4-bit"),
            (&["-g", "-1"][..], "negative"),
            (&["-s", "4k"][..], "not a number"),
            (&["--timeout", "0"][..], "--timeout 0"),
        ] {
            let err = parse(argv).unwrap_err().to_string();
            assert!(err.contains(needle), "{argv:?}: {err}");
        }
    }

    #[test]
    fn omitted_c_flags_are_unknown() {
        for flag in ["-o", "-O", "-P", "-t", "-j", "-N", "-U"] {
            assert!(parse(&[flag]).is_err(), "{flag} should be rejected");
        }
    }

    #[test]
    fn mtu_round_trips_through_its_text() {
        for m in Mtu::ALL {
            assert_eq!(m.to_string().parse::<Mtu>(), Ok(m));
        }
        assert_eq!(Mtu::Mtu256.to_ibv(), 1);
        assert_eq!(Mtu::Mtu4096.to_ibv(), 5);
    }

    #[test]
    fn help_has_the_footer_and_no_duplicate_flags() {
        use clap::CommandFactory;
        Cli::command().debug_assert(); // panics on duplicate short/long flags
        let help = Cli::command().render_help().to_string();
        assert!(help.contains("cargo run --bin 05_modify_qp_rtr -- -g 1 127.0.0.1"), "{help}");
        // The environment's defaults are named, never their values (hide_env_values): the
        // help reads the same wherever it is printed.
        for var in ["[env: RDMA_DEVICE]", "[env: RDMA_IB_PORT]", "[env: RDMA_GID_INDEX]"] {
            assert!(help.contains(var), "{var} missing from\n{help}");
        }
    }

    #[test]
    fn each_steps_group_parses_on_its_own() {
        // What a step's Cli is: its group of flags, flattened (the steps add only --break).
        #[derive(Parser)]
        struct Step<A: Args> {
            #[command(flatten)]
            args: A,
        }
        use clap::CommandFactory;
        Step::<OpenArgs>::command().debug_assert();
        Step::<MrArgs>::command().debug_assert();
        Step::<QpArgs>::command().debug_assert();
        let open = parse_as::<OpenArgs>(&["-d", "rxe0", "-g", "1"]).unwrap();
        assert_eq!(open.device.choice(), DeviceChoice { ib_dev: Some("rxe0".into()), ib_port: 1, gid_index: Some(1) });
        assert!(parse_as::<OpenArgs>(&["-s", "64"]).is_err(), "01 takes no -s");
        let mr = parse_as::<MrArgs>(&["-s", "64"]).unwrap();
        assert_eq!(mr.buffer.size, 64);
        let qp = parse_as::<QpArgs>(&["-d", "rxe0", "-s", "64", "-r", "8", "-e"]).unwrap();
        assert_eq!(
            (qp.device.ib_dev.as_deref(), qp.buffer.size, qp.queue.rx_depth, qp.queue.events),
            (Some("rxe0"), 64, 8, true)
        );
    }
}

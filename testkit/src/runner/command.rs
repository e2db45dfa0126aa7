//! The command lines of a run: who can play a role ([`Player`]) and what each process is
//! told — the device's flags, where the server waits, the flags of its role. Pure: the unit
//! tests check it without a device.

use rdma_dissect::role::Role;

use super::Run;
use crate::{Roles, Step};

/// Who plays a role of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Player {
    /// Our program: the step's binary, or another build of it (a student's, the grader's
    /// reference), at this path.
    Ours(String),
    /// The C tool the step dissects (`pair` steps), the list's `c=`: rdma-core's
    /// `ibv_rc_pingpong`, `ibv_ud_pingpong`, …, perftest's `ib_atomic_lat`, or its `ib_write_bw` (`no-c-peer`:
    /// only ever its own peer, as in lab/bench).
    C,
    /// Debian's rping (`cm` steps), rdma-core's `librdmacm/examples/rping.c`.
    Rping,
}

impl Player {
    /// `ours`, `c` or `rping` (`cargo xtask run --peer`); `ours` is the step's binary in `bins`.
    pub fn parse(word: &str, step: &Step, bins: &std::path::Path) -> Result<Player, String> {
        match word {
            "ours" => Ok(Player::Ours(bins.join(&step.bin).display().to_string())),
            "c" => Ok(Player::C),
            "rping" => Ok(Player::Rping),
            _ => Err(format!("`{word}`: a role is played by ours, c or rping")),
        }
    }

    /// The program it runs for `step`, or why it cannot play it.
    pub fn program(&self, step: &Step) -> Result<String, String> {
        match (self, step.roles) {
            (Player::Ours(program), _) => Ok(program.clone()),
            (Player::C, Roles::Pair) => {
                step.c.clone().ok_or_else(|| format!("{} has no C tool (steps/list.txt names none: c=)", step.bin))
            }
            (Player::Rping, Roles::Cm) => Ok(crate::cm::RPING.into()),
            (Player::C, _) => Err(format!("{} has no C peer (rping's steps take --peer rping)", step.bin)),
            (Player::Rping, _) => Err(format!("{} does not connect with rdma_cm: rping cannot play it", step.bin)),
        }
    }

    /// A C tool that waits for a ping-pong the step never does (the list's `c-outlasts`:
    /// rc_pingpong opposite a step that stops before its ping-pong). It has done its part
    /// once the other side has exited and it has printed the peer's address; the runner
    /// then stops it, and runs it line-buffered (`stdbuf -oL`) so that what it printed is
    /// not lost in its stdio buffer.
    pub(super) fn outlasts(&self, step: &Step) -> bool {
        *self == Player::C && step.c_outlasts
    }
}

/// The device's flags as a run passes them (`-d`, `-i`, `-g`): testkit's [`device`](crate::device).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeviceFlags {
    /// `-d`.
    pub name: String,
    /// `-i`.
    pub port: u8,
    /// `-g` (perftest's `-x`).
    pub gid_index: u32,
}

/// Where the server waits for its client: the TCP port (`-p`, both kinds) and, for `cm`,
/// the device's IPv4 address (`-a`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Meeting {
    /// `-p`.
    pub port: u16,
    /// The pair's client's host argument; the `cm` server's and client's `-a`.
    pub addr: String,
}

impl Run {
    /// The command line of `role`'s process: wrapper, program, the device's flags as the
    /// program spells them, the meeting point as the kind of roles gives it, then the
    /// flags. Pure: the unit tests check it without a device.
    pub fn command(&self, role: Option<Role>, dev: &DeviceFlags, at: &Meeting) -> Result<Vec<String>, String> {
        let player = self.player(role);
        let program = player.program(&self.step)?;
        let label = role.map_or("alone", Role::label);
        let mut cmd: Vec<String> = self.wrap.iter().map(|w| w.replace("{role}", label)).collect();
        let (role_wrap, role_flags): (&[String], &[String]) = match role {
            Some(Role::Server) => (&self.server_wrap, &self.server_flags),
            Some(Role::Client) => (&self.client_wrap, &self.client_flags),
            None => (&[], &[]),
        };
        cmd.extend(role_wrap.iter().map(|w| w.replace("{role}", label)));
        // A C tool the run may stop (see `outlasts`, `after_failure`) runs line-buffered:
        // its stdout is a pipe, so stdio would keep what it printed until it exits.
        if player.outlasts(&self.step) || (*player == Player::C && self.after_failure.is_some()) {
            cmd.extend(["stdbuf".to_string(), "-oL".into()]);
        }
        cmd.push(program.clone());
        // perftest's tools (ib_write_bw, ib_atomic_lat) spell the GID index -x.
        let gid_flag = if program.starts_with("ib_") { "-x" } else { "-g" };
        let device = [
            "-d".to_string(),
            dev.name.clone(),
            "-i".into(),
            dev.port.to_string(),
            gid_flag.into(),
            dev.gid_index.to_string(),
        ];
        let port = ["-p".to_string(), at.port.to_string()];
        // One arm per kind of roles: what the kind's processes are told about each other.
        let mut host = None;
        match self.step.roles {
            Roles::Alone => cmd.extend(device.iter().filter(|_| self.device).cloned()),
            Roles::Pair => {
                cmd.extend(device.iter().filter(|_| self.device).cloned());
                cmd.extend(port);
                // ibv_ud_pingpong's default size, 2048, is above rxe's active MTU over a
                // 1500-byte Ethernet, where it refuses to start: it gets step 11's default,
                // which a later -s overrides (getopt keeps the last).
                if program == "ibv_ud_pingpong" {
                    cmd.extend(["-s".to_string(), "1024".into()]);
                }
                host = (role == Some(Role::Client)).then(|| at.addr.clone());
            }
            Roles::Cm => {
                cmd.push(if role == Some(Role::Client) { "-c" } else { "-s" }.into());
                cmd.extend(["-a".to_string(), at.addr.clone()]);
                cmd.extend(port);
            }
        }
        cmd.extend(self.flags.iter().cloned());
        if matches!(player, Player::Ours(_)) {
            cmd.extend(self.ours_flags.iter().cloned());
        }
        cmd.extend(role_flags.iter().cloned());
        cmd.extend(host);
        Ok(cmd)
    }
}

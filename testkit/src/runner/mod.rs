//! The runner: one step of `steps/list.txt` run in its roles. The one place that knows how
//! a run starts — the server first, the client once the server is ready for it (a TCP
//! listener for `pair`, a listening CM id for `cm`), both bounded in time — and who can
//! play a role: our step, the C tool it dissects, or rping. The tests, the exercise grader
//! and, through `cargo xtask run`, the lab scripts run steps through it.
//!
//! Across two hosts ([`Run::across`]) each host's runner runs one role, and the two runners
//! keep the same order over a TCP connection of their own ([`peer_link_port`]).
//!
//! ```no_run
//! use testkit::runner::{Player, Run};
//! // Our 08_poll_cq as the client of the C ibv_rc_pingpong, 100 iterations.
//! let run = Run::new(testkit::step("08").unwrap()).server(Player::C).flags(&["-n", "100"]);
//! for ran in run.run() {
//!     assert!(ran.ok(), "{}", ran.report());
//! }
//! ```

use std::net::Shutdown;
use std::process::{Command, ExitStatus, Output};
use std::time::{Duration, Instant};

use rdma_dissect::role::Role;

pub mod cli;
mod command;
mod link;
mod watch;

use crate::cm::{cm_addr, cm_listening};
use crate::{device, release, root, spawn_as, tcp_port, Roles, Step, TIMEOUT};
pub use command::{DeviceFlags, Meeting, Player};
pub use link::peer_link_port;
use link::{accept_link, link_listener, link_to};
use watch::{Proc, Watch};

/// One role of a run across two hosts: the other host's runner runs the other role.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Across {
    /// The role this host runs.
    pub role: Role,
    /// The server's host address: the pair's client's host argument, both `cm` sides' `-a`.
    pub server: String,
}

/// One run of a step: who plays each role, with which flags, under which wrapper.
#[derive(Debug, Clone)]
pub struct Run {
    /// The step, as `steps/list.txt` lists it: its roles say how it runs.
    pub step: Step,
    /// Who plays the server (and, for an `alone` step, the one process).
    pub server: Player,
    /// Who plays the client.
    pub client: Player,
    /// Flags every process gets, after the ones the runner gives (device, port, role).
    pub flags: Vec<String>,
    /// Flags only the server gets.
    pub server_flags: Vec<String>,
    /// Flags only the client gets.
    pub client_flags: Vec<String>,
    /// Flags only our programs get (`--timeout`, `--break`): the C tools do not know them.
    pub ours_flags: Vec<String>,
    /// A command every process runs under (`valgrind …`, `env LD_PRELOAD=…`); `{role}` in
    /// a word is the role's label (`server`, `client`, `alone`).
    pub wrap: Vec<String>,
    /// A command the server runs under, inside [`Run::wrap`].
    pub server_wrap: Vec<String>,
    /// A command the client runs under, inside [`Run::wrap`].
    pub client_wrap: Vec<String>,
    /// Pass the device's `-d -i -g` (`alone` and `pair`; rdma_cm finds the device by `-a`).
    pub device: bool,
    /// The TCP port; a free one of testkit's ([`tcp_port`]) when None (a run across hosts
    /// needs it: both runners must name the same).
    pub port: Option<u16>,
    /// Only one role runs here, the other on another host (None: every role runs here).
    pub across: Option<Across>,
    /// How long the whole run may take; what is still running then is killed.
    pub timeout: Duration,
    /// When this role's process fails, the others get this long more and are then killed
    /// (the grader's program under test: its peer would wait for ever for a partner that
    /// is gone). None: they run on.
    pub after_failure: Option<(Option<Role>, Duration)>,
    /// Pass what the one process here prints on to our stdout and stderr as it comes, as
    /// well as keep it: a script can watch it, and it is out even if the host dies.
    pub live: bool,
}

/// What one process of a run did.
#[derive(Debug, Clone)]
pub struct Ran {
    /// Its role: `None` for the one process of an `alone` step.
    pub role: Option<Role>,
    /// Who played it.
    pub player: Player,
    /// What was run: wrapper, program, arguments.
    pub command: Vec<String>,
    /// None when it was killed: it did not finish in time, or it was stopped (a C tool
    /// that outlasts the step, [`Run::after_failure`]).
    pub status: Option<ExitStatus>,
    /// It was stopped once it had done its part: a C tool that outlasts the step, after
    /// printing the peer's address.
    pub stopped: bool,
    /// Everything it printed on stdout.
    pub stdout: Vec<u8>,
    /// Everything it printed on stderr.
    pub stderr: Vec<u8>,
}

impl Ran {
    /// `server`, `client` or `alone`.
    pub fn label(&self) -> &'static str {
        self.role.map_or("alone", Role::label)
    }

    /// It exited 0, or was stopped once it had done its part.
    pub fn ok(&self) -> bool {
        self.stopped || self.status.is_some_and(|s| s.success())
    }

    /// `exit status N`, `stopped once done`, or `killed`.
    pub fn status_text(&self) -> String {
        match self.status.and_then(|s| s.code()) {
            Some(code) => format!("exit status {code}"),
            None if self.stopped => "stopped once done".into(),
            None => "killed".into(),
        }
    }

    /// Its command, how it ended, and both outputs: for a failure's message.
    pub fn report(&self) -> String {
        format!(
            "{} `{}`: {}\n--- stdout\n{}--- stderr\n{}",
            self.label(),
            self.command.join(" "),
            self.status_text(),
            String::from_utf8_lossy(&self.stdout),
            String::from_utf8_lossy(&self.stderr)
        )
    }

    /// As `std::process::Output`; panics, with both outputs, when it was killed.
    pub fn output(&self) -> Output {
        let status = self.status.unwrap_or_else(|| panic!("did not finish in time and was killed: {}", self.report()));
        Output { status, stdout: self.stdout.clone(), stderr: self.stderr.clone() }
    }
}

impl Run {
    /// `step` with our binary in every role (`target/debug/<bin>`), the device's flags,
    /// no other flag and no wrapper, bounded by [`TIMEOUT`].
    pub fn new(step: Step) -> Run {
        let ours = Player::Ours(root().join("target/debug").join(&step.bin).display().to_string());
        Run {
            step,
            server: ours.clone(),
            client: ours,
            flags: Vec::new(),
            server_flags: Vec::new(),
            client_flags: Vec::new(),
            ours_flags: Vec::new(),
            wrap: Vec::new(),
            server_wrap: Vec::new(),
            client_wrap: Vec::new(),
            device: true,
            port: None,
            across: None,
            timeout: TIMEOUT,
            after_failure: None,
            live: false,
        }
    }

    /// Our program at `program` (a test's `env!("CARGO_BIN_EXE_…")`) in every role.
    pub fn ours(mut self, program: &str) -> Run {
        self.server = Player::Ours(program.into());
        self.client = Player::Ours(program.into());
        self
    }

    /// Who plays the server.
    pub fn server(mut self, player: Player) -> Run {
        self.server = player;
        self
    }

    /// Who plays the client.
    pub fn client(mut self, player: Player) -> Run {
        self.client = player;
        self
    }

    /// Adds flags for every process.
    pub fn flags(mut self, flags: &[&str]) -> Run {
        self.flags.extend(flags.iter().map(|f| f.to_string()));
        self
    }

    /// Adds flags for `role`'s process only.
    pub fn role_flags(mut self, role: Role, flags: &[&str]) -> Run {
        let to = if role == Role::Server { &mut self.server_flags } else { &mut self.client_flags };
        to.extend(flags.iter().map(|f| f.to_string()));
        self
    }

    /// Adds flags only our programs get.
    pub fn ours_flags(mut self, flags: &[&str]) -> Run {
        self.ours_flags.extend(flags.iter().map(|f| f.to_string()));
        self
    }

    /// Who plays `role` (the server's player for the one process of an `alone` step).
    pub fn player(&self, role: Option<Role>) -> &Player {
        if role == Some(Role::Client) {
            &self.client
        } else {
            &self.server
        }
    }

    /// Runs only `role` here, the other role on the host at `server_addr`'s side (see
    /// [`Across`]); both runners need the same [`Run::port`].
    pub fn across(mut self, role: Role, server_addr: &str) -> Run {
        self.across = Some(Across { role, server: server_addr.into() });
        self
    }

    /// Where this run's server waits: a free port of testkit's unless one was given, on
    /// `127.0.0.1` for `pair` and on the device's IPv4 address for `cm` — across hosts, on
    /// the server's host address.
    pub fn meeting(&self) -> Meeting {
        let port = self.port.unwrap_or_else(tcp_port);
        let addr = match (&self.across, self.step.roles) {
            (Some(across), _) => across.server.clone(),
            (None, Roles::Cm) => cm_addr(),
            (None, Roles::Alone | Roles::Pair) => "127.0.0.1".into(),
        };
        Meeting { port, addr }
    }

    /// The roles whose processes run here: the kind's, or across hosts the one of this host.
    fn roles_here(&self) -> Vec<Option<Role>> {
        let roles = self.step.roles.roles().iter().copied();
        roles.filter(|r| self.across.as_ref().is_none_or(|a| *r == Some(a.role))).collect()
    }

    /// Runs the step in its roles and returns what each process did, in the order they
    /// started (the server, then the client). Panics when a process cannot be started or a
    /// player cannot play its role (see [`Run::try_run`]).
    pub fn run(&self) -> Vec<Ran> {
        self.try_run().unwrap_or_else(|e| panic!("{}: {e}", self.step.bin))
    }

    /// A two-role run's server's and client's outputs; panics, with both outputs, when
    /// either was killed (the tests' contract: a run that hangs fails).
    pub fn server_client(&self) -> (Output, Output) {
        let ran = self.run();
        assert!(ran.len() == 2, "{} has no server and client", self.step.bin);
        if ran.iter().any(|r| r.status.is_none()) {
            panic!("{} did not finish in time:\n{}\n{}", self.step.bin, ran[0].report(), ran[1].report());
        }
        (ran[0].output(), ran[1].output())
    }

    /// [`Run::run`], or why it cannot start.
    pub fn try_run(&self) -> Result<Vec<Ran>, String> {
        if self.across.is_some() {
            if self.step.roles == Roles::Alone {
                return Err(format!("{} runs alone: it has no roles to run across hosts", self.step.bin));
            }
            if self.port.is_none() {
                return Err("across hosts, both runners must be given the same port".into());
            }
        }
        let roles = self.roles_here();
        if self.live && roles.len() > 1 {
            return Err(format!("live output is for one process: {} runs two here", self.step.bin));
        }
        for &role in &roles {
            self.player(role).program(&self.step)?;
        }
        // The device is asked only when its flags are passed (rdma_cm's address asks it too).
        let dev = match self.device && self.step.roles != Roles::Cm {
            true => {
                let dev = device();
                DeviceFlags { name: dev.name.clone(), port: dev.port, gid_index: dev.gid_index }
            }
            false => DeviceFlags::default(),
        };
        let at =
            if self.step.roles == Roles::Alone { Meeting { port: 0, addr: String::new() } } else { self.meeting() };
        let link_port = if self.across.is_some() { peer_link_port(at.port)? } else { 0 };
        let mut commands = Vec::new();
        for &role in &roles {
            commands.push((role, self.command(role, &dev, &at)?));
        }
        let deadline = Instant::now() + self.timeout;
        let watch = Watch::new(self.live);
        let mut procs: Vec<Proc> = Vec::new();
        let mut link = None;
        for (role, command) in commands {
            if role == Some(Role::Client) {
                // The server first: the C client does not retry a refused connect, and a CM
                // client is rejected while nobody listens. Across hosts, the server's runner
                // says when (it accepts the peer link).
                link = match self.across {
                    None => {
                        self.wait_ready(&at, procs.first_mut(), deadline);
                        None
                    }
                    Some(_) => Some(link_to(&at.addr, link_port, deadline)?),
                };
            }
            let child = spawn_as(Command::new(&command[0]), &command[0], &command[1..]);
            procs.push(watch.start(role, self.player(role).clone(), command, child, deadline));
            if role == Some(Role::Server) && self.across.is_some() {
                // Listening on the link says "ready": the kernel completes a connect to a
                // listener before anyone accepts it.
                self.wait_ready(&at, procs.first_mut(), deadline);
                match link_listener(link_port) {
                    Ok(listener) => link = accept_link(&listener, &mut procs[0], deadline),
                    Err(e) => {
                        let _ = procs[0].child.kill();
                        let _ = procs[0].child.wait();
                        return Err(e);
                    }
                }
            }
        }
        // The peer link's end is the other host's runner's end: it is watched as a process of
        // this run's would be (a C tool here that outlasts the step is then stopped).
        let peer = link.as_ref().and_then(|l| l.try_clone().ok()).map(|l| watch.peer(l));
        watch.finish(&mut procs, &self.step, self.after_failure, peer);
        // Our end: the other runner's watch sees the peer link close.
        if let Some(l) = link {
            let _ = l.shutdown(Shutdown::Both);
        }
        // Every process of the run has ended: a port of testkit's is given back.
        if self.port.is_none() && at.port != 0 {
            release(at.port);
        }
        Ok(procs.into_iter().map(Proc::into_ran).collect())
    }

    /// Waits until the server is ready for its client, the server has exited, or `deadline`.
    fn wait_ready(&self, at: &Meeting, server: Option<&mut Proc>, deadline: Instant) {
        let mut server = server;
        while !self.ready(at)
            && Instant::now() < deadline
            && server.as_mut().is_none_or(|p| p.child.try_wait().ok().flatten().is_none())
        {
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The server is ready for its client: one arm per kind of roles.
    fn ready(&self, at: &Meeting) -> bool {
        match self.step.roles {
            Roles::Alone => true,
            Roles::Pair => listening(at.port),
            Roles::Cm => cm_listening(&at.addr, at.port),
        }
    }
}

/// True when some socket listens on TCP `port` (state 0A in /proc/net/tcp{,6}); checking
/// this way does not consume the server's one accept (and the C client does not retry a
/// refused connect).
pub fn listening(port: u16) -> bool {
    let needle = format!(":{port:04X} ");
    ["/proc/net/tcp", "/proc/net/tcp6"].iter().any(|file| {
        std::fs::read_to_string(file).is_ok_and(|text| {
            text.lines().any(|l| {
                let cols: Vec<&str> = l.split_whitespace().collect();
                cols.len() > 3 && format!("{} ", cols[1]).ends_with(&needle) && cols[3] == "0A"
            })
        })
    })
}

#[cfg(test)]
mod tests;

//! The runner: one step of `steps/list.txt` run in its roles. The one place that knows how
//! a run starts — the server first, the client once the server is ready for it (a TCP
//! listener for `pair`, a listening CM id for `cm`), both bounded in time — and who can
//! play a role: our step, the C tool it dissects, or rping. The tests, the exercise grader
//! and, through `cargo xtask run`, the lab scripts run steps through it.
//!
//! ```no_run
//! use testkit::runner::{Player, Run};
//! // Our 08_poll_cq as the client of the C ibv_rc_pingpong, 100 iterations.
//! let run = Run::new(testkit::step("08").unwrap()).server(Player::C).flags(&["-n", "100"]);
//! for ran in run.run() {
//!     assert!(ran.ok(), "{}", ran.report());
//! }
//! ```

use std::io::Read;
use std::process::{Child, Command, ExitStatus, Output};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use rdma_dissect::role::Role;

use crate::cm::{cm_addr, cm_listening};
use crate::{device, root, spawn_as, tcp_port, Roles, Step, TIMEOUT};

/// Who plays a role of a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Player {
    /// Our program: the step's binary, or another build of it (a student's, the grader's
    /// reference), at this path.
    Ours(String),
    /// The C tool the step dissects (`pair` steps): rdma-core's `ibv_rc_pingpong`, or
    /// perftest's `ib_write_bw` for 09 (its address message is ours, so this is only ever
    /// its own peer, as in lab/bench).
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
    fn program(&self, step: &Step) -> Result<String, String> {
        match (self, step.roles) {
            (Player::Ours(program), _) => Ok(program.clone()),
            (Player::C, Roles::Pair) if step.bin == "09_rdma_write" => Ok("ib_write_bw".into()),
            (Player::C, Roles::Pair) => Ok("ibv_rc_pingpong".into()),
            (Player::Rping, Roles::Cm) => Ok(crate::cm::RPING.into()),
            (Player::C, _) => Err(format!("{} has no C peer (rping's steps take --peer rping)", step.bin)),
            (Player::Rping, _) => Err(format!("{} does not connect with rdma_cm: rping cannot play it", step.bin)),
        }
    }

    /// A C tool that waits for a ping-pong the step never does: rc_pingpong opposite
    /// 05–07, which stop before their stage's ping-pong. It has done its part once the
    /// other side has exited and it has printed the peer's address; the runner then stops
    /// it, and runs it line-buffered (`stdbuf -oL`) so that what it printed is not lost in
    /// its stdio buffer.
    fn outlasts(&self, step: &Step) -> bool {
        *self == Player::C && step.roles == Roles::Pair && step.bin.as_str() < "08"
    }
}

/// The device's flags as a run passes them (`-d`, `-i`, `-g`): testkit's [`device`].
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
    /// The TCP port; a free one of testkit's ([`tcp_port`]) when None.
    pub port: Option<u16>,
    /// How long the whole run may take; what is still running then is killed.
    pub timeout: Duration,
    /// When this role's process fails, the others get this long more and are then killed
    /// (the grader's program under test: its peer would wait for ever for a partner that
    /// is gone). None: they run on.
    pub after_failure: Option<(Option<Role>, Duration)>,
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

    /// It exited 0.
    pub fn ok(&self) -> bool {
        self.status.is_some_and(|s| s.success())
    }

    /// `exit status N`, or `killed`.
    pub fn status_text(&self) -> String {
        match self.status.and_then(|s| s.code()) {
            Some(code) => format!("exit status {code}"),
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
            timeout: TIMEOUT,
            after_failure: None,
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
        let gid_flag = if program == "ib_write_bw" { "-x" } else { "-g" };
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

    /// Where this run's server waits: a free port of testkit's unless one was given, on
    /// `127.0.0.1` for `pair` and on the device's IPv4 address for `cm`.
    pub fn meeting(&self) -> Meeting {
        let port = self.port.unwrap_or_else(tcp_port);
        let addr = match self.step.roles {
            Roles::Cm => cm_addr(),
            Roles::Alone | Roles::Pair => "127.0.0.1".into(),
        };
        Meeting { port, addr }
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
        for &role in self.step.roles.roles() {
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
        let mut commands = Vec::new();
        for &role in self.step.roles.roles() {
            commands.push((role, self.command(role, &dev, &at)?));
        }
        let deadline = Instant::now() + self.timeout;
        let watch = Watch::default();
        let mut procs: Vec<Proc> = Vec::new();
        for (role, command) in commands {
            if role == Some(Role::Client) {
                // The server first: the C client does not retry a refused connect, and a CM
                // client is rejected while nobody listens.
                while !self.ready(&at)
                    && Instant::now() < deadline
                    && procs[0].child.try_wait().ok().flatten().is_none()
                {
                    std::thread::sleep(Duration::from_millis(20));
                }
            }
            let child = spawn_as(Command::new(&command[0]), &command[0], &command[1..]);
            procs.push(watch.start(role, self.player(role).clone(), command, child, deadline));
        }
        watch.finish(&mut procs, &self.step, self.after_failure);
        Ok(procs.into_iter().map(Proc::into_ran).collect())
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

/// What the processes of a run have printed so far, and how many of their pipes are still
/// open, with a condition variable their readers signal: the runner sleeps until a process
/// prints, closes its pipes (it exits) or a deadline passes. It does not poll while the
/// processes run, so a run timed on the lab's instruction clock (lab/bench) pays nothing
/// for being watched.
#[derive(Default, Clone)]
struct Watch(Arc<(Mutex<Vec<Captured>>, Condvar)>);

#[derive(Default)]
struct Captured {
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    open: u8,
}

/// One process of a run, watched.
struct Proc {
    role: Option<Role>,
    player: Player,
    command: Vec<String>,
    child: Child,
    index: usize,
    watch: Watch,
    deadline: Instant,
    /// Stop it as soon as its stdout so far says it is done (a C tool that outlasts the step).
    enough: Option<fn(&[u8]) -> bool>,
    /// Some once it has ended: its status, None when it was killed.
    ended: Option<Option<ExitStatus>>,
}

impl Watch {
    fn start(
        &self,
        role: Option<Role>,
        player: Player,
        command: Vec<String>,
        mut child: Child,
        deadline: Instant,
    ) -> Proc {
        let index = {
            let mut all = self.0 .0.lock().unwrap();
            all.push(Captured { open: 2, ..Default::default() });
            all.len() - 1
        };
        let out = child.stdout.take().expect("stdout piped");
        let err = child.stderr.take().expect("stderr piped");
        self.read(index, out, |c| &mut c.stdout);
        self.read(index, err, |c| &mut c.stderr);
        Proc { role, player, command, child, index, watch: self.clone(), deadline, enough: None, ended: None }
    }

    /// Drains `pipe` into one of `index`'s buffers on a thread, waking the runner each time.
    fn read(&self, index: usize, mut pipe: impl Read + Send + 'static, buf: fn(&mut Captured) -> &mut Vec<u8>) {
        let watch = self.clone();
        std::thread::spawn(move || {
            let mut chunk = [0u8; 4096];
            loop {
                let n = match pipe.read(&mut chunk) {
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Ok(n) => n,
                    Err(_) => 0,
                };
                let (lock, wake) = &*watch.0;
                let mut all = lock.lock().unwrap();
                if n == 0 {
                    all[index].open -= 1;
                    wake.notify_all();
                    return;
                }
                buf(&mut all[index]).extend_from_slice(&chunk[..n]);
                wake.notify_all();
            }
        });
    }

    /// Waits for every process of `procs`, killing each at its deadline, and applies the
    /// rules that cut a process's time short once another has ended.
    fn finish(&self, procs: &mut [Proc], step: &Step, after_failure: Option<(Option<Role>, Duration)>) {
        let (lock, wake) = &*self.0;
        let mut all = lock.lock().unwrap();
        loop {
            let now = Instant::now();
            let mut just_ended = Vec::new();
            for (i, p) in procs.iter_mut().enumerate().filter(|(_, p)| p.ended.is_none()) {
                let captured = &all[p.index];
                if captured.open == 0 {
                    // Both pipes closed: it has exited, or is about to.
                    if let Some(status) = p.child.try_wait().expect("try_wait") {
                        p.ended = Some(Some(status));
                        just_ended.push(i);
                        continue;
                    }
                }
                if now >= p.deadline || p.enough.is_some_and(|enough| enough(&captured.stdout)) {
                    let _ = p.child.kill();
                    let _ = p.child.wait();
                    p.ended = Some(None);
                    just_ended.push(i);
                }
            }
            for i in just_ended {
                let failed = !procs[i].ended.flatten().is_some_and(|s| s.success());
                let cut = after_failure.filter(|(role, _)| failed && *role == procs[i].role).map(|(_, grace)| grace);
                for p in procs.iter_mut().filter(|p| p.ended.is_none()) {
                    if p.player.outlasts(step) {
                        p.deadline = p.deadline.min(now + Duration::from_secs(1));
                        p.enough = Some(printed_the_peer);
                    }
                    if let Some(grace) = cut {
                        p.deadline = p.deadline.min(now + grace);
                    }
                }
            }
            let live: Vec<&Proc> = procs.iter().filter(|p| p.ended.is_none()).collect();
            let Some(next) = live.iter().map(|p| p.deadline).min() else { break };
            // A process whose pipes are closed is reaped within a moment: look again soon.
            let closed = live.iter().any(|p| all[p.index].open == 0);
            let wait = next.saturating_duration_since(Instant::now());
            let wait = if closed { wait.min(Duration::from_millis(20)) } else { wait };
            all = wake.wait_timeout(all, wait).unwrap().0;
        }
    }
}

/// rc_pingpong has printed the peer's address line, whole (`  remote address: …\n`).
fn printed_the_peer(stdout: &[u8]) -> bool {
    stdout.split(|&b| b == b'\n').rev().skip(1).any(|l| l.starts_with(b"  remote address:"))
}

impl Proc {
    fn into_ran(self) -> Ran {
        let mut all = self.watch.0 .0.lock().unwrap();
        let captured = std::mem::take(&mut all[self.index]);
        Ran {
            role: self.role,
            player: self.player,
            command: self.command,
            status: self.ended.flatten(),
            stdout: captured.stdout,
            stderr: captured.stderr,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listed(bin: &str) -> Step {
        crate::steps().into_iter().find(|s| s.bin == bin).unwrap()
    }

    fn dev() -> DeviceFlags {
        DeviceFlags { name: "rxe0".into(), port: 1, gid_index: 1 }
    }

    fn at() -> Meeting {
        Meeting { port: 21000, addr: "127.0.0.1".into() }
    }

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn every_kind_of_roles_starts_the_server_first() {
        assert_eq!(Roles::Alone.roles(), &[None]);
        for roles in [Roles::Pair, Roles::Cm] {
            assert_eq!(roles.roles(), &[Some(Role::Server), Some(Role::Client)]);
        }
        for s in crate::steps() {
            assert_eq!(Roles::parse(s.roles.word()), Some(s.roles));
            assert_eq!((s.pair, s.cm), (s.roles != Roles::Alone, s.roles == Roles::Cm));
        }
    }

    #[test]
    fn an_alone_step_gets_the_device_and_its_flags() {
        let run = Run::new(listed("03_reg_mr")).ours("/b/03").flags(&["-s", "100"]);
        assert_eq!(run.command(None, &dev(), &at()).unwrap(), words("/b/03 -d rxe0 -i 1 -g 1 -s 100"));
    }

    #[test]
    fn a_pair_s_client_gets_the_host_last() {
        let run = Run::new(listed("08_poll_cq")).ours("/b/08").flags(&["-n", "5"]).ours_flags(&["--timeout", "3"]);
        let server = run.command(Some(Role::Server), &dev(), &at()).unwrap();
        assert_eq!(server, words("/b/08 -d rxe0 -i 1 -g 1 -p 21000 -n 5 --timeout 3"));
        let client = run.command(Some(Role::Client), &dev(), &at()).unwrap();
        assert_eq!(client, words("/b/08 -d rxe0 -i 1 -g 1 -p 21000 -n 5 --timeout 3 127.0.0.1"));
    }

    #[test]
    fn c_tools_get_no_flags_of_ours_and_their_own_spelling() {
        let run = Run::new(listed("08_poll_cq")).server(Player::C).ours_flags(&["--timeout", "3"]);
        let server = run.command(Some(Role::Server), &dev(), &at()).unwrap();
        assert_eq!(server, words("ibv_rc_pingpong -d rxe0 -i 1 -g 1 -p 21000"));
        let bw = Run::new(listed("09_rdma_write")).client(Player::C).role_flags(Role::Client, &["-n", "9"]);
        let client = bw.command(Some(Role::Client), &dev(), &at()).unwrap();
        assert_eq!(client, words("ib_write_bw -d rxe0 -i 1 -x 1 -p 21000 -n 9 127.0.0.1"));
    }

    #[test]
    fn a_c_tool_opposite_05_to_07_runs_line_buffered() {
        let run = Run::new(listed("05_modify_qp_rtr")).server(Player::C);
        assert!(run
            .command(Some(Role::Server), &dev(), &at())
            .unwrap()
            .starts_with(&words("stdbuf -oL ibv_rc_pingpong")));
        assert!(!Player::C.outlasts(&listed("08_poll_cq")));
        let mut run = Run::new(listed("08_poll_cq")).server(Player::C);
        assert!(run.command(Some(Role::Server), &dev(), &at()).unwrap().starts_with(&words("ibv_rc_pingpong")));
        run.after_failure = Some((Some(Role::Client), Duration::from_secs(1)));
        assert!(run
            .command(Some(Role::Server), &dev(), &at())
            .unwrap()
            .starts_with(&words("stdbuf -oL ibv_rc_pingpong")));
        assert!(printed_the_peer(b"  local address: x\n  remote address: y\n"));
        assert!(!printed_the_peer(b"  remote address: y"));
    }

    #[test]
    fn a_cm_step_gets_rping_s_role_flags_and_no_device() {
        let at = Meeting { port: 7174, addr: "192.0.2.1".into() };
        let run =
            Run::new(listed("10_rdma_cm")).ours("/b/10").client(Player::Rping).role_flags(Role::Client, &["-C", "3"]);
        assert_eq!(run.command(Some(Role::Server), &dev(), &at).unwrap(), words("/b/10 -s -a 192.0.2.1 -p 7174"));
        assert_eq!(run.command(Some(Role::Client), &dev(), &at).unwrap(), words("rping -c -a 192.0.2.1 -p 7174 -C 3"));
    }

    #[test]
    fn wrappers_come_first_with_the_role_s_label() {
        let mut run = Run::new(listed("06_modify_qp_rts")).ours("/b/06");
        run.wrap = words("valgrind --log-file=/t/{role}.log");
        run.client_wrap = words("env X=1");
        run.device = false;
        let client = run.command(Some(Role::Client), &dev(), &at()).unwrap();
        assert_eq!(client, words("valgrind --log-file=/t/client.log env X=1 /b/06 -p 21000 127.0.0.1"));
    }

    /// A stand-in for a pair step without a device: python3 (a wrapper, so the program
    /// and its arguments are its argv) listening on `-p` or, with a host, connecting once
    /// — refused if the runner started it too early, as the C client is. The last `-p` counts.
    const FAKE: &str = "import socket, sys; a = sys.argv; p = int(a[max(i for i, x in enumerate(a) if x == '-p') + 1])
if a[-1] == '127.0.0.1':
    c = socket.create_connection(('127.0.0.1', p)); c.sendall(b'ping'); print('client sent ping')
else:
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(('0.0.0.0', p)); s.listen(1); c, _ = s.accept()
    print('server got', c.recv(4).decode())
";

    fn fake(step: &str) -> Run {
        let mut run = Run::new(listed(step)).ours("fake");
        run.device = false;
        run.wrap = vec!["python3".into(), "-c".into(), FAKE.into()];
        run
    }

    #[test]
    fn the_client_starts_once_the_server_listens_and_both_outputs_come_back() {
        let ran = fake("08_poll_cq").run();
        assert_eq!(ran.iter().map(Ran::label).collect::<Vec<_>>(), ["server", "client"]);
        assert!(ran.iter().all(Ran::ok), "{}\n{}", ran[0].report(), ran[1].report());
        assert_eq!(String::from_utf8_lossy(&ran[0].stdout), "server got ping\n");
        assert_eq!(String::from_utf8_lossy(&ran[1].stdout), "client sent ping\n");
    }

    #[test]
    fn what_outlives_the_run_s_time_is_killed() {
        let mut run = fake("08_poll_cq");
        // The server listens and waits for a client that connects to another port.
        run.client_flags = vec!["-p".into(), "1".into()];
        run.timeout = Duration::from_secs(2);
        let started = Instant::now();
        let ran = run.run();
        assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
        assert!(ran[0].status.is_none() && !ran[1].ok(), "{}\n{}", ran[0].report(), ran[1].report());
        assert_eq!(ran[0].status_text(), "killed");
    }

    #[test]
    fn a_failure_of_the_watched_role_cuts_the_other_short() {
        // The client fails at once (nothing listens on port 1); the server, which would
        // wait for ever, gets the second after_failure gives it.
        let mut run = fake("08_poll_cq");
        run.client_flags = vec!["-p".into(), "1".into()];
        run.after_failure = Some((Some(Role::Client), Duration::from_secs(1)));
        let started = Instant::now();
        let ran = run.run();
        assert!(started.elapsed() < Duration::from_secs(10), "{:?}", started.elapsed());
        assert!(ran[0].status.is_none() && !ran[1].ok(), "{}\n{}", ran[0].report(), ran[1].report());
    }

    #[test]
    fn a_player_that_cannot_play_the_step_says_so() {
        let run = Run::new(listed("01_open_device")).server(Player::C);
        assert!(run.command(None, &dev(), &at()).unwrap_err().contains("has no C peer"));
        let run = Run::new(listed("08_poll_cq")).client(Player::Rping);
        assert!(run.command(Some(Role::Client), &dev(), &at()).unwrap_err().contains("rping cannot play it"));
    }
}

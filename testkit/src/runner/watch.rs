//! Watching the processes of a run: their output, their end, and the deadlines that end
//! them.

use std::io::{Read, Write};
use std::process::{Child, ExitStatus};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use rdma_dissect::role::Role;

use super::{Player, Ran};
use crate::Step;

/// What the processes of a run have printed so far, and how many of their pipes are still
/// open, with a condition variable their readers signal: the runner sleeps until a process
/// prints, closes its pipes (it exits) or a deadline passes. It does not poll while the
/// processes run, so a run timed on the lab's instruction clock (lab/bench) pays nothing
/// for being watched.
#[derive(Default, Clone)]
pub(super) struct Watch {
    shared: Arc<(Mutex<Vec<Captured>>, Condvar)>,
    /// Also pass what each process prints on to the runner's own stdout and stderr as it
    /// comes ([`super::Run::live`]).
    live: bool,
}

#[derive(Default)]
struct Captured {
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    open: u8,
}

/// One process of a run, watched.
pub(super) struct Proc {
    role: Option<Role>,
    player: Player,
    command: Vec<String>,
    pub(super) child: Child,
    index: usize,
    watch: Watch,
    deadline: Instant,
    /// Stop it as soon as its stdout so far says it is done (a C tool that outlasts the step).
    enough: Option<fn(&[u8]) -> bool>,
    /// Some once it has ended: its status, None when it was killed.
    ended: Option<Option<ExitStatus>>,
    /// It was killed once `enough` said it had done its part.
    stopped: bool,
}

impl Watch {
    /// A watch for one run; `live`: see [`super::Run::live`].
    pub(super) fn new(live: bool) -> Watch {
        Watch { live, ..Watch::default() }
    }

    pub(super) fn start(
        &self,
        role: Option<Role>,
        player: Player,
        command: Vec<String>,
        mut child: Child,
        deadline: Instant,
    ) -> Proc {
        let index = {
            let mut all = self.shared.0.lock().unwrap();
            all.push(Captured { open: 2, ..Default::default() });
            all.len() - 1
        };
        let out = child.stdout.take().expect("stdout piped");
        let err = child.stderr.take().expect("stderr piped");
        let echo = |to: Box<dyn Write + Send>| self.live.then_some(to);
        self.read(index, out, |c| &mut c.stdout, echo(Box::new(std::io::stdout())));
        self.read(index, err, |c| &mut c.stderr, echo(Box::new(std::io::stderr())));
        Proc {
            role,
            player,
            command,
            child,
            index,
            watch: self.clone(),
            deadline,
            enough: None,
            ended: None,
            stopped: false,
        }
    }

    /// Watches the other host's runner through the peer link: its index, whose pipe count
    /// falls to 0 when that runner closes the link (its process has ended).
    pub(super) fn peer(&self, link: std::net::TcpStream) -> usize {
        let index = {
            let mut all = self.shared.0.lock().unwrap();
            all.push(Captured { open: 1, ..Default::default() });
            all.len() - 1
        };
        self.read(index, link, |c| &mut c.stdout, None);
        index
    }

    /// Drains `pipe` into one of `index`'s buffers on a thread, waking the runner each time,
    /// and passes it on to `echo` as it comes.
    fn read(
        &self,
        index: usize,
        mut pipe: impl Read + Send + 'static,
        buf: fn(&mut Captured) -> &mut Vec<u8>,
        mut echo: Option<Box<dyn Write + Send>>,
    ) {
        let watch = self.clone();
        std::thread::spawn(move || {
            let mut chunk = [0u8; 4096];
            loop {
                let n = match pipe.read(&mut chunk) {
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Ok(n) => n,
                    Err(_) => 0,
                };
                if let Some(to) = echo.as_mut().filter(|_| n > 0) {
                    // Best effort: a reader gone from the other end must not stop the run.
                    let _ = to.write_all(&chunk[..n]).and_then(|()| to.flush());
                }
                let (lock, wake) = &*watch.shared;
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
    /// rules that cut a process's time short once another has ended — here, or on the other
    /// host (`peer`: the peer link's index, see [`Watch::peer`]).
    pub(super) fn finish(
        &self,
        procs: &mut [Proc],
        step: &Step,
        after_failure: Option<(Option<Role>, Duration)>,
        mut peer: Option<usize>,
    ) {
        let (lock, wake) = &*self.shared;
        let mut all = lock.lock().unwrap();
        loop {
            let now = Instant::now();
            let mut just_ended = Vec::new();
            if peer.is_some_and(|i| all[i].open == 0) {
                peer = None;
                for p in procs.iter_mut().filter(|p| p.ended.is_none() && p.player.outlasts(step)) {
                    p.deadline = p.deadline.min(now + Duration::from_secs(1));
                    p.enough = Some(printed_the_peer);
                }
            }
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
                let done = p.enough.is_some_and(|enough| enough(&captured.stdout));
                if now >= p.deadline || done {
                    p.stopped = done;
                    let _ = p.child.kill();
                    let _ = p.child.wait();
                    p.ended = Some(None);
                    just_ended.push(i);
                }
            }
            let ended_now = !just_ended.is_empty();
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
            if ended_now {
                // What an ending changed (a deadline, what is enough) is looked at now, not
                // at the next deadline: a C peer that has done its part is stopped at once.
                continue;
            }
            let live: Vec<&Proc> = procs.iter().filter(|p| p.ended.is_none()).collect();
            let Some(next) = live.iter().map(|p| p.deadline).min() else { break };
            // A process whose pipes are closed is reaped within a moment: look again soon.
            let closed = live.iter().any(|p| all[p.index].open == 0);
            let wait = next.saturating_duration_since(Instant::now());
            let wait = if closed { wait.min(Duration::from_millis(20)) } else { wait };
            all = wake.wait_timeout(all, wait).unwrap().0;
        }
        // What a killed process printed last may still be in its pipes: its readers get it
        // before they see the pipes close (a second at most, should something it started
        // hold them open).
        let drained = Instant::now() + Duration::from_secs(1);
        while procs.iter().any(|p| all[p.index].open > 0) && Instant::now() < drained {
            all = wake.wait_timeout(all, Duration::from_millis(50)).unwrap().0;
        }
    }
}

/// rc_pingpong has printed the peer's address line, whole (`  remote address: …\n`).
pub(super) fn printed_the_peer(stdout: &[u8]) -> bool {
    stdout.split(|&b| b == b'\n').rev().skip(1).any(|l| l.starts_with(b"  remote address:"))
}

impl Proc {
    pub(super) fn into_ran(self) -> Ran {
        let mut all = self.watch.shared.0.lock().unwrap();
        let captured = std::mem::take(&mut all[self.index]);
        Ran {
            role: self.role,
            player: self.player,
            command: self.command,
            status: self.ended.flatten(),
            stopped: self.stopped,
            stdout: captured.stdout,
            stderr: captured.stderr,
        }
    }
}

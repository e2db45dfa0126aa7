//! `cargo xtask run NN …`: a step in its roles, through the runner (the one place that
//! starts a server and then its client), for the lab scripts and for people.
//!
//! ```text
//! cargo xtask run NN [--peer ours|c|rping] [--as server|client] [--server WHO] [--client WHO]
//!                    [--wrap CMD] [--server-wrap CMD] [--client-wrap CMD]
//!                    [--server-flags FLAGS] [--client-flags FLAGS] [--ours-flags FLAGS]
//!                    [--bin-dir DIR] [--port P] [--timeout S] [--out DIR] [--host ADDR] [--live]
//!                    [-- FLAGS…]
//! ```
//!
//! `--peer WHO` plays the role opposite ours (`--as`, default the client); `--server` and
//! `--client` name each role's player outright (`c` and `c`: the C tool against itself).
//! CMD and FLAGS are one argument each, split at spaces except inside single quotes
//! (`--client-wrap "lab/impair --netem 'loss 5%' --"`); `{role}` in a wrapper's word is
//! the role's label (`valgrind --log-file=/tmp/{role}.log`). `--host ADDR` runs the step
//! across two hosts: only the `--as` role runs here, ADDR is the server's host address, and
//! the other host runs the same command with the other `--as` and the same `--port`; the
//! two runners keep the order between them ([`super::peer_link_port`]). FLAGS after `--` go to every
//! process. Each role's output is printed labelled (`[server] …`; an `alone` step's as it
//! is), or with `--out DIR` written to `DIR/ROLE` (stdout, then stderr) and `DIR/ROLE.status`
//! (the exit code; `stopped` for a C tool stopped once it had done its part, `killed` for
//! what ran out of time). `--live` prints the one process's output as it comes instead
//! (stdout to stdout, stderr to stderr; an `alone` step, or one role with `--host`). The
//! exit status is 1 when a process failed.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, ValueEnum};

use super::{Player, Ran, Run};
use rdma_dissect::role::Role;

/// `cargo xtask run`'s arguments (and the `runner` binary's): clap's, so `--help` says what
/// each is. An option given twice counts once, the last time (as scripts that add to a
/// command line expect).
#[derive(Args, Debug, Clone, PartialEq)]
#[command(args_override_self = true)]
pub struct RunArgs {
    /// The step: its number in steps/list.txt (or its bin)
    #[arg(value_name = "NN")]
    pub step: String,
    /// Who plays the role opposite ours: ours, c (the C tool the step dissects) or rping
    #[arg(long, value_name = "WHO")]
    pub peer: Option<String>,
    /// The role ours plays (the other is --peer's)
    #[arg(long = "as", value_enum, value_name = "ROLE", default_value = "client")]
    pub ours_as: Side,
    /// Who plays the server, outright: ours, c or rping
    #[arg(long, value_name = "WHO")]
    pub server: Option<String>,
    /// Who plays the client, outright: ours, c or rping
    #[arg(long, value_name = "WHO")]
    pub client: Option<String>,
    /// A command every process runs under (words; '…' keeps spaces; {role} is the role)
    #[arg(long, value_name = "CMD", allow_hyphen_values = true)]
    pub wrap: Option<String>,
    /// A command the server runs under, inside --wrap
    #[arg(long, value_name = "CMD", allow_hyphen_values = true)]
    pub server_wrap: Option<String>,
    /// A command the client runs under, inside --wrap
    #[arg(long, value_name = "CMD", allow_hyphen_values = true)]
    pub client_wrap: Option<String>,
    /// Flags only the server gets (words)
    #[arg(long, value_name = "FLAGS", allow_hyphen_values = true)]
    pub server_flags: Option<String>,
    /// Flags only the client gets (words)
    #[arg(long, value_name = "FLAGS", allow_hyphen_values = true)]
    pub client_flags: Option<String>,
    /// Flags only our programs get (--timeout, --break: the C tools do not know them)
    #[arg(long, value_name = "FLAGS", allow_hyphen_values = true)]
    pub ours_flags: Option<String>,
    /// Where our steps' binaries are (default: target/debug)
    #[arg(long, value_name = "DIR")]
    pub bin_dir: Option<PathBuf>,
    /// The TCP port (default: a free one)
    #[arg(long, value_name = "P")]
    pub port: Option<u16>,
    /// Seconds the whole run may take
    #[arg(long, value_name = "S")]
    pub timeout: Option<u64>,
    /// Write each role's output to DIR/ROLE and its exit to DIR/ROLE.status
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Across two hosts: only --as's role runs here; ADDR is the server's host address
    #[arg(long, value_name = "ADDR")]
    pub host: Option<String>,
    /// Print the one process's output as it comes
    #[arg(long)]
    pub live: bool,
    /// Flags every process gets
    #[arg(last = true, value_name = "FLAGS")]
    pub flags: Vec<String>,
}

/// `--as`'s roles.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq)]
pub enum Side {
    Server,
    Client,
}

/// The `runner` binary's command line: [`RunArgs`] alone.
#[derive(Parser, Debug)]
#[command(name = "runner", about = "`cargo xtask run` without the rest of xtask: a step in its roles on the device")]
pub struct RunnerCli {
    #[command(flatten)]
    pub args: RunArgs,
}

/// What the command line asks for: the run, and where its output goes.
struct Asked {
    run: Run,
    out: Option<PathBuf>,
}

/// CMD or FLAGS as words: split at spaces, except inside single quotes, which a word keeps
/// together and loses, as in a shell (a wrapper's own argument can hold a space).
fn words(s: &str) -> Result<Vec<String>, String> {
    let (mut words, mut word, mut quoted) = (Vec::new(), None::<String>, false);
    for c in s.chars() {
        match c {
            '\'' => {
                quoted = !quoted;
                word.get_or_insert_with(String::new);
            }
            c if c.is_whitespace() && !quoted => words.extend(word.take()),
            c => word.get_or_insert_with(String::new).push(c),
        }
    }
    if quoted {
        return Err(format!("`{s}`: a single quote is not closed"));
    }
    words.extend(word);
    Ok(words)
}

/// The run `a` asks for.
fn parse(a: &RunArgs) -> Result<Asked, String> {
    let step = crate::step(&a.step)?;
    let bins = a.bin_dir.clone().unwrap_or_else(|| crate::root().join("target/debug"));
    let player = |word: &str| Player::parse(word, &step, &bins);
    let ours = player("ours")?;
    let ours_as = match a.ours_as {
        Side::Server => Role::Server,
        Side::Client => Role::Client,
    };
    let peer = player(a.peer.as_deref().unwrap_or("ours"))?;
    let (mut server, mut client) = if ours_as == Role::Server { (ours, peer) } else { (peer, ours) };
    if let Some(who) = &a.server {
        server = player(who)?;
    }
    if let Some(who) = &a.client {
        client = player(who)?;
    }
    let mut run = Run::new(step).server(server).client(client);
    run.flags = a.flags.clone();
    let list = |value: &Option<String>| value.as_deref().map_or(Ok(Vec::new()), words);
    (run.server_flags, run.client_flags, run.ours_flags) =
        (list(&a.server_flags)?, list(&a.client_flags)?, list(&a.ours_flags)?);
    (run.wrap, run.server_wrap, run.client_wrap) = (list(&a.wrap)?, list(&a.server_wrap)?, list(&a.client_wrap)?);
    run.live = a.live;
    run.port = a.port;
    if let Some(secs) = a.timeout {
        run.timeout = Duration::from_secs(secs);
    }
    if let Some(host) = &a.host {
        run = run.across(ours_as, host);
    }
    Ok(Asked { run, out: a.out.clone() })
}

/// One process's output (stdout, then stderr), each line labelled with its role when the
/// run had more than one here.
fn labelled(ran: &Ran, alone: bool) -> String {
    let text = format!("{}{}", String::from_utf8_lossy(&ran.stdout), String::from_utf8_lossy(&ran.stderr));
    match ran.role {
        Some(role) if !alone => text.lines().map(|l| format!("[{}] {l}\n", role.label())).collect(),
        _ => text,
    }
}

fn write_out(dir: &Path, ran: &Ran) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let write = |name: String, bytes: &[u8]| {
        std::fs::write(dir.join(&name), bytes).map_err(|e| format!("{}: {e}", dir.join(name).display()))
    };
    write(ran.label().into(), &[&ran.stdout[..], &ran.stderr[..]].concat())?;
    let status = match ran.status.and_then(|s| s.code()) {
        Some(code) => code.to_string(),
        None if ran.stopped => "stopped".into(),
        None => "killed".into(),
    };
    write(format!("{}.status", ran.label()), format!("{status}\n").as_bytes())
}

/// `run NN …`, parsed.
pub fn main(args: &RunArgs) -> ExitCode {
    let result = parse(args).and_then(|asked| {
        let ran = asked.run.try_run()?;
        for r in &ran {
            match &asked.out {
                Some(dir) => write_out(dir, r)?,
                None if asked.run.live => {} // printed as it came
                None => print!("{}", labelled(r, ran.len() == 1)),
            }
        }
        Ok((asked.run.step.bin.clone(), ran))
    });
    match result {
        Ok((_, ran)) if ran.iter().all(Ran::ok) => ExitCode::SUCCESS,
        Ok((bin, ran)) => {
            let how: Vec<String> = ran.iter().map(|r| format!("{} {}", r.label(), r.status_text())).collect();
            eprintln!("xtask run: {bin} failed ({})", how.join(", "));
            ExitCode::from(1)
        }
        Err(e) => {
            eprintln!("xtask run: {e}");
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(line: &str) -> Vec<String> {
        words(line).unwrap()
    }

    fn args(words: &[String]) -> Result<RunArgs, clap::Error> {
        RunnerCli::try_parse_from(std::iter::once("runner".to_string()).chain(words.iter().cloned())).map(|c| c.args)
    }

    fn asked(line: &str) -> Result<Asked, String> {
        parse(&args(&w(line)).map_err(|e| e.to_string())?)
    }

    #[test]
    fn ours_plays_both_roles_unless_a_peer_is_named() {
        let run = asked("8").unwrap().run;
        assert_eq!(run.step.bin, "08_poll_cq");
        assert!(
            matches!((&run.server, &run.client), (Player::Ours(s), Player::Ours(c)) if s == c && s.ends_with("target/debug/08_poll_cq"))
        );
        let run = asked("08 --peer c").unwrap().run;
        assert!(run.server == Player::C && matches!(run.client, Player::Ours(_)));
        let run = asked("10 --peer rping --as server").unwrap().run;
        assert!(matches!(run.server, Player::Ours(_)) && run.client == Player::Rping);
        let run = asked("09 --server c --client c --bin-dir /r").unwrap().run;
        assert_eq!((run.server, run.client), (Player::C, Player::C));
        let run = asked("09 --bin-dir /r").unwrap().run;
        assert_eq!(run.server, Player::Ours("/r/09_rdma_write".into()));
        assert!(run.across.is_none());
    }

    #[test]
    fn host_runs_the_as_role_here_only() {
        let run = asked("08 --host 192.0.2.1 --port 18515 --as server --server c").unwrap().run;
        assert_eq!(run.across, Some(crate::runner::Across { role: Role::Server, server: "192.0.2.1".into() }));
        assert_eq!(run.server, Player::C);
        let run = asked("10 --host 192.0.2.1 --port 7174").unwrap().run;
        assert_eq!(run.across.map(|a| a.role), Some(Role::Client));
    }

    #[test]
    fn flags_and_wrappers_are_split_at_spaces() {
        let a = asked("08 --wrap valgrind --client-flags 127.0.0.2 --timeout 900 --out /t -- -n 5").unwrap();
        assert_eq!(a.out, Some(PathBuf::from("/t")));
        let run = a.run;
        assert_eq!((run.flags, run.client_flags), (w("-n 5"), w("127.0.0.2")));
        assert_eq!(run.wrap, w("valgrind"));
        assert_eq!(run.timeout, Duration::from_secs(900));
        let run = asked("10").unwrap();
        assert!(run.run.wrap.is_empty() && run.out.is_none());
        let mut args = w("08 --wrap");
        args.push("valgrind --tool=memcheck --log-file=/t/{role}.log".into());
        assert_eq!(parse(&super::tests::args(&args).unwrap()).unwrap().run.wrap.len(), 3);
    }

    #[test]
    fn single_quotes_keep_a_wrapper_s_argument_whole() {
        let mut args = w("08 --server-wrap");
        args.push("lab/impair --netem 'delay 2ms reorder 30% 50%' --".into());
        let run = parse(&super::tests::args(&args).unwrap()).unwrap().run;
        assert_eq!(run.server_wrap, ["lab/impair", "--netem", "delay 2ms reorder 30% 50%", "--"]);
        assert_eq!(w("-C 1 '' a'b c'd"), ["-C", "1", "", "ab cd"]);
        assert!(words("--netem 'loss 5%").unwrap_err().contains("not closed"));
    }

    #[test]
    fn live_takes_no_value() {
        let run = asked("08 --live --host 192.0.2.1 --port 18515 --as server -- -n 1").unwrap().run;
        assert!(run.live && run.across.is_some());
        assert_eq!(run.flags, w("-n 1"));
        assert!(!asked("08").unwrap().run.live);
    }

    #[test]
    fn mistakes_are_named() {
        use clap::error::ErrorKind;
        let kind = |line: &str| args(&w(line)).unwrap_err().kind();
        assert_eq!(kind(""), ErrorKind::MissingRequiredArgument);
        assert!(asked("99").err().unwrap().contains("no step `99`"));
        assert!(asked("08 --peer java").err().unwrap().contains("ours, c or rping"));
        assert_eq!(kind("08 --as both"), ErrorKind::InvalidValue);
        assert_eq!(kind("08 --bogus 1"), ErrorKind::UnknownArgument);
        assert_eq!(kind("08 --port"), ErrorKind::InvalidValue);
        assert_eq!(kind("08 --port 70000"), ErrorKind::ValueValidation);
    }

    #[test]
    fn a_value_may_start_with_a_dash_and_the_last_of_an_option_counts() {
        let run = asked("08 --ours-flags --timeout --server-flags -n --port 1 --port 2").unwrap().run;
        assert_eq!((run.ours_flags, run.server_flags, run.port), (w("--timeout"), w("-n"), Some(2)));
        let mut line = w("05 --ours-flags");
        line.push("--timeout 5".into());
        assert_eq!(parse(&args(&line).unwrap()).unwrap().run.ours_flags, w("--timeout 5"));
    }
}

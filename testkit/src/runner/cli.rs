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

use super::{Player, Ran, Run};
use rdma_dissect::role::Role;

const USAGE: &str = "usage: cargo xtask run NN [--peer ours|c|rping] [--as server|client] [--server WHO] \
[--client WHO] [--wrap CMD] [--server-wrap CMD] [--client-wrap CMD] [--server-flags FLAGS] [--client-flags FLAGS] \
[--ours-flags FLAGS] [--bin-dir DIR] [--port P] [--timeout S] [--out DIR] [--host ADDR] [--live] [-- FLAGS...]";

/// The options, each with one value (`--live` takes none).
const OPTIONS: [&str; 15] = [
    "--peer",
    "--as",
    "--server",
    "--client",
    "--wrap",
    "--server-wrap",
    "--client-wrap",
    "--server-flags",
    "--client-flags",
    "--ours-flags",
    "--bin-dir",
    "--port",
    "--timeout",
    "--out",
    "--host",
];

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

/// Reads the command line (after `run`) into a [`Run`].
fn parse(args: &[String]) -> Result<Asked, String> {
    let (opts, flags) = match args.iter().position(|a| a == "--") {
        Some(i) => (&args[..i], &args[i + 1..]),
        None => (args, &args[..0]),
    };
    let (which, opts) = opts.split_first().ok_or("which step? (a number of steps/list.txt)")?;
    let step = crate::step(which)?;
    let (mut pairs, mut live) = (Vec::new(), false);
    let mut it = opts.iter();
    while let Some(opt) = it.next() {
        if opt == "--live" {
            live = true;
            continue;
        }
        let value = it.next().ok_or_else(|| format!("{opt} wants a value"))?;
        pairs.push((opt.as_str(), value.as_str()));
    }
    let value = |name: &str| pairs.iter().rev().find(|(o, _)| *o == name).map(|(_, v)| *v);
    if let Some((bad, _)) = pairs.iter().find(|(o, _)| !OPTIONS.contains(o)) {
        return Err(format!("unknown option {bad}"));
    }
    let bins = value("--bin-dir").map_or_else(|| crate::root().join("target/debug"), PathBuf::from);
    let player = |word: &str| Player::parse(word, &step, &bins);
    let ours = player("ours")?;
    let ours_as = match value("--as") {
        None | Some("client") => Role::Client,
        Some("server") => Role::Server,
        Some(other) => return Err(format!("--as {other}: server or client")),
    };
    let peer = player(value("--peer").unwrap_or("ours"))?;
    let (mut server, mut client) = if ours_as == Role::Server { (ours, peer) } else { (peer, ours) };
    if let Some(who) = value("--server") {
        server = player(who)?;
    }
    if let Some(who) = value("--client") {
        client = player(who)?;
    }
    let mut run = Run::new(step).server(server).client(client);
    run.flags = flags.to_vec();
    let list = |name| value(name).map_or(Ok(Vec::new()), words);
    (run.server_flags, run.client_flags, run.ours_flags) =
        (list("--server-flags")?, list("--client-flags")?, list("--ours-flags")?);
    (run.wrap, run.server_wrap, run.client_wrap) = (list("--wrap")?, list("--server-wrap")?, list("--client-wrap")?);
    run.live = live;
    if let Some(port) = value("--port") {
        run.port = Some(port.parse().map_err(|_| format!("--port {port}: a TCP port"))?);
    }
    if let Some(secs) = value("--timeout") {
        run.timeout = Duration::from_secs(secs.parse().map_err(|_| format!("--timeout {secs}: seconds"))?);
    }
    if let Some(host) = value("--host") {
        run = run.across(ours_as, host);
    }
    Ok(Asked { run, out: value("--out").map(PathBuf::from) })
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

/// `run ARGS…`.
pub fn main(args: &[String]) -> ExitCode {
    if matches!(args.first().map(String::as_str), Some("-h" | "--help")) {
        println!("{USAGE}");
        return ExitCode::SUCCESS;
    }
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
            eprintln!("xtask run: {e}\n{USAGE}");
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

    fn asked(line: &str) -> Result<Asked, String> {
        parse(&w(line))
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
        assert_eq!(parse(&args).unwrap().run.wrap.len(), 3);
    }

    #[test]
    fn single_quotes_keep_a_wrapper_s_argument_whole() {
        let mut args = w("08 --server-wrap");
        args.push("lab/impair --netem 'delay 2ms reorder 30% 50%' --".into());
        let run = parse(&args).unwrap().run;
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
        assert!(asked("").err().unwrap().contains("which step"));
        assert!(asked("99").err().unwrap().contains("no step `99`"));
        assert!(asked("08 --peer java").err().unwrap().contains("ours, c or rping"));
        assert!(asked("08 --as both").err().unwrap().contains("server or client"));
        assert!(asked("08 --bogus 1").err().unwrap().contains("unknown option --bogus"));
        assert!(asked("08 --port").err().unwrap().contains("--port wants a value"));
    }
}

//! The runner's unit tests: the arguments each kind of roles and each player gets (pure),
//! and, with a python3 stand-in for a step, the order and the deadlines of a run.

use super::watch::printed_the_peer;
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
    assert!(run.command(Some(Role::Server), &dev(), &at()).unwrap().starts_with(&words("stdbuf -oL ibv_rc_pingpong")));
    assert!(!Player::C.outlasts(&listed("08_poll_cq")));
    let mut run = Run::new(listed("08_poll_cq")).server(Player::C);
    assert!(run.command(Some(Role::Server), &dev(), &at()).unwrap().starts_with(&words("ibv_rc_pingpong")));
    run.after_failure = Some((Some(Role::Client), Duration::from_secs(1)));
    assert!(run.command(Some(Role::Server), &dev(), &at()).unwrap().starts_with(&words("stdbuf -oL ibv_rc_pingpong")));
    assert!(printed_the_peer(b"  local address: x\n  remote address: y\n"));
    assert!(!printed_the_peer(b"  remote address: y"));
}

#[test]
fn a_cm_step_gets_rping_s_role_flags_and_no_device() {
    let at = Meeting { port: 7174, addr: "192.0.2.1".into() };
    let run = Run::new(listed("10_rdma_cm")).ours("/b/10").client(Player::Rping).role_flags(Role::Client, &["-C", "3"]);
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

#[test]
fn across_hosts_each_runner_runs_its_role_in_the_run_s_order() {
    // Two runners, as on two hosts (here both on 127.0.0.1): the client's, started first,
    // starts its client only once the server's runner says its server listens (the
    // stand-in's client does not retry), and each runs and reports its own role only.
    let port = crate::tcp_ports(2);
    let side = move |role| {
        let mut run = fake("08_poll_cq").across(role, "127.0.0.1");
        run.port = Some(port);
        run
    };
    let client = std::thread::spawn(move || side(Role::Client).run());
    let server = side(Role::Server).run();
    let client = client.join().unwrap();
    assert_eq!((server.len(), client.len()), (1, 1));
    assert!(server[0].ok() && client[0].ok(), "{}\n{}", server[0].report(), client[0].report());
    assert_eq!(String::from_utf8_lossy(&server[0].stdout), "server got ping\n");
    assert_eq!(String::from_utf8_lossy(&client[0].stdout), "client sent ping\n");
    let mut no_port = side(Role::Client);
    no_port.port = None;
    assert!(no_port.try_run().unwrap_err().contains("same port"));
}

#[test]
fn live_output_is_kept_too_and_only_for_one_process_here() {
    let mut both = fake("08_poll_cq");
    both.live = true;
    assert!(both.try_run().unwrap_err().contains("live output is for one process"));
    // Across hosts, one process here: what it printed went out as it came (to this test's
    // stdout) and is in its Ran all the same.
    let port = crate::tcp_ports(2);
    let side = move |role| {
        let mut run = fake("08_poll_cq").across(role, "127.0.0.1");
        (run.port, run.live) = (Some(port), true);
        run
    };
    let client = std::thread::spawn(move || side(Role::Client).run());
    let server = side(Role::Server).run();
    let client = client.join().unwrap();
    assert!(server[0].ok() && client[0].ok(), "{}\n{}", server[0].report(), client[0].report());
    assert_eq!(String::from_utf8_lossy(&server[0].stdout), "server got ping\n");
}

//! The project's one ordered list of the steps, `steps/list.txt`.

use rdma_dissect::role::Role;

use crate::find_root;

/// One step of `steps/list.txt`, the project's one ordered list of the steps (its header
/// says what the columns mean; the lab scripts read it with `lab_steps` in lab/common.sh).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// `NN_name`: the `[[bin]]`, `steps/NN_name.rs` and `book/src/NN_name.md`.
    pub bin: String,
    /// Runs as a server and a client (roles `pair` or `cm`), not as one process.
    pub pair: bool,
    /// Connects with rdma_cm and takes rping's flags (10, roles `cm`), not the TCP exchange
    /// and rc_pingpong's.
    pub cm: bool,
    /// The step this one is built on, for the book's "what changed" diff (`cargo xtask
    /// book`): `base=`, else the previous step; None for the first.
    pub base: Option<String>,
    /// The second column: how it runs (`pair` and `cm` above say the same as booleans).
    pub roles: Roles,
    /// `c=`: the C tool that plays the other side of a `pair` step (`ibv_rc_pingpong`, …).
    pub c: Option<String>,
    /// `c-outlasts`: that C tool waits for a ping-pong the step never does (05–07), so the
    /// runner stops it once ours has exited.
    pub c_outlasts: bool,
    /// The C tool can be our program's peer (`c=` without `no-c-peer`): the grader and
    /// lab/pair-test pair ours with it; otherwise with ours.
    pub c_peer: bool,
    /// The grader pairs ours with the C tool: it can be a peer ([`Step::c_peer`]) and the
    /// list does not say `graded-with-ours` (perftest's `ib_atomic_lat` fills its buffer with
    /// random bytes, so what our side traces of it differs from run to run).
    pub graded_with_c: bool,
    /// `grade=`: the argument sets the grader runs; one empty set (the defaults) when the
    /// list names none.
    pub grade: Vec<Vec<String>>,
    /// `two-hosts=`: the flags lab/pair-test gives both sides across two VMs.
    pub two_hosts: Vec<String>,
    /// Not `two-hosts-ours-only`: lab/pair-test pairs it with the C tool too, when there is
    /// a peer one.
    pub two_hosts_c: bool,
}

/// How a step runs, the list's second column. The runner (`crate::runner`) gives each kind
/// its processes' arguments and the moment the server is ready for its client: a new kind
/// (UD, SRQ) is one variant here and one match arm in each of those.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Roles {
    /// One process (01–04).
    Alone,
    /// A server and a client that exchange addresses over TCP, with the flags of rc_pingpong
    /// or of rdma-core's other ping-pongs: the client gets the host, `127.0.0.1`.
    Pair,
    /// A server and a client that connect with rdma_cm, with rping's flags (10): `-s`/`-c`
    /// and the device's IPv4 address as `-a`.
    Cm,
}

impl Roles {
    /// The list's word for it.
    pub fn parse(word: &str) -> Option<Roles> {
        match word {
            "alone" => Some(Roles::Alone),
            "pair" => Some(Roles::Pair),
            "cm" => Some(Roles::Cm),
            _ => None,
        }
    }

    /// The list's word for it (`alone`, `pair`, `cm`).
    pub fn word(self) -> &'static str {
        match self {
            Roles::Alone => "alone",
            Roles::Pair => "pair",
            Roles::Cm => "cm",
        }
    }

    /// Its processes, in the order they start: the one process (`None`), or the server
    /// and then the client.
    pub fn roles(self) -> &'static [Option<Role>] {
        match self {
            Roles::Alone => &[None],
            Roles::Pair | Roles::Cm => &[Some(Role::Server), Some(Role::Client)],
        }
    }
}

impl Step {
    /// The step's number, `01`…`09`.
    pub fn nn(&self) -> &str {
        &self.bin[..2]
    }

    /// Its stage module, `src/stages/<stage>.rs`: the bin name without its number.
    pub fn stage(&self) -> &str {
        &self.bin[3..]
    }
}

/// The steps, in order, from `steps/list.txt`, or what is wrong with it (its path and
/// line). tests/no_device/consistency.rs checks that Cargo.toml's `[[bin]]`s, the
/// `steps/*.rs` files and book/src/SUMMARY.md's chapters are this list.
pub fn load_steps() -> Result<Vec<Step>, String> {
    let path = find_root()?.join("steps/list.txt");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    parse_steps(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// The steps of a list's `text` (see `steps/list.txt`'s header), or what is wrong: the line
/// and why.
pub fn parse_steps(text: &str) -> Result<Vec<Step>, String> {
    let mut steps: Vec<Step> = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
        let at = |what: String| format!("`{line}`: {what}");
        let mut words = line.split_whitespace();
        let (Some(bin), Some(roles)) = (words.next(), words.next()) else {
            return Err(at("want `NN_name alone|pair|cm [FACT...]`".into()));
        };
        let Some(roles) = Roles::parse(roles) else {
            return Err(at("the roles are `alone`, `pair` or `cm`".into()));
        };
        let numbered = bin.len() > 3 && bin[..2].bytes().all(|b| b.is_ascii_digit()) && bin.as_bytes()[2] == b'_';
        if !numbered {
            return Err(at(format!("`{bin}` is not named NN_name")));
        }
        let (pair, cm) = (roles != Roles::Alone, roles == Roles::Cm);
        let mut step = Step {
            bin: bin.to_string(),
            pair,
            cm,
            base: steps.last().map(|s| s.bin.clone()),
            roles,
            c: None,
            c_outlasts: false,
            c_peer: false,
            graded_with_c: true,
            grade: Vec::new(),
            two_hosts: Vec::new(),
            two_hosts_c: true,
        };
        let (mut no_c_peer, mut seen) = (false, Vec::new());
        for fact in words {
            let (key, value) = fact.split_once('=').map_or((fact, None), |(k, v)| (k, Some(v)));
            // An argument set: its words joined by commas, the empty set for the defaults.
            let args = |v: &str| v.split(',').filter(|w| !w.is_empty()).map(str::to_string).collect::<Vec<_>>();
            if key != "grade" && seen.contains(&key) {
                return Err(at(format!("`{key}` is given twice")));
            }
            seen.push(key);
            match (key, value) {
                ("base", Some(base)) => {
                    if !steps.iter().any(|s| s.bin == base) {
                        return Err(at(format!("base `{base}` is not a step listed before")));
                    }
                    step.base = Some(base.to_string());
                }
                ("c", Some(c)) if roles == Roles::Pair && !c.is_empty() => step.c = Some(c.to_string()),
                ("c", Some(_)) => return Err(at("`c=PROGRAM` names the C tool of a `pair` step".into())),
                ("c-outlasts", None) => step.c_outlasts = true,
                ("no-c-peer", None) => no_c_peer = true,
                ("graded-with-ours", None) => step.graded_with_c = false,
                ("grade", Some(v)) => step.grade.push(args(v)),
                ("two-hosts", Some(v)) if pair => step.two_hosts = args(v),
                ("two-hosts-ours-only", None) if pair => step.two_hosts_c = false,
                _ => {
                    return Err(at(format!(
                    "`{fact}` is not a fact the list knows (base=BIN, c=PROGRAM, c-outlasts, no-c-peer, graded-with-ours, grade=ARGS, \
                         and for a pair step two-hosts=ARGS, two-hosts-ours-only)"
                )))
                }
            }
        }
        if step.c.is_none() && (step.c_outlasts || no_c_peer || !step.graded_with_c) {
            return Err(at("`c-outlasts`, `no-c-peer` and `graded-with-ours` need a `c=PROGRAM`".into()));
        }
        step.c_peer = step.c.is_some() && !no_c_peer;
        step.graded_with_c &= step.c_peer;
        step.two_hosts_c &= step.c_peer || cm;
        if step.grade.is_empty() {
            step.grade.push(Vec::new());
        }
        steps.push(step);
    }
    if steps.is_empty() {
        return Err("it lists no step".into());
    }
    Ok(steps)
}

/// [`load_steps`] for the tests, where a broken list is a failed test.
pub fn steps() -> Vec<Step> {
    load_steps().unwrap_or_else(|e| panic!("{e}"))
}

/// The step `which` names: its number (`5`, `05`) or its bin (`05_modify_qp_rtr`).
pub fn step(which: &str) -> Result<Step, String> {
    let nn = if which.len() == 1 { format!("0{which}") } else { which.to_string() };
    let all = load_steps()?;
    all.iter().find(|s| s.nn() == nn || s.bin == nn).cloned().ok_or_else(|| {
        let list: Vec<String> = all.iter().map(|s| s.nn().to_string()).collect();
        format!("no step `{which}`: give a step number of steps/list.txt ({})", list.join(", "))
    })
}

#[cfg(test)]
mod tests {
    use super::parse_steps;

    #[test]
    fn the_facts_after_the_roles_are_read_with_their_defaults() {
        let list = "# a comment\n01_a alone\n02_b alone grade= grade=-s,100\n\n\
                    03_c pair c=ibv_rc_pingpong c-outlasts two-hosts=-n,100,-c\n\
                    04_d pair base=02_b c=ib_write_bw no-c-peer\n05_e pair two-hosts-ours-only\n06_f cm base=01_a\n\
                    07_g pair c=ib_atomic_lat graded-with-ours\n";
        let s = parse_steps(list).unwrap();
        assert_eq!(
            s.iter().map(|s| s.base.as_deref()).collect::<Vec<_>>(),
            [None, Some("01_a"), Some("02_b"), Some("02_b"), Some("04_d"), Some("01_a"), Some("06_f")]
        );
        assert_eq!(s[0].grade, [Vec::<String>::new()], "no grade=: the defaults, once");
        assert_eq!(s[1].grade, [vec![], vec!["-s".to_string(), "100".into()]]);
        assert!(s[2].c.as_deref() == Some("ibv_rc_pingpong") && s[2].c_outlasts && s[2].c_peer && s[2].two_hosts_c);
        assert!(s[2].graded_with_c && !s[3].graded_with_c, "graded with the C tool when it can be a peer");
        assert!(s[6].c_peer && s[6].two_hosts_c && !s[6].graded_with_c, "graded-with-ours: only the grader");
        assert_eq!(s[2].two_hosts, ["-n", "100", "-c"]);
        assert!(s[3].c.is_some() && !s[3].c_peer && !s[3].two_hosts_c, "no-c-peer: ours across two hosts too");
        assert!(s[4].c.is_none() && !s[4].c_peer && !s[4].two_hosts_c);
        assert!(s[5].cm && s[5].two_hosts_c, "a cm step meets rping across two hosts");
    }

    #[test]
    fn a_wrong_fact_is_refused_with_its_line_and_what_the_list_knows() {
        let refused = |list: &str, why: &str| {
            let e = parse_steps(list).unwrap_err();
            assert!(e.contains(why), "{list:?}: {e}");
        };
        refused("01_a alone c=ibv_rc_pingpong\n", "`01_a alone c=ibv_rc_pingpong`: `c=PROGRAM` names the C tool");
        refused("01_a pair c-outlasts\n", "need a `c=PROGRAM`");
        refused("01_a pair graded-with-ours\n", "need a `c=PROGRAM`");
        refused("01_a pair colour=blue\n", "`colour=blue` is not a fact the list knows (base=BIN");
        refused("01_a alone two-hosts=-n,1\n", "not a fact the list knows");
        refused("01_a alone\n02_b alone base=03_c\n", "base `03_c` is not a step listed before");
        refused("01_a pair c=x c=y\n", "`c` is given twice");
        refused("1_a alone\n", "is not named NN_name");
        refused("01_a\n", "want `NN_name alone|pair|cm [FACT...]`");
        refused("# nothing\n", "it lists no step");
    }
}

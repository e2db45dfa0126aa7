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
    /// book`): the third column, else the previous step; None for the first.
    pub base: Option<String>,
    /// The second column: how it runs (`pair` and `cm` above say the same as booleans).
    pub roles: Roles,
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
    let at = |line: &str, what: String| format!("{}: `{line}`: {what}", path.display());
    let mut steps: Vec<Step> = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
        let (bin, roles, base) = match line.split_whitespace().collect::<Vec<_>>()[..] {
            [bin, roles] => (bin, roles, None),
            [bin, roles, base] => (bin, roles, Some(base)),
            _ => return Err(at(line, "want `NN_name alone|pair|cm [BASE]`".into())),
        };
        let Some(roles) = Roles::parse(roles) else {
            return Err(at(line, "the roles are `alone`, `pair` or `cm`".into()));
        };
        let numbered = bin.len() > 3 && bin[..2].bytes().all(|b| b.is_ascii_digit()) && bin.as_bytes()[2] == b'_';
        if !numbered {
            return Err(at(line, format!("`{bin}` is not named NN_name")));
        }
        if let Some(base) = base.filter(|base| !steps.iter().any(|s| s.bin == *base)) {
            return Err(at(line, format!("base `{base}` is not a step listed before")));
        }
        let base = base.map(str::to_string).or_else(|| steps.last().map(|s| s.bin.clone()));
        let (pair, cm) = (roles != Roles::Alone, roles == Roles::Cm);
        steps.push(Step { bin: bin.to_string(), pair, cm, base, roles });
    }
    if steps.is_empty() {
        return Err(format!("{} lists no step", path.display()));
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

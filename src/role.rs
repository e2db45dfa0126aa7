//! The role a process plays in a run — one word for it across the crate, the break-it cases,
//! the test kit and the grader.
//!
//! rc_pingpong decides by its host argument: without one it is the server (it listens and
//! replies), with one the client (it connects and speaks first). Steps 01–04 have no peer;
//! where "alone" is possible the type is `Option<Role>`, `None` being the one process.
//! A leaf: it imports nothing of the crate's.

/// Which of the two programs of a run this is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// No host argument: listens on `-p`, accepts one client, replies after connecting its QP.
    Server,
    /// A host argument: connects to it, speaks first, sends `"done"` last. Also the side
    /// that posts the first SEND of the ping-pong and the writer of step 09.
    Client,
}

impl Role {
    /// rc_pingpong's rule: a host makes a client.
    pub fn of(host: Option<&str>) -> Role {
        match host {
            None => Role::Server,
            Some(_) => Role::Client,
        }
    }

    /// The role of the other program of the run.
    pub fn peer(self) -> Role {
        match self {
            Role::Server => Role::Client,
            Role::Client => Role::Server,
        }
    }

    /// How traces, snapshots and `--break` label it: `server`, `client`.
    pub fn label(self) -> &'static str {
        match self {
            Role::Server => "server",
            Role::Client => "client",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Role;

    #[test]
    fn a_host_makes_a_client_and_each_role_has_the_other_as_its_peer() {
        assert_eq!(Role::of(None), Role::Server);
        assert_eq!(Role::of(Some("192.0.2.1")), Role::Client);
        assert_eq!(Role::Server.peer(), Role::Client);
        assert_eq!(Role::Client.peer().label(), "server");
    }
}

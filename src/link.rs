//! What the kernel can say about the link under our port, read when something fails so that
//! the explanation names what happened instead of guessing from the status alone.
//!
//! None of this is a verb. On RoCE the port rides on an Ethernet interface: sysfs names it
//! (`/sys/class/infiniband/DEV/ports/N/gid_attrs/ndevs/G`, the interface of GID index G)
//! and says whether it is up (`/sys/class/net/IF/operstate`, `carrier`). The device also
//! counts what its transport did (`ports/N/hw_counters/`: rxe's `send_err`, packets it
//! could not hand to the interface; `completer_retry_err`, retransmit timer expiries;
//! `retry_exceeded_err`). Hardware drivers name their counters otherwise, or have none
//! there: every value is optional, and an explanation uses only what it could read.
//!
//! [`watch`] remembers the device, port and GID index once per process, with the counters
//! at that moment, so that a later [`Sample`] can say what changed since.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

/// What was read about the link at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sample {
    /// The interface under the port's GID (`eth0`), if sysfs names one.
    pub netdev: Option<String>,
    /// Its operstate (`up`, `down`, `lowerlayerdown`, …).
    pub operstate: Option<String>,
    /// Whether it has a carrier (unreadable while the interface is administratively down).
    pub carrier: Option<bool>,
    /// How many times its carrier went on or off since it was created: an interface that
    /// went down and came back shows here, not in its state.
    pub carrier_changes: Option<u64>,
    /// The device's packets it failed to transmit (rxe's `send_err`).
    pub send_err: Option<u64>,
    /// Retransmit timer expiries (rxe's `completer_retry_err`).
    pub retries: Option<u64>,
    /// Work requests failed because the retries ran out (rxe's `retry_exceeded_err`).
    pub retry_exceeded: Option<u64>,
}

impl Sample {
    /// Why the link is not carrying packets now, in words, if sysfs says it is not.
    pub fn down(&self) -> Option<String> {
        let netdev = self.netdev.as_deref()?;
        let state = self.operstate.as_deref()?;
        // "unknown": an interface whose driver reports no state (a dummy) may still carry.
        if matches!(state, "up" | "unknown") && self.carrier != Some(false) {
            return None;
        }
        let carrier = match self.carrier {
            Some(true) => ", carrier on",
            Some(false) => ", no carrier",
            None => "",
        };
        Some(format!("{netdev} is down (operstate {state}{carrier})"))
    }
}

/// The port whose link [`sample`] reads, and what it read when [`watch`] was called.
struct Watched {
    dir: PathBuf,
    gid_index: Option<u8>,
    start: Sample,
}

static WATCHED: OnceLock<Watched> = OnceLock::new();

/// Remembers `device`'s port `port` and GID index for later explanations, with its counters
/// now. Only the first call in a process counts: a step opens one device.
pub fn watch(device: &str, port: u8, gid_index: Option<u8>) {
    let dir = port_dir(device, port);
    let start = read(&dir, gid_index);
    let _ = WATCHED.set(Watched { dir, gid_index, start });
}

/// The index of `gid` in the GID table of `device`'s port `port`, found in sysfs
/// (`ports/N/gids/I`): the connection manager names our GID, not its index (step 10).
/// `None` when it is not among the first 256 entries.
pub fn gid_index(device: &str, port: u8, gid: [u8; 16]) -> Option<u8> {
    let dir = port_dir(device, port).join("gids");
    let want: Vec<String> = gid.chunks(2).map(|c| format!("{:02x}{:02x}", c[0], c[1])).collect();
    let want = want.join(":");
    (0..=u8::MAX).find(|i| text(&dir.join(i.to_string())).as_deref() == Some(want.as_str()))
}

fn port_dir(device: &str, port: u8) -> PathBuf {
    Path::new("/sys/class/infiniband").join(device).join("ports").join(port.to_string())
}

/// What the link looks like now, and what it looked like when [`watch`] was called; `None`
/// if nothing is watched.
pub fn sample() -> Option<(Sample, Sample)> {
    let w = WATCHED.get()?;
    Some((w.start.clone(), read(&w.dir, w.gid_index)))
}

/// How many retransmit timer expiries the device counts in `window`: more than zero means
/// one of our packets is going unacknowledged right now. `None` without the counter.
pub fn retries_during(window: Duration) -> Option<u64> {
    let w = WATCHED.get()?;
    let counter = |dir: &Path| number(&dir.join("hw_counters/completer_retry_err"));
    let before = counter(&w.dir)?;
    std::thread::sleep(window);
    Some(counter(&w.dir)?.saturating_sub(before))
}

fn read(port_dir: &Path, gid_index: Option<u8>) -> Sample {
    // Without -g there is no GID to name an interface (InfiniBand): counters only.
    let netdev = gid_index.and_then(|g| text(&port_dir.join(format!("gid_attrs/ndevs/{g}"))));
    let net = netdev.as_ref().map(|n| Path::new("/sys/class/net").join(n));
    let counters = port_dir.join("hw_counters");
    Sample {
        operstate: net.as_ref().and_then(|n| text(&n.join("operstate"))),
        carrier: net.as_ref().and_then(|n| text(&n.join("carrier"))).map(|c| c == "1"),
        carrier_changes: net.as_ref().and_then(|n| number(&n.join("carrier_changes"))),
        netdev,
        send_err: number(&counters.join("send_err")),
        retries: number(&counters.join("completer_retry_err")),
        retry_exceeded: number(&counters.join("retry_exceeded_err")),
    }
}

fn text(path: &Path) -> Option<String> {
    std::fs::read_to_string(path).ok().map(|s| s.trim().to_string()).filter(|s| !s.is_empty())
}

fn number(path: &Path) -> Option<u64> {
    text(path)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(operstate: &str, carrier: Option<bool>) -> Sample {
        Sample { netdev: Some("eth0".into()), operstate: Some(operstate.into()), carrier, ..Sample::default() }
    }

    #[test]
    fn a_link_is_down_when_its_operstate_or_carrier_says_so() {
        assert_eq!(link("up", Some(true)).down(), None);
        assert_eq!(link("down", None).down().unwrap(), "eth0 is down (operstate down)");
        assert_eq!(link("up", Some(false)).down().unwrap(), "eth0 is down (operstate up, no carrier)");
        // Nothing readable: nothing claimed.
        assert_eq!(Sample::default().down(), None);
    }
}

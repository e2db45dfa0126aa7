//! lab/class, a class from a roster, without a VM: what a good roster becomes (user-data,
//! the pairing plan, the example commands), and that a bad one names each bad line and
//! writes nothing. The VMs that boot its user-data are lab/cloud-test's.

use std::path::Path;
use std::process::{Command, Output};

use crate::{project, scratch};

fn class(args: &[&Path]) -> Output {
    Command::new(project().join("lab/class")).args(args).output().expect("run lab/class")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

const KEY_A: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIEZOgQf81hF5fGSpCbgpZyQyQ5nqKvifZcXMWx1Vjfmf ada@laptop";
const KEY_B: &str = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIM3m9d0dZ0n9Lx1a9yq1YzGdKx1f2q4m7lI7dG5WqZ7a";

#[test]
fn a_roster_becomes_user_data_a_plan_and_example_commands() {
    let dir = scratch("class-good");
    let roster = dir.join("roster.csv");
    std::fs::write(&roster, format!("name,key\r\n# the Tuesday group\nada,{KEY_A}\r\n\nbob, {KEY_B}\ncy,{KEY_A}\n"))
        .unwrap();
    let out = dir.join("class");
    let run = class(&[&roster, &out]);
    assert!(run.status.success(), "{}", stderr(&run));
    for name in ["ada", "bob", "cy"] {
        let ud = std::fs::read_to_string(out.join(format!("user-data/{name}.yaml"))).unwrap();
        assert!(ud.starts_with("#cloud-config\n"), "{ud}");
        assert!(ud.contains(&format!("hostname: rdma-{name}\n")), "{ud}");
        assert!(ud.contains(&format!("  - name: {name}\n")), "{ud}");
        assert!(ud.contains("lock_passwd: true") && ud.contains("ssh_pwauth: false"), "{ud}");
        // Renamed, its home left where the builds in it say it is.
        assert!(ud.contains(&format!("usermod -l {name} student &&")), "{ud}");
    }
    let ada = std::fs::read_to_string(out.join("user-data/ada.yaml")).unwrap();
    assert!(ada.contains(&format!("      - {KEY_A}\n")), "{ada}");
    // Each student's own key, not the last row's (cy's is ada's: bob's tells them apart).
    let bob = std::fs::read_to_string(out.join("user-data/bob.yaml")).unwrap();
    assert!(bob.contains(&format!("      - {KEY_B}\n")) && !bob.contains(KEY_A), "{bob}");
    assert!(ada.contains("addr show to 192.0.2.11/32"), "{ada}");
    // Three students: one trio, addresses in roster order from .11.
    let plan = std::fs::read_to_string(out.join("pairs.txt")).unwrap();
    assert!(plan.contains("ada              192.0.2.11       bob 192.0.2.12, cy 192.0.2.13"), "{plan}");
    assert!(plan.contains("cy               192.0.2.13       ada 192.0.2.11, bob 192.0.2.12"), "{plan}");
    assert!(plan.contains("trio"), "{plan}");
    for example in ["openstack.sh", "proxmox.sh"] {
        let text = std::fs::read_to_string(out.join(example)).unwrap();
        assert!(text.contains("# EXAMPLE"), "{example} is not labelled an example");
        for port in ["4791", "18515", "7174", "18514"] {
            assert!(text.contains(port), "{example} opens no port {port}");
        }
        let sh = Command::new("sh").arg("-n").arg(out.join(example)).output().unwrap();
        assert!(sh.status.success(), "{example}: {}", stderr(&sh));
    }
    // The output directory is there now: a second run refuses to write over it.
    let again = class(&[&roster, &out]);
    assert_eq!(again.status.code(), Some(2), "{}", stderr(&again));
    assert!(stderr(&again).contains("exists"), "{}", stderr(&again));
}

#[test]
fn bad_rows_are_named_by_line_and_nothing_is_written() {
    let dir = scratch("class-bad");
    let roster = dir.join("roster.csv");
    std::fs::write(
        &roster,
        format!(
            "ada,{KEY_A}\nBob,{KEY_B}\nada,{KEY_B}\ncy\ndee,\nroot,{KEY_A}\neve,ssh-ed25519 not@base64\n,{KEY_A}\n"
        ),
    )
    .unwrap();
    let out = dir.join("class");
    let run = class(&[&roster, &out]);
    let err = stderr(&run);
    assert_eq!(run.status.code(), Some(1), "{err}");
    for want in [
        "line 2: 'Bob' is not a valid account name",
        "line 3: 'ada' is a duplicate of line 1",
        "line 4: no SSH public key for 'cy'",
        "line 5: no SSH public key for 'dee'",
        "line 6: 'root' is an account or group the system has already",
        "line 7: the key for 'eve' is not an SSH public key",
        "line 8: no name before the comma",
        "nothing was written",
    ] {
        assert!(err.contains(want), "no '{want}' in:\n{err}");
    }
    // Nothing half-written: neither the directory nor its temporary twin.
    let left: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left, vec![std::ffi::OsString::from("roster.csv")]);
    // One student is no class; a bad --net is refused.
    std::fs::write(&roster, format!("ada,{KEY_A}\n")).unwrap();
    let one = class(&[&roster, &out]);
    assert_eq!(one.status.code(), Some(1), "{}", stderr(&one));
    assert!(!out.exists());
    let net = Command::new(project().join("lab/class"))
        .args(["--net", "10.0.0.0/16"])
        .arg(&roster)
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(net.status.code(), Some(2), "{}", stderr(&net));
    assert!(stderr(&net).contains("--net must be a /24"), "{}", stderr(&net));
}

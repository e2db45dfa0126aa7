//! lab/class, a class from a roster, without a VM: what a good roster becomes (user-data,
//! the pairing plan, the example commands), that a bad one names each bad line and
//! writes nothing, and that a re-run with a changed roster moves nobody. The VMs that boot its user-data are lab/cloud-test's.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
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
    // The same roster again: the state makes it the same class, file for file.
    let state = std::fs::read_to_string(out.join("class-state.tsv")).unwrap();
    assert!(state.contains("ada\t192.0.2.11\t1\n") && state.contains("cy\t192.0.2.13\t1\n"), "{state}");
    let again = class(&[&roster, &out]);
    assert!(again.status.success(), "{}", stderr(&again));
    for (file, before) in [("pairs.txt", &plan), ("class-state.tsv", &state), ("user-data/bob.yaml", &bob)] {
        assert_eq!(&std::fs::read_to_string(out.join(file)).unwrap(), before, "{file} changed on a re-run");
    }
    // A directory lab/class did not write is not written over.
    let other = dir.join("other");
    std::fs::create_dir(&other).unwrap();
    let refused = class(&[&roster, &other]);
    assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
    assert!(stderr(&refused).contains("no class-state.tsv"), "{}", stderr(&refused));
}

/// pairs.txt as student → (group, address).
fn seats(out: &Path) -> BTreeMap<String, (String, String)> {
    std::fs::read_to_string(out.join("pairs.txt"))
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f[1].to_string(), (f[0].to_string(), f[2].to_string()))
        })
        .collect()
}

fn roster(dir: &Path, names: &[&str]) -> PathBuf {
    let path = dir.join("roster.csv");
    std::fs::write(&path, names.iter().map(|n| format!("{n},{KEY_A}\n")).collect::<String>()).unwrap();
    path
}

/// Issue 45: removing a student once moved everyone after them in the roster to a new
/// address and partner, so VMs booted from the first run no longer matched the plan.
#[test]
fn a_re_run_moves_nobody_and_never_reuses_an_address() {
    let dir = scratch("class-rerun");
    let out = dir.join("class");
    let run = |names: &[&str]| {
        let run = class(&[&roster(&dir, names), &out]);
        assert!(run.status.success(), "{}", stderr(&run));
        (seats(&out), stderr(&run))
    };
    // ada-bob, then the trio cy-dee-eve.
    let (first, _) = run(&["ada", "bob", "cy", "dee", "eve"]);
    assert_eq!(first["eve"], ("2".into(), "192.0.2.15".into()));

    // dee leaves: everyone else keeps group and address (eve is not moved up to .14).
    let (second, said) = run(&["ada", "bob", "cy", "eve"]);
    let mut want = first.clone();
    want.remove("dee");
    assert_eq!(second, want, "{said}");
    assert!(said.contains("dee left: 192.0.2.14 is retired"), "{said}");
    assert!(std::fs::read_to_string(out.join("pairs.txt")).unwrap().contains("192.0.2.14 is retired (dee left)"));

    // fay arrives: nobody moves; she gets an address no one ever had, and makes the
    // highest-numbered pair a trio.
    let (third, said) = run(&["ada", "bob", "cy", "eve", "fay"]);
    want.insert("fay".into(), ("2".into(), "192.0.2.16".into()));
    assert_eq!(third, want, "{said}");

    // ada leaves and gus arrives together: gus takes ada's seat beside bob, not her address.
    let (fourth, said) = run(&["bob", "cy", "gus", "eve", "fay"]);
    want.remove("ada");
    want.insert("gus".into(), ("1".into(), "192.0.2.17".into()));
    assert_eq!(fourth, want, "{said}");

    // dee comes back: her own address again (only her VM can hold it), a group like any newcomer's.
    let (fifth, said) = run(&["bob", "cy", "gus", "eve", "fay", "dee"]);
    assert_eq!(fifth["dee"].1, "192.0.2.14", "{said}");
    assert!(fifth.iter().all(|(n, v)| n == "dee" || want[n] == *v), "{said}");

    // The class's network is the state's: another --net is refused, not a renumbering.
    let net = Command::new(project().join("lab/class"))
        .args(["--net", "10.0.0.0/24"])
        .arg(dir.join("roster.csv"))
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(net.status.code(), Some(2), "{}", stderr(&net));

    // A damaged state stops the run with its line, and the class is left as it was.
    let state = out.join("class-state.tsv");
    let good = std::fs::read_to_string(&state).unwrap();
    std::fs::write(&state, format!("{good}zed\t192.0.2.15\t3\n")).unwrap();
    let bad = class(&[&dir.join("roster.csv"), &out]);
    assert_eq!(bad.status.code(), Some(1), "{}", stderr(&bad));
    assert!(stderr(&bad).contains("192.0.2.15 is eve's already"), "{}", stderr(&bad));
    assert_eq!(seats(&out), fifth);
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

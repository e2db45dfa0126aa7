//! The tool finds the project where it is run, not where it was built.

use std::path::Path;
use std::process::Command;

fn xtask(dir: &Path, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_xtask")).args(args).current_dir(dir).output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn outside_a_checkout_it_says_so_with_the_path_and_does_not_panic() {
    let dir = std::env::temp_dir().join(format!("xtask-no-project-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for args in [&["exercise", "path", "05"][..], &["exercise", "holes", "05"], &["book", "--check"]] {
        let (ok, _, err) = xtask(&dir, args);
        assert!(!ok, "{args:?} succeeded outside a checkout");
        assert!(err.contains(&format!("{}: not inside an rdma-dissect checkout", dir.display())), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_second_checkout_is_read_from_where_the_tool_runs() {
    // A checkout of one step, its stage a file of our own: the tool reads this one, not
    // the project it was built in.
    let dir = std::env::temp_dir().join(format!("xtask-other-project-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("steps")).unwrap();
    std::fs::create_dir_all(dir.join("src/stages")).unwrap();
    std::fs::write(dir.join("steps/list.txt"), "01_open_device alone\n").unwrap();
    let (ok, out, err) = xtask(&dir.join("src"), &["exercise", "path", "01"]);
    assert!(ok, "{err}");
    assert_eq!(out, "01_open_device src/stages/open_device.rs\n");
    let (ok, _, err) = xtask(&dir, &["exercise", "holes", "01"]);
    assert!(
        !ok && err.contains(&format!("{}: No such file", dir.join("src/stages/open_device.rs").display())),
        "{err}"
    );
    std::fs::write(dir.join("steps/list.txt"), "01_open_device sideways\n").unwrap();
    let (ok, _, err) = xtask(&dir, &["exercise", "path", "01"]);
    assert!(!ok && err.contains("list.txt: `01_open_device sideways`: the roles are"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

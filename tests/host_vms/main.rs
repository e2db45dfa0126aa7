//! The tests that must run on the host, outside the lab VM, because they boot VMs of their
//! own or drive a browser: the lab VM itself, the lab's scripts, the two-host wire, the
//! rendered book, and the exercise grader. Built only with `--features lab-host`;
//! `lab/test` runs them as `cargo test --features lab-host --test host_vms`.

mod book_dom;
mod exercises;
mod lab_run;
mod lab_scripts;
mod two_hosts;

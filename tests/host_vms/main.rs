//! The tests that must run on the host, outside the lab VM, because they boot VMs of their
//! own or drive a browser: the lab VM itself, the lab's scripts, the two-host wire, the
//! rendered book, the exercise grader and the class grader, and a step added with new-step
//! in a clone. Left out of a plain `cargo test` (`test = false`); `lab/test` runs them as
//! `cargo test --test host_vms`.

mod book_dom;
mod exercises;
mod grade;
mod lab_run;
mod lab_scripts;
mod new_step;
mod two_hosts;

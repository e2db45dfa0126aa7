//! The lab's own acceptance check, independent of our code: Debian's C `ibv_rc_pingpong`
//! completes a full 1000-iteration run on this machine's device (`RDMA_DEVICE`,
//! `RDMA_IB_PORT`, `RDMA_GID_INDEX`: rxe0, port 1, GID index 1 in the lab VM). If this
//! fails, the device is broken, not the steps.

use testkit as common;

use std::time::Duration;

use common::runner::{Player, Run};

#[test]
fn c_rc_pingpong_server_and_client_complete_1000_iterations() {
    // Alone on the device: a busy-polling pair needs both of the lab VM's vCPUs.
    let _device = common::device_lock();
    let mut run =
        Run::new(common::step("08_poll_cq").unwrap()).server(Player::C).client(Player::C).flags(&["-n", "1000"]);
    // A bounded run: a broken device must fail the test, not hang it.
    run.timeout = Duration::from_secs(60);
    for ran in run.run() {
        assert!(
            ran.ok(),
            "{} failed — is there an RDMA device? Run the tests through `lab/test`:\n{}",
            ran.label(),
            ran.report()
        );
        let stdout = String::from_utf8_lossy(&ran.stdout);
        assert!(stdout.contains("1000 iters in"), "{} did not complete 1000 iterations:\n{stdout}", ran.label());
    }
}

#!/usr/bin/env bash
# lab/ci/gradescope/setup.sh — Gradescope runs it once, as root, when it builds the
# autograder's image (its Ubuntu base image; the zip's files are in /autograder/source):
# Debian's, or here Ubuntu's, git and Rust toolchain, the reference cloned at the commit
# kit.conf pins into /autograder/source/reference, and there lab/setup (the lab VM's
# packages) and the grader and reference steps built, so a submission's run only grades.
# NOT RUN HERE: Gradescope's image cannot be run on this project's machine (see the
# instructor's guide, "Gradescope").
set -euo pipefail
source_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=lab/ci/gradescope/kit.conf
. "$source_dir/kit.conf"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends git ca-certificates cargo rustc
reference=$source_dir/reference
rm -rf "$reference"
git clone --quiet "$REFERENCE_REPO" "$reference"
git -C "$reference" checkout --quiet "$REFERENCE_COMMIT"
"$reference/lab/setup"
(cd "$reference" && cargo build --quiet --workspace --bins)

# shellcheck shell=bash disable=SC2034 # sourced: the variables are used by the scripts that source it
# Shared by the lab scripts (sourced, not run): the error report every script gets,
# the list of steps, prerequisites, the cached guest kernel, the initramfs, the choice of accelerator, and
# how to find a device's RoCE v2 IPv4 GID. Messages go to stderr so that a command's
# stdout stays exactly what the command printed.

# No silent deaths. Every lab script runs under `set -euo pipefail` and sources this file
# first, so any command that fails unexpectedly — in the script, in a function (set -E)
# or in a $(…) — is reported with its file, line and text before the script exits with
# its status (LAB_ERR_STATUS instead, where a script documents one, as lab/run's 125).
# A probe that may fail on purpose is written as one: `if …`, `… || true`. A function
# that fails on purpose says why and ends with `return N`: that is not reported again.
set -E
lab_on_err() {
    local status=$1 file=$2 line=$3 cmd=$4
    case "$cmd" in
        return*) ;;
        *) [ -n "${project:-}" ] && file=${file#"$project"/}
           echo "$file:$line: command failed (exit $status): $cmd" >&2 ;;
    esac
    if [ -n "${LAB_ERR_STATUS:-}" ]; then exit "$LAB_ERR_STATUS"; fi
}
trap 'lab_on_err $? "${BASH_SOURCE[0]}" "$LINENO" "$BASH_COMMAND"' ERR

# depmod, modprobe, ip and rdma live in /usr/sbin, which is not on a normal user's PATH.
case ":$PATH:" in *:/usr/sbin:*) ;; *) PATH=$PATH:/usr/sbin:/sbin ;; esac

# What the scripts read of the machine they run on: which system it is, and its RDMA
# devices. The no-device tests (tests/no_device/lab_scripts.rs) point these at a pretend
# Ubuntu or a pretend rxe0, which needs no namespace, so they run in a chroot or an
# unprivileged container too. They steer setup and where a command runs (lab/provision,
# lab/walkthrough, lab/run, lab_roce_gid_index), never a verdict: lab/grade always boots
# the VM (LAB_VM=1), and lab/run passes neither into it (a job gets an allow-list of the
# caller's environment).
LAB_OS_RELEASE=${LAB_OS_RELEASE:-/etc/os-release}
LAB_SYS_RDMA=${LAB_SYS_RDMA:-/sys/class/infiniband}

# What the project needs from Debian, in the groups the two README commands install.
# The lab VM runs the host's own binaries (its root filesystem is the host's), so the RDMA
# userspace — libibverbs, the rxe provider, the C tools we compare against — is installed
# on the host in every case.
#   RDMA_PACKAGES   the verbs library and provider, ibv_devinfo/ibv_rc_pingpong, `rdma`;
#                   librdmacm's header (step 10 links it) and rping (its peer)
#   BUILD_PACKAGES  ibverbs-sys runs bindgen (libclang) at build time; its cmake run is
#                   skipped (.cargo/cmake says why), so no cmake; libibverbs-dev brings
#                   libnl
#   VM_PACKAGES     the lab VM (lab/run): qemu, the initramfs's busybox and kmod tools,
#                   xz and zstd to unpack Debian 12's and 13's kernels
#   TEST_PACKAGES   only the tests: tshark (two_hosts), perftest (lab/bench, interop),
#                   valgrind (memcheck), chromium (the book's DOM test), shellcheck,
#                   python3 (the runner's stand-in for a step, testkit/src/runner/tests.rs)
RDMA_PACKAGES=(rdma-core ibverbs-utils ibverbs-providers libibverbs-dev librdmacm-dev rdmacm-utils iproute2)
BUILD_PACKAGES=(gcc make pkg-config libclang-dev)
VM_PACKAGES=(qemu-system-x86 busybox-static kmod cpio xz-utils zstd bubblewrap)
TEST_PACKAGES=(tshark perftest valgrind chromium shellcheck python3)
# Services and cloud-init's runcmd start with no HOME (lab/class's user-data runs lab/rxe
# there): take the account's own from the password database.
if [ -z "${HOME:-}" ]; then
    HOME=$(getent passwd "$(id -u)" | cut -d: -f6)
    export HOME
fi
LAB_CACHE=${LAB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rdma-dissect/lab}

# -nodefaults: no device but those lab/run adds (its NIC never has a path off the VM).
LAB_QEMU_BASE=(-M pc -nodefaults -no-user-config -display none -no-reboot -monitor none)

# Each of these saves boot time under TCG, where the guest kernel runs ~10x slower than
# native: no crypto self-tests, no Spectre mitigations to patch in, no i8042/PNP probing,
# no TSC calibration against a PIT that TCG emulates badly, and legacy PCI IRQ routing
# instead of interpreting ACPI's interrupt links (≈1 s). `reboot -f` + qemu -no-reboot
# ends the VM; panic=-1 turns a panic into that same reboot, so qemu always exits.
LAB_KERNEL_CMDLINE="console=ttyS0 quiet loglevel=3 panic=-1 cryptomgr.notests mitigations=off \
nokaslr random.trust_cpu=on i8042.noaux i8042.nopnp i8042.nomux 8250.nr_uarts=1 \
no_timer_check tsc=reliable pci=noacpi"

now() { date +%s%3N; }
lab_log() { [ "${verbose:-0}" = 1 ] && echo "lab: $*" >&2; return 0; }

# The steps, in order, from steps/list.txt's first two columns (its header says what they
# mean). Fills LAB_STEPS with every step's bin name, LAB_STEPS_ALONE with those that run
# as one process, LAB_STEPS_PAIR with those that run as a server and a client with
# rc_pingpong's flags, and LAB_STEPS_CM with those that connect with rdma_cm and take
# rping's. Arrays rather than lines to read back: set -e does not see a failure inside
# `for step in $(…)` or `< <(…)`, and a list that could not be read must not pass for an
# empty one. The facts after the roles are testkit's to read (load_steps, which validates
# the whole list; `cargo xtask steps` prints them for a script); tests/no_device checks
# that this reading is its.
lab_steps() {
    local list bin roles _
    list=$(dirname "${BASH_SOURCE[0]}")/../steps/list.txt
    if ! [ -r "$list" ]; then echo "lab: cannot read $list, the list of steps" >&2; return 1; fi
    LAB_STEPS=() LAB_STEPS_ALONE=() LAB_STEPS_PAIR=() LAB_STEPS_CM=()
    while read -r bin roles _ || [ -n "$bin" ]; do
        case $bin in '' | '#'*) continue ;; esac
        case $roles in
            alone) LAB_STEPS_ALONE+=("$bin") ;;
            pair) LAB_STEPS_PAIR+=("$bin") ;;
            cm) LAB_STEPS_CM+=("$bin") ;;
            *) echo "lab: $list: step $bin: roles '$roles', not alone, pair or cm" >&2; return 1 ;;
        esac
        LAB_STEPS+=("$bin")
    done <"$list"
    if [ ${#LAB_STEPS[@]} = 0 ]; then echo "lab: $list lists no step" >&2; return 1; fi
}

# Where lab/image puts the book it built (HTML), for book/serve on an image with no mdbook.
LAB_BUILT_BOOK=/usr/local/share/doc/rdma-dissect/book

# lab_student_copy SRC DEST: the students' copy of the checkout SRC, for lab/provision and
# lab/image: a new git repository at DEST holding SRC's committed tree without
# book/instructor/ (every answer and the lab plan), in one commit whose message names SRC's
# commit. A clone would carry the answers in its history and its remote; this has neither.
lab_student_copy() {
    local src=$1 dest=$2 commit
    commit=$(git -C "$src" rev-parse HEAD) || return 1
    mkdir -p "$dest"
    git -C "$src" archive --format=tar HEAD | tar -x -C "$dest" --exclude=book/instructor
    git -C "$dest" init --quiet
    git -C "$dest" add --all
    git -C "$dest" -c user.name=rdma-dissect -c user.email=lab@localhost \
        commit --quiet -m "rdma-dissect $commit, the students' copy (without book/instructor/)"
}

# lab_xtask: the built tooling, target/debug/xtask, whose `xtask run NN` runs a step in its
# roles (testkit's runner: the server first, the client once the server listens; no script
# starts a pair itself). Built with cargo when it is not there; lab/test's host half builds
# it before the lab VM's (its no-device tests run `cargo xtask book --check`). Sets LAB_XTASK.
lab_xtask() {
    LAB_XTASK=$(dirname "${BASH_SOURCE[0]}")/../target/debug/xtask
    [ -x "$LAB_XTASK" ] && return 0
    (cd "$(dirname "${BASH_SOURCE[0]}")/.." && cargo build --quiet --locked --package xtask)
}

# Installs the missing packages (default: the lab VM's) when we are root, as CI and the
# lab VMs are; otherwise says exactly what to run. Without recommends: what we need is
# named, and qemu's recommends alone (GUI, firmware for other machines) double the time.
lab_require_packages() {
    local installed missing=() p want=("$@")
    [ ${#want[@]} -gt 0 ] || want=("${RDMA_PACKAGES[@]}" "${VM_PACKAGES[@]}")
    if ! command -v dpkg-query >/dev/null; then
        echo "lab: this needs a Debian or Ubuntu host (dpkg/apt) to fetch Debian's kernel and packages." >&2
        return 1
    fi
    # dpkg-query exits 1 when any of them was never installed (and says so on stderr),
    # yet prints the status of the others: that is the answer we want, not a failure.
    installed=" $(dpkg-query -W -f='${Package}:${db:Status-Status} ' "${want[@]}" 2>/dev/null || true) "
    for p in "${want[@]}"; do
        [[ $installed == *" $p:installed "* ]] || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    if [ "$(id -u)" != 0 ]; then
        echo "lab: missing packages. Install them with:" >&2
        echo "  sudo apt-get install -y --no-install-recommends ${missing[*]}" >&2
        return 1
    fi
    echo "lab: installing ${#missing[@]} packages and what they depend on: ${missing[*]} ..." >&2
    { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
        --no-install-recommends "${missing[@]}"; } >&2 || {
        echo "lab: apt-get install failed (see above)." >&2
        return 1
    }
}

# Debian's generic amd64 kernel ships rdma_rxe as a module (the -cloud- flavour does not).
# We unpack it into our cache — never into the host's /boot or /lib/modules — and boot
# its uncompressed vmlinux: the kernel has CONFIG_PVH, so qemu can enter it directly and
# skip ≈2 s of decompression under TCG. Sets LAB_KDIR, LAB_KVER, LAB_VMLINUX.
lab_prepare_kernel() {
    local pkg ver deb tmp off lists lookup
    # Asking apt costs ≈2 s here (no pkgcache.bin), so the answer is remembered until the
    # package lists change, i.e. until the next apt-get update.
    lists=$(stat -c %Y /var/lib/apt/lists 2>/dev/null || echo none)
    lookup=$LAB_CACHE/kernel-lookup
    if [ -f "$lookup" ] && [ "$(head -n 1 "$lookup")" = "$lists" ]; then
        read -r pkg ver < <(tail -n 1 "$lookup")
    else
        pkg=$(lab_kernel_package)
        if [ -z "$pkg" ] && [ "$(id -u)" = 0 ]; then
            apt-get update -q >&2
            lists=$(stat -c %Y /var/lib/apt/lists 2>/dev/null || echo none)
            pkg=$(lab_kernel_package)
        fi
        ver=
        if [ -n "$pkg" ]; then
            ver=$(apt-cache policy "$pkg" 2>/dev/null | awk '/Candidate:/ {print $2; exit}' || true)
        fi
        if [ -n "$pkg" ] && [ -n "$ver" ] && [ "$ver" != "(none)" ]; then
            mkdir -p "$LAB_CACHE"
            printf '%s\n%s %s\n' "$lists" "$pkg" "$ver" >"$lookup"
        else
            pkg=
        fi
    fi
    if [ -n "$pkg" ]; then
        LAB_KDIR=$LAB_CACHE/$pkg-$ver
    else
        # No package lists (offline, not root): a kernel fetched earlier still works.
        LAB_KDIR=$(find "$LAB_CACHE" -maxdepth 1 -name 'linux-image-*' -type d 2>/dev/null | sort -V | tail -n 1)
        if [ -z "$LAB_KDIR" ]; then
            lab_no_kernel_package
            return 1
        fi
        pkg=$(basename "$LAB_KDIR"); pkg=${pkg%-*-*}
    fi
    LAB_KVER=${pkg#linux-image-}
    LAB_VMLINUX=$LAB_KDIR/vmlinux
    [ -f "$LAB_KDIR/.ready" ] && return 0

    echo "lab: fetching the guest kernel $pkg ${ver:-} (once, ≈70 MB; cached in $LAB_CACHE) ..." >&2
    tmp=$(mktemp -d)
    (cd "$tmp" && apt-get download -q -o APT::Sandbox::User=root "$pkg" >&2) || {
        rm -rf "$tmp"; echo "lab: apt-get download $pkg failed." >&2; return 1
    }
    deb=$(echo "$tmp"/*.deb)
    # A new kernel version replaces the old one: the cache holds one kernel.
    rm -rf "$LAB_CACHE"/linux-image-* "$LAB_CACHE"/initramfs-*
    mkdir -p "$LAB_KDIR"
    dpkg -x "$deb" "$LAB_KDIR"
    rm -rf "$tmp"
    # Debian 13 (merged /usr) ships the modules under usr/lib/modules/KVER; depmod -b,
    # modprobe -d and the guest's bind mount all look under lib/modules, as on Debian 12.
    # The same symlink a merged-/usr root has makes both layouts one.
    if ! [ -e "$LAB_KDIR/lib" ] && [ -d "$LAB_KDIR/usr/lib/modules/$LAB_KVER" ]; then
        ln -s usr/lib "$LAB_KDIR/lib"
    fi
    depmod -b "$LAB_KDIR" "$LAB_KVER"
    if ! lab_extract_vmlinux "$LAB_KDIR/boot/vmlinuz-$LAB_KVER" "$LAB_VMLINUX"; then
        echo "lab: could not unpack vmlinux from the bzImage; booting the compressed kernel." >&2
        cp "$LAB_KDIR/boot/vmlinuz-$LAB_KVER" "$LAB_VMLINUX"
    fi
    touch "$LAB_KDIR/.ready"
}

# The ELF kernel inside a bzImage: the payload after the decompressor, XZ on Debian 12 and
# zstd on Debian 13. Each decompressor is asked to stop at its first stream/frame; zstd
# then complains about the bytes that follow it (exit 1), and a false match of a magic
# number gives garbage, so the test is whether the output is an ELF file.
lab_extract_vmlinux() {
    local bz=$1 out=$2 magic tool off
    for magic in 'xz:\xfd7zXZ\x00' 'zstd:\x28\xb5\x2f\xfd'; do
        tool=${magic%%:*}
        command -v "$tool" >/dev/null || continue
        off=$(LC_ALL=C grep -m 1 -obUaP "${magic#*:}" "$bz" | cut -d: -f1 || true)
        [ -n "$off" ] || continue
        case "$tool" in
            xz) tail -c +$((off + 1)) "$bz" | xz -dc --single-stream >"$out" 2>/dev/null || true ;;
            zstd) tail -c +$((off + 1)) "$bz" | zstd -dc >"$out" 2>/dev/null || true ;;
        esac
        [ "$(head -c 4 "$out" | od -An -c | tr -d ' ')" = '177ELF' ] && return 0
    done
    return 1
}

# The generic kernel package of this host's Debian release (its rdma_rxe matches the
# release's rdma-core), or nothing. apt-cache exits 100 for a package it does not know —
# on Ubuntu, or before the first apt-get update — which is an answer, not a failure.
lab_kernel_package() {
    apt-cache depends linux-image-amd64 2>/dev/null \
        | awk '/Depends: linux-image-[0-9]/ {print $2; exit}' || true
}

lab_no_kernel_package() {
    if [ -r "$LAB_OS_RELEASE" ] && grep -qi '^ID=ubuntu' "$LAB_OS_RELEASE"; then
        cat >&2 <<'MSG'
lab: the lab VM boots Debian's kernel package linux-image-amd64, which Ubuntu does not have.
lab: Ubuntu's own generic kernel ships rdma_rxe (package linux-modules-extra-$(uname -r)):
lab: give this machine a Soft-RoCE device instead, with `sudo lab/rxe up`.
MSG
    else
        echo "lab: cannot find Debian's kernel package (apt-cache knows no linux-image-amd64; run 'sudo apt-get update')." >&2
    fi
}

# Debian signs its modules and the kernel checks each signature at insmod: RSA under TCG
# costs tens of milliseconds a module. The lab kernel does not enforce signatures, so we
# drop the appended signature (struct module_signature, whose last 4 bytes are the
# big-endian signature length, then the magic string) and skip that work.
lab_copy_unsigned() {
    local src=$1 dst=$2 magic='~Module signature appended~' size siglen
    size=$(stat -c %s "$src")
    if [ "$(tail -c 28 "$src" | head -c 27)" = "$magic" ]; then
        siglen=$(tail -c 32 "$src" | head -c 4 | od -An -tu1 | awk '{print $1*16777216 + $2*65536 + $3*256 + $4}')
        head -c $((size - 28 - 12 - siglen)) "$src" >"$dst"
    else
        cp "$src" "$dst"
    fi
}

# The initramfs holds only what the kernel needs before it can mount the host's root:
# busybox, our init, and the modules for virtio, 9p, overlay and the RDMA stack, in
# dependency order. It is rebuilt whenever any of those inputs changes.
# Sets LAB_INITRAMFS.
lab_prepare_initramfs() {
    local want key stage m lab_dir=${lab_dir:?the sourcing script sets lab_dir}
    # crc32_generic first: rdma_rxe asks the crypto API for "crc32", and the accelerated
    # variant needs a CPU flag that TCG's qemu64 model lacks. rdma_ucm gives user space the
    # connection manager (/dev/infiniband/rdma_cm, step 10's rdma_cm and rping); nothing
    # loads it on demand.
    want=(virtio_pci virtio_net virtio_console 9pnet_virtio 9p overlay crc32_generic rdma_rxe rdma_ucm)
    key=$( { cat "$lab_dir/guest-init" "$lab_dir/common.sh"; echo "$LAB_KDIR ${want[*]}"; dpkg-query -W -f='${Version}' busybox-static; } \
        | sha256sum | cut -c1-16)
    LAB_INITRAMFS=$LAB_CACHE/initramfs-$key.cpio
    [ -f "$LAB_INITRAMFS" ] && return 0

    lab_log "building the initramfs"
    stage=$(mktemp -d)
    mkdir -p "$stage/bin" "$stage/modules"
    cp /bin/busybox "$stage/bin/busybox"
    cp "$lab_dir/guest-init" "$stage/init"
    chmod +x "$stage/init"
    modprobe -a -d "$LAB_KDIR" -S "$LAB_KVER" --show-depends "${want[@]}" \
        | awk '$1 == "insmod" && !seen[$2]++ {print $2}' \
        | while read -r m; do
            lab_copy_unsigned "$m" "$stage/modules/$(basename "$m")"
            basename "$m" >>"$stage/modules/order"
        done
    rm -f "$LAB_CACHE"/initramfs-*.cpio
    (cd "$stage" && find . | cpio -o -H newc --quiet) >"$LAB_INITRAMFS.tmp"
    mv "$LAB_INITRAMFS.tmp" "$LAB_INITRAMFS"
    rm -rf "$stage"
}

# KVM when it really boots our kernel, TCG otherwise. /dev/kvm existing proves nothing:
# on this project's CI machines it is PVM-backed and a Debian kernel either aborts
# ("failed to set MSR 0x10a") or hangs after the decompressor. So we boot once, bounded,
# and remember the answer for this host kernel, guest kernel and qemu.
# Prints "ACCEL CPU", e.g. "tcg qemu64".
lab_accel() {
    local choice=${LAB_ACCEL:-auto} key probe_dir ok
    case "$choice" in
        tcg) echo "tcg qemu64"; return 0 ;;
        kvm) echo "kvm host"; return 0 ;;
        auto) ;;
        *) echo "lab: LAB_ACCEL must be tcg, kvm or unset (got '$choice')." >&2; return 1 ;;
    esac
    if ! [ -r /dev/kvm ] || ! [ -w /dev/kvm ]; then
        echo "tcg qemu64"; return 0
    fi
    key=$( { uname -r; echo "$LAB_KVER"; dpkg-query -W -f='${Version}' qemu-system-x86; } | sha256sum | cut -c1-16)
    if ! [ -f "$LAB_CACHE/accel-$key" ]; then
        lab_log "probing whether KVM boots the guest kernel (once)"
        probe_dir=$(mktemp -d)
        ok=tcg
        timeout --foreground -k 2 20 qemu-system-x86_64 "${LAB_QEMU_BASE[@]}" -accel kvm -cpu host \
            -smp 1 -m 256 -kernel "$LAB_VMLINUX" -initrd "$LAB_INITRAMFS" \
            -append "console=ttyS0 quiet lab.mode=probe" \
            -chardev "file,id=con,path=$probe_dir/console" -serial chardev:con \
            </dev/null >/dev/null 2>&1 || true
        grep -q probe-ok "$probe_dir/console" 2>/dev/null && ok=kvm
        rm -rf "$probe_dir"
        echo "$ok" >"$LAB_CACHE/accel-$key"
    fi
    if [ "$(cat "$LAB_CACHE/accel-$key")" = kvm ]; then echo "kvm host"; else echo "tcg qemu64"; fi
}

# lab_image_accel ME: qemu's accelerator for the VMs of lab/image's image (lab/image-test,
# pair-test, class-test, cloud-test), into LAB_IMAGE_ACCEL, which vm_boot (lab/console.sh)
# passes: TCG unless LAB_ACCEL=kvm. Not lab_accel's probe, which boots the lab VM's kernel
# that these scripts never build; their timings are TCG's. ME names the script in the error.
lab_image_accel() {
    case "${LAB_ACCEL:-tcg}" in
        tcg) LAB_IMAGE_ACCEL=(-accel tcg -cpu qemu64) ;;
        kvm) LAB_IMAGE_ACCEL=(-accel kvm -cpu host) ;;
        *) echo "$1: LAB_ACCEL must be tcg or kvm" >&2; return 1 ;;
    esac
}

# lab_layer IMAGE LAYER: a throw-away copy-on-write qcow2 LAYER over IMAGE (an absolute
# path), so that a VM's writes leave the image as lab/image made it. IMAGE may be in any
# format qemu reads: lab/image's qcow2, or its conversions (vmdk, vdi).
lab_layer() {
    local format
    format=$(qemu-img info --output=json "$1" | sed -n 's/.*"format": "\([a-z0-9]*\)".*/\1/p' | head -n 1)
    qemu-img create -q -f qcow2 -b "$1" -F "$format" "$2"
}

# The GID table index of IPV4's RoCE v2 GID (::ffff:IPV4) on DEV's PORT, as ibv_rc_pingpong's
# -g wants it; with IPV4 empty, the first IPv4 one. rxe fills the table from the netdev's
# addresses, so the index depends on which addresses the interface has and in what order:
# read it, never assume 1.
lab_roce_gid_index() {
    local dev=$1 port=$2 ipv4=$3 want a b c d dir n type gid
    want='0000:0000:0000:0000:0000:ffff:????:????'
    if [ -n "$ipv4" ]; then
        IFS=. read -r a b c d <<<"$ipv4"
        want=$(printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x' "$a" "$b" "$c" "$d")
    fi
    dir=$LAB_SYS_RDMA/$dev/ports/$port
    # Numeric order: gids/10 sorts before gids/2 in a glob.
    for n in $(find "$dir/gids" -mindepth 1 -maxdepth 1 -printf '%f\n' 2>/dev/null | sort -n || true); do
        # `read`, not $(cat): rxe's table has 1024 entries, and a fork each costs
        # seconds in the emulated lab VM.
        gid='' type=''
        read -r gid <"$dir/gids/$n" 2>/dev/null || true
        # shellcheck disable=SC2053 # $want is a glob pattern on purpose
        [[ $gid == $want ]] || continue
        # Reading the type of an empty entry fails (EINVAL): that is "no type".
        read -r type <"$dir/gid_attrs/types/$n" 2>/dev/null || true
        if [ "$type" = "RoCE v2" ]; then echo "$n"; return 0; fi
    done
    echo "lab: $dev port $port has no RoCE v2 GID for ${ipv4:-an IPv4 address} (see $dir/gids/)" >&2
    return 1
}

# lab_stop_on_ubuntu SCRIPT: on Ubuntu (or a system built on it, ID_LIKE=ubuntu), say what
# Ubuntu needs and return 1, before SCRIPT changes anything. rdma-dissect is built and
# tested on Debian 12 and 13 only, on machines that cannot reach Ubuntu's archive: nothing
# Ubuntu-specific has ever run. Going on would fail half-way, with misleading errors:
# Debian's kernel package name (linux-image-amd64), Ubuntu's rustc, which may be older than
# the crate's rust-version, and rdma_rxe, which Ubuntu ships in linux-modules-extra, not in
# the kernel package.
lab_stop_on_ubuntu() {
    local key value id='' like='' os=Ubuntu rust
    [ -r "$LAB_OS_RELEASE" ] || return 0
    # Read, not sourced: the scripts source it themselves, and its ID, VERSION_ID... are theirs.
    while IFS='=' read -r key value; do
        value=${value#[\"\']} value=${value%[\"\']}
        case $key in
            ID) id=$value ;;
            ID_LIKE) like=$value ;;
            PRETTY_NAME) os=$value ;;
        esac
    done <"$LAB_OS_RELEASE"
    case " $id $like " in *" ubuntu "*) ;; *) return 0 ;; esac
    rust=$(sed -n 's/^rust-version = "\(.*\)"$/\1/p' "$(dirname "${BASH_SOURCE[0]}")/../Cargo.toml" || true)
    [ -n "$rust" ] || rust="the crate's rust-version"
    cat >&2 <<MSG
$1: this is $os. rdma-dissect is made and tested on Debian 12 and 13 only;
Ubuntu's archive cannot be reached from where it is built, so nothing here has been tried
on Ubuntu. Stopping before changing anything. What Ubuntu should need (untested):
  sudo apt-get install linux-modules-extra-\$(uname -r)   # rdma_rxe (Soft-RoCE) lives there
  sudo apt-get install ${RDMA_PACKAGES[*]} ${BUILD_PACKAGES[*]} git
  curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh   # Rust >= $rust; Ubuntu's rustc may be older
then, in a new shell, from this checkout: sudo lab/rxe up, lab/setup, lab/stages.
MSG
    return 1
}

# lab_find_cargo SCRIPT: makes `cargo` runnable for a script run with sudo. sudo's
# secure_path leaves the invoking user's ~/.cargo/bin (rustup's usual home) off PATH, and
# its HOME is root's: then SUDO_USER's ~/.cargo/bin is put on PATH, and RUSTUP_HOME at that
# user's ~/.rustup so rustup's cargo finds its toolchains (CARGO_HOME stays root's, so
# nothing root downloads lands in the user's home). Returns 1 with a message if there is
# no cargo either way.
lab_find_cargo() {
    local home=''
    command -v cargo >/dev/null && return 0
    if [ -n "${SUDO_USER:-}" ] && [ "$SUDO_USER" != root ]; then
        IFS=: read -r _ _ _ _ _ home _ < <(getent passwd "$SUDO_USER" || true)
        if [ -n "$home" ] && [ -x "$home/.cargo/bin/cargo" ]; then
            PATH=$PATH:$home/.cargo/bin
            if [ -z "${RUSTUP_HOME:-}" ] && [ -d "$home/.rustup" ]; then export RUSTUP_HOME=$home/.rustup; fi
            echo "$1: using $SUDO_USER's cargo, $home/.cargo/bin/cargo (sudo leaves it off PATH)" >&2
            return 0
        fi
    fi
    local where="on PATH"
    if [ -n "${SUDO_USER:-}" ]; then where="on PATH nor in $SUDO_USER""'s ${home:-home}/.cargo/bin"; fi
    echo "$1: needs cargo, and there is none $where." >&2
    echo "$1: install Rust (https://rustup.rs) as the user who runs sudo, or put cargo on root's PATH" >&2
    return 1
}

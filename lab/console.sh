# shellcheck shell=bash disable=SC2034,SC2154 # sourced: $job comes from the script, DEV and GID go back to it
# Sourced (after lab/common.sh) by lab/image-test, lab/pair-test, lab/class-test and
# lab/cloud-test: the one way they boot disk images under qemu (on copy-on-write layers,
# lab_layer), and drive their serial consoles the way a person at the terminal would —
# waits for a prompt, types a line, reads what came back; or reaches them over SSH. One VM
# may have several consoles (ttyS0, ttyS1, ...), and several VMs may run at once; each
# console has a name, and expect, run and login act on the one console_use chose.
#
# The caller runs lab_image_accel, sets $job (a directory of its own: FIFOs, console logs)
# and LAB_CONSOLE_ME (its name, for messages), and calls vm_cleanup from its EXIT trap.

declare -A VM_PID=() VM_MON=() VM_MON_READER=() CON_FD=() CON_FROM=() CON_READER=() CON_VM=() CON_START=() CON_T=() CON_CMD=()
CON=

# vm_boot VM "CONSOLE..." QEMU_ARGS...: starts qemu with the accelerator lab_image_accel
# chose, QEMU_ARGS, one serial port per console name (the first is ttyS0) and a monitor. Each serial port is a pair of FIFOs
# (qemu's pipe chardev): we type into NAME.serial.in and read the console from
# NAME.serial.out into $job/NAME.console; the monitor likewise, to press the power button.
vm_boot() {
    local vm=$1 consoles=$2 c fd serial=()
    shift 2
    rm -f "$job/$vm".mon.*
    mkfifo "$job/$vm.mon.in" "$job/$vm.mon.out"
    for c in $consoles; do
        : >"$job/$c.console"
        rm -f "$job/$c".serial.*
        mkfifo "$job/$c.serial.in" "$job/$c.serial.out"
        serial+=(-chardev "pipe,id=s_$c,path=$job/$c.serial" -serial "chardev:s_$c")
    done
    qemu-system-x86_64 "${LAB_QEMU_BASE[@]}" "${LAB_IMAGE_ACCEL[@]}" "$@" "${serial[@]}" \
        -chardev "pipe,id=m_$vm,path=$job/$vm.mon" -mon "chardev=m_$vm,mode=readline" \
        </dev/null >"$job/$vm.qemu.log" 2>&1 &
    VM_PID[$vm]=$!
    exec {fd}<>"$job/$vm.mon.in"
    VM_MON[$vm]=$fd
    cat "$job/$vm.mon.out" >/dev/null &
    VM_MON_READER[$vm]=$!
    for c in $consoles; do
        exec {fd}<>"$job/$c.serial.in"
        CON_FD[$c]=$fd
        cat "$job/$c.serial.out" >>"$job/$c.console" &
        CON_READER[$c]=$!
        CON_FROM[$c]=0 CON_VM[$c]=$vm
    done
}

# The console expect, run, login and type_line act on from now on.
console_use() { CON=$1; }
# How messages name it: "the console" when there is only one.
console_said() { if [ "${#CON_FROM[@]}" = 1 ]; then echo "the console"; else echo "console $CON"; fi; }

# Stops VM (if it still runs) and forgets it and its consoles.
vm_forget() {
    local vm=$1 c fd
    if [ -n "${VM_PID[$vm]:-}" ]; then
        kill "${VM_PID[$vm]}" 2>/dev/null || true
        wait "${VM_PID[$vm]}" 2>/dev/null || true
    fi
    kill "${VM_MON_READER[$vm]:-}" 2>/dev/null || true
    if [ -n "${VM_MON[$vm]:-}" ]; then fd=${VM_MON[$vm]}; exec {fd}>&-; fi
    for c in "${!CON_VM[@]}"; do
        [ "${CON_VM[$c]}" = "$vm" ] || continue
        kill "${CON_READER[$c]}" 2>/dev/null || true
        fd=${CON_FD[$c]}
        exec {fd}>&-
        unset "CON_VM[$c]" "CON_FD[$c]" "CON_READER[$c]"
    done
    unset "VM_PID[$vm]" "VM_MON[$vm]" "VM_MON_READER[$vm]"
}

# For the caller's EXIT trap: no qemu outlives the script.
vm_cleanup() {
    local vm
    for vm in "${!VM_PID[@]}"; do vm_forget "$vm"; done
}

# vm_power_off VM: the ACPI power button (a clean shutdown), then waits up to 120 s for
# qemu to exit.
vm_power_off() {
    local vm=$1 pid=${VM_PID[$1]}
    echo system_powerdown >&"${VM_MON[$vm]}"
    for _ in $(seq 1200); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then fail "the VM did not power off within 120 s of the power button"; fi
    vm_forget "$vm"
}

# fail MESSAGE: says so, with the end of every console (and what qemu said), and exits 1 —
# or 75 (EX_TEMPFAIL) when a guest's kernel panicked, whatever the script was waiting for:
# a panic is a bug of that kernel, which no program it runs can be blamed for, so a caller
# may try once more (.ci/run does; Debian 13's 6.12 rxe has panicked under TCG, in
# net_rx_action, while acknowledging a packet).
fail() {
    local c n=${#CON_FROM[@]} vm status=1 panicked=
    for c in "${!CON_FROM[@]}"; do
        if grep -a -q "Kernel panic - not syncing" "$job/$c.console" 2>/dev/null; then panicked+=" $c"; fi
    done
    echo "$LAB_CONSOLE_ME: FAILED: $*" >&2
    if [ -n "$panicked" ]; then
        echo "$LAB_CONSOLE_ME: the guest kernel panicked (console${panicked}): the kernel's bug, not this project's; exit 75 so that it can be tried again" >&2
        status=75
    fi
    for c in "${!CON_FROM[@]}"; do
        if [ "$n" = 1 ]; then
            echo "--- the last lines of the console ---" >&2
        else
            echo "--- the last lines of console $c ---" >&2
        fi
        tail -n 40 "$job/$c.console" | tr -d '\r' >&2
    done
    for vm in "${!VM_PID[@]}"; do
        [ -s "$job/$vm.qemu.log" ] && { echo "--- qemu said ($vm) ---" >&2; tail -n 5 "$job/$vm.qemu.log" >&2; }
    done
    exit "$status"
}

# expect PATTERN TIMEOUT: waits until the console shows PATTERN (an extended regex) after
# what was matched before.
expect() {
    local pattern=$1 deadline=$(( $(now) + $2 * 1000 )) hit offset match from=${CON_FROM[$CON]}
    while :; do
        hit=$(tail -c +$((from + 1)) "$job/$CON.console" | grep -a -b -o -E -m 1 "$pattern|Kernel panic - not syncing" | head -n 1 || true)
        # A panicked guest never prints PATTERN (the images do not reboot on panic): say so now.
        case "$hit" in *"Kernel panic - not syncing"*) fail "the guest kernel panicked (on $(console_said))" ;; esac
        if [ -n "$hit" ]; then
            offset=${hit%%:*} match=${hit#*:}
            CON_FROM[$CON]=$((from + offset + ${#match}))
            return 0
        fi
        kill -0 "${VM_PID[${CON_VM[$CON]}]}" 2>/dev/null || fail "the VM stopped while waiting for '$pattern'"
        [ "$(now)" -lt "$deadline" ] || fail "no '$pattern' on $(console_said) within $2 s"
        sleep 0.2
    done
}
type_line() { printf '%s\r' "$1" >&"${CON_FD[$CON]}"; }

# run CMD TIMEOUT: types CMD at the shell and waits for its exit status, which a marker
# line carries (the echo of the typed line shows `$?`, not a number, so it cannot match).
# Sets OUT to what CMD printed and RC to its status. `start CMD` and `finish TIMEOUT` are
# its two halves, for a command that must run while another console is used (a server).
start() {
    CON_START[$CON]=${CON_FROM[$CON]} CON_T[$CON]=$(now) CON_CMD[$CON]=$1
    type_line "$1; echo @@rc=\$?@@"
}
finish() {
    local start=${CON_START[$CON]} from tag=
    expect '@@rc=[0-9]+@@' "$1"
    from=${CON_FROM[$CON]}
    OUT=$(tail -c +$((start + 1)) "$job/$CON.console" | head -c $((from - start)) | tr -d '\r' | sed '1d;$d')
    RC=$(tail -c +$((start + 1)) "$job/$CON.console" | head -c $((from - start)) | grep -a -o -E '@@rc=[0-9]+@@' | tail -n 1 | tr -dc 0-9)
    [ "${#CON_FROM[@]}" = 1 ] || tag="$CON "
    printf '%s\n' "$OUT" | sed "s/^/    $tag| /" >&2
    echo "$LAB_CONSOLE_ME:   $tag'${CON_CMD[$CON]}': exit $RC ($(( ($(now) - CON_T[$CON] + 500) / 1000 )) s)" >&2
}
run() { start "$1"; finish "$2"; }

# login USER PASSWORD: at the serial console's login prompt.
login() {
    type_line "$1"
    expect 'Password: ' 60
    type_line "$2"
    expect '[$#] ' 120
    run 'export NO_COLOR=1 TERM=dumb' 60
}
logout() {
    type_line 'exit'
    expect 'login: ' 60
}

# The device the boot made and its GID index, from lab/rxe status's "this boot:" line:
# sets DEV and GID.
device_of_this_boot() {
    run 'lab/rxe status' 120
    [ "$RC" = 0 ] || fail "lab/rxe status exited $RC"
    read -r DEV GID < <(echo "$OUT" | sed -n 's/^this boot: \([^ ]*\) on .* RoCE v2 GID index \([0-9]*\) .*/\1 \2/p' | head -n 1) || true
}

# SSH into a VM, as a cloud's VM is reached: from this host through qemu's user-mode NIC
# (hostfwd=tcp:127.0.0.1:${SSH_PORT[VM]}-:22), with the key the VM's user-data seeded, the
# caller's $job/key. The VMs' host keys are new at each boot: nothing is remembered.
declare -A SSH_PORT=()
SSH_OPTS=(-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR -o ConnectTimeout=20)
# ssh_free_port: a free TCP port on 127.0.0.1, for a VM's SSH.
ssh_free_port() {
    local p
    for _ in $(seq 50); do
        p=$((20000 + RANDOM % 20000))
        ss -Hltn "sport = :$p" | grep -q . || { echo "$p"; return 0; }
    done
    echo "$LAB_CONSOLE_ME: no free port on 127.0.0.1" >&2
    return 1
}
# ssh_run VM USER CMD: CMD over SSH as USER, in a login shell (as the student's own login:
# /etc/profile.d gives the steps RDMA_DEVICE and RDMA_GID_INDEX); sets OUT (stdout and
# stderr) and RC.
ssh_run() { ssh_as login "$@"; }
# ssh_plain VM USER CMD...: as ssh_run, but CMD goes to sshd as it is, the way scripts,
# editors' remote runners and `ssh vm CMD` send it: the user's shell runs it as a
# non-login shell, which reads no /etc/profile.d.
ssh_plain() { ssh_as plain "$@"; }
ssh_as() {
    local how=$1 vm=$2 user=$3 cmd said=''
    shift 3
    cmd=$*
    if [ "$how" = login ]; then cmd="bash -lc $(printf %q "$*")"; else said=' (no login shell)'; fi
    RC=0
    OUT=$(ssh "${SSH_OPTS[@]}" -o BatchMode=yes -i "$job/key" -p "${SSH_PORT[$vm]}" "$user@127.0.0.1" "$cmd" 2>&1 </dev/null) || RC=$?
    printf '%s\n' "$OUT" | sed "s/^/    $vm $user| /" >&2
    echo "$LAB_CONSOLE_ME:   $vm $user$said '$*': exit $RC" >&2
}
# wait_ssh VM USER TIMEOUT: until the key logs in as USER (sshd is up and cloud-init has put
# the key there), or fails after TIMEOUT seconds or when the VM stops.
wait_ssh() {
    local deadline=$(( $(now) + $3 * 1000 ))
    until ssh "${SSH_OPTS[@]}" -o BatchMode=yes -i "$job/key" -p "${SSH_PORT[$1]}" "$2@127.0.0.1" true </dev/null >/dev/null 2>&1; do
        kill -0 "${VM_PID[$1]}" 2>/dev/null || { console_use "$1"; fail "the VM $1 stopped before SSH answered"; }
        [ "$(now)" -lt "$deadline" ] || { console_use "$1"; fail "no SSH login as $2 on $1 within $3 s"; }
        sleep 3
    done
}

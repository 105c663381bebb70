"""The measure scenario: `iommuctl top` against the real kernel's tracepoints (docs/measure.md).

In one boot (VT-d, CM=0: every NVMe group DMA-FQ), the guest:
0. runs `iommuctl top` as nobody, which must get one line saying who may measure;
1. starts `iommuctl top`, waits until its tracefs instance has its triggers, SIGKILLs it and
   records that the instance stayed (the state a killed top leaves);
2. starts `iommuctl top` and SIGTERMs it once armed: it must remove its own instance;
3. starts `iommuctl top --once --seconds 600 --json`, waits for its "counting" line, then runs a
   fixed amount of fio I/O (4096 random 4 KiB direct reads) on nvme0 under
   `perf stat -e dma:dma_map_page,... --filter 'device == "<nvme0's address>"'` (on 6.1, which
   has no dma:* events, `perf stat -e iommu:map,iommu:unmap`, host-wide);
   and ends top's interval with SIGINT once fio is done (so no clock races fio);
4. records the tracefs instances left after top exited;
5. runs `iommuctl status --measure 2 --json` and `explain nvme0 --measure 1 --json` (valid JSON,
   no instance left);
6. runs `iommuctl apply --measure 3` with a rule that puts nvme0's group at identity while fio keeps
   reading nvme0: a window before the change, one after;
7. runs iommud with [measure] and [prometheus] (interval 1 s, no policies) around fio, SIGKILLs it,
   starts it again (it must sweep the killed one's instance) and SIGTERMs it (it must remove its own);
8. reverts nvme0's group to DMA-FQ and runs iommud with [measure] effect-window = 3 on a private
   system bus while fio reads nvme0, adds the identity policy and reloads it (SIGHUP): the daemon
   must log the measured effect of its change and send the Measured signal (dbus-monitor).

The host checks: the killed top's instance was there after the kill and the next top removed it
(and said so); the SIGTERMed top removed its own; top's JSON is valid (docs/schema/top.schema.json);
on 6.12 the maps are attributed to nvme0 and to no other NVMe, at least fio's 4096, within 2% of
perf's count for the same device, through translation (DMA-FQ); on 6.1 maps are not attributed
(null, and the note says why) and the host-wide IOMMU maps agree within 2% with perf's iommu:map;
apply --measure made the group identity and says nvme0 went from translated to not translated, with
maps counted in both windows on 6.12 (identity still maps: the DMA API is called all the same);
the daemon's measured entry says the same of its own change (translated -> not translated, the
host's IOMMU maps falling) and its Measured signal reached the bus.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import scenarios
import vmlib

sys.path.insert(0, str(vmlib.HERE.parent / "schema"))
import schemas  # noqa: E402

FIO_IOS = 4096  # 16 MiB in 4 KiB reads

GUEST = r"""
set -u
iommuctl=/vm/in/iommuctl
T=/sys/kernel/tracing
mountpoint -q $T || mount -t tracefs tracefs $T
cat /proc/sys/kernel/osrelease > /vm/out/release
for n in /sys/class/nvme/*; do
    echo "$(basename $n) $(basename "$(readlink -f $n/device)")"
done > /vm/out/nvme.txt
nvme0=$(awk '$1=="nvme0"{print $2}' /vm/out/nvme.txt)

# The instance of a top whose triggers are all armed (iommu/unmap is armed last); bounded.
armed() {
    local pid=$1 i d
    for i in $(seq 600); do
        for d in $T/instances/iommud-$pid-*; do
            grep -qs '^hist:' $d/events/iommu/unmap/trigger && { echo $d; return 0; }
        done
        kill -0 $pid 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}

# 0. Someone without access to tracefs gets one line.
setpriv --reuid=65534 --regid=65534 --clear-groups $iommuctl top --once --seconds 1 \
    > /vm/out/nobody.out 2> /vm/out/nobody.err; echo $? > /vm/out/nobody.rc

# 1. SIGKILL leaves the instance behind.
$iommuctl top --seconds 1 --json > /vm/out/killed.json 2> /vm/out/killed.err &
killed=$!
echo $killed > /vm/out/killed.pid
armed $killed > /vm/out/killed.instance || echo "never armed" >> /vm/out/killed.err
kill -KILL $killed; wait $killed
ls $T/instances > /vm/out/after-kill.txt

# 2. SIGTERM: top removes its own instance (the killed one is swept by this start, too).
$iommuctl top --seconds 1 > /dev/null 2> /vm/out/termed.err &
termed=$!
armed $termed > /vm/out/termed.instance || echo "never armed" >> /vm/out/termed.err
kill -TERM $termed; wait $termed; echo $? > /vm/out/termed.rc
ls $T/instances > /vm/out/after-term.txt

# 3. One interval around a fixed amount of I/O, counted by perf at the same time.
# The interval is ended by SIGINT once fio is done (as perf stat's is), not by the clock.
$iommuctl top --once --seconds 600 --json > /vm/out/top.json 2> /vm/out/top.err &
top=$!
for i in $(seq 600); do grep -q 'counting for' /vm/out/top.err && break; kill -0 $top 2>/dev/null || break; sleep 0.1; done
fio_args="--name=measure --filename=/dev/nvme0n1 --rw=randread --bs=4k --direct=1 --size=16m \
          --ioengine=psync --randrepeat=0 --norandommap --number_ios=@IOS@ --output-format=terse"
if [ -d $T/events/dma ]; then
    f="device == \"$nvme0\""
    perf stat -x, -a -o /vm/out/perf.txt \
        -e dma:dma_map_page --filter "$f" -e dma:dma_unmap_page --filter "$f" \
        -e dma:dma_map_sg --filter "$f" -e dma:dma_unmap_sg --filter "$f" \
        -- fio $fio_args > /vm/out/fio.txt 2>&1
else
    perf stat -x, -a -o /vm/out/perf.txt -e iommu:map -e iommu:unmap -- fio $fio_args > /vm/out/fio.txt 2>&1
fi
echo $? > /vm/out/fio.rc
kill -INT $top; wait $top; echo $? > /vm/out/top.rc
ls $T/instances > /vm/out/after-top.txt

# 5. status --measure: the findings with a window of counting (the guest is idle now).
$iommuctl status --measure 2 --json > /vm/out/status-measured.json 2> /vm/out/status-measured.err
echo $? > /vm/out/status-measured.rc
$iommuctl explain nvme0 --measure 1 --json > /vm/out/explain-measured.json 2> /vm/out/explain-measured.err
echo $? > /vm/out/explain-measured.rc
ls $T/instances > /vm/out/after-status.txt

# 6. apply --measure: nvme0's group to identity while fio keeps reading nvme0 (restarted when the
# rebind takes the disk away for a moment), a window before and one after the change.
mkdir -p /tmp/identity-policy
cat > /tmp/identity-policy/50-identity.toml <<EOF
[[rule]]
name = "vm-measure-identity"
description = "identity for nvme0, measured (tests/vm measure)"
domain = "identity"
when = "always"
accept = ["no-isolation"]
[rule.match]
kind = "nvme"
address = "$nvme0"
EOF
( while [ ! -e /tmp/stop-fio ]; do
      fio --name=load --filename=/dev/nvme0n1 --rw=randread --bs=4k --direct=1 --size=16m --ioengine=psync \
          --time_based --runtime=1 > /dev/null 2>&1 || sleep 0.1
  done ) &
loader=$!
$iommuctl apply --policies /tmp/identity-policy --measure 3 > /vm/out/apply-measured.out 2> /vm/out/apply-measured.err
echo $? > /vm/out/apply-measured.rc
touch /tmp/stop-fio; wait $loader
cat /sys/bus/pci/devices/$nvme0/iommu_group/type > /vm/out/identity-type.txt
ls $T/instances > /vm/out/after-apply.txt

# 7. The daemon measuring ([measure] with [prometheus], interval 1 s, no policies): the textfile's
# counters follow fio; a SIGKILLed daemon's instance is swept by the next start, a SIGTERMed one
# removes its own.
# (in a directory only root can write: iommud refuses a configuration in /tmp)
mkdir -p -m 0755 /run/measure-test /run/measure-test/policies /tmp/prom
cat > /run/measure-test/iommud.conf <<EOF
policy-dirs = ["/run/measure-test/policies"]
[prometheus]
enabled = true
directory = "/tmp/prom"
[measure]
enabled = true
interval = 1
EOF
start_daemon() {  # N [CONFIG]
    RUNTIME_DIRECTORY=/run/iommud STATE_DIRECTORY=/var/lib/iommud /vm/in/iommud \
        --config "${2:-/run/measure-test/iommud.conf}" > /vm/out/iommud-$1.log 2>&1 &
    daemon=$!
    for i in $(seq 600); do grep -q "iommud started" /vm/out/iommud-$1.log && break; kill -0 $daemon 2>/dev/null || break; sleep 0.1; done
}
exported() {  # whether the textfile shows the work fio did
    if [ -d $T/events/dma ]; then
        awk -v d="iommud_dma_maps_total{device=\"$nvme0\"" -v n=@IOS@ 'index($0, d) == 1 && $NF + 0 >= n {ok = 1} END {exit !ok}' /tmp/prom/iommud.prom
    else
        grep -q '^iommud_iommu_page_maps_total ' /tmp/prom/iommud.prom
    fi
}
start_daemon 1
cpu() { awk '{print $14 + $15}' /proc/$daemon/stat; }
c0=$(cpu); t0=$(date +%s.%N)
fio --name=daemon --filename=/dev/nvme0n1 --rw=randread --bs=4k --direct=1 --size=16m --ioengine=psync \
    --randrepeat=0 --norandommap --number_ios=@IOS@ --output-format=terse > /vm/out/fio-daemon.txt 2>&1
for i in $(seq 600); do [ -f /tmp/prom/iommud.prom ] && exported && break; sleep 0.1; done
c1=$(cpu); t1=$(date +%s.%N)
echo "$c0 $c1 $t0 $t1 $(getconf CLK_TCK)" > /vm/out/daemon-cpu.txt
cp /tmp/prom/iommud.prom /vm/out/iommud.prom 2>/dev/null
ls $T/instances > /vm/out/daemon-instances.txt
echo $daemon > /vm/out/daemon-1.pid
kill -KILL $daemon; wait $daemon
ls $T/instances > /vm/out/after-daemon-kill.txt
start_daemon 2
kill -TERM $daemon; wait $daemon; echo $? > /vm/out/iommud-2.rc
ls $T/instances > /vm/out/after-daemon-term.txt

# 8. The daemon's own change, measured ([measure] effect-window = 3, no Prometheus): nvme0's group
# back to DMA-FQ (iommuctl revert), fio reading it, a private system bus with dbus-monitor
# listening for the Measured signal; then a policy that puts the group at identity, and SIGHUP.
$iommuctl revert > /vm/out/revert.out 2>&1; echo $? > /vm/out/revert.rc
cat /sys/bus/pci/devices/$nvme0/iommu_group/type > /vm/out/reverted-type.txt
cat > /run/measure-test/bus.conf <<EOF
<busconfig>
  <type>system</type>
  <listen>unix:path=/run/measure-test/bus</listen>
  <auth>EXTERNAL</auth>
  <policy context="default"><allow user="*"/><allow own="*"/><allow send_destination="*"/><allow eavesdrop="true"/></policy>
</busconfig>
EOF
dbus-daemon --config-file=/run/measure-test/bus.conf --fork --print-pid > /vm/out/bus.pid 2> /vm/out/bus.err
export DBUS_SYSTEM_BUS_ADDRESS=unix:path=/run/measure-test/bus
dbus-monitor --system "type='signal',interface='org.iommud1.Manager',member='Measured'" \
    > /vm/out/measured-signal.txt 2> /vm/out/dbus-monitor.err &
monitor=$!
# dbus-monitor prints its own NameAcquired/NameLost first: then it listens.
for i in $(seq 600); do grep -qs 'signal' /vm/out/measured-signal.txt && break; sleep 0.1; done
mkdir -p -m 0755 /run/measure-test/policies8
cat > /run/measure-test/iommud8.conf <<EOF
policy-dirs = ["/run/measure-test/policies8"]
[measure]
enabled = true
effect-window = 3
EOF
# One long fio, started again at once when the rebind takes the disk away (a fio's start costs
# seconds under TCG: a loop of short runs would leave the windows nearly idle).
rm -f /tmp/stop-fio
( while [ ! -e /tmp/stop-fio ]; do
      fio --name=load --filename=/dev/nvme0n1 --rw=randread --bs=4k --direct=1 --size=16m --ioengine=psync \
          --time_based --runtime=600 > /dev/null 2>&1 || sleep 0.1
  done ) &
loader=$!
reads() { awk '{print $1}' /sys/block/nvme0n1/stat 2>/dev/null || echo 0; }
r0=$(reads)
for i in $(seq 600); do [ $(( $(reads) - r0 )) -ge 200 ] && break; sleep 0.1; done  # fio is reading
start_daemon 3 /run/measure-test/iommud8.conf
c0=$(cpu); t0=$(date +%s.%N)
# Counting time for the before window, not a wait for an event: 3 s and 1 s more for the daemon's
# once-a-second reading.
sleep 4
cm=$(cpu); tm=$(date +%s.%N)
cp /tmp/identity-policy/50-identity.toml /run/measure-test/policies8/
kill -HUP $daemon
for i in $(seq 900); do grep -q "measured effect of the change: nvme0" /vm/out/iommud-3.log && break; kill -0 $daemon 2>/dev/null || break; sleep 0.1; done
c1=$(cpu); t1=$(date +%s.%N)
echo "$c0 $cm $c1 $t0 $tm $t1 $(getconf CLK_TCK)" > /vm/out/daemon-effect-cpu.txt
cat /sys/bus/pci/devices/$nvme0/iommu_group/type > /vm/out/effect-type.txt
touch /tmp/stop-fio; pkill -x fio; wait $loader
kill -TERM $daemon; wait $daemon; echo $? > /vm/out/iommud-3.rc
kill -TERM $monitor; wait $monitor
kill -TERM $(cat /vm/out/bus.pid)
""".replace("@IOS@", str(FIO_IOS))


def perf_counts(text: str) -> dict[str, int]:
    """perf stat -x, lines: "20197,,dma:dma_map_page,3095221719,100.00,,"."""
    counts = {}
    for line in text.splitlines():
        f = line.split(",")
        if len(f) >= 3 and f[0].strip().isdigit():
            counts[f[2]] = int(f[0])
    return counts


def within(a: float, b: float, fraction: float) -> bool:
    return abs(a - b) <= fraction * max(a, b)


def check(out: Path, series: str, notes: list[str]) -> list[str]:
    problems: list[str] = []
    read = lambda name: (out / name).read_text()  # noqa: E731

    # 0: one clear line for someone who may not measure.
    nobody = read("nobody.err").splitlines()
    if read("nobody.rc").strip() != "1" or len(nobody) != 1 or "needs root" not in nobody[0]:
        problems.append(f"as nobody: exit {read('nobody.rc').strip()}, stderr {nobody!r}: not one line saying who may")
    else:
        notes.append(f"as nobody: {nobody[0]}")

    # 1 and 2: cleanup.
    killed_pid = read("killed.pid").strip()
    stale = [n for n in read("after-kill.txt").split() if n.startswith(f"iommud-{killed_pid}-")]
    if not stale:
        problems.append(f"the SIGKILLed top (pid {killed_pid}) left no instance: nothing to clean up was tested"
                        f" ({read('killed.err').strip()})")
    termed_err = read("termed.err")
    if not stale or f"removed tracing instance {stale[0]}" not in termed_err:
        problems.append(f"the next top did not say it removed {stale}: {termed_err.strip()!r}")
    if read("termed.rc").strip() != "143":
        problems.append(f"SIGTERMed top exited {read('termed.rc').strip()}, not 143")
    for after in ("after-term.txt", "after-top.txt"):
        left = [n for n in read(after).split() if n.startswith("iommud-")]
        if left:
            problems.append(f"{after}: instances left: {left}")

    # 5: status --measure runs, prints a valid status and leaves no instance.
    if read("status-measured.rc").strip() != "0":
        problems.append(f"status --measure exited {read('status-measured.rc').strip()}: {read('status-measured.err')}")
    else:
        problems += [f"status --measure {p}" for p in schemas.problems("status", json.loads(read("status-measured.json")))]
        if read("status-measured.err").strip():
            notes.append(f"status --measure 2 said: {read('status-measured.err').strip()}")
    if read("explain-measured.rc").strip() != "0":
        problems.append(f"explain --measure exited {read('explain-measured.rc').strip()}: {read('explain-measured.err')}")
    else:
        problems += [f"explain --measure {p}" for p in schemas.problems("explain", json.loads(read("explain-measured.json")))]
    if [n for n in read("after-status.txt").split() if n.startswith("iommud-")]:
        problems.append(f"status --measure left an instance: {read('after-status.txt').split()}")

    problems += check_apply_measured(out, series, notes)
    problems += check_daemon_measuring(out, series, notes)
    problems += check_daemon_effect(out, series, notes)

    # 3: the measurement.
    if read("top.rc").strip() != "0" or read("fio.rc").strip() != "0":
        problems.append(f"top exited {read('top.rc').strip()}, fio {read('fio.rc').strip()}: "
                        f"{read('top.err').strip()} {read('fio.txt')[-300:]}")
        return problems
    doc = json.loads(read("top.json"))
    problems += [f"top.json {p}" for p in schemas.problems("top", doc)]
    nvme = dict(line.split() for line in read("nvme.txt").splitlines())
    devices = {d["device"]: d for d in doc["devices"]}
    target = nvme["nvme0"]
    others = [a for n, a in nvme.items() if n != "nvme0"]
    perf = perf_counts(read("perf.txt"))
    if series == "6.12":
        if not doc["maps_attributed"]:
            problems.append(f"6.12 has dma:* events, yet maps are not attributed: {doc['note']}")
            return problems
        d = devices.get(target)
        if d is None:
            problems.append(f"{target} (nvme0) not in top's devices")
            return problems
        perf_maps = perf.get("dma:dma_map_page", -1) + perf.get("dma:dma_map_sg", 0)
        perf_unmaps = perf.get("dma:dma_unmap_page", -1) + perf.get("dma:dma_unmap_sg", 0)
        notes.append(f"nvme0 {target}: top maps {d['maps']} unmaps {d['unmaps']} "
                     f"({d['maps_per_second']}/s, mean {d['mean_map_bytes']} B, {d['domain']}); "
                     f"perf maps {perf_maps} unmaps {perf_unmaps}; fio {FIO_IOS} I/Os")
        if d["maps"] < FIO_IOS:
            problems.append(f"top counted {d['maps']} maps on nvme0, fewer than fio's {FIO_IOS} I/Os "
                            "(did fio outlast top's interval?)")
        if not within(d["maps"], perf_maps, 0.02) or not within(d["unmaps"], perf_unmaps, 0.02):
            problems.append(f"top ({d['maps']} maps, {d['unmaps']} unmaps) and perf ({perf_maps}, {perf_unmaps}) "
                            "differ by more than 2%")
        if d["translated"] is not True or d["domain"] not in ("DMA", "DMA-FQ"):
            problems.append(f"nvme0 should be translated: domain {d['domain']}, translated {d['translated']}")
        for a in others:
            if devices.get(a, {}).get("maps"):
                problems.append(f"maps attributed to {a}, which fio did not touch: {devices[a]['maps']}")
    else:
        if doc["maps_attributed"] or any(d["maps"] is not None for d in doc["devices"]):
            problems.append("6.1 has no dma:* events, yet top attributes maps")
        if not doc["note"] or "cannot be attributed" not in doc["note"]:
            problems.append(f"the note does not say what cannot be attributed: {doc['note']!r}")
        host_maps = doc["host"]["iommu_maps"]
        perf_maps = perf.get("iommu:map", -1)
        notes.append(f"host-wide: top iommu maps {host_maps}, perf iommu:map {perf_maps}; fio {FIO_IOS} I/Os")
        if host_maps is None or host_maps < FIO_IOS or not within(host_maps, perf_maps, 0.02):
            problems.append(f"host-wide IOMMU maps: top {host_maps}, perf {perf_maps}: not within 2% "
                            f"or fewer than fio's {FIO_IOS}")
    return problems


def check_apply_measured(out: Path, series: str, notes: list[str]) -> list[str]:
    """6: apply --measure set nvme0's group to identity; its maps are counted before and after,
    translated before and not after (on 6.1: not attributed, said in words)."""
    read = lambda name: (out / name).read_text()  # noqa: E731
    text = read("apply-measured.out")
    if read("apply-measured.rc").strip() != "0":
        return [f"apply --measure exited {read('apply-measured.rc').strip()}: {text} {read('apply-measured.err')}"]
    problems = []
    if read("identity-type.txt").strip() != "identity":
        problems.append(f"nvme0's group is {read('identity-type.txt').strip()} after apply, not identity: {text}")
    if [n for n in read("after-apply.txt").split() if n.startswith("iommud-")]:
        problems.append(f"apply --measure left an instance: {read('after-apply.txt').split()}")
    line = next((l for l in text.splitlines() if l.startswith("measured: nvme0:")), None)
    if line is None:
        return problems + [f"no measured line for nvme0 in apply's output: {text!r}"]
    notes.append(f"apply --measure: {line}")
    host = next((l for l in text.splitlines() if l.startswith("measured: host:")), "")
    notes.append(f"apply --measure: {host}")
    return problems + identity_effect(line, host, series)


def identity_effect(line: str, host: str, series: str) -> list[str]:
    """What a measured line for nvme0 and the host's line must say once nvme0's group went from
    DMA-FQ to identity with fio reading it through both windows."""
    problems = []
    if "translated -> not translated" not in line:
        problems.append(f"nvme0 should go from translated to not translated: {line}")
    h = re.search(r"host: (\d+) -> (\d+) IOMMU page maps/s", host)
    # nvme0 was the one busy device: out of translation, the IOMMU maps (almost) nothing.
    if h is None or int(h.group(1)) == 0 or int(h.group(2)) * 4 > int(h.group(1)):
        problems.append(f"the host's IOMMU maps should fall by far once nvme0 is at identity: {host!r}")
    if series == "6.12":
        m = re.search(r"nvme0: (\d+) -> (\d+) maps/s", line)
        if m is None or int(m.group(1)) == 0 or int(m.group(2)) == 0:
            problems.append(f"fio read nvme0 through both windows, so both should count maps: {line}")
    elif "maps not attributed to devices by this kernel" not in line:
        problems.append(f"6.1 cannot attribute maps, and the line should say so: {line}")
    return problems


def check_daemon_measuring(out: Path, series: str, notes: list[str]) -> list[str]:
    """7: the daemon's textfile carries fio's maps (6.12) or the host's IOMMU maps (6.1), passes
    promtool, and the daemon's tracefs instance is swept after SIGKILL and removed at SIGTERM."""
    read = lambda name: (out / name).read_text()  # noqa: E731
    problems: list[str] = []
    if not (out / "iommud.prom").is_file():
        return [f"the daemon wrote no textfile: {read('iommud-1.log')[-1500:]}"]
    text = read("iommud.prom")
    lint = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True, text=True)
    if lint.returncode != 0 or (lint.stdout + lint.stderr).strip():
        problems.append(f"promtool check metrics: {(lint.stdout + lint.stderr).strip()}")
    nvme = dict(line.split() for line in read("nvme.txt").splitlines())
    maps = [l for l in text.splitlines() if l.startswith(f'iommud_dma_maps_total{{device="{nvme["nvme0"]}"')]
    if series == "6.12":
        if not maps or int(maps[0].split()[-1]) < FIO_IOS:
            problems.append(f"the textfile does not count fio's {FIO_IOS} maps on nvme0: {maps}")
    elif maps or "iommud_dma_maps_attributed 0" not in text or "iommud_iommu_page_maps_total " not in text:
        problems.append("6.1: the textfile should say maps are not attributed and give the host's IOMMU maps")
    pid = read("daemon-1.pid").strip()
    mine = [n for n in read("daemon-instances.txt").split() if n.startswith(f"iommud-{pid}-")]
    if not mine:
        problems.append(f"the measuring daemon (pid {pid}) had no tracing instance: {read('daemon-instances.txt')}")
    elif mine[0] not in read("after-daemon-kill.txt").split():
        problems.append("the SIGKILLed daemon's instance was gone at once: nothing to sweep was tested")
    elif f"removed tracing instance {mine[0]}" not in read("iommud-2.log"):
        problems.append(f"the next daemon did not say it removed {mine[0]}: {read('iommud-2.log')[-800:]}")
    if read("iommud-2.rc").strip() != "0":
        problems.append(f"the SIGTERMed daemon exited {read('iommud-2.rc').strip()}")
    if [n for n in read("after-daemon-term.txt").split() if n.startswith("iommud-")]:
        problems.append(f"instances left after the daemon stopped: {read('after-daemon-term.txt').split()}")
    c0, c1, t0, t1, hz = read("daemon-cpu.txt").split()
    cpu = (float(c1) - float(c0)) / float(hz)
    wall = float(t1) - float(t0)
    notes.append(f"daemon measuring (interval 1 s): {cpu:.2f} s of CPU in {wall:.1f} s "
                 f"({100 * cpu / wall:.1f}% of one CPU, TCG) while fio ran {FIO_IOS} I/Os; "
                 + (f"textfile: {maps[0]}" if maps else "textfile: host-wide counts only"))
    return problems


def check_daemon_effect(out: Path, series: str, notes: list[str]) -> list[str]:
    """8: the daemon measured its own change: the log line for nvme0 (translated -> not translated,
    the host's IOMMU maps falling; both windows counting nvme0's maps on 6.12) and the Measured
    signal on the bus."""
    read = lambda name: (out / name).read_text()  # noqa: E731
    problems: list[str] = []
    if read("reverted-type.txt").strip() != "DMA-FQ":
        return [f"revert left nvme0's group {read('reverted-type.txt').strip()}: {read('revert.out')}"]
    log = read("iommud-3.log")
    if read("effect-type.txt").strip() != "identity":
        problems.append(f"the daemon did not put nvme0's group at identity: {log[-1500:]}")
    line = next((l for l in log.splitlines() if "measured effect of the change: nvme0:" in l), None)
    if line is None:
        return problems + [f"the daemon logged no measured effect for nvme0: {log[-2000:]}"]
    notes.append(f"daemon effect-window 3: {line[line.index('nvme0:'):]}")
    problems += identity_effect(line, line, series)
    signal = read("measured-signal.txt")
    if "member=Measured" not in signal or '"nvme0"' not in signal:
        problems.append(f"no Measured signal for nvme0 on the bus: {signal[-1500:]} {read('dbus-monitor.err')}")
    else:
        notes.append("the Measured signal for nvme0 reached the guest's system bus (dbus-monitor)")
    if read("iommud-3.rc").strip() != "0":
        problems.append(f"the daemon exited {read('iommud-3.rc').strip()}")
    c0, cm, c1, t0, tm, t1, hz = (float(x) for x in read("daemon-effect-cpu.txt").split())
    idle, busy = (cm - c0) / hz, (c1 - cm) / hz
    notes.append(f"daemon with effect-window (TCG): {idle:.2f} s of CPU in {tm - t0:.1f} s of readings alone "
                 f"({100 * idle / (tm - t0):.1f}% of one CPU), {busy:.2f} s in {t1 - tm:.1f} s for the reload, "
                 f"the change and its windows ({100 * busy / (t1 - tm):.1f}%)")
    return problems


def run_measure(series: str, iommuctl: Path, iommud: Path, out_dir: Path | None = None,
                echo: bool = False) -> vmlib.Outcome:
    kernel = vmlib.find_kernel(series)
    if not iommud.is_file():
        raise vmlib.SetupMissing(f"iommud not found at {iommud}: build first")
    files, guest_path = scenarios._prepare_iommuctl(iommuctl)  # noqa: SLF001 (shared with the other scenarios)
    files["iommud"] = iommud
    machine = vmlib.Machine(iommu="intel")
    r = vmlib.boot(kernel, machine, GUEST.replace("/vm/in/iommuctl", guest_path), files_in=files,
                   timeout=300, out_dir=out_dir, echo=echo)
    return vmlib.judged(f"measure on {series}", r, lambda out, notes: check(out, series, notes))


if __name__ == "__main__":  # re-check a kept directory: measure_scenario.py DIR SERIES
    n: list[str] = []
    p = check(Path(sys.argv[1]), sys.argv[2], n)
    print("\n".join(n + [f"PROBLEM: {x}" for x in p]))
    sys.exit(1 if p else 0)

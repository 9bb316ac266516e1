#!/usr/bin/env python3
"""Every function of BINARY that a run of COMMAND executes, one name per line.

    link/trace-functions.py BINARY -- COMMAND [ARGS...]

Why not callgrind (as link/gateway-layout.sh uses): valgrind knows neither Landlock's system
calls nor a child cloned on a stack of its own, so under it the front refuses to start a jail.
This steps through the real process with ptrace, one instruction at a time, in every process
and thread the command starts (the jail's child shares the front's memory until it executes
the jailed program), and stops following a process once it executes another file. A few
hundred thousand steps take seconds. x86_64 and aarch64 Linux; run as a user who may trace
the command (the front marks itself non-dumpable, which a tracer attached from the start
does not mind).
"""

import bisect
import ctypes
import os
import signal
import subprocess
import sys

PTRACE_TRACEME, PTRACE_PEEKUSER, PTRACE_CONT, PTRACE_SINGLESTEP = 0, 3, 7, 9
PTRACE_DETACH, PTRACE_SETOPTIONS, PTRACE_GETREGSET = 17, 0x4200, 0x4204
OPTIONS = 0x1 | 0x2 | 0x4 | 0x8 | 0x10  # TRACESYSGOOD, FORK, VFORK, CLONE, EXEC
EVENT_EXEC = 4
WALL = 0x40000000  # __WALL: threads and clones too
NT_PRSTATUS = 1
# Where the program counter sits in the NT_PRSTATUS register set (64-bit words).
PC_INDEX = {"x86_64": 16, "aarch64": 32}[os.uname().machine]

libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.restype = ctypes.c_long
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]


class IoVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


def ptrace(request, pid, addr=0, data=0):
    if libc.ptrace(request, pid, addr, data) == -1:
        raise OSError(ctypes.get_errno(), f"ptrace({request}) on {pid}")


def program_counter(pid, regs=(ctypes.c_uint64 * 64)()):
    iov = IoVec(ctypes.cast(regs, ctypes.c_void_p), ctypes.sizeof(regs))
    ptrace(PTRACE_GETREGSET, pid, NT_PRSTATUS, ctypes.addressof(iov))
    return regs[PC_INDEX]


def load_ranges(pid, binary):
    """(start, end, load bias) of each executable mapping of `binary` in `pid`."""
    real = os.path.realpath(binary)
    ranges = []
    with open(f"/proc/{pid}/maps") as maps:
        for line in maps:
            fields = line.split()
            if len(fields) >= 6 and fields[5] == real and "x" in fields[1]:
                start, end = (int(x, 16) for x in fields[0].split("-"))
                offset = int(fields[2], 16)
                ranges.append((start, end, start - offset))
    return ranges


def file_offset_to_address(binary):
    """The program headers' (file offset, virtual address) pairs of executable segments."""
    out = subprocess.run(["readelf", "-lW", binary], capture_output=True, text=True, check=True)
    pairs = []
    for line in out.stdout.split("\n"):
        fields = line.split()
        if fields[:1] == ["LOAD"] and "E" in fields[6:-1]:
            pairs.append((int(fields[1], 16), int(fields[2], 16)))
    return pairs


def symbols(binary):
    out = subprocess.run(["nm", "-n", "--defined-only", binary], capture_output=True,
                         text=True, check=True)
    table = []
    for line in out.stdout.split("\n"):
        fields = line.split()
        if len(fields) == 3 and fields[1] in "tTwWiI":
            table.append((int(fields[0], 16), fields[2]))
    return table


def main():
    if len(sys.argv) < 4 or sys.argv[2] != "--":
        sys.exit(__doc__)
    binary, command = sys.argv[1], sys.argv[3:]
    segments = file_offset_to_address(binary)
    table = symbols(binary)
    starts = [a for a, _ in table]

    child = os.fork()
    if child == 0:
        libc.ptrace(PTRACE_TRACEME, 0, None, None)
        # The command's output goes to stderr: stdout is the list.
        os.dup2(2, 1)
        os.execvp(command[0], command)
    os.waitpid(child, 0)  # stopped at the exec
    ptrace(PTRACE_SETOPTIONS, child, 0, OPTIONS)
    ranges = {child: load_ranges(child, binary)}
    pcs = set()
    ptrace(PTRACE_SINGLESTEP, child)
    while ranges:
        try:
            pid, status = os.waitpid(-1, WALL)
        except ChildProcessError:
            break
        if os.WIFEXITED(status) or os.WIFSIGNALED(status):
            ranges.pop(pid, None)
            continue
        if pid not in ranges:
            # A new process or thread, reported before its parent's event: same memory map
            # (a clone with CLONE_VM) or a copy of it.
            ranges[pid] = load_ranges(pid, binary)
        event = status >> 16
        if event == EVENT_EXEC and os.path.realpath(f"/proc/{pid}/exe") != os.path.realpath(binary):
            # It runs another program now: not ours to follow.
            ptrace(PTRACE_DETACH, pid)
            ranges.pop(pid)
            continue
        if event == EVENT_EXEC:
            ranges[pid] = load_ranges(pid, binary)
        pc = program_counter(pid)
        for start, end, bias in ranges[pid]:
            if start <= pc < end:
                pcs.add(pc - bias)
        stopsig = os.WSTOPSIG(status)
        # Pass on real signals; swallow the traps of stepping and the stops of new tracees.
        deliver = 0 if event or stopsig in (signal.SIGTRAP, signal.SIGSTOP) else stopsig
        try:
            ptrace(PTRACE_SINGLESTEP, pid, 0, deliver)
        except OSError:
            ranges.pop(pid, None)

    # File offsets to link-time addresses, then to the function around each.
    ran = set()
    for offset in pcs:
        for file_offset, vaddr in segments:
            address = offset - file_offset + vaddr
            i = bisect.bisect_right(starts, address) - 1
            if i >= 0:
                ran.add(table[i][1])
                break
    for name in sorted(ran):
        print(name)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""A linker script that places the functions named on stdin first in BINARY's .text.

    link/layout.py [--static-libc] [--at-least N] BINARY HEADER_FILE < names > layout.ld

Exits 3 without writing anything when fewer than N functions of BINARY ran: the profile
stopped early, and a layout made from it would throw the present one away. The names are
those of functions that ran (link/gateway-layout.sh reads them from a
callgrind profile, link/front-layout.sh from link/trace-functions.py). HEADER_FILE is the
comment the script opens with: why this binary's hot code is placed together. The script
matches sections, not addresses, so it stays valid across rebuilds; a name that matches
nothing places nothing.

How a name becomes a section pattern:
- rustc (v0 symbol names, .cargo/config.toml) puts each function in `.text.<name>`, or in
  `.text.unlikely.<name>` when LLVM judges it cold. The crates' disambiguators (hashes of the
  toolchain and the build) and LTO's `.llvm.` suffix vary between builds and are wildcards.
- LLVM merges functions whose code is identical into one and makes the others aliases of it:
  a profile may name an alias while the section is named after the function it points into,
  so every name at the address of a function that ran is taken.
- a C function compiled with -ffunction-sections (SQLite) lives in `.text.<name>`, its cold
  part (`name.cold`) in `.text.unlikely.<name>`;
- with --static-libc (a binary linked with glibc's static archive), a function of that archive
  lives in the `.text*` of its archive member, which is named instead (`*libc.a:member.o`).
"""

import re
import subprocess
import sys


def static_libc_members():
    """Symbol -> member of the C compiler's libc.a, when there is one."""
    path = subprocess.run(["cc", "-print-file-name=libc.a"], capture_output=True, text=True)
    archive = path.stdout.strip()
    if path.returncode != 0 or "/" not in archive:
        return {}
    out = subprocess.run(["nm", "-A", "--defined-only", archive], capture_output=True, text=True)
    members = {}
    for line in out.stdout.split("\n"):
        # "/usr/lib/.../libc.a:malloc.o:0000000000000000 T malloc"
        fields = line.split()
        if len(fields) == 3 and fields[1] in "tTwWiI":
            member = fields[0].rsplit(":", 2)[-2]
            members.setdefault(fields[2], member)
    return members


def main():
    args = sys.argv[1:]
    static_libc = args[:1] == ["--static-libc"]
    if static_libc:
        args = args[1:]
    at_least = 0
    if args[:1] == ["--at-least"] and len(args) > 1 and args[1].isdigit():
        at_least, args = int(args[1]), args[2:]
    if len(args) != 2:
        sys.exit(__doc__)
    binary, header = args[0], open(args[1]).read()
    ran = {line.strip() for line in sys.stdin if line.strip()}
    names_at, addresses_of = {}, {}
    nm = subprocess.run(["nm", "--defined-only", binary], capture_output=True, text=True,
                        check=True)
    for line in nm.stdout.split("\n"):
        fields = line.split()
        if len(fields) == 3 and fields[1] in "tTwWiI":
            names_at.setdefault(fields[0], set()).add(fields[2])
            addresses_of.setdefault(fields[2], set()).add(fields[0])
    ran |= {alias for name in ran for at in addresses_of.get(name, ()) for alias in names_at[at]}
    libc_members = static_libc_members() if static_libc else {}
    patterns = set()
    for name in ran:
        if name.startswith(("(", "0x")):
            continue
        if name.startswith("_R"):
            name = re.sub(r"Cs[0-9A-Za-z]+_", "Cs*_", name.split(".llvm.")[0]) + "*"
            patterns.add(f".text.{name} .text.unlikely.{name}")
        elif name in libc_members:
            patterns.add(f"*libc.a:{libc_members[name]}(.text .text.*)")
        elif name.endswith(".cold"):
            patterns.add(".text.unlikely." + name.removesuffix(".cold"))
        else:
            patterns.add(".text." + name)
    if len(patterns) < at_least:
        print(f"only {len(patterns)} functions of {binary} ran (at least {at_least} expected)",
              file=sys.stderr)
        sys.exit(3)
    print(header.rstrip())
    print("SECTIONS\n{\n  .text :\n  {")
    for pattern in sorted(patterns):
        # Archive members name a file, not only sections.
        print(f"    {pattern}" if pattern.startswith("*libc.a:") else f"    *({pattern})")
    print("  }\n}\nINSERT BEFORE .fini;")


if __name__ == "__main__":
    main()

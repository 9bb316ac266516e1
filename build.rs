//! Link warden's binaries with compact relative relocations (DT_RELR) where the toolchain and
//! the C library support them (binutils ≥ 2.38, glibc ≥ 2.36).
//!
//! Why: as position-independent executables, each binary carries one 24-byte relocation per
//! pointer in its static data (vtables, panic locations, string tables) — 1.2 MB in the bot's
//! gateway — which the dynamic loader reads at every start. DT_RELR packs them into ~20 kB:
//! less to read before `main` (every jailed command pays warden's start-up) and less memory
//! resident in the long-running bot. Where the probe fails, the binaries link as before.

use std::path::PathBuf;
use std::process::Command;

const FLAG: &str = "-Wl,-z,pack-relative-relocs";

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    let target = std::env::var("TARGET").unwrap_or_default();
    let host = std::env::var("HOST").unwrap_or_default();
    // The probe runs what it links: only when building for this machine.
    if target != host || !target.contains("linux-gnu") {
        return;
    }
    if probe() {
        for bin in ["warden", "warden-bot", "warden-full"] {
            println!("cargo::rustc-link-arg-bin={bin}={FLAG}");
        }
    } else {
        println!("cargo::warning=linking without DT_RELR (the C toolchain or glibc lacks it)");
    }
}

/// Link and run a small position-independent program with the flag.
fn probe() -> bool {
    let Some(out) = std::env::var_os("OUT_DIR").map(PathBuf::from) else {
        return false;
    };
    let source = out.join("relr_probe.c");
    let program = out.join("relr_probe");
    let code =
        "static const char *p[] = {\"a\", \"b\"};\nint main(void) { return p[1][0] != 'b'; }\n";
    if std::fs::write(&source, code).is_err() {
        return false;
    }
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let linked = Command::new(cc)
        .args(["-fPIE", "-pie", "-Werror", FLAG, "-o"])
        .arg(&program)
        .arg(&source)
        .output()
        .is_ok_and(|o| o.status.success() && o.stderr.is_empty());
    linked && Command::new(&program).status().is_ok_and(|s| s.success())
}

//! Link warden's binaries with compact relative relocations (DT_RELR) where the toolchain and
//! the C library support them (binutils ≥ 2.38, glibc ≥ 2.36), the front `warden` as a static
//! position-independent executable (below), and the release `warden-bot` with its gateway's
//! hot code together (`link/gateway.ld`, below).
//!
//! Why: as position-independent executables, each binary carries one 24-byte relocation per
//! pointer in its static data (vtables, panic locations, string tables) — 1.2 MB in the bot's
//! gateway — which the dynamic loader reads at every start. DT_RELR packs them into ~20 kB:
//! less to read before `main` (every jailed command pays warden's start-up) and less memory
//! resident in the long-running bot. Where the probe fails, the binaries link as before.

use std::path::PathBuf;
use std::process::Command;

const FLAG: &str = "-Wl,-z,pack-relative-relocs";

/// The functions the bot's gateway runs while it starts, idles and answers, placed first in
/// the release `warden-bot`'s code. Why: the idle gateway stays resident all day, and each
/// page of code it touches maps a 64 kB window of the file around it (the kernel's
/// fault-around); the ~2 MB it runs, scattered through 9 MB of code, kept 5.6 MB of it
/// resident, and 3.6 MB once placed together. Measured idle, the page cache dropped before
/// each run: 11.0-11.1 MB -> 8.9-9.3 MB, and 7.9-8.0 MB once the list also named the sections
/// LLVM marks cold (`.text.unlikely.`) and merged functions' aliases. The list is generated
/// (`link/gateway-layout.sh`) and matches v0 symbol names whatever the toolchain's crate
/// hashes (`.cargo/config.toml`); a stale entry places nothing.
const GATEWAY_LAYOUT: &str = "link/gateway.ld";

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-changed={GATEWAY_LAYOUT}");
    let target = std::env::var("TARGET").unwrap_or_default();
    let host = std::env::var("HOST").unwrap_or_default();
    // The probe runs what it links: only when building for this machine.
    if target != host || !target.contains("linux-gnu") {
        return;
    }
    if probe(&[FLAG]) {
        for bin in ["warden", "warden-bot", "warden-full"] {
            println!("cargo::rustc-link-arg-bin={bin}={FLAG}");
        }
    } else {
        println!("cargo::warning=linking without DT_RELR (the C toolchain or glibc lacks it)");
    }
    front_static();
    // Only the release build, whose binary is the one that stays resident: a debug link would
    // match every pattern against ten times as many sections for nothing.
    if std::env::var("PROFILE").as_deref() == Ok("release") {
        let manifest = std::env::var_os("CARGO_MANIFEST_DIR").map(PathBuf::from);
        let layout = manifest.unwrap_or_default().join(GATEWAY_LAYOUT);
        let flag = format!("-Wl,-T,{}", layout.display());
        if probe(&[&flag]) {
            println!("cargo::rustc-link-arg-bin=warden-bot={flag}");
        } else {
            let refused = "the linker refused it";
            println!("cargo::warning=linking warden-bot without {GATEWAY_LAYOUT} ({refused})");
        }
    }
}

/// The front `warden` linked statically (static-pie: ASLR, full RELRO and DT_RELR kept). Why:
/// every jailed command starts this binary, and a dynamic one spends its first ~0.5 ms in the
/// dynamic loader: mapping libc, libm and libgcc_s, and looking up each of their symbols the
/// binary uses. Measured (`benches/jail.sh`, release builds of one commit, linked both ways,
/// two runs): `warden jail -- /bin/true` 3.52 -> 2.87 ms and 3.84 -> 3.19 ms, 2.36 -> 1.93 and
/// 2.29 -> 1.90 times the C floor; the CPU time before `main` 1,177 -> 798 µs. The
/// front resolves no host names or users (no NSS): its libc needs nothing loaded at run time.
/// The cost: a fix to glibc reaches the front when warden is rebuilt, as fixes to Rust's std
/// always do. warden-full and warden-bot stay dynamic (they resolve host names).
///
/// rustc links a binary static only with `-C target-feature=+crt-static`, which cargo can give
/// every crate of a build or none (proc macros cannot be built with it). So the front's link
/// gets `-static-pie`, and a directory searched before the system's in which each library
/// rustc names for a dynamic link (`-lc`, `-lgcc_s`, ...) is a linker script naming the static
/// archive instead: the same archives `+crt-static` links. A probe links and runs a program
/// that way first and checks that it has no program interpreter; where it fails (glibc's
/// static archives not installed), the front links dynamically, with a warning.
fn front_static() {
    let Some(out) = std::env::var_os("OUT_DIR").map(PathBuf::from) else {
        return;
    };
    let stubs = out.join("static-libs");
    let scripts = [
        ("libgcc_s.so", "INPUT(-lgcc_eh -lgcc)"),
        // libc's static archive needs the unwinder back (cancellation, backtrace): a group.
        ("libc.so", "GROUP(-l:libc.a -lgcc_eh -lgcc)"),
        ("libm.so", "INPUT(-l:libm.a)"),
        ("libpthread.so", "INPUT(-l:libpthread.a)"),
        ("librt.so", "INPUT(-l:librt.a)"),
        ("libdl.so", "INPUT(-l:libdl.a)"),
        ("libutil.so", "INPUT(-l:libutil.a)"),
    ];
    let written = std::fs::create_dir_all(&stubs).is_ok()
        && scripts
            .iter()
            .all(|(name, script)| std::fs::write(stubs.join(name), format!("{script}\n")).is_ok());
    let search = format!("-L{}", stubs.display());
    // The libraries in the order rustc names them for a dynamic link, after the flags.
    let dynamic_libs = [
        "-nodefaultlibs",
        "-Wl,-Bdynamic",
        "-lgcc_s",
        "-lutil",
        "-lrt",
        "-lpthread",
        "-lm",
        "-ldl",
        "-lc",
    ];
    let code = "#include <sys/auxv.h>\nstatic const char *p[] = {\"a\", \"b\"};\n\
                int main(void) { return getauxval(AT_BASE) != 0 || p[1][0] != 'b'; }\n";
    let flags = ["-static-pie", &search];
    if written && probe_program(code, &flags, &dynamic_libs) {
        for flag in flags {
            println!("cargo::rustc-link-arg-bin=warden={flag}");
        }
    } else {
        println!(
            "cargo::warning=linking the front `warden` dynamically (static-pie with glibc's \
             static archives failed; on Fedora: glibc-static): every jailed command starts \
             ~0.6 ms slower"
        );
    }
}

/// Link and run a small position-independent program with `flags`.
fn probe(flags: &[&str]) -> bool {
    let code =
        "static const char *p[] = {\"a\", \"b\"};\nint main(void) { return p[1][0] != 'b'; }\n";
    probe_program(code, flags, &[])
}

/// Link `code` with `flags` (and `libs` after the source) and run it: true if it exits 0.
fn probe_program(code: &str, flags: &[&str], libs: &[&str]) -> bool {
    let Some(out) = std::env::var_os("OUT_DIR").map(PathBuf::from) else {
        return false;
    };
    let source = out.join("link_probe.c");
    let program = out.join("link_probe");
    if std::fs::write(&source, code).is_err() {
        return false;
    }
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let linked = Command::new(cc)
        .args(["-fPIE", "-pie", "-Werror"])
        .args(flags)
        .arg("-o")
        .arg(&program)
        .arg(&source)
        .args(libs)
        .output()
        .is_ok_and(|o| o.status.success() && o.stderr.is_empty());
    linked && Command::new(&program).status().is_ok_and(|s| s.success())
}

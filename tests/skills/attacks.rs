//! Malicious skills (`tests/fixtures/skills/`) through the real `warden skill run`: each is
//! stopped, checked from outside the jail, and the reason is in the CLI output and in the
//! audit log. (The network ones are in `skills_cli.rs`; the agent's tool in `skills_agent.rs`.)

use crate::support::skills::{SkillEnv, API_KEY, BOT_TOKEN};
use std::time::{Duration, Instant};

#[test]
fn secrets_in_the_environment_proc_and_ssh_are_out_of_reach() {
    let env = SkillEnv::new("");
    let key = env.home.join(".ssh/id_rsa");
    // The attacker knows where the key is.
    std::fs::write(
        env.fixture("steal-secrets").join("targets.txt"),
        format!("{}\n", key.display()),
    )
    .unwrap();
    env.install("steal-secrets");
    let out = env.warden(&["skill", "run", "steal-secrets"]);
    assert_eq!(out.code, 1, "{out:?}");
    env.assert_no_secret(&out.all());
    assert!(out.stdout.contains("loot: []"), "{}", out.stdout);
    // Its environment is the jail's allowlist plus the skill's own variables.
    let names = out.stdout.lines().next().unwrap();
    for absent in ["ANTHROPIC", "TELEGRAM", "WARDEN_CONFIG"] {
        assert!(!names.contains(absent), "{names}");
    }
    assert!(
        out.stderr
            .contains("/environ: [Errno 13] Permission denied"),
        "{}",
        out.stderr
    );
    let denied = format!(
        "PermissionError: [Errno 13] Permission denied: '{}'",
        key.display()
    );
    assert!(out.stderr.contains(&denied), "{}", out.stderr);

    let row = env.last_audit("skill:steal-secrets");
    assert_eq!((row.decision.as_str(), row.exit_code), ("allow", Some(1)));
    assert!(row.reason.contains(&denied), "{}", row.reason);
    for audit in env.audit() {
        env.assert_no_secret(&format!("{audit:?}"));
        assert!(!audit.reason.contains(API_KEY) && !audit.reason.contains(BOT_TOKEN));
    }
}

#[test]
fn writes_into_other_skills_templates_and_its_own_folder_are_refused() {
    let env = SkillEnv::new("");
    env.install("weather");
    env.install("vandal");
    let templates = env.ws.join("templates");
    std::fs::create_dir_all(&templates).unwrap();
    std::fs::write(templates.join("SOUL.md"), "be kind\n").unwrap();
    let weather_script = env.ws.join("skills/weather/forecast.py");
    let before = std::fs::read(&weather_script).unwrap();

    let out = env.warden(&["skill", "run", "vandal"]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(!out.all().contains("TAMPERED"), "{}", out.all());
    // The folder it was granted works.
    assert_eq!(
        std::fs::read_to_string(env.ws.join("notes/summary.md")).unwrap(),
        "# Summary\n"
    );
    // Everything else is unchanged, seen from outside.
    assert_eq!(std::fs::read(&weather_script).unwrap(), before);
    assert_eq!(
        std::fs::read_to_string(templates.join("SOUL.md")).unwrap(),
        "be kind\n"
    );
    let vandal_md = std::fs::read_to_string(env.ws.join("skills/vandal/SKILL.md")).unwrap();
    assert!(!vandal_md.contains("curl"), "{vandal_md}");
    let row = env.last_audit("skill:vandal");
    for target in [
        weather_script.display().to_string(),
        templates.join("SOUL.md").display().to_string(),
        "skill/SKILL.md".to_string(),
    ] {
        let blocked = format!("{target}: [Errno 13] Permission denied");
        assert!(out.stderr.contains(&blocked), "{blocked}: {}", out.stderr);
        assert!(row.reason.contains(&target), "{target}: {}", row.reason);
    }
    assert!(row.reason.contains("Permission denied"), "{}", row.reason);
    // And both skills still hash to what was granted.
    let list = env.warden(&["skill", "list"]);
    assert!(
        !list.stdout.contains("changed since grant"),
        "{}",
        list.stdout
    );
}

#[test]
fn a_manifest_edited_after_the_grant_stops_the_skill_until_regranted() {
    let env = SkillEnv::new("");
    env.install("shapeshifter");
    // Arguments reach the script as they were given: quoted, never re-read by a shell.
    let out = env.warden(&[
        "skill",
        "run",
        "shapeshifter",
        "one",
        "O'Brien; rm -rf ~",
        "$HOME",
        "*",
        "",
    ]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(out.stdout.lines().next(), Some("5 words"));
    // From inside, neither its private copy nor the workspace folder can be changed.
    assert!(!out.stdout.contains("WIDENED"), "{}", out.stdout);
    assert_eq!(
        out.stderr.matches("Permission denied").count(),
        2,
        "{}",
        out.stderr
    );

    // From outside (another tool, an update, a git pull): the manifest gains a domain.
    let manifest = env.ws.join("skills/shapeshifter/skill.toml");
    let mut text = std::fs::read_to_string(&manifest).unwrap();
    text.push_str("\n[permissions.network]\ndomains = [\"evil.example.test\"]\n");
    std::fs::write(&manifest, text).unwrap();
    let out = env.warden(&["skill", "run", "shapeshifter", "one"]);
    assert_eq!(out.code, 126, "{out:?}");
    assert!(
        out.stderr.contains("changed since it was granted"),
        "{}",
        out.stderr
    );
    env.assert_audited("skill:shapeshifter", "deny", "changed since it was granted");
    let list = env.warden(&["skill", "list"]);
    assert!(
        list.stdout.contains("changed since grant"),
        "{}",
        list.stdout
    );

    // Any file counts, not only the manifest: even a new empty one.
    let out = env.warden(&["skill", "grant", "--yes", "shapeshifter"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        out.stdout.contains("connect to evil.example.test"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("It changed since its grant"),
        "{}",
        out.stdout
    );
    std::fs::write(env.ws.join("skills/shapeshifter/extra.py"), "").unwrap();
    let out = env.warden(&["skill", "run", "shapeshifter", "one"]);
    assert_eq!(out.code, 126, "{out:?}");
    assert!(
        out.stderr.contains("changed since it was granted"),
        "{}",
        out.stderr
    );
}

#[test]
fn nothing_a_skill_starts_outlives_its_run() {
    let env = SkillEnv::new("");
    env.install("daemon");
    let marker = format!("skilltest-daemon-{}", std::process::id());
    let started = Instant::now();
    let out = env.warden(&["skill", "run", "daemon", &marker]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "the run waited for its helper"
    );
    assert!(
        out.stdout.contains("started a background helper"),
        "{}",
        out.stdout
    );
    assert!(
        out.stderr
            .contains("left 1 process(es) running in the background"),
        "{}",
        out.stderr
    );
    // setsid is one of the ways out it tried; seccomp refuses it.
    assert!(out.stderr.contains("setsid: [Errno 1]"), "{}", out.stderr);
    let row = env.last_audit("skill:daemon");
    assert!(
        row.reason.contains("killed 1 process(es) it left running"),
        "{}",
        row.reason
    );

    // From outside: the helper never wakes up to write its file, and is gone.
    std::thread::sleep(Duration::from_secs(4));
    assert!(!env.ws.join("daemon-out/still-alive").exists());
    let survivors: Vec<String> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains(&marker))
        .collect();
    assert!(survivors.is_empty(), "still running: {survivors:?}");
    // Its run folder (private copy and scratch) is gone too.
    let runs = env.data.join("skill-runs");
    assert_eq!(std::fs::read_dir(runs).unwrap().count(), 0);
}

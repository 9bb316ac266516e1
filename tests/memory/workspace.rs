//! The workspace convention files through the real App: seeded on first run without
//! overwriting the user's own, sent to the model in the system prompt each run (re-read, so
//! edits show at once), capped when oversized, and never read through a symlink.

use crate::support::app_config::{config, say};
use crate::support::fake_llm::{FakeLlm, Turn};
use warden::app::App;
use warden::memory::workspace::TEMPLATES;

#[tokio::test]
async fn first_run_seeds_the_files_and_every_run_sends_them() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("USER.md"), "# USER.md\n- Name: Ada\n").unwrap();
    let llm = FakeLlm::anthropic(vec![Turn::text("hi"), Turn::text("hi again")]).await;
    let app = App::build(config(dir.path(), &llm.base_url())).unwrap();
    for (name, template) in TEMPLATES {
        let on_disk = std::fs::read_to_string(ws.join(name)).unwrap();
        if *name == "USER.md" {
            assert_eq!(
                on_disk, "# USER.md\n- Name: Ada\n",
                "the user's file is kept"
            );
        } else {
            assert_eq!(&on_disk, template, "{name}");
        }
    }
    assert!(ws.join("memory").is_dir());

    say(&app, "test:ws", "hello").await;
    let system = llm.last_request().system().unwrap();
    for name in [
        "AGENTS.md",
        "SOUL.md",
        "USER.md",
        "TOOLS.md",
        "MEMORY.md",
        "HEARTBEAT.md",
    ] {
        assert!(
            system.contains(&format!("## {name}\n")),
            "{name} missing:\n{system}"
        );
    }
    assert!(system.contains("- Name: Ada"));
    assert!(system.contains("You are warden, a personal assistant"));

    // Edited between runs: the next run sees the new text.
    std::fs::write(ws.join("SOUL.md"), "# SOUL.md\nSpeak like a pirate.\n").unwrap();
    say(&app, "test:ws", "hello again").await;
    let system = llm.last_request().system().unwrap();
    assert!(system.contains("Speak like a pirate."));

    // A second start does not touch edited files.
    drop(app);
    App::build(config(dir.path(), &llm.base_url())).unwrap();
    assert_eq!(
        std::fs::read_to_string(ws.join("SOUL.md")).unwrap(),
        "# SOUL.md\nSpeak like a pirate.\n"
    );
}

#[tokio::test]
async fn a_symlinked_soul_md_is_not_read_and_big_files_are_capped() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let shadow = dir.path().join("shadow");
    std::fs::write(&shadow, "root:$6$very-secret-hash:19000:0:99999:7:::\n").unwrap();
    std::os::unix::fs::symlink(&shadow, ws.join("SOUL.md")).unwrap();
    // Also a symlink to the real /etc/shadow, as in the threat model.
    std::os::unix::fs::symlink("/etc/shadow", ws.join("TOOLS.md")).unwrap();
    let big: String = (0..5000)
        .map(|i| format!("- fact number {i:05}\n"))
        .collect();
    std::fs::write(ws.join("MEMORY.md"), &big).unwrap();

    let llm = FakeLlm::anthropic(vec![Turn::text("hi")]).await;
    let mut config = config(dir.path(), &llm.base_url());
    config.memory.prompt_file_chars = 2000;
    let app = App::build(config).unwrap();
    // Seeding left the links alone (and wrote nothing through them).
    assert!(std::fs::symlink_metadata(ws.join("SOUL.md"))
        .unwrap()
        .file_type()
        .is_symlink());
    assert!(std::fs::read_to_string(&shadow)
        .unwrap()
        .starts_with("root:"));

    say(&app, "test:ws", "hello").await;
    let system = llm.last_request().system().unwrap();
    assert!(!system.contains("very-secret-hash"), "{system}");
    assert!(!system.contains("## SOUL.md"), "{system}");
    assert!(!system.contains("## TOOLS.md"), "{system}");
    assert!(system.contains("## AGENTS.md"));
    // MEMORY.md: head and tail, with a marker where the middle was cut.
    assert!(system.contains("- fact number 00000\n"));
    assert!(system.contains("- fact number 04999"));
    assert!(!system.contains("- fact number 02500"));
    assert!(system.contains("characters of MEMORY.md cut here; read the file for all of it"));
}

//! The commented example config in README.md is parsed by the real config parser, so the
//! documentation cannot drift from the code (unknown keys are errors).

#[test]
fn the_readme_example_config_parses() {
    let readme = include_str!("../README.md");
    let section = readme
        .split("## Configuration")
        .nth(1)
        .expect("README has a Configuration section");
    let block = section
        .split("```toml\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("the Configuration section holds a toml block");
    let config = warden::config::Config::parse(block, std::path::Path::new("README.md"))
        .unwrap_or_else(|e| panic!("README example config: {e}"));
    assert_eq!(config.llm.max_iterations, 25);
    assert_eq!(config.sandbox.timeout_secs, 120);
    assert!(config.telegram.allowed_users.is_empty());
    assert!(config.workspace.ends_with(".warden/workspace"));
    assert!(config.skills.enabled && config.skills.bundled);
    assert!(config.skills.hosts.is_empty());
    assert!(
        config.search.provider.is_none(),
        "no search tool by default"
    );
    assert_eq!(config.search.max_results, 5);
    assert!(config.delegate.enabled);
    assert_eq!(config.delegate.max_iterations, 10);
}

#[test]
fn the_readme_mcp_example_parses() {
    let readme = include_str!("../README.md");
    let section = readme
        .split("\n## MCP\n")
        .nth(1)
        .expect("README has an MCP section");
    let block = section
        .split("```toml\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("the MCP section holds a toml block");
    let config = warden::config::Config::parse(block, std::path::Path::new("README.md"))
        .unwrap_or_else(|e| panic!("README MCP example: {e}"));
    let notes = &config.mcp.servers["notes"];
    assert_eq!(notes.command.as_deref(), Some("python3"));
    assert_eq!(
        notes.tool_rule("delete"),
        Some(warden::policy::Decision::Deny)
    );
    assert!(config.mcp.servers["docs"].url.is_some());
}

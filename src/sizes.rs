//! Byte counts as people read them ("2.5 MB"), and the one rule for bytes that come into
//! warden's process from outside (MCP servers, web pages, search and model APIs, speech to
//! text, the egress proxy's clients): every message, line or body has a cap, checked while it
//! is read — never after buffering it — and going over fails with an error that names the cap
//! and its config key ([`Exceeded`]). The caps are the `[caps]` section ([`Caps`]); the
//! readers that apply them are in [`read`].

pub mod read;

use serde::Deserialize;
use std::sync::RwLock;

pub fn human(bytes: u64) -> String {
    match bytes {
        b if b >= 1024 * 1024 => format!("{:.1} MB", b as f64 / (1024.0 * 1024.0)),
        b if b >= 1024 => format!("{:.1} KB", b as f64 / 1024.0),
        b => format!("{b} bytes"),
    }
}

const MIB: usize = 1024 * 1024;

/// `[caps]`: how much warden reads of what comes from outside, and how long it spends turning
/// untrusted markup into text.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct Caps {
    /// One JSON-RPC message from an MCP server: a stdio line, an HTTP body, an SSE event.
    pub mcp_message_bytes: usize,
    /// `tools/list` of one MCP server: pages, tools and bytes, all pages together.
    pub mcp_list_pages: usize,
    pub mcp_list_tools: usize,
    pub mcp_list_bytes: usize,
    /// A page `web_fetch` reads (longer ones are cut) and a `web_search` answer.
    pub web_bytes: usize,
    /// One server-sent event of a model's stream, and the whole stream.
    pub llm_event_bytes: usize,
    pub llm_response_bytes: usize,
    /// An answer of the speech-to-text or embeddings API.
    pub api_response_bytes: usize,
    /// The head of a request to the egress proxy (request line and headers).
    pub proxy_head_bytes: usize,
    /// Elements nested deeper than this are flattened before HTML becomes text.
    pub html_depth: usize,
    /// The longest a conversion of untrusted markup (HTML to text) may take.
    pub convert_secs: u64,
}

impl Default for Caps {
    fn default() -> Self {
        Caps {
            mcp_message_bytes: 8 * MIB,
            mcp_list_pages: 50,
            mcp_list_tools: 500,
            mcp_list_bytes: 8 * MIB,
            web_bytes: 2 * MIB,
            llm_event_bytes: 16 * MIB,
            llm_response_bytes: 64 * MIB,
            api_response_bytes: 16 * MIB,
            proxy_head_bytes: 16 * 1024,
            html_depth: 64,
            convert_secs: 10,
        }
    }
}

/// The caps this process was configured with (the defaults until a config is loaded).
static INSTALLED: RwLock<Option<Caps>> = RwLock::new(None);

/// The caps in force.
pub fn caps() -> Caps {
    match INSTALLED.read() {
        Ok(guard) => guard.unwrap_or_default(),
        Err(poisoned) => poisoned.into_inner().unwrap_or_default(),
    }
}

impl Caps {
    /// Make these the caps of this process (done once the config is loaded).
    pub fn install(self) {
        match INSTALLED.write() {
            Ok(mut guard) => *guard = Some(self),
            Err(poisoned) => *poisoned.into_inner() = Some(self),
        }
    }

    /// Every cap must let something through, and stay below what would itself exhaust warden.
    pub fn check(&self) -> Result<(), String> {
        let bytes = [
            ("mcp_message_bytes", self.mcp_message_bytes),
            ("mcp_list_bytes", self.mcp_list_bytes),
            ("web_bytes", self.web_bytes),
            ("llm_event_bytes", self.llm_event_bytes),
            ("llm_response_bytes", self.llm_response_bytes),
            ("api_response_bytes", self.api_response_bytes),
            ("proxy_head_bytes", self.proxy_head_bytes),
        ];
        for (key, value) in bytes {
            if !(1024..=1024 * MIB).contains(&value) {
                return Err(format!(
                    "caps.{key} = {value} is not between 1 KB and 1024 MB"
                ));
            }
        }
        for (key, value, max) in [
            ("mcp_list_pages", self.mcp_list_pages, 10_000),
            ("mcp_list_tools", self.mcp_list_tools, 100_000),
            ("html_depth", self.html_depth, 10_000),
        ] {
            if value == 0 || value > max {
                return Err(format!("caps.{key} = {value} is not between 1 and {max}"));
            }
        }
        if self.convert_secs == 0 || self.convert_secs > 3600 {
            return Err(format!(
                "caps.convert_secs = {} is not between 1 and 3600",
                self.convert_secs
            ));
        }
        Ok(())
    }
}

/// A cap: how many bytes, and the key that sets it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cap {
    pub bytes: usize,
    /// The key in `[caps]`.
    pub key: &'static str,
}

impl Cap {
    pub fn new(bytes: usize, key: &'static str) -> Cap {
        Cap { bytes, key }
    }

    /// `what` went over this cap.
    pub fn exceeded(&self, what: impl Into<String>) -> Exceeded {
        Exceeded {
            what: what.into(),
            cap: *self,
        }
    }
}

/// Something from outside was larger than its cap: "`what` is larger than 8.0 MB
/// (caps.mcp_message_bytes)".
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Exceeded {
    pub what: String,
    pub cap: Cap,
}

impl std::fmt::Display for Exceeded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} is larger than {} (caps.{})",
            self.what,
            human(self.cap.bytes as u64),
            self.cap.key
        )
    }
}

impl std::error::Error for Exceeded {}

impl From<Exceeded> for std::io::Error {
    fn from(e: Exceeded) -> Self {
        std::io::Error::new(std::io::ErrorKind::InvalidData, e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_naturally() {
        assert_eq!(human(12), "12 bytes");
        assert_eq!(human(2048), "2.0 KB");
        assert_eq!(human(10 * 1024 * 1024), "10.0 MB");
    }

    #[test]
    fn an_exceeded_cap_names_its_key() {
        let cap = Cap::new(8 * MIB, "mcp_message_bytes");
        assert_eq!(
            cap.exceeded("a line from the MCP server notes").to_string(),
            "a line from the MCP server notes is larger than 8.0 MB (caps.mcp_message_bytes)"
        );
    }

    #[test]
    fn caps_parse_and_nonsense_is_refused() {
        let caps: Caps = toml::from_str("mcp_message_bytes = 65536\nhtml_depth = 32\n").unwrap();
        assert_eq!(caps.mcp_message_bytes, 65536);
        assert_eq!(caps.web_bytes, Caps::default().web_bytes);
        assert!(caps.check().is_ok());
        for (text, key) in [
            ("web_bytes = 10\n", "caps.web_bytes"),
            ("mcp_list_pages = 0\n", "caps.mcp_list_pages"),
            ("convert_secs = 0\n", "caps.convert_secs"),
        ] {
            let caps: Caps = toml::from_str(text).unwrap();
            assert!(caps.check().unwrap_err().contains(key), "{text}");
        }
        assert!(toml::from_str::<Caps>("no_such_cap = 1\n").is_err());
    }
}

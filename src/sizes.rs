//! Byte counts as people read them, in replies and tool results ("2.5 MB").

pub fn human(bytes: u64) -> String {
    match bytes {
        b if b >= 1024 * 1024 => format!("{:.1} MB", b as f64 / (1024.0 * 1024.0)),
        b if b >= 1024 => format!("{:.1} KB", b as f64 / 1024.0),
        b => format!("{b} bytes"),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn sizes_read_naturally() {
        assert_eq!(super::human(12), "12 bytes");
        assert_eq!(super::human(2048), "2.0 KB");
        assert_eq!(super::human(10 * 1024 * 1024), "10.0 MB");
    }
}

//! How an I/O error reads to a person, as shells print it: without the "(os error N)" tail.

pub(super) fn short(e: &std::io::Error) -> String {
    let text = e.to_string();
    text.split(" (os error").next().unwrap_or(&text).to_string()
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_os_error_number_is_left_out() {
        let e = std::io::Error::from_raw_os_error(libc::ENOENT);
        assert_eq!(super::short(&e), "No such file or directory");
    }
}

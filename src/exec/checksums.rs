//! A checksum list fed on standard input (`echo "$sum  notes.txt" | md5sum -c`): the names in
//! it exist only when the command runs, so the checker left them to the executor. warden reads
//! the list from the command's stdin itself (at most the size the policy checks in a list
//! file), checks every name as a read exactly as `policy::lists` checks a list file, and only
//! then starts the program with the text it checked on a pipe of its own — the program never
//! reads a byte warden did not check. Any refused name stops the script.

use super::redirect::FdTable;
use crate::policy::lists::{self, ListFormat};
use crate::policy::paths::Access;
use crate::policy::PathPolicy;
use std::io::Read;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::sync::Arc;
use tokio::task::JoinHandle;

/// What became of the list.
pub enum Fed {
    /// The program's stdin is now the checked text, written by this task.
    Checked(JoinHandle<()>),
    /// A name the policy refuses, or a list it cannot check.
    Refused(String),
}

/// Read the list from the table's stdin, check it, and give the table a pipe holding it.
/// Not cancellable by itself: the caller bounds it with the script's deadline.
pub async fn feed(
    table: &mut FdTable,
    null: Arc<OwnedFd>,
    paths: &PathPolicy,
    cwd: &Path,
    program: &str,
) -> std::io::Result<Fed> {
    let [stdin, _, _] = table.standard(null);
    let source = stdin.try_clone()?;
    let bytes = tokio::task::spawn_blocking(move || {
        let mut bytes = Vec::new();
        // One byte past the limit tells "too large" apart (check_names refuses it).
        std::fs::File::from(source)
            .take(lists::MAX_BYTES as u64 + 1)
            .read_to_end(&mut bytes)
            .map(|_| bytes)
    })
    .await
    .map_err(std::io::Error::other)??;
    let shown = "on standard input";
    if let Err(denial) = lists::check_names(
        &bytes,
        ListFormat::Checksums,
        cwd,
        paths,
        Access::Read,
        program,
        shown,
    ) {
        return Ok(Fed::Refused(denial.reason));
    }
    let (read, write) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC)?;
    table.set_stdin(Arc::new(read));
    Ok(Fed::Checked(tokio::task::spawn_blocking(move || {
        use std::io::Write;
        // A program that stops reading (EPIPE) ends the writing; nothing else to do.
        let _ = std::fs::File::from(write).write_all(&bytes);
    })))
}

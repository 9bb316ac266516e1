//! Processes seen from outside, through /proc: who is whose child, what runs, what is gone.

/// Processes whose parent is `pid`, with their command lines.
pub fn children(pid: u32) -> Vec<(u32, String)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(child) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        // Gone since the directory was listed.
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{child}/stat")) else {
            continue;
        };
        // pid (comm) state ppid …; comm may hold spaces and parentheses.
        let after = &stat[stat.rfind(')').unwrap() + 2..];
        let ppid: u32 = after.split(' ').nth(1).unwrap().parse().unwrap();
        if ppid == pid {
            found.push((child, cmdline(child)));
        }
    }
    found
}

/// Every process below `pid`.
pub fn descendants(pid: u32) -> Vec<(u32, String)> {
    let mut all = Vec::new();
    let mut todo = vec![pid];
    while let Some(p) = todo.pop() {
        for (child, cmd) in children(p) {
            todo.push(child);
            all.push((child, cmd));
        }
    }
    all
}

pub fn cmdline(pid: u32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|b| {
            String::from_utf8_lossy(&b)
                .replace('\0', " ")
                .trim()
                .to_string()
        })
        .unwrap_or_default()
}

pub fn exe_name(pid: u32) -> String {
    std::fs::read_link(format!("/proc/{pid}/exe"))
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The bot's agent worker, if one runs.
pub fn worker_of(bot: u32) -> Option<u32> {
    children(bot)
        .into_iter()
        .find(|(_, cmd)| cmd.contains("agent-worker"))
        .map(|(pid, _)| pid)
}

/// A process is gone when /proc has no entry (or only a zombie's) with the same command line.
pub fn gone(pid: u32, cmd: &str) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let zombie = stat
        .rfind(')')
        .is_some_and(|i| stat[i + 2..].starts_with('Z'));
    stat.is_empty() || zombie || cmdline(pid) != cmd
}

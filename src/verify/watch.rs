//! Watching the protected set while a command runs, from warden's side. A background command
//! may run for many minutes, and the user's own git may run in the meantime: a hook it plants
//! must not wait for the end of the command to be found. inotify on the folders that hold
//! protected entries (a change there is looked at within milliseconds), and a full look every
//! [`PERIOD`] for new `.git` entries anywhere. A change nobody approved stops the command
//! (every command in the same roots); it is undone once they have ended.

use super::scan::GIT_NAMES;
use super::state::State;
use super::{check_running, Guard};
use crate::locks::lock;
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify, WatchDescriptor};
use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::unix::AsyncFd;
use tokio_util::sync::CancellationToken;

/// How often a running command's roots are looked at in full.
const PERIOD: Duration = Duration::from_secs(1);
/// Events this close together are looked at once.
const SETTLE: Duration = Duration::from_millis(5);

/// Stops watching when dropped.
pub struct Watcher {
    stop: CancellationToken,
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

struct Watched {
    dir: PathBuf,
    /// Every event here matters (a protected folder); otherwise only events naming a
    /// protected entry or a git name.
    all: bool,
}

impl Watcher {
    pub fn start(guard: Arc<Guard>, kill: CancellationToken) -> Watcher {
        let stop = kill.child_token();
        let token = stop.clone();
        let inotify = watch_folders(&guard);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(PERIOD);
            tick.tick().await;
            loop {
                let changed = match &inotify {
                    Some((fd, watched, items)) => tokio::select! {
                        _ = token.cancelled() => return,
                        _ = tick.tick() => true,
                        ready = fd.readable() => match ready {
                            Ok(mut ready) => {
                                let events = fd.get_ref().0.read_events().unwrap_or_default();
                                ready.clear_ready();
                                relevant(&events, watched, items)
                            }
                            Err(_) => true,
                        },
                    },
                    None => tokio::select! {
                        _ = token.cancelled() => return,
                        _ = tick.tick() => true,
                    },
                };
                if !changed {
                    continue;
                }
                tokio::time::sleep(SETTLE).await;
                if let Some((fd, _, _)) = &inotify {
                    // Drain what arrived meanwhile: the look below sees it all.
                    let _ = fd.get_ref().0.read_events();
                }
                if token.is_cancelled() {
                    return;
                }
                if !check_running(&guard) {
                    return;
                }
            }
        });
        Watcher { stop }
    }
}

/// An inotify instance as tokio wants it.
struct Events(Inotify);

impl std::os::fd::AsRawFd for Events {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        use std::os::fd::AsFd;
        self.0.as_fd().as_raw_fd()
    }
}

type Watches = (
    AsyncFd<Events>,
    HashMap<WatchDescriptor, Watched>,
    BTreeSet<PathBuf>,
);

/// inotify on the roots, the protected folders and the folders holding protected files.
/// `None` when inotify is not available (the periodic look still runs).
fn watch_folders(guard: &Guard) -> Option<Watches> {
    let (roots, items): (Vec<PathBuf>, Vec<(PathBuf, bool)>) = {
        let st = lock(&guard.state);
        let baseline = st.baseline.as_ref()?;
        let items = baseline
            .items
            .iter()
            .map(|(p, i)| (p.clone(), matches!(i.state, State::Dir { .. })))
            .collect();
        (st.scope.roots.clone(), items)
    };
    let inotify = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC).ok()?;
    let flags = AddWatchFlags::IN_CREATE
        | AddWatchFlags::IN_DELETE
        | AddWatchFlags::IN_MODIFY
        | AddWatchFlags::IN_ATTRIB
        | AddWatchFlags::IN_MOVED_FROM
        | AddWatchFlags::IN_MOVED_TO
        | AddWatchFlags::IN_CLOSE_WRITE
        | AddWatchFlags::IN_DELETE_SELF
        | AddWatchFlags::IN_MOVE_SELF
        | AddWatchFlags::IN_ONLYDIR
        | AddWatchFlags::IN_DONT_FOLLOW;
    let mut folders: Vec<(PathBuf, bool)> = roots.iter().map(|r| (r.clone(), false)).collect();
    for (path, is_dir) in &items {
        if *is_dir {
            folders.push((path.clone(), true));
        }
        if let Some(parent) = path.parent() {
            folders.push((parent.to_path_buf(), false));
        }
    }
    folders.sort();
    // A folder both protected and a parent is watched for everything.
    folders.dedup_by(|later, earlier| {
        if later.0 == earlier.0 {
            earlier.1 |= later.1;
            true
        } else {
            false
        }
    });
    let mut watched = HashMap::new();
    for (dir, all) in folders {
        if let Ok(wd) = inotify.add_watch(&dir, flags) {
            watched.insert(wd, Watched { dir, all });
        }
    }
    let paths: BTreeSet<PathBuf> = items.into_iter().map(|(p, _)| p).collect();
    // SAFETY: the inotify fd moves into the AsyncFd and stays open for its whole lifetime.
    let fd =
        unsafe { AsyncFd::register_with_interest(Events(inotify), tokio::io::Interest::READABLE) }
            .ok()?;
    Some((fd, watched, paths))
}

fn relevant(
    events: &[nix::sys::inotify::InotifyEvent],
    watched: &HashMap<WatchDescriptor, Watched>,
    items: &BTreeSet<PathBuf>,
) -> bool {
    events.iter().any(|event| {
        if event.mask.contains(AddWatchFlags::IN_Q_OVERFLOW) {
            return true;
        }
        let Some(w) = watched.get(&event.wd) else {
            return false;
        };
        if w.all {
            return true;
        }
        let Some(name) = &event.name else {
            // The folder itself moved or went away.
            return true;
        };
        let path = w.dir.join(name);
        GIT_NAMES.iter().any(|g| name == *g)
            || name == ".gitconfig"
            || name == ".config"
            || items
                .range(path.clone()..)
                .next()
                .is_some_and(|p| p.starts_with(&path))
    })
}

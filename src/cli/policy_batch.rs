//! `warden policy check --batch FILE`: one command per input line, one JSON decision per output
//! line, in the input's order. With more than one checker the lines are checked in chunks on
//! that many threads, and the answers are written back in order.

use crate::policy::Checker;
use std::collections::BTreeMap;
use std::io::{BufRead, BufWriter, Write};
use std::path::Path;
use std::sync::{mpsc, Mutex};

/// Lines a thread takes at a time: enough that handing them over costs nothing next to
/// checking them (about 10 µs a line), few enough that the first answers come out early.
const CHUNK_LINES: usize = 256;

/// Check every line of `source` (`-` for stdin); the exit code.
pub fn run(mut checkers: Vec<Checker>, source: &Path) -> anyhow::Result<i32> {
    // Send: with several checkers a thread of its own reads the input.
    let mut input: Box<dyn BufRead + Send> = if source == Path::new("-") {
        Box::new(std::io::BufReader::new(std::io::stdin()))
    } else {
        Box::new(std::io::BufReader::new(
            std::fs::File::open(source)
                .map_err(|e| anyhow::anyhow!("cannot read batch file {}: {e}", source.display()))?,
        ))
    };
    let stdout = std::io::stdout();
    let mut out = BufWriter::with_capacity(64 * 1024, stdout.lock());
    if checkers.len() > 1 {
        in_parallel(checkers, input, &mut out)?;
    } else if let Some(checker) = checkers.first_mut() {
        let mut line = Vec::new();
        while read_line(&mut input, &mut line)? {
            answer(checker, &line, &mut out)?;
        }
    }
    out.flush()?;
    Ok(0)
}

/// The next line without its `\n` (and a `\r` before it); false at the end of the input.
fn read_line(input: &mut dyn BufRead, line: &mut Vec<u8>) -> std::io::Result<bool> {
    line.clear();
    if input.read_until(b'\n', line)? == 0 {
        return Ok(false);
    }
    if line.last() == Some(&b'\n') {
        line.pop();
        if line.last() == Some(&b'\r') {
            line.pop();
        }
    }
    Ok(true)
}

/// One line's answer. An empty line gets a deny too, so outputs stay aligned with inputs; so
/// does a line that is not valid UTF-8 (it is denied with the reason; the batch goes on).
fn answer(checker: &mut Checker, line: &[u8], out: &mut impl Write) -> std::io::Result<()> {
    match std::str::from_utf8(line) {
        Ok(line) => checker.check(line).write_json(&mut *out)?,
        Err(e) => serde_json::to_writer(
            &mut *out,
            &serde_json::json!({
                "decision": "deny",
                "reason": format!(
                    "the line is not valid UTF-8 (byte {} of the line): a command must be text",
                    e.valid_up_to()
                ),
                "commands": [],
            }),
        )?,
    }
    out.write_all(b"\n")
}

/// The lines of the input in chunks: each thread checks whole chunks with its own checker, and
/// the answers are written in input order. At most a few chunks per thread are read ahead or
/// waiting to be written, so a large input never sits in memory.
fn in_parallel(
    checkers: Vec<Checker>,
    input: Box<dyn BufRead + Send>,
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let in_flight = checkers.len() * 4;
    // A chunk read takes a slot; writing its answers gives the slot back.
    let (slot_back, slots) = mpsc::sync_channel::<()>(in_flight);
    for _ in 0..in_flight {
        slot_back.send(()).ok();
    }
    // As deep as the slots: handing out a chunk never blocks, so the reader cannot wait on
    // threads that have stopped.
    let (work, chunks) = mpsc::sync_channel::<(usize, Vec<Vec<u8>>)>(in_flight);
    let chunks = Mutex::new(chunks);
    let (done, answers) = mpsc::channel::<(usize, Result<Vec<u8>, String>)>();
    std::thread::scope(|scope| -> anyhow::Result<()> {
        for mut checker in checkers {
            let (chunks, done) = (&chunks, done.clone());
            // A thread that cannot start is an error, not a panic; those already started stop
            // when this closure returns and `work` goes with it.
            let thread = std::thread::Builder::new().name("batch check".into());
            thread
                .spawn_scoped(scope, move || loop {
                    let next = chunks
                        .lock()
                        .map_err(|_| ())
                        .and_then(|c| c.recv().map_err(|_| ()));
                    let Ok((index, lines)) = next else { break };
                    let checked = check_chunk(&mut checker, index, &lines);
                    let failed = checked.is_err();
                    if done.send((index, checked)).is_err() || failed {
                        break;
                    }
                })
                .map_err(|e| anyhow::anyhow!("could not start a thread to check the batch: {e}"))?;
        }
        drop(done);
        let reader = scope.spawn(move || read_chunks(input, &slots, &work));
        // On an error the channels go with this call, and the reader and the threads stop.
        let written = write_in_order(answers, slot_back, out);
        let read = reader
            .join()
            .map_err(|_| anyhow::anyhow!("the batch's reader thread panicked"))?;
        written?;
        Ok(read?)
    })
}

/// One chunk's answers. A panic stops the batch (as it would without threads) instead of
/// leaving a gap the writer would wait on forever.
fn check_chunk(checker: &mut Checker, index: usize, lines: &[Vec<u8>]) -> Result<Vec<u8>, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut text = Vec::with_capacity(lines.len() * 128);
        for line in lines {
            // Writing to a Vec cannot fail.
            answer(checker, line, &mut text).ok();
        }
        text
    }))
    .map_err(|_| {
        format!(
            "the check of line {} to {} panicked",
            index * CHUNK_LINES + 1,
            index * CHUNK_LINES + lines.len()
        )
    })
}

/// Write each chunk's answers once those of every chunk before it are out.
fn write_in_order(
    answers: mpsc::Receiver<(usize, Result<Vec<u8>, String>)>,
    slot_back: mpsc::SyncSender<()>,
    out: &mut impl Write,
) -> std::io::Result<()> {
    let mut waiting = BTreeMap::new();
    let mut next = 0;
    for (index, checked) in answers {
        waiting.insert(index, checked.map_err(std::io::Error::other)?);
        while let Some(text) = waiting.remove(&next) {
            out.write_all(&text)?;
            next += 1;
            // The reader may have stopped (end of input); the slot is not needed then.
            slot_back.send(()).ok();
        }
    }
    Ok(())
}

/// Read the input into chunks of lines and hand them out, each once a slot is free. Stops
/// early when the writer has gone (its error is the one reported).
fn read_chunks(
    mut input: Box<dyn BufRead + Send>,
    slots: &mpsc::Receiver<()>,
    work: &mpsc::SyncSender<(usize, Vec<Vec<u8>>)>,
) -> std::io::Result<()> {
    let mut line = Vec::new();
    for index in 0.. {
        if slots.recv().is_err() {
            return Ok(());
        }
        let mut lines = Vec::with_capacity(CHUNK_LINES);
        while lines.len() < CHUNK_LINES && read_line(&mut *input, &mut line)? {
            lines.push(std::mem::take(&mut line));
        }
        if lines.is_empty() || work.send((index, lines)).is_err() {
            return Ok(());
        }
    }
    Ok(())
}

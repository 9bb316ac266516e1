//! `GET /v1/runs/{id}/events`: a run's live events as server-sent events (see [`super::events`]).
//! The stream starts with the run's `status`, then `progress`, `tool_start`, `approval`,
//! `tool_end`, `text` (the answer as it streams)… and ends with the final `status`.

use super::events::PendingApproval;
use super::events::RunEvent;
use super::events::{lagged, sse, status};
use super::routes::{ApiError, Shared};
use super::runs::RunView;
use super::Api;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use std::convert::Infallible;
use std::time::Duration;
use tokio::sync::{broadcast, mpsc};

/// How often a stream checks that its run has not ended unseen (cancelled while queued).
const RECHECK: Duration = Duration::from_secs(1);

pub async fn run_events(State(api): Shared, Path(id): Path<String>) -> Result<Response, ApiError> {
    let id: i64 = id
        .parse()
        .map_err(|_| ApiError::new(StatusCode::NOT_FOUND, format!("no run {id:?}")))?;
    // Listen before reading the status: nothing that happens in between is missed.
    let events = api.hub.subscribe(id);
    let Some(run) = api.run(id)? else {
        drop(events);
        api.hub.forget_unheard(id);
        return Err(ApiError::new(StatusCode::NOT_FOUND, format!("no run {id}")));
    };
    let (tx, rx) = mpsc::channel::<Event>(64);
    tokio::spawn(async move {
        forward(&api, id, run, events, tx).await;
        // A run that never started has nobody else to remove its channel.
        api.hub.forget_unheard(id);
    });
    let stream = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|event| (Ok::<_, Infallible>(event), rx))
    });
    Ok(Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response())
}

/// Send the stream's events until the run's final status (or until the client leaves).
async fn forward(
    api: &Api,
    id: i64,
    run: RunView,
    mut events: broadcast::Receiver<RunEvent>,
    tx: mpsc::Sender<Event>,
) {
    let final_status = run.status.is_final();
    if tx.send(status(&run)).await.is_err() || final_status {
        return;
    }
    let run_id = id.to_string();
    let waiting: Vec<PendingApproval> = api
        .inbox
        .list()
        .into_iter()
        .filter(|a| a.run_id == run_id)
        .collect();
    for approval in waiting {
        if tx.send(sse(&RunEvent::Approval(approval))).await.is_err() {
            return;
        }
    }
    let mut recheck = tokio::time::interval(RECHECK);
    loop {
        let event = tokio::select! {
            received = events.recv() => match received {
                Ok(event) => sse(&event),
                Err(broadcast::error::RecvError::Lagged(missed)) => lagged(missed),
                Err(broadcast::error::RecvError::Closed) => break,
            },
            _ = recheck.tick() => match api.run(id) {
                Ok(Some(run)) if run.status.is_final() => break,
                _ => continue,
            },
            _ = tx.closed() => return,
        };
        if tx.send(event).await.is_err() {
            return;
        }
    }
    drop(events);
    // The agent is done; its answer is stored a moment later.
    for _ in 0..200 {
        match api.run(id) {
            Ok(Some(run)) if run.status.is_final() => {
                let _ = tx.send(status(&run)).await;
                return;
            }
            Ok(Some(_)) => tokio::time::sleep(Duration::from_millis(50)).await,
            _ => return,
        }
    }
}

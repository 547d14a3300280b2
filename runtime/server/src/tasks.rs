//! Tasks quiver hands its own clients (2026-07-28's tasks extension, SEP-2663): a client that
//! declared the extension and calls an upstream tool its server runs as a task gets a task at
//! once instead of waiting on the call; it polls `tasks/get`, answers what the call asks of it
//! (`inputRequests`) with `tasks/update`, and may `tasks/cancel` it.
//!
//! The call runs on the replica that was asked for it; the task's state is kept in the shared
//! state store ([`StateStore`] records, signed on Redis), written only by that replica, so
//! `tasks/get` is answered alike by every replica. A client's answers and a cancellation are
//! records of their own, which the running call takes up: nothing is written twice by two
//! replicas. A task is its caller's: another user's `tasks/get` of its id is told no such task
//! exists.
//!
//! Must not depend on: the HTTP transport (the caller is named by the server).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use quiver_runtime::state::StateStore;
use rmcp::model::{
    CallToolResult, DetailedTask, InputRequest, InputRequests, InputResponses, Task, TaskPayload,
    TaskStatus,
};
use rmcp::ErrorData as McpError;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

/// How often a running task looks for its client's answers and for a cancellation.
const WATCH_EVERY: Duration = Duration::from_millis(100);

/// How long a task's final state is kept for its client to read, past the call's own timeout.
pub(crate) const KEPT_AFTER: Duration = Duration::from_secs(300);

/// The poll interval quiver suggests to its clients.
const POLL_INTERVAL_MS: u64 = 500;

/// The tasks this process runs, by id: a replica told to stop lets them end, and says so of
/// those that did not in time ([`wind_down`]).
static RUNNING: std::sync::LazyLock<Mutex<HashMap<String, Weak<TaskRun>>>> =
    std::sync::LazyLock::new(Default::default);

/// Waits, at most `within`, for the tasks this process runs to end; those still running are
/// ended `failed`, saying the replica stopped, so their clients (polling any replica) hear it
/// now instead of at the task's expiry.
pub(crate) async fn wind_down(within: Duration) {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        let running: Vec<Arc<TaskRun>> = {
            let mut running = RUNNING.lock().unwrap_or_else(|e| e.into_inner());
            running.retain(|_, run| run.strong_count() > 0);
            running.values().filter_map(Weak::upgrade).collect()
        };
        if running.is_empty() {
            return;
        }
        if tokio::time::Instant::now() >= deadline {
            tracing::warn!(tasks = running.len(), "stopping with tasks still running");
            for run in running {
                let stopped = McpError::internal_error(
                    "the quiver replica running this task stopped before it ended; call the \
                     tool again",
                    None,
                );
                run.end(Ending::Failed(stopped)).await;
            }
            return;
        }
        tokio::time::sleep(WATCH_EVERY).await;
    }
}

/// What is kept of a task: whose it is, and its state as `tasks/get` answers it.
#[derive(Serialize, Deserialize)]
struct Record {
    owner: String,
    task: DetailedTask,
}

fn task_key(id: &str) -> String {
    format!("tasks:{id}")
}

fn answer_key(id: &str, key: &str) -> String {
    format!("tasks:{id}:answer:{key}")
}

fn cancel_key(id: &str) -> String {
    format!("tasks:{id}:cancel")
}

/// The protocol's answer to a task id its caller does not have (unknown, expired, or
/// another user's: the same answer, so an id says nothing of others' tasks).
fn unknown_task(id: &str) -> McpError {
    McpError::invalid_params(
        format!("no task `{id}`: it is unknown, or ended long enough ago to be forgotten"),
        None,
    )
}

fn unavailable(e: String) -> McpError {
    McpError::internal_error(format!("the task's state cannot be reached now: {e}"), None)
}

/// The tasks of every caller, in the shared state.
pub(crate) struct Tasks {
    state: Arc<dyn StateStore>,
}

impl Tasks {
    pub(crate) fn new(state: Arc<dyn StateStore>) -> Self {
        Self { state }
    }

    async fn record(&self, id: &str, owner: &str) -> Result<Record, McpError> {
        let kept = self.state.record_get(&task_key(id)).await.map_err(unavailable)?;
        kept.and_then(|json| serde_json::from_str::<Record>(&json).ok())
            .filter(|record| record.owner == owner)
            .ok_or_else(|| unknown_task(id))
    }

    /// `tasks/get`.
    pub(crate) async fn get(&self, id: &str, owner: &str) -> Result<DetailedTask, McpError> {
        Ok(self.record(id, owner).await?.task)
    }

    /// `tasks/update`: each answer to a request the task has outstanding is handed to it;
    /// others (unknown keys, answered already) are ignored, as the extension says.
    pub(crate) async fn update(
        &self,
        id: &str,
        owner: &str,
        responses: InputResponses,
    ) -> Result<(), McpError> {
        let record = self.record(id, owner).await?;
        let TaskPayload::InputRequired { input_requests } = &record.task.payload else {
            return Ok(());
        };
        let ttl = kept_for(&record.task);
        for (key, response) in responses {
            if input_requests.contains_key(&key) {
                let json = serde_json::to_string(&response).unwrap_or_default();
                self.state
                    .record_put(&answer_key(id, &key), &json, ttl)
                    .await
                    .map_err(unavailable)?;
            }
        }
        Ok(())
    }

    /// `tasks/cancel`: asks the running call to stop; the task says `cancelled` once it has.
    pub(crate) async fn cancel(&self, id: &str, owner: &str) -> Result<(), McpError> {
        let record = self.record(id, owner).await?;
        if !record.task.status().is_terminal() {
            let ttl = kept_for(&record.task);
            self.state.record_put(&cancel_key(id), "1", ttl).await.map_err(unavailable)?;
        }
        Ok(())
    }

    /// Makes a task for `owner`, kept for `ttl`: written before its client hears of it, so its
    /// first `tasks/get` (on any replica) finds it.
    pub(crate) async fn start(&self, owner: &str, ttl: Duration) -> Result<Arc<TaskRun>, McpError> {
        let id = quiver_runtime::accounts::random_token();
        let now = rmcp::task_manager::current_timestamp();
        let mut task = Task::new(id.clone(), TaskStatus::Working, now.clone(), now);
        task.ttl_ms = Some(u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX));
        task.poll_interval_ms = Some(POLL_INTERVAL_MS);
        let run = TaskRun {
            id,
            owner: owner.to_owned(),
            state: Arc::clone(&self.state),
            now: Mutex::new(Now { task, outstanding: BTreeMap::new(), end: None }),
            writing: tokio::sync::Mutex::new(()),
            asked: std::sync::atomic::AtomicUsize::new(0),
            cancel: CancellationToken::new(),
        };
        run.write().await?;
        let run = Arc::new(run);
        RUNNING
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(run.id.clone(), Arc::downgrade(&run));
        tokio::spawn(watch_for_cancellation(Arc::downgrade(&run)));
        Ok(run)
    }
}

/// Looks for the client's `tasks/cancel` (made at any replica) while the task runs, and
/// cancels the task's token when it comes: the one place the store is asked.
async fn watch_for_cancellation(run: Weak<TaskRun>) {
    loop {
        tokio::time::sleep(WATCH_EVERY).await;
        let Some(run) = run.upgrade() else { return };
        if run.now.lock().unwrap_or_else(|e| e.into_inner()).end.is_some() {
            return;
        }
        if run.cancel_asked().await {
            run.cancel.cancel();
            return;
        }
    }
}

/// `value` as a JSON object (a result's, an error's), empty if it is not one.
fn as_object(value: &impl Serialize) -> serde_json::Map<String, Value> {
    match serde_json::to_value(value) {
        Ok(Value::Object(object)) => object,
        _ => Default::default(),
    }
}

/// How long what is written of `task` is kept: its time to live from now (a bound; the
/// task's own clock started at its creation).
fn kept_for(task: &DetailedTask) -> Option<Duration> {
    Some(task.task.ttl_ms.map_or(KEPT_AFTER, Duration::from_millis))
}

/// A task's state as its running call sees it.
struct Now {
    task: Task,
    outstanding: InputRequests,
    end: Option<TaskPayload>,
}

/// The running side of one task: the only writer of its state.
pub(crate) struct TaskRun {
    id: String,
    owner: String,
    state: Arc<dyn StateStore>,
    now: Mutex<Now>,
    /// Held while the state is written, so writes land in the order of the changes they carry.
    writing: tokio::sync::Mutex<()>,
    /// Requests asked so far: keys are never used twice in one task.
    asked: std::sync::atomic::AtomicUsize,
    /// Cancelled when the client cancels the task: the call's own cancellation.
    cancel: CancellationToken,
}

impl TaskRun {
    /// The task as its client is first told of it.
    pub(crate) fn task(&self) -> Task {
        self.now.lock().unwrap_or_else(|e| e.into_inner()).task.clone()
    }

    fn snapshot(&self) -> DetailedTask {
        let now = self.now.lock().unwrap_or_else(|e| e.into_inner());
        let payload = match (&now.end, now.outstanding.is_empty()) {
            (Some(end), _) => end.clone(),
            (None, false) => TaskPayload::InputRequired { input_requests: now.outstanding.clone() },
            (None, true) => TaskPayload::Working,
        };
        DetailedTask::new(now.task.clone(), payload)
    }

    /// Writes the task's latest state (whatever change asked for the write).
    async fn write(&self) -> Result<(), McpError> {
        let _order = self.writing.lock().await;
        let record = Record { owner: self.owner.clone(), task: self.snapshot() };
        let json = serde_json::to_string(&record)
            .map_err(|e| McpError::internal_error(format!("task state: {e}"), None))?;
        let ttl = kept_for(&record.task);
        self.state.record_put(&task_key(&self.id), &json, ttl).await.map_err(unavailable)
    }

    async fn changed(&self) {
        self.now.lock().unwrap_or_else(|e| e.into_inner()).task.last_updated_at =
            rmcp::task_manager::current_timestamp();
        if let Err(e) = self.write().await {
            tracing::warn!(task = %self.id, "could not keep a task's state: {}", e.message);
        }
    }

    /// The call's latest word on how it goes (an upstream's progress message), kept as the
    /// task's status message. Each write carries the latest state, so the last word is kept
    /// whatever order the writes run in.
    pub(crate) fn say(self: &Arc<Self>, message: String) {
        {
            let mut now = self.now.lock().unwrap_or_else(|e| e.into_inner());
            if now.task.status_message.as_deref() == Some(message.as_str()) || now.end.is_some() {
                return;
            }
            now.task.status_message = Some(message);
        }
        let run = Arc::clone(self);
        tokio::spawn(async move { run.changed().await });
    }

    /// Whether the client asked to cancel the task.
    pub(crate) async fn cancel_asked(&self) -> bool {
        matches!(self.state.record_get(&cancel_key(&self.id)).await, Ok(Some(_)))
    }

    /// The task's cancellation: cancelled once its client cancels it.
    pub(crate) fn cancellation(&self) -> CancellationToken {
        self.cancel.clone()
    }

    /// Asks the client `requests` (keyed as the asker keyed them) through `tasks/get`, and
    /// waits for every answer from `tasks/update`; `None` when the task is cancelled first.
    pub(crate) async fn ask(&self, requests: InputRequests) -> Option<InputResponses> {
        let round = self.asked.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        // The task's keys are unique over its life; the asker's may repeat from round to round.
        let keys: Vec<(String, String)> =
            requests.keys().map(|key| (format!("{round}.{key}"), key.clone())).collect();
        {
            let mut now = self.now.lock().unwrap_or_else(|e| e.into_inner());
            for ((ours, _), request) in keys.iter().zip(requests.into_values()) {
                now.outstanding.insert(ours.clone(), request);
            }
        }
        self.changed().await;
        let mut answers = InputResponses::new();
        while answers.len() < keys.len() {
            for (ours, theirs) in &keys {
                if answers.contains_key(theirs) {
                    continue;
                }
                if let Ok(Some(json)) = self.state.record_take(&answer_key(&self.id, ours)).await {
                    let answer = serde_json::from_str(&json).unwrap_or(Value::Null);
                    answers.insert(theirs.clone(), answer);
                    self.now.lock().unwrap_or_else(|e| e.into_inner()).outstanding.remove(ours);
                    self.changed().await;
                }
            }
            if answers.len() < keys.len() {
                tokio::select! {
                    () = self.cancel.cancelled() => return None,
                    () = tokio::time::sleep(WATCH_EVERY) => {}
                }
            }
        }
        Some(answers)
    }

    /// Asks the client one request within the call (an upstream's `method`: elicitation,
    /// sampling or roots) and reads its answer as `T`.
    pub(crate) async fn ask_one<T: serde::de::DeserializeOwned>(
        &self,
        method: &str,
        params: Option<Value>,
    ) -> Result<T, McpError> {
        let mut request = serde_json::json!({ "method": method });
        if let Some(params) = params {
            request["params"] = params;
        }
        let request = serde_json::from_value::<InputRequest>(request).map_err(|e| {
            McpError::invalid_params(format!("`{method}` cannot be asked within a task: {e}"), None)
        })?;
        let asked = self.ask(InputRequests::from([("request".to_owned(), request)])).await;
        let answer = asked.and_then(|a| a.into_values().next()).ok_or_else(|| {
            McpError::internal_error("the task was cancelled before the client answered", None)
        })?;
        serde_json::from_value(answer).map_err(|e| {
            McpError::invalid_params(format!("the client's answer to `{method}`: {e}"), None)
        })
    }

    /// Ends the task: `completed` with the call's result (an error result too, as the
    /// extension says), `failed` with a protocol error, or `cancelled`.
    pub(crate) async fn end(&self, outcome: Ending) {
        let end = match outcome {
            Ending::Result(result) => TaskPayload::Completed { result: as_object(&result) },
            Ending::Failed(error) => TaskPayload::Failed { error: as_object(&error) },
            Ending::Cancelled => TaskPayload::Cancelled,
        };
        {
            let mut now = self.now.lock().unwrap_or_else(|e| e.into_inner());
            // Ended once: by its call, or by a replica stopping first.
            if now.end.is_some() {
                return;
            }
            now.outstanding.clear();
            now.end = Some(end);
        }
        RUNNING.lock().unwrap_or_else(|e| e.into_inner()).remove(&self.id);
        self.changed().await;
        let _ = self.state.record_delete(&cancel_key(&self.id)).await;
    }
}

/// How a task's call ended.
pub(crate) enum Ending {
    Result(CallToolResult),
    Failed(McpError),
    Cancelled,
}

#[cfg(test)]
mod tests {
    use super::*;
    use quiver_runtime::state::MemoryState;
    use serde_json::json;

    fn tasks() -> Tasks {
        Tasks::new(Arc::new(MemoryState::new(4)))
    }

    fn question() -> InputRequests {
        let request = json!({"method": "elicitation/create", "params": {
            "message": "Which Python?", "requestedSchema": {"type": "object", "properties": {}}
        }});
        InputRequests::from([("topic".to_owned(), serde_json::from_value(request).unwrap())])
    }

    /// Polls until the task is asking something: its outstanding keys.
    async fn asked(tasks: &Tasks, id: &str) -> Vec<String> {
        loop {
            if let TaskPayload::InputRequired { input_requests } =
                tasks.get(id, "alice").await.unwrap().payload
            {
                return input_requests.into_keys().collect();
            }
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test]
    async fn a_task_is_read_and_answered_by_its_owner_alone() {
        let tasks = tasks();
        let run = tasks.start("alice", Duration::from_secs(60)).await.unwrap();
        let id = run.task().task_id;
        assert_eq!(tasks.get(&id, "alice").await.unwrap().status(), TaskStatus::Working);
        let refused = tasks.get(&id, "bob").await.unwrap_err();
        assert_eq!(refused.code, rmcp::model::ErrorCode::INVALID_PARAMS);
        assert!(tasks.cancel(&id, "bob").await.is_err());
        assert!(!run.cancel_asked().await, "another user cannot cancel it");
    }

    #[tokio::test]
    async fn answers_reach_the_running_call_by_the_askers_keys_and_others_are_ignored() {
        let tasks = tasks();
        let run = tasks.start("alice", Duration::from_secs(60)).await.unwrap();
        let id = run.task().task_id;
        let asking = tokio::spawn({
            let run = Arc::clone(&run);
            async move { run.ask(question()).await }
        });
        let keys = asked(&tasks, &id).await;
        assert_eq!(keys, ["0.topic"]);
        let answer = json!({"action": "accept", "content": {"which": "the language"}});
        let responses = InputResponses::from([
            ("0.topic".to_owned(), answer.clone()),
            ("made-up".to_owned(), json!({"action": "decline"})),
        ]);
        tasks.update(&id, "alice", responses).await.unwrap();
        let answers = asking.await.unwrap().expect("answered");
        assert_eq!(answers, InputResponses::from([("topic".to_owned(), answer)]));
        assert_eq!(tasks.get(&id, "alice").await.unwrap().status(), TaskStatus::Working);
        // The next round's keys are new, though the asker's are the same.
        let again = tokio::spawn({
            let run = Arc::clone(&run);
            async move { run.ask(question()).await }
        });
        assert_eq!(asked(&tasks, &id).await, ["1.topic"]);
        tasks.cancel(&id, "alice").await.unwrap();
        assert!(again.await.unwrap().is_none(), "a cancelled task stops waiting");
        run.end(Ending::Cancelled).await;
        let ended = tasks.get(&id, "alice").await.unwrap();
        assert_eq!(ended.status(), TaskStatus::Cancelled);
    }

    #[tokio::test]
    async fn a_finished_task_keeps_its_result_and_its_last_status() {
        let tasks = tasks();
        let run = tasks.start("alice", Duration::from_secs(60)).await.unwrap();
        let id = run.task().task_id;
        run.say("Analyzing content...".to_owned());
        let result = CallToolResult::success(vec![rmcp::model::ContentBlock::text("the report")]);
        run.end(Ending::Result(result)).await;
        // A word said after the end changes nothing.
        run.say("late".to_owned());
        let ended = tasks.get(&id, "alice").await.unwrap();
        assert_eq!(ended.status(), TaskStatus::Completed);
        assert_eq!(ended.task.status_message.as_deref(), Some("Analyzing content..."));
        let TaskPayload::Completed { result } = ended.payload else { unreachable!() };
        assert!(Value::Object(result).to_string().contains("the report"));
        // Cancelling a task that ended is acknowledged and changes nothing.
        tasks.cancel(&id, "alice").await.unwrap();
        assert_eq!(tasks.get(&id, "alice").await.unwrap().status(), TaskStatus::Completed);
    }
}

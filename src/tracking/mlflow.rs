//! MLflow tracking over its REST API (`--mlflow URI`, or `MLFLOW_TRACKING_URI`): an experiment
//! named after the job (or `--experiment`), a run with the resolved config as flattened
//! params, each epoch's scalars in one `runs/log-batch`, tags, the run's files as artifacts
//! (through the server's artifact proxy), and the final status.
//!
//! Tracking never costs a run: requests go from a thread of their own, off the step path, each
//! bounded in time. The first failure (a server that is down, slow, or answers an error) prints
//! one warning line and ends tracking for the run; training goes on, and `summary.json` records
//! what failed.

use crate::record::EpochRecord;
use serde::Serialize;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Set by `ember sweep run` for its trials' processes: the sweep's name, which an MLflow run
/// takes as its experiment (unless `--experiment` says otherwise) and as a tag.
pub const SWEEP_NAME_ENV: &str = "EMBER_SWEEP";

/// A connection's and a small request's time limit, and how long an upload may stall: a
/// server that accepts connections and never answers holds a run up by this much at most (the
/// first failure ends tracking).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// How long the end of a run waits for the last requests.
const FINISH_WAIT: Duration = Duration::from_secs(180);
/// MLflow's limit on params per `log-batch`.
const PARAMS_PER_BATCH: usize = 100;
/// MLflow keeps a param value up to 6000 characters; ember's longer ones (a category's level
/// list) are cut to this.
const MAX_PARAM_CHARS: usize = 500;

/// What a run tells MLflow when it starts.
pub struct RunStart {
    pub uri: String,
    pub experiment: String,
    pub run_name: String,
    pub params: Vec<(String, String)>,
    pub tags: Vec<(String, String)>,
}

/// How a run ended, in MLflow's words.
#[derive(Debug, Clone, Copy)]
pub enum Status {
    Finished,
    Failed,
    Killed,
}

impl Status {
    fn name(self) -> &'static str {
        match self {
            Status::Finished => "FINISHED",
            Status::Failed => "FAILED",
            Status::Killed => "KILLED",
        }
    }
}

/// What `summary.json` records of the tracking.
#[derive(Debug, Clone, Serialize, serde::Deserialize, PartialEq)]
pub struct Outcome {
    pub uri: String,
    pub experiment_id: Option<String>,
    pub run_id: Option<String>,
    /// The first failure; tracking stopped there.
    pub error: Option<String>,
}

enum Message {
    Epoch(EpochRecord),
    Finish(Status, Vec<PathBuf>),
}

/// A run's tracker: a sender to the thread that talks to the server.
pub struct Tracker {
    to_worker: Sender<Message>,
    outcome: std::sync::Mutex<Receiver<Outcome>>,
    uri: String,
}

impl Tracker {
    /// Starts the run on the server, from a thread of its own.
    pub fn start(run: RunStart) -> Tracker {
        let (to_worker, messages) = channel();
        let (report, outcome) = channel();
        let uri = run.uri.clone();
        std::thread::spawn(move || {
            let mut client = Client::new(&run.uri);
            let _ = report.send(client.serve(&run, messages));
        });
        Tracker {
            to_worker,
            outcome: std::sync::Mutex::new(outcome),
            uri,
        }
    }

    /// Logs one epoch (returns at once).
    pub fn epoch(&self, record: &EpochRecord) {
        let _ = self.to_worker.send(Message::Epoch(*record));
    }

    /// Uploads `artifacts` that exist, sets the status and waits (boundedly) for the requests.
    pub fn finish(&self, status: Status, artifacts: Vec<PathBuf>) -> Outcome {
        let _ = self.to_worker.send(Message::Finish(status, artifacts));
        let outcome = self.outcome.lock().expect("tracker lock");
        outcome.recv_timeout(FINISH_WAIT).unwrap_or_else(|_| {
            let error = format!("no answer within {} s", FINISH_WAIT.as_secs());
            warn(&format!("{}: {error}", self.uri));
            Outcome {
                uri: self.uri.clone(),
                experiment_id: None,
                run_id: None,
                error: Some(error),
            }
        })
    }
}

fn warn(why: &str) {
    eprintln!("warning: MLflow tracking stopped for this run ({why}); training goes on");
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// The requests of one run, made in order on the worker thread.
struct Client {
    base: String,
    agent: ureq::Agent,
    outcome: Outcome,
}

impl Client {
    fn new(uri: &str) -> Client {
        // No overall limit for an upload (a large model on a slow link takes its time), but
        // no read or write may wait longer than a small request may take.
        let agent = ureq::AgentBuilder::new()
            .timeout_connect(REQUEST_TIMEOUT)
            .timeout_read(REQUEST_TIMEOUT)
            .timeout_write(REQUEST_TIMEOUT)
            .build();
        Client {
            base: uri.trim_end_matches('/').to_string(),
            agent,
            outcome: Outcome {
                uri: uri.to_string(),
                experiment_id: None,
                run_id: None,
                error: None,
            },
        }
    }

    /// Runs until the finish message (or the tracker is dropped); stops requesting at the
    /// first failure.
    fn serve(&mut self, run: &RunStart, messages: Receiver<Message>) -> Outcome {
        let mut ok = self.begin(run).map_err(|e| self.fail(e)).is_ok();
        for message in messages {
            let finish = matches!(message, Message::Finish(..));
            if ok {
                let result = match message {
                    Message::Epoch(r) => self.log_epoch(&r),
                    Message::Finish(status, files) => self.end(status, &files),
                };
                ok = result.map_err(|e| self.fail(e)).is_ok();
            }
            if finish {
                break;
            }
        }
        self.outcome.clone()
    }

    fn fail(&mut self, error: String) {
        warn(&format!("{}: {error}", self.base));
        self.outcome.error = Some(error);
    }

    fn post(&self, path: &str, body: Value) -> Result<Value, String> {
        let url = format!("{}/api/2.0/mlflow/{path}", self.base);
        let response = self
            .agent
            .post(&url)
            .timeout(REQUEST_TIMEOUT)
            .send_json(body)
            .map_err(|e| describe(path, e))?;
        response
            .into_json()
            .map_err(|e| format!("{path}: not JSON ({e})"))
    }

    /// The experiment's id, made if it does not exist; then a new run with the params.
    fn begin(&mut self, run: &RunStart) -> Result<(), String> {
        let experiment = self.experiment(&run.experiment)?;
        let tags: Vec<Value> = run
            .tags
            .iter()
            .map(|(k, v)| json!({"key": k, "value": v}))
            .collect();
        let mut body = json!({"experiment_id": experiment, "start_time": now_ms(), "tags": tags});
        if !run.run_name.is_empty() {
            body["run_name"] = json!(run.run_name);
        }
        let created = self.post("runs/create", body)?;
        let run_id = created["run"]["info"]["run_id"]
            .as_str()
            .ok_or("runs/create: no run_id in the answer")?
            .to_string();
        self.outcome.experiment_id = Some(experiment);
        self.outcome.run_id = Some(run_id.clone());
        for chunk in run.params.chunks(PARAMS_PER_BATCH) {
            let params: Vec<Value> = chunk
                .iter()
                .map(|(k, v)| json!({"key": key(k), "value": cut(v)}))
                .collect();
            self.post(
                "runs/log-batch",
                json!({"run_id": run_id, "params": params}),
            )?;
        }
        Ok(())
    }

    /// The id of experiment `name`, made if it does not exist. The replicas of a sweep start
    /// their runs at once: when another made it first, its id is read again.
    fn experiment(&self, name: &str) -> Result<String, String> {
        match self.find_or_create(name) {
            Err(e) if e.contains("RESOURCE_ALREADY_EXISTS") || e.contains("already exists") => {
                self.find_or_create(name)
            }
            found => found,
        }
    }

    fn find_or_create(&self, name: &str) -> Result<String, String> {
        let url = format!("{}/api/2.0/mlflow/experiments/get-by-name", self.base);
        let found = self
            .agent
            .get(&url)
            .timeout(REQUEST_TIMEOUT)
            .query("experiment_name", name)
            .call();
        let id = match found {
            Ok(r) => r
                .into_json::<Value>()
                .ok()
                .map(|v| v["experiment"]["experiment_id"].clone()),
            // MLflow answers 404 RESOURCE_DOES_NOT_EXIST for an experiment it does not have.
            Err(ureq::Error::Status(404, _)) => {
                let made = self.post("experiments/create", json!({"name": name}))?;
                Some(made["experiment_id"].clone())
            }
            Err(e) => return Err(describe("experiments/get-by-name", e)),
        };
        id.and_then(|v| v.as_str().map(str::to_string))
            .ok_or_else(|| "experiments: no experiment_id in the answer".to_string())
    }

    fn run_id(&self) -> &str {
        self.outcome.run_id.as_deref().unwrap_or_default()
    }

    fn log_epoch(&self, record: &EpochRecord) -> Result<(), String> {
        let time = now_ms();
        let metrics: Vec<Value> = crate::tracking::events::scalars(record)
            .into_iter()
            .filter(|(_, v)| v.is_finite())
            .map(|(k, v)| json!({"key": k, "value": v, "timestamp": time, "step": record.epoch}))
            .collect();
        self.post(
            "runs/log-batch",
            json!({"run_id": self.run_id(), "metrics": metrics}),
        )
        .map(|_| ())
    }

    fn end(&self, status: Status, files: &[PathBuf]) -> Result<(), String> {
        for file in files.iter().filter(|f| f.is_file()) {
            self.upload(file)?;
        }
        let mut body =
            json!({"run_id": self.run_id(), "status": status.name(), "end_time": now_ms()});
        // The run folder's name, when the run was started without one (no --out).
        let folder = files
            .first()
            .and_then(|f| f.parent())
            .and_then(|d| d.file_name());
        if let Some(name) = folder.and_then(|n| n.to_str()) {
            body["run_name"] = json!(name);
        }
        self.post("runs/update", body).map(|_| ())
    }

    /// `file` into the run's artifacts, through the server's artifact proxy.
    fn upload(&self, file: &std::path::Path) -> Result<(), String> {
        let name = file.file_name().and_then(|n| n.to_str()).unwrap_or("file");
        let bytes = std::fs::read(file).map_err(|e| format!("{}: {e}", file.display()))?;
        let experiment = self.outcome.experiment_id.as_deref().unwrap_or_default();
        let url = format!(
            "{}/api/2.0/mlflow-artifacts/artifacts/{experiment}/{}/artifacts/{name}",
            self.base,
            self.run_id()
        );
        self.agent
            .put(&url)
            .send_bytes(&bytes)
            .map(|_| ())
            .map_err(|e| describe(&format!("artifact {name}"), e))
    }
}

/// A param key as MLflow takes it: alphanumerics, `_`, `-`, `.`, ` `, `:` and `/`, at most 250
/// characters (a column named "Body Mass (g)" becomes "Body Mass _g_").
fn key(name: &str) -> String {
    let allowed = |c: char| c.is_ascii_alphanumeric() || "_-. :/".contains(c);
    let key: String = name
        .chars()
        .map(|c| if allowed(c) { c } else { '_' })
        .collect();
    key.chars().take(250).collect()
}

fn cut(value: &str) -> String {
    match value.char_indices().nth(MAX_PARAM_CHARS) {
        Some((at, _)) => format!("{}…", &value[..at]),
        None => value.to_string(),
    }
}

/// One line for a failed request: the server's own message where it gave one.
fn describe(what: &str, e: ureq::Error) -> String {
    match e {
        ureq::Error::Status(code, response) => {
            let text = response.into_string().unwrap_or_default();
            let message = serde_json::from_str::<Value>(&text)
                .ok()
                .and_then(|v| v["message"].as_str().map(str::to_string))
                .unwrap_or(text);
            let message: String = message.chars().take(200).collect();
            format!("{what}: HTTP {code} {}", message.replace('\n', " "))
        }
        ureq::Error::Transport(t) => format!("{what}: {t}"),
    }
}

/// Starts the MLflow run of a training run of `config` on `device`, when `uri` names a server.
/// A sweep's trial ([`SWEEP_NAME_ENV`] set) goes to the sweep's experiment, tagged with
/// its name.
pub fn start_run(
    config: &crate::config::JobConfig,
    uri: Option<&str>,
    experiment: Option<String>,
    run_name: Option<String>,
    device: crate::device::Device,
) -> Option<std::sync::Arc<Tracker>> {
    let uri = uri.filter(|u| !u.is_empty())?;
    let mut tags = vec![
        (
            "ember.version".to_string(),
            env!("CARGO_PKG_VERSION").to_string(),
        ),
        ("ember.device".into(), device.to_string()),
        ("ember.job".into(), config.name().to_string()),
        ("mlflow.source.name".into(), "ember".into()),
    ];
    if let Some(commit) = option_env!("EMBER_GIT_COMMIT") {
        tags.push(("mlflow.source.git.commit".into(), commit.into()));
    }
    let sweep = std::env::var(SWEEP_NAME_ENV).ok();
    if let Some(s) = &sweep {
        tags.push(("ember.sweep".into(), s.clone()));
    }
    let experiment = experiment
        .or(sweep)
        .unwrap_or_else(|| config.name().to_string());
    Some(std::sync::Arc::new(Tracker::start(RunStart {
        uri: uri.to_string(),
        experiment,
        run_name: run_name.unwrap_or_default(),
        params: params(&config.to_toml()),
        tags,
    })))
}

/// The resolved config as MLflow params: every value under its dotted key, the fitted
/// encodings left out (they are in the `config.toml` artifact).
pub fn params(config_toml: &str) -> Vec<(String, String)> {
    let table: toml::Table = toml::from_str(config_toml).unwrap_or_default();
    let mut out = Vec::new();
    flatten("", &toml::Value::Table(table), &mut out);
    out.retain(|(k, _)| !k.starts_with("data.encoding"));
    out
}

fn flatten(prefix: &str, value: &toml::Value, out: &mut Vec<(String, String)>) {
    match value {
        toml::Value::Table(t) => {
            for (k, v) in t {
                let key = match prefix {
                    "" => k.clone(),
                    _ => format!("{prefix}.{k}"),
                };
                flatten(&key, v, out);
            }
        }
        toml::Value::String(s) => out.push((prefix.to_string(), s.clone())),
        other => out.push((prefix.to_string(), other.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_flatten_the_config_without_encodings() {
        let toml = "seed = 3\n[adam]\nlr = 0.001\n[data]\nlabel = \"y\"\n[[data.encoding]]\ncolumn = \"a\"\nkind = \"numeric\"\nfill = 1.0\n";
        let p = params(toml);
        assert_eq!(
            p,
            [
                ("adam.lr".to_string(), "0.001".to_string()),
                ("data.label".into(), "y".into()),
                ("seed".into(), "3".into()),
            ]
        );
        assert_eq!(cut(&"x".repeat(600)).chars().count(), MAX_PARAM_CHARS + 1);
        assert_eq!(
            key("data.columns.Body Mass (g)"),
            "data.columns.Body Mass _g_"
        );
    }
}

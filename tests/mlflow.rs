//! MLflow tracking against a real server: `mlflow server` on 127.0.0.1 with a SQLite store
//! (from the Python that `EMBER_TEST_PYTHON` names; required under CI=true). A run and a
//! replica sweep are read back through the REST API: params, every metric step, artifacts,
//! tags and status. A server killed mid-run, or never there, costs the run nothing but one
//! warning line.

mod common;

use common::*;
use serde_json::{Value, json};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A tracking server of this test's own, stopped when dropped.
struct Server {
    child: Child,
    uri: String,
}

impl Server {
    /// Kills the server with its workers (`mlflow server` runs uvicorn as a child process,
    /// in the process group the test gave it).
    fn kill(&mut self) {
        // SAFETY: kill(2) on the server's own process group.
        unsafe { libc::kill(-(self.child.id() as i32), libc::SIGKILL) };
        let _ = self.child.wait();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The `mlflow` beside `EMBER_TEST_PYTHON`, or `None` (a skip, which CI does not allow).
fn mlflow_binary() -> Option<PathBuf> {
    let python = test_python(&["mlflow"], "the MLflow tests")?;
    let mlflow = Path::new(&python).with_file_name("mlflow");
    assert!(
        mlflow.is_file(),
        "no mlflow beside EMBER_TEST_PYTHON={python} (pip install mlflow)"
    );
    Some(mlflow)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Starts `mlflow server` with its store in `dir`; waits until it answers.
fn server(dir: &Path) -> Option<Server> {
    let mlflow = mlflow_binary()?;
    let port = free_port();
    let child = Command::new(mlflow)
        .args([
            "server",
            "--host",
            "127.0.0.1",
            "--port",
            &port.to_string(),
            "--workers",
            "1",
        ])
        .arg("--backend-store-uri")
        .arg(format!("sqlite:///{}", dir.join("mlflow.db").display()))
        .arg("--artifacts-destination")
        .arg(dir.join("artifacts"))
        .process_group(0)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.join("server.log")).unwrap())
        .spawn()
        .unwrap();
    let server = Server {
        child,
        uri: format!("http://127.0.0.1:{port}"),
    };
    let start = Instant::now();
    while ureq::get(&format!("{}/health", server.uri)).call().is_err() {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "mlflow server never answered"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    Some(server)
}

fn get(server: &Server, path: &str, query: &[(&str, &str)]) -> Value {
    let mut request = ureq::get(&format!("{}/api/2.0/mlflow/{path}", server.uri));
    for (k, v) in query {
        request = request.query(k, v);
    }
    request.call().unwrap().into_json().unwrap()
}

/// The runs of experiment `name`.
fn runs(server: &Server, name: &str) -> Vec<Value> {
    let experiment = get(
        server,
        "experiments/get-by-name",
        &[("experiment_name", name)],
    );
    let id = experiment["experiment"]["experiment_id"].as_str().unwrap();
    let url = format!("{}/api/2.0/mlflow/runs/search", server.uri);
    let found: Value = ureq::post(&url)
        .send_json(json!({"experiment_ids": [id], "max_results": 100}))
        .unwrap()
        .into_json()
        .unwrap();
    found["runs"].as_array().cloned().unwrap_or_default()
}

/// `key`'s value in a list of {key, value}.
fn entry<'a>(list: &'a Value, key: &str) -> Option<&'a str> {
    list.as_array()?.iter().find(|e| e["key"] == key)?["value"].as_str()
}

/// Checks one MLflow run against the run folder `run`: status, params, tags, every epoch of
/// `loss/valid`, and the artifacts.
fn assert_logged(server: &Server, logged: &Value, run: &Path) {
    let info = &logged["info"];
    assert_eq!(info["status"], "FINISHED", "{logged}");
    let data = &logged["data"];
    let seed = std::fs::read_to_string(run.join("config.toml")).unwrap();
    let seed = seed.lines().find(|l| l.starts_with("seed = ")).unwrap();
    assert_eq!(
        entry(&data["params"], "seed"),
        Some(&seed["seed = ".len()..])
    );
    assert_eq!(
        entry(&data["tags"], "ember.version"),
        Some(env!("CARGO_PKG_VERSION"))
    );
    let run_id = info["run_id"].as_str().unwrap();
    let history = get(
        server,
        "metrics/get-history",
        &[("run_id", run_id), ("metric_key", "loss/valid")],
    );
    let got: Vec<(u64, f64)> = history["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["step"].as_u64().unwrap_or(0),
                m["value"].as_f64().unwrap(),
            )
        })
        .collect();
    let want: Vec<(u64, f64)> = losses(run)
        .iter()
        .enumerate()
        .map(|(i, l)| (i as u64 + 1, l.1))
        .collect();
    assert_eq!(got, want, "loss/valid");
    let listed = get(server, "artifacts/list", &[("run_id", run_id)]);
    let files: Vec<&str> = listed["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    for f in ["config.toml", "curves.png", "model.safetensors"] {
        assert!(files.contains(&f), "{f} not in {files:?}");
    }
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["mlflow"]["run_id"], run_id);
    assert_eq!(summary["mlflow"]["error"], Value::Null);
}

#[test]
fn a_run_and_a_replica_sweep_are_logged_and_read_back() {
    let dir = scratch("mlflow");
    let Some(server) = server(&dir) else { return };
    let table = root().join("examples/penguins-raw.csv");
    let out = ember(&["init", "--csv", path_str(&table), "--label", "Species"]);
    ok(&out);
    let cfg = config(&dir, "species.toml", &common::with_epochs(&stdout(&out), 3));
    let run = dir.join("species");
    let o = train_on_cpu(
        &cfg,
        &run,
        &[
            "--mlflow",
            server.uri.as_str(),
            "--experiment",
            "ember-test",
        ],
    );
    ok(&o);
    assert!(!stderr(&o).contains("warning"), "{}", stderr(&o));
    let logged = runs(&server, "ember-test");
    assert_eq!(logged.len(), 1);
    assert_logged(&server, &logged[0], &run);
    assert_eq!(logged[0]["info"]["run_name"], "species");

    // A sweep's trials: runs of the experiment named after the sweep, tagged with it.
    config(
        &dir,
        "base.toml",
        "job = \"tabular-mlp\"\nepochs = 2\nmax_train_rows = 4000\nmax_valid_rows = 1000\n[sgd]\nlr = 0.1\n",
    );
    let sweep = config(
        &dir,
        "seeds.toml",
        "base = \"base.toml\"\nname = \"seeds\"\nseeds = [1, 2]\n",
    );
    let out_dir = dir.join("sweep");
    let o = ember(&[
        "--threads",
        "2",
        "sweep",
        "run",
        path_str(&sweep),
        "--out",
        path_str(&out_dir),
        "--device",
        "cpu",
        "--mlflow",
        server.uri.as_str(),
    ]);
    ok(&o);
    let logged = runs(&server, "seeds");
    assert_eq!(logged.len(), 2, "{logged:?}");
    for l in &logged {
        let name = l["info"]["run_name"].as_str().unwrap();
        assert_eq!(entry(&l["data"]["tags"], "ember.sweep"), Some("seeds"));
        assert_logged(&server, l, &out_dir.join(name));
    }
}

#[test]
fn a_server_killed_mid_run_or_never_there_costs_the_run_nothing() {
    let dir = scratch("mlflow-killed");
    let Some(mut server) = server(&dir) else {
        return;
    };
    let cfg = config(
        &dir,
        "small.toml",
        "job = \"fashion-mlp\"\nepochs = 6\nbatch_size = 64\n[adam]\nlr = 1e-3\n",
    );
    let run = dir.join("run");
    let mut args = train_each_epoch_checkpointed(path_str(&cfg), path_str(&run));
    args.extend(["--mlflow", server.uri.as_str()]);
    let child = spawn(&args);
    wait_for(
        &run.join("checkpoint/epoch-1.json"),
        Duration::from_secs(120),
    );
    server.kill();
    let o = child.wait_with_output().unwrap();
    ok(&o);
    let err = stderr(&o);
    let warnings = err
        .lines()
        .filter(|l| l.starts_with("warning: MLflow"))
        .count();
    assert_eq!(warnings, 1, "{err}");
    assert_eq!(losses(&run).len(), 6);
    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(run.join("summary.json")).unwrap()).unwrap();
    assert_eq!(summary["status"], "complete");
    assert!(summary["mlflow"]["error"].is_string(), "{summary}");
    assert!(run.join("model.safetensors").is_file());

    // No server at all: the same.
    let nobody = format!("http://127.0.0.1:{}", free_port());
    let none = dir.join("none");
    let o = train_on_cpu(
        &cfg,
        &none,
        &[
            "--epochs",
            "1",
            "--max-train-rows",
            "640",
            "--mlflow",
            nobody.as_str(),
        ],
    );
    ok(&o);
    let warnings = stderr(&o)
        .lines()
        .filter(|l| l.starts_with("warning: MLflow"))
        .count();
    assert_eq!(warnings, 1, "{}", stderr(&o));
}

/// A server that accepts connections and never answers (a stalled socket): training is held up
/// by at most 5 s in all, then goes on without it, with one warning line.
#[test]
fn a_server_that_never_answers_holds_the_run_up_5_s_at_most() {
    let dir = scratch("mlflow-stalled");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let uri = format!("http://{}", listener.local_addr().unwrap());
    // Accepts every connection and keeps it open, silent.
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().flatten() {
            held.push(stream);
        }
    });
    let cfg = config(
        &dir,
        "small.toml",
        "job = \"fashion-mlp\"\nepochs = 1\nbatch_size = 64\n[adam]\nlr = 1e-3\n",
    );
    let rows = ["--max-train-rows", "640"];
    let started = Instant::now();
    ok(&train_on_cpu(&cfg, &dir.join("untracked"), &rows));
    let untracked = started.elapsed();
    let started = Instant::now();
    let o = train_on_cpu(
        &cfg,
        &dir.join("stalled"),
        &[&rows[..], &["--mlflow", &uri]].concat(),
    );
    let stalled = started.elapsed();
    ok(&o);
    let warnings = stderr(&o)
        .lines()
        .filter(|l| l.starts_with("warning: MLflow"))
        .count();
    assert_eq!(warnings, 1, "{}", stderr(&o));
    // 5 s of waiting at most, and a second for the noise of two runs.
    assert!(
        stalled < untracked + Duration::from_secs(6),
        "the stalled server held the run up {:?} (untracked {untracked:?})",
        stalled.saturating_sub(untracked)
    );
}

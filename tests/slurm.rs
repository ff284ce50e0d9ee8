//! `ember sweep slurm` on a real Slurm: a one-node cluster (Debian's `slurm-wlm` and `munge`)
//! started in a scratch folder from its own `slurm.conf`, with no cgroups, its own `munged` on a
//! private socket and non-default ports. The generated job array runs a 4-trial sweep through
//! `sbatch --wait`; the daemons are stopped by their pids. Under `CI=true` a missing Slurm fails
//! the test instead of skipping it.

mod common;
use common::*;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The daemons of the test cluster, stopped when dropped.
struct Cluster {
    conf: PathBuf,
    daemons: Vec<Child>,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for d in self.daemons.iter_mut().rev() {
            d.kill().ok();
            d.wait().ok();
        }
    }
}

fn installed(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Two ports free now (both listeners are held until both are read, so they differ).
fn free_ports() -> (u16, u16) {
    let a = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let b = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    (
        a.local_addr().unwrap().port(),
        b.local_addr().unwrap().port(),
    )
}

fn output(program: &str, args: &[&str]) -> String {
    let o = Command::new(program).args(args).output().unwrap();
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// A foreground daemon, its output in `log`.
fn daemon(dir: &Path, program: &str, args: &[&str], log: &str) -> Child {
    let log = std::fs::File::create(dir.join(log)).unwrap();
    Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {program}: {e}"))
}

fn wait_until(what: &str, dir: &Path, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        if start.elapsed() > Duration::from_secs(60) {
            let logs: Vec<String> = ["munged", "slurmctld", "slurmd"]
                .iter()
                .flat_map(|d| [format!("{d}.log"), format!("{d}.out")])
                .map(|f| std::fs::read_to_string(dir.join(f)).unwrap_or_default())
                .collect();
            panic!(
                "{what} did not happen in 60 s; logs:\n{}",
                logs.join("\n---\n")
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// `munged` on a private socket and key, held by `cluster`.
fn start_munge(dir: &Path, cluster: &mut Cluster) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let key = dir.join("munge.key");
    let mut bytes = vec![0u8; 1024];
    std::io::Read::read_exact(
        &mut std::fs::File::open("/dev/urandom").unwrap(),
        &mut bytes,
    )
    .unwrap();
    std::fs::write(&key, bytes).unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o400)).unwrap();
    let socket = dir.join("munge.socket");
    let p = |f: &str| dir.join(f).display().to_string();
    let munged = daemon(
        dir,
        "munged",
        &[
            "--foreground",
            "--force",
            &format!("--key-file={}", key.display()),
            &format!("--socket={}", socket.display()),
            &format!("--pid-file={}", p("munged.pid")),
            &format!("--seed-file={}", p("munged.seed")),
            &format!("--log-file={}", p("munged.log")),
        ],
        "munged.out",
    );
    cluster.daemons.push(munged);
    wait_until("munged's socket", dir, || socket.exists());
    socket
}

fn slurm_conf(dir: &Path, socket: &Path) -> PathBuf {
    let host = output("hostname", &["-s"]);
    let user = output("id", &["-un"]);
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let p = |f: &str| dir.join(f).display().to_string();
    for sub in ["state", "spool"] {
        std::fs::create_dir_all(dir.join(sub)).unwrap();
    }
    let (ctld_port, slurmd_port) = free_ports();
    let text = format!(
        "ClusterName=embertest\nSlurmctldHost={host}\nSlurmUser={user}\nSlurmdUser={user}\n\
         SlurmctldPort={}\nSlurmdPort={}\nAuthType=auth/munge\nAuthInfo=socket={}\n\
         CredType=cred/munge\nStateSaveLocation={}\nSlurmdSpoolDir={}\n\
         SlurmctldPidFile={}\nSlurmdPidFile={}\nSlurmctldLogFile={}\nSlurmdLogFile={}\n\
         ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\nSelectType=select/cons_tres\n\
         SelectTypeParameters=CR_CPU\nMpiDefault=none\nReturnToService=2\n\
         JobAcctGatherType=jobacct_gather/none\nAccountingStorageType=accounting_storage/none\n\
         JobCompType=jobcomp/none\nNodeName={host} CPUs={cpus} State=UNKNOWN\n\
         PartitionName=ember Nodes={host} Default=YES MaxTime=INFINITE State=UP\n",
        ctld_port,
        slurmd_port,
        socket.display(),
        p("state"),
        p("spool"),
        p("slurmctld.pid"),
        p("slurmd.pid"),
        p("slurmctld.log"),
        p("slurmd.log"),
    );
    let conf = dir.join("slurm.conf");
    std::fs::write(&conf, text).unwrap();
    conf
}

/// munged, slurmctld and slurmd, up until the node is idle.
fn start_cluster(dir: &Path) -> Cluster {
    let mut cluster = Cluster {
        conf: PathBuf::new(),
        daemons: Vec::new(),
    };
    let socket = start_munge(dir, &mut cluster);
    let conf = slurm_conf(dir, &socket);
    cluster.conf = conf.clone();
    let c = conf.display().to_string();
    cluster.daemons.push(daemon(
        dir,
        "slurmctld",
        &["-D", "-i", "-f", &c],
        "slurmctld.out",
    ));
    cluster
        .daemons
        .push(daemon(dir, "slurmd", &["-D", "-f", &c], "slurmd.out"));
    wait_until("an idle node", dir, || {
        let o = Command::new("sinfo")
            .args(["-h", "-o", "%T"])
            .env("SLURM_CONF", &conf)
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).trim() == "idle"
    });
    cluster
}

#[test]
fn a_sweep_runs_as_a_job_array_on_a_real_slurm() {
    let present = ["munged", "slurmctld", "slurmd", "sbatch"].map(installed);
    if present.contains(&false) {
        cannot_run(
            "a sweep on a real Slurm",
            "slurm-wlm and munge are not installed (.ci/run installs them)",
        );
        return;
    }
    let dir = scratch("slurm");
    let cluster = start_cluster(&dir);
    config(
        &dir,
        "base.toml",
        "job = \"tabular-mlp\"\nepochs = 5\nbatch_size = 256\nmax_train_rows = 4000\n\
         max_valid_rows = 1000\n[adam]\nlr = 1e-3\n",
    );
    let sweep = config(
        &dir,
        "widths.toml",
        "base = \"base.toml\"\nseeds = [1, 2]\n[grid]\n\"model.hidden\" = [[4], [8]]\n",
    );
    let out = dir.join("sweep");
    let o = ember(&[
        "sweep",
        "slurm",
        path_str(&sweep),
        "--out",
        path_str(&out),
        "--cpus",
        "1",
        "--time",
        "10",
        "--max-parallel",
        "2",
        "--device",
        "cpu",
        "--set",
        "epochs=3",
    ]);
    ok(&o);
    let script = std::fs::read_to_string(out.join("sweep.sbatch")).unwrap();
    assert!(script.contains("#SBATCH --array=0-1%2"), "{script}");
    assert!(
        script.contains("--unit \"$SLURM_ARRAY_TASK_ID\""),
        "{script}"
    );

    let submitted = Command::new("timeout")
        .args([
            "300",
            "sbatch",
            "--wait",
            path_str(&out.join("sweep.sbatch")),
        ])
        .env("SLURM_CONF", &cluster.conf)
        .current_dir(&dir)
        .output()
        .unwrap();
    let logs = || {
        (0..2)
            .map(|u| {
                std::fs::read_to_string(out.join(format!("logs/unit-{u}.out"))).unwrap_or_default()
            })
            .collect::<Vec<_>>()
            .join("\n---\n")
    };
    assert!(
        submitted.status.success(),
        "sbatch: {}\n{}",
        stderr(&submitted),
        logs()
    );
    for i in 0..4 {
        let run = out.join(format!("trial-{i:03}"));
        let s: serde_json::Value =
            serde_json::from_slice(&std::fs::read(run.join("summary.json")).unwrap()).unwrap();
        assert_eq!(s["status"], "complete", "trial {i}");
        assert_eq!(s["epochs_done"], 3, "trial {i}");
        assert!(run.join("model.safetensors").is_file() && run.join("curves.png").is_file());
    }
    let report = ember(&["sweep", "report", path_str(&out)]);
    ok(&report);
    let table = stdout(&report);
    assert!(table.contains("4 trials, 2 configurations"), "{table}");
    assert_eq!(table.matches(" 2/2 ").count(), 2, "{table}");
    drop(cluster);
}

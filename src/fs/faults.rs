//! Faults injected into ember's own writes, for the tests that prove nothing is lost when a
//! disk fails (`tests/faults.rs`). Off unless `EMBER_FAULTS` is set; a user never sets it.
//!
//! `EMBER_FAULTS` is a comma-separated list of rules `ACTION@FILE[:PHASE][#N]`:
//! - `ACTION`: `eio` (the write fails with an I/O error), `enospc` (it fails as on a full disk),
//!   `short` (only the first half of the bytes reach the file, and the write reports success:
//!   a disk that lies), `kill` (the process kills itself with SIGKILL), or `wait` (the process
//!   creates the file `EMBER_FAULTS_GATE` names and waits until it is removed: a test fills
//!   the disk meanwhile);
//! - `FILE`: the written file's name (its last path component), or `*` for every file;
//! - `PHASE`, where in the write it strikes: `before` (nothing written yet), `partial` (the
//!   temporary file half written; the default), `written` (the temporary file whole, not yet
//!   renamed), `renamed` (the new file in place, the call not yet returned);
//! - `#N`: the rule strikes at the Nth write of a matching file only (default: the first).

use std::io;
use std::path::Path;
use std::sync::Mutex;
use std::sync::OnceLock;
use std::time::Duration;

/// Where in a write a fault strikes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    Before,
    Partial,
    Written,
    Renamed,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Action {
    Eio,
    Enospc,
    Short,
    Kill,
    Wait,
}

#[derive(Debug)]
struct Rule {
    action: Action,
    file: String,
    phase: Phase,
    nth: usize,
    /// Matching writes seen so far.
    seen: usize,
}

/// The fault that strikes one write, if any.
#[derive(Debug, Clone, Copy)]
pub struct Fault {
    action: Action,
    phase: Phase,
}

fn rules() -> &'static Mutex<Vec<Rule>> {
    static RULES: OnceLock<Mutex<Vec<Rule>>> = OnceLock::new();
    RULES.get_or_init(|| {
        let spec = std::env::var("EMBER_FAULTS").unwrap_or_default();
        Mutex::new(spec.split(',').filter_map(parse).collect())
    })
}

/// One rule of `EMBER_FAULTS`; a malformed one is ignored (the tests check that theirs strike).
fn parse(rule: &str) -> Option<Rule> {
    let (action, rest) = rule.trim().split_once('@')?;
    let action = match action {
        "eio" => Action::Eio,
        "enospc" => Action::Enospc,
        "short" => Action::Short,
        "kill" => Action::Kill,
        "wait" => Action::Wait,
        _ => return None,
    };
    let (rest, nth) = match rest.split_once('#') {
        Some((r, n)) => (r, n.parse().ok()?),
        None => (rest, 1),
    };
    let (file, phase) = match rest.split_once(':') {
        Some((f, p)) => (f, parse_phase(p)?),
        None => (rest, Phase::Partial),
    };
    Some(Rule {
        action,
        file: file.to_string(),
        phase,
        nth,
        seen: 0,
    })
}

fn parse_phase(p: &str) -> Option<Phase> {
    Some(match p {
        "before" => Phase::Before,
        "partial" => Phase::Partial,
        "written" => Phase::Written,
        "renamed" => Phase::Renamed,
        _ => return None,
    })
}

/// The fault, if any, that strikes this write of `path`; each call counts as one write.
pub fn for_write(path: &Path) -> Option<Fault> {
    // Off unless set: one lookup of the environment per write.
    std::env::var_os("EMBER_FAULTS")?;
    let name = path.file_name()?.to_string_lossy();
    let mut rules = rules().lock().expect("fault rules lock");
    let mut fault = None;
    for rule in rules.iter_mut() {
        if rule.file == "*" || rule.file == name {
            rule.seen += 1;
            if rule.seen == rule.nth && fault.is_none() {
                fault = Some(Fault {
                    action: rule.action,
                    phase: rule.phase,
                });
            }
        }
    }
    fault
}

impl Fault {
    /// Strikes if this fault belongs to `phase`: returns the injected error, kills the
    /// process, or waits for the gate.
    pub fn at(fault: Option<Fault>, phase: Phase) -> io::Result<()> {
        let Some(f) = fault.filter(|f| f.phase == phase) else {
            return Ok(());
        };
        match f.action {
            Action::Eio => Err(io::Error::from_raw_os_error(libc::EIO)),
            Action::Enospc => Err(io::Error::from_raw_os_error(libc::ENOSPC)),
            Action::Short => Ok(()),
            Action::Kill => {
                // SAFETY: kill(2) on this process; it does not return.
                unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
                unreachable!("SIGKILL ends the process")
            }
            Action::Wait => {
                wait_at_gate();
                Ok(())
            }
        }
    }

    /// Whether the write keeps only the first half of its bytes (and says nothing).
    pub fn is_short(fault: Option<Fault>) -> bool {
        fault.is_some_and(|f| f.action == Action::Short)
    }
}

/// Creates the gate file `EMBER_FAULTS_GATE` names and waits until it is gone.
fn wait_at_gate() {
    let Some(gate) = std::env::var_os("EMBER_FAULTS_GATE") else {
        return;
    };
    if std::fs::write(&gate, std::process::id().to_string()).is_err() {
        return;
    }
    while Path::new(&gate).exists() {
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_parse_with_their_defaults() {
        let r = parse("kill@model-2.mpk:written#3").unwrap();
        assert_eq!(
            (r.action, r.file.as_str(), r.phase, r.nth),
            (Action::Kill, "model-2.mpk", Phase::Written, 3)
        );
        let r = parse("eio@*").unwrap();
        assert_eq!((r.action, r.phase, r.nth), (Action::Eio, Phase::Partial, 1));
        assert!(parse("burn@x").is_none());
        assert!(parse("eio@x:sometime").is_none());
        assert!(parse("eio@x#first").is_none());
    }
}

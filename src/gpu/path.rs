//! Which way each of ember's GPU operations ran in this process: ember's kernel, or Burn's
//! composition of the same operation (`ops::composed`) and why, for `ember bench` to report.
//! Recorded only once asked for ([`watch`]), so a training run pays nothing for it.

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

/// Why an operation took the composition: what the kernels do not take.
pub type Reason = &'static str;

static WATCHING: AtomicBool = AtomicBool::new(false);
static SEEN: Mutex<BTreeSet<(&str, Option<Reason>)>> = Mutex::new(BTreeSet::new());

/// Records the way of every operation from now on.
pub fn watch() {
    WATCHING.store(true, Ordering::Relaxed);
}

/// Notes that `op` ran as `way` says (`Ok`: ember's kernel; `Err`: the composition, and
/// why), and hands `way` back.
pub(super) fn chosen<T>(op: &'static str, way: Result<T, Reason>) -> Result<T, Reason> {
    if WATCHING.load(Ordering::Relaxed) {
        let reason = way.as_ref().err().copied();
        SEEN.lock().expect("the path's record").insert((op, reason));
    }
    way
}

/// Each operation and way seen since [`watch`], one line each, in a fixed order:
/// `linear: ember's kernel`, `sgd_step: Burn's composition (under 1024 elements)`.
pub fn taken() -> Vec<String> {
    let seen = SEEN.lock().expect("the path's record");
    seen.iter()
        .map(|(op, reason)| match reason {
            None => format!("{op}: ember's kernel"),
            Some(why) => format!("{op}: Burn's composition ({why})"),
        })
        .collect()
}

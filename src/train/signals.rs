//! Ctrl-C: the first press asks the run to stop after the current epoch, once its checkpoint is
//! written; the second stops the process at once.

use std::sync::atomic::{AtomicUsize, Ordering};

static PRESSES: AtomicUsize = AtomicUsize::new(0);

/// A handle on the Ctrl-C state.
#[derive(Clone, Copy, Debug, Default)]
pub struct StopSignal;

impl StopSignal {
    /// Installs the handler (once per process).
    pub fn install() -> Self {
        let _ = ctrlc::set_handler(|| {
            if PRESSES.fetch_add(1, Ordering::SeqCst) == 0 {
                eprintln!(
                    "\nstopping after this epoch, once its checkpoint is written (Ctrl-C again to stop now)"
                );
            } else {
                eprintln!("\nstopped");
                std::process::exit(130);
            }
        });
        StopSignal
    }

    /// Whether Ctrl-C was pressed.
    pub fn requested(&self) -> bool {
        PRESSES.load(Ordering::SeqCst) > 0
    }
}

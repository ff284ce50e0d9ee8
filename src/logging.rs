//! ember's one `log` logger. `EMBER_LOG=error|warn|info|debug|trace` prints the log records of
//! ember's dependencies (Burn, CubeCL, wgpu) on stderr: which adapter and device were opened,
//! which kernels were compiled. Off by default. The same logger hands every record first to an
//! observer where one is installed ([`observe_with`]: the kernel launch counter of
//! `ember bench --launches`), and does not print what the observer takes.

use std::sync::OnceLock;

/// Takes a record it recognises (and returns true), or leaves it to be printed.
pub type Observer = fn(&log::Record) -> bool;

static OBSERVER: OnceLock<Observer> = OnceLock::new();

struct EmberLog;

/// The level `EMBER_LOG` asks to print, if any.
fn printed() -> Option<log::LevelFilter> {
    static LEVEL: OnceLock<Option<log::LevelFilter>> = OnceLock::new();
    *LEVEL.get_or_init(|| std::env::var("EMBER_LOG").ok()?.parse().ok())
}

impl log::Log for EmberLog {
    fn enabled(&self, meta: &log::Metadata) -> bool {
        meta.level() <= log::max_level()
    }

    fn log(&self, record: &log::Record) {
        if OBSERVER.get().is_some_and(|observe| observe(record)) {
            return;
        }
        if printed().is_some_and(|level| record.level() <= level) {
            eprintln!("[{} {}] {}", record.level(), record.target(), record.args());
        }
    }

    fn flush(&self) {}
}

/// Installs the logger when `EMBER_LOG` names a level.
pub fn init_from_env() {
    if printed().is_some() {
        install();
    }
}

/// Installs the logger with `observer` (the first observer stays), letting every level through
/// to it.
pub fn observe_with(observer: Observer) {
    let _ = OBSERVER.set(observer);
    install();
}

/// Installs the logger (once), letting through what `EMBER_LOG` prints and, with an observer,
/// every level.
fn install() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = log::set_boxed_logger(Box::new(EmberLog));
    });
    let observed = OBSERVER.get().map(|_| log::LevelFilter::Trace);
    log::set_max_level(printed().max(observed).unwrap_or(log::LevelFilter::Off));
}

//! `EMBER_LOG=error|warn|info|debug|trace` prints the log records of ember's dependencies
//! (Burn, CubeCL, wgpu) on stderr: which adapter and device were opened, which kernels were
//! compiled. Off by default.

struct StderrLog;

impl log::Log for StderrLog {
    fn enabled(&self, meta: &log::Metadata) -> bool {
        meta.level() <= log::max_level()
    }

    fn log(&self, record: &log::Record) {
        if self.enabled(record.metadata()) {
            eprintln!("[{} {}] {}", record.level(), record.target(), record.args());
        }
    }

    fn flush(&self) {}
}

/// Installs the logger when `EMBER_LOG` names a level.
pub fn init_from_env() {
    let Some(level) = std::env::var("EMBER_LOG")
        .ok()
        .and_then(|v| v.parse::<log::LevelFilter>().ok())
    else {
        return;
    };
    if log::set_boxed_logger(Box::new(StderrLog)).is_ok() {
        log::set_max_level(level);
    }
}

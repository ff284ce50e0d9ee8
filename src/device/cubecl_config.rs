//! CubeCL's settings for ember, set once before the first GPU device is opened:
//! - caches in the user's cache folder, not CubeCL's default (the `target/` folder of the
//!   nearest Cargo project above the working directory, wrong for a tool people run from
//!   anywhere): the autotune cache, and the compiled kernels, so that a second run on a machine
//!   does not compile again what the first did. CubeCL caches CUDA's compiled kernels (PTX)
//!   under a key without the GPU's architecture, so each GPU model gets a folder of its own;
//!   it caches nothing for wgpu's WGSL shaders;
//! - with `ember bench --launches`, its launch log, which `device::launches` counts.
//!
//! A `cubecl.toml` the user wrote still wins where it names a cache.

use std::path::PathBuf;

/// `$XDG_CACHE_HOME/ember`, else `~/.cache/ember` (`~/Library/Caches/ember` on macOS).
pub fn cache_dir() -> Option<PathBuf> {
    if let Some(x) = std::env::var_os("XDG_CACHE_HOME").filter(|x| !x.is_empty()) {
        return Some(PathBuf::from(x).join("ember"));
    }
    let home = PathBuf::from(std::env::var_os("HOME").filter(|h| !h.is_empty())?);
    Some(if cfg!(target_os = "macos") {
        home.join("Library/Caches/ember")
    } else {
        home.join(".cache/ember")
    })
}

/// The folder of `hardware`'s compiled kernels: `<cache>/kernels/<hardware, as a file name>`.
pub fn kernel_cache(hardware: &str) -> Option<PathBuf> {
    let name: String = (hardware.chars())
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    Some(cache_dir()?.join("kernels").join(name))
}

/// Sets CubeCL's global config once, before the first GPU device (whose hardware is named
/// `hardware`) is opened.
#[cfg(any(feature = "wgpu", feature = "cuda"))]
pub fn install(hardware: &str) {
    use cubecl_runtime::config::cache::CacheConfig;
    use cubecl_runtime::config::{CubeClRuntimeConfig, RuntimeConfig};
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        if CubeClRuntimeConfig::storage().lock().is_some() {
            return;
        }
        let mut config = CubeClRuntimeConfig::from_current_dir().override_from_env();
        if let (CacheConfig::Target, Some(dir)) = (&config.autotune.cache, cache_dir()) {
            // CubeCL adds `autotune/<version>/<device>/` below this folder.
            config.autotune.cache = CacheConfig::File(dir);
        }
        if config.compilation.cache.is_none() {
            config.compilation.cache = kernel_cache(hardware).map(CacheConfig::File);
        }
        if super::launches::enabled() {
            // Every launch's line, forwarded to the `log` crate and nowhere else.
            config.profiling.logger = toml::from_str("level = \"minimal\"\nlog = \"trace\"\n")
                .expect("a valid logger config");
        }
        CubeClRuntimeConfig::set(config);
    });
}

#[cfg(not(any(feature = "wgpu", feature = "cuda")))]
pub fn install(_hardware: &str) {}

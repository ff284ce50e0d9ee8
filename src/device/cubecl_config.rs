//! CubeCL's settings for ember. By default CubeCL keeps its autotune cache in the `target/`
//! folder of the nearest Cargo project above the working directory (or the working directory
//! itself), which is wrong for a tool people run from anywhere: ember keeps it in the user's
//! cache folder instead. A `cubecl.toml` the user wrote still wins where it names a cache.

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

/// Sets CubeCL's global config once, before the first GPU device is opened.
#[cfg(any(feature = "wgpu", feature = "cuda"))]
pub fn install() {
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
        CubeClRuntimeConfig::set(config);
    });
}

#[cfg(not(any(feature = "wgpu", feature = "cuda")))]
pub fn install() {}

//! With the `blas` feature, links OpenBLAS's serial build (see src/ops/blas.rs). Without it,
//! ember is pure Rust and this script does nothing.
//!
//! The library is looked for in `EMBER_BLAS_DIR`, else where Debian's `libopenblas-serial-dev`
//! puts it. That folder is also written into the binary's run path, so the serial build is the
//! one loaded even where the system's default `libopenblas.so` is a threaded one.

use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-env-changed=EMBER_BLAS_DIR");
    if std::env::var_os("CARGO_FEATURE_BLAS").is_none() {
        return;
    }
    let dir = match std::env::var_os("EMBER_BLAS_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => debian_dir(),
    };
    if !dir.join("libopenblas.so").exists() {
        panic!(
            "the `blas` feature needs OpenBLAS's serial build: no libopenblas.so in {} \
             (install Debian's libopenblas-serial-dev with `make blas`, set EMBER_BLAS_DIR to \
             the folder that holds it, or build without the feature)",
            dir.display()
        );
    }
    println!("cargo:rustc-link-search=native={}", dir.display());
    println!("cargo:rustc-link-lib=dylib=openblas");
    println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir.display());
}

/// Debian's folder for the serial build, under the target's multiarch library folder.
fn debian_dir() -> PathBuf {
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    PathBuf::from(format!("/usr/lib/{arch}-{os}-{env}/openblas-serial"))
}

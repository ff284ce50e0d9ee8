//! The layers of `docs/ARCHITECTURE.md` hold in the code: every `crate::` path in `src/` (outside
//! test modules) points down the page's list of layers, never up or sideways, and the list
//! names each top-level module of `src/` once, and nothing else.
//!
//! The page lists the layers from the top, one numbered line each, its modules in backticks:
//! ``3. `train` `inference` — ...``. A module may use the modules of the lines below its own.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Each module's line on the page (1 is the top), from the numbered lines under `## Layers`.
pub fn layers(page: &str) -> BTreeMap<String, usize> {
    let section = page
        .split("\n## ")
        .find(|s| s.starts_with("Layers"))
        .expect("docs/ARCHITECTURE.md has a `## Layers` section");
    let mut line_of = BTreeMap::new();
    for line in section.lines() {
        let Some((number, rest)) = line.split_once(". ") else {
            continue;
        };
        let Ok(number) = number.trim().parse::<usize>() else {
            continue;
        };
        let named = rest.split(" — ").next().unwrap_or_default();
        for module in named.split('`').skip(1).step_by(2) {
            let earlier = line_of.insert(module.to_string(), number);
            assert!(
                earlier.is_none(),
                "`{module}` is on two lines of the layers"
            );
        }
    }
    line_of
}

/// The top-level modules of the crate at `src`: `src/X.rs` and `src/X/` (the binary's
/// `main.rs` and the crate root `lib.rs` are above every layer).
pub fn top_modules(src: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(src)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n != "main.rs" && n != "lib.rs")
        .map(|n| n.trim_end_matches(".rs").to_string())
        .collect();
    names.sort();
    names.dedup();
    names
}

/// The source of `text` without its test module (from a `#[cfg(test)]` before a `mod` to the
/// end of the file, where ember keeps it) and without comments.
fn code_of(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let mut code = String::new();
    for (i, line) in lines.iter().enumerate() {
        let trimmed = line.trim_start();
        let next = lines.get(i + 1).map_or("", |l| l.trim_start());
        let test_module = trimmed.starts_with("#[cfg(")
            && trimmed.contains("test")
            && (next.starts_with("mod ") || next.starts_with("pub mod "));
        if test_module {
            break;
        }
        if !trimmed.starts_with("//") {
            code.push_str(line.split(" // ").next().unwrap_or_default());
            code.push('\n');
        }
    }
    code
}

/// The modules that `crate::` paths in `code` name first (`crate::a::b`, `crate::{a, b::c}`),
/// with `crate::input_err` (the macro `error.rs` exports at the root) as `error`.
fn named_modules(code: &str) -> Vec<String> {
    let mut named = Vec::new();
    for after in code.split("crate::").skip(1) {
        let words = match after.strip_prefix('{') {
            Some(group) => group.split('}').next().unwrap_or_default(),
            None => after,
        };
        for item in words.split(',') {
            let name: String = item
                .trim_start()
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                named.push(if name == "input_err" {
                    "error".into()
                } else {
                    name
                });
            }
            if !after.starts_with('{') {
                break;
            }
        }
    }
    named
}

/// Every `.rs` file under `dir`, but the files that hold only a test module (`tests.rs`).
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs")
            && path.file_name().is_some_and(|n| n != "tests.rs")
        {
            out.push(path);
        }
    }
}

/// Each import in `src` that breaks `line_of`: `file: a -> b (line i to line j)`, and each
/// top-level module missing from the list.
pub fn violations(src: &Path, line_of: &BTreeMap<String, usize>) -> Vec<String> {
    let modules = top_modules(src);
    let mut found: Vec<String> = line_of
        .keys()
        .filter(|m| !modules.contains(m))
        .map(|m| format!("`{m}` is on the layers but not in src/"))
        .collect();
    found.extend(
        modules
            .iter()
            .filter(|m| !line_of.contains_key(*m))
            .map(|m| format!("`{m}` is on no line of the layers")),
    );
    let mut files = Vec::new();
    sources(src, &mut files);
    files.sort();
    for file in files {
        let rel = file.strip_prefix(src).unwrap();
        let top = rel.iter().next().unwrap().to_string_lossy();
        let top = top.trim_end_matches(".rs");
        let Some(&from) = line_of.get(top) else {
            continue;
        };
        let code = code_of(&std::fs::read_to_string(&file).unwrap());
        for to in named_modules(&code) {
            match line_of.get(&to) {
                Some(&line) if to != top && line <= from => found.push(format!(
                    "src/{}: {top} (line {from}) uses {to} (line {line})",
                    rel.display()
                )),
                _ => {}
            }
        }
    }
    found.dedup();
    found
}

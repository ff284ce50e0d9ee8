//! The layers of `docs/ARCHITECTURE.md` hold in the code: every path in `src/` (outside test
//! modules) that names a top-level module — `crate::x`, `crate::{x, y::z}`, or `super::` up to
//! the crate's root — points down the page's list of layers, never up or sideways, and the list
//! names each top-level module of `src/` once, and nothing else.
//!
//! The page lists the layers from the top, one numbered line each, its modules in backticks:
//! ``3. `train` `inference` — ...``. A module may use the modules of the lines below its own.

use std::collections::{BTreeMap, BTreeSet};
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

/// `text` without comments, as lines.
fn lines_of(text: &str) -> Vec<&str> {
    text.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .map(|l| l.split(" // ").next().unwrap_or_default())
        .collect()
}

/// Whether `lines[i]` begins a test module: `#[cfg(test)]` (or a `cfg` on `test` with
/// others), then any other attributes, then `mod NAME`; returns that `mod` line's index.
fn test_module_at(lines: &[&str], i: usize) -> Option<usize> {
    let cfg = lines[i].trim_start();
    let on_test = cfg.starts_with("#[cfg(") && !cfg.contains("not(test") && cfg.contains("test");
    if !on_test {
        return None;
    }
    let mut j = i + 1;
    while lines.get(j)?.trim_start().starts_with("#[") {
        j += 1;
    }
    let item = lines[j]
        .trim_start()
        .trim_start_matches("pub(super) ")
        .trim_start_matches("pub ");
    item.starts_with("mod ").then_some(j)
}

/// The code of `text` outside its inline test modules (`#[cfg(test)] mod tests { ... }`),
/// and the names of the test modules it declares in files of their own (`mod tests;`).
fn code_of(text: &str) -> (String, Vec<String>) {
    let lines = lines_of(text);
    let (mut code, mut test_files, mut i) = (String::new(), Vec::new(), 0);
    while i < lines.len() {
        let Some(j) = test_module_at(&lines, i) else {
            code.push_str(lines[i]);
            code.push('\n');
            i += 1;
            continue;
        };
        let name: String = lines[j]
            .trim_start()
            .split("mod ")
            .nth(1)
            .unwrap_or_default()
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if lines[j].trim_end().ends_with(';') {
            test_files.push(name);
            i = j + 1;
            continue;
        }
        // Past the module's closing brace.
        let mut depth = 0i64;
        i = j;
        while i < lines.len() {
            depth += lines[i].matches('{').count() as i64 - lines[i].matches('}').count() as i64;
            i += 1;
            if depth <= 0 && lines[i - 1].contains('}') {
                break;
            }
        }
    }
    (code, test_files)
}

/// The first name of each path in a `use` group's text (after its `{`), to its closing brace:
/// `a::b, c::{d, e}, f` gives `a`, `c`, `f`.
fn group_heads(group: &str) -> Vec<String> {
    let (mut heads, mut depth, mut at_start) = (Vec::new(), 0, true);
    let mut word = String::new();
    for c in group.chars() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => break,
            '}' => depth -= 1,
            ',' if depth == 0 => at_start = true,
            c if at_start && (c.is_alphanumeric() || c == '_') => word.push(c),
            _ if !word.is_empty() => {
                heads.push(std::mem::take(&mut word));
                at_start = false;
            }
            _ => {}
        }
    }
    heads.extend((!word.is_empty()).then_some(word));
    heads
}

/// The first name after each `prefix` in `code` (one name, or each head of a `{...}` group),
/// where `prefix` is not the end of a longer name (`my_crate::`).
fn names_after(code: &str, prefix: &str) -> Vec<String> {
    let mut named = Vec::new();
    for (at, _) in code.match_indices(prefix) {
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        let after = &code[at + prefix.len()..];
        match after.strip_prefix('{') {
            Some(group) => named.extend(group_heads(group)),
            None => named.push(
                after
                    .chars()
                    .take_while(|c| c.is_alphanumeric() || *c == '_')
                    .collect(),
            ),
        }
    }
    named
}

/// The top-level modules (and root items) that `code`, in a module `depth` below the root,
/// names: through `crate::`, or through `super::` repeated `depth` times; the root's
/// `input_err!` macro is the `error` module's.
fn named_modules(code: &str, depth: usize) -> Vec<String> {
    let mut named = names_after(code, "crate::");
    named.extend(names_after(code, &"super::".repeat(depth)));
    for name in &mut named {
        if name == "input_err" {
            *name = "error".into();
        }
    }
    named
}

/// Every `.rs` file under `dir` but the test modules' files, with its depth below the crate's
/// root (`src/a.rs` and `src/a/mod.rs` 1, `src/a/b.rs` 2).
fn sources(dir: &Path, depth: usize, out: &mut Vec<(PathBuf, usize)>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    entries.sort();
    let mut skipped = BTreeSet::new();
    for path in &entries {
        if path.extension().is_some_and(|e| e == "rs") {
            let (_, test_files) = code_of(&std::fs::read_to_string(path).unwrap());
            // `dir/x.rs` declares `dir/x/NAME.rs`; `dir/mod.rs` declares `dir/NAME.rs`.
            let stem = path.file_stem().unwrap();
            let home = if stem == "mod" {
                dir.to_path_buf()
            } else {
                dir.join(stem)
            };
            skipped.extend(test_files.iter().map(|n| home.join(format!("{n}.rs"))));
        }
    }
    for path in entries {
        if path.is_dir() {
            sources(&path, depth + 1, out);
        } else if path.extension().is_some_and(|e| e == "rs") && !skipped.contains(&path) {
            let own = depth + usize::from(path.file_stem().is_some_and(|s| s != "mod"));
            out.push((path, own));
        }
    }
}

/// Each import in `src` that breaks `line_of`: `file: a (line i) uses b (line j)`, each
/// top-level module missing from the list, and each listed name with no module.
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
    sources(src, 0, &mut files);
    for (file, depth) in files {
        let rel = file.strip_prefix(src).unwrap();
        let top = rel.iter().next().unwrap().to_string_lossy();
        let top = top.trim_end_matches(".rs");
        let Some(&from) = line_of.get(top) else {
            continue;
        };
        let (code, _) = code_of(&std::fs::read_to_string(&file).unwrap());
        let mut uses: BTreeSet<String> = named_modules(&code, depth).into_iter().collect();
        uses.remove(top);
        for to in uses {
            if let Some(&line) = line_of.get(&to).filter(|&&line| line <= from) {
                found.push(format!(
                    "src/{}: {top} (line {from}) uses {to} (line {line})",
                    rel.display()
                ));
            }
        }
    }
    found
}
